//go:build !linux

package files

import (
	"errors"
	"os"
)

// bootID is unknown here, which keeps the write-ahead log off: every change flushes its
// own files (see durable_linux.go).
func bootID() string { return "" }

func syncFS(*os.File) error { return errors.ErrUnsupported }

func datasync(f *os.File) error { return f.Sync() }

// unlinked is never known here (the write-ahead log is off).
func unlinked(os.FileInfo) bool { return false }
