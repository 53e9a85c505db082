//go:build unix

package files

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openNonblock is added to every open: opening a fifo that another program put in place of a
// file must not wait for a writer.
const openNonblock = syscall.O_NONBLOCK

// openDir opens a directory, and nothing else, without blocking.
const openDir = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_DIRECTORY

// errWouldBlock is tryFlock's answer when another holder has the lock.
var errWouldBlock = unix.EWOULDBLOCK

// tryFlock takes the flock on f without waiting.
func tryFlock(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func funlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// syncDir flushes a directory's entries, so that a rename into it survives a crash.
func syncDir(d *os.File) error { return d.Sync() }
