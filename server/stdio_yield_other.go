//go:build !linux

package server

// yieldThread does nothing here: the loop's looks are short, and the other systems'
// schedulers are not what this was measured on (see looker).
func yieldThread() {}
