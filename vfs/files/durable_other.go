//go:build !linux && !darwin && !windows

package files

import "os"

// bootID is unknown here, which keeps the write-ahead log off: every change flushes its
// own files.
func bootID() string { return "" }

func datasync(f *os.File) error { return f.Sync() }

// heldOpen: only Windows keeps a file that another program has open from being renamed or
// removed (see retryWhile).
func heldOpen(error) bool { return false }
