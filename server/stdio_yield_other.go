//go:build !linux

package server

// yieldThread does nothing here: the other systems' schedulers are not what the yield
// was measured on (see stdioLoop.spin).
func yieldThread() {}
