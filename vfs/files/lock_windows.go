//go:build windows

package files

import (
	"os"

	"golang.org/x/sys/windows"
)

// Windows has no fifos in the file namespace, so opens need no flag to avoid blocking.
const (
	openNonblock = 0
	openDir      = os.O_RDONLY
)

// errWouldBlock is tryFlock's answer when another holder has the lock.
var errWouldBlock = windows.ERROR_LOCK_VIOLATION

// lockRange is where the storage locks sit in their files: one byte far beyond their content
// (the change counter lives at offset 0), since Windows byte-range locks are mandatory.
func lockRange() *windows.Overlapped { return &windows.Overlapped{OffsetHigh: 1} }

// tryFlock takes the lock on f without waiting (LockFileEx with LOCKFILE_FAIL_IMMEDIATELY).
func tryFlock(f *os.File, exclusive bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, lockRange())
}

func funlock(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, lockRange())
}

// syncDir is a no-op: Windows cannot flush a directory handle, and NTFS journals the
// metadata of a rename itself.
func syncDir(*os.File) error { return nil }
