//go:build unix

package vfs

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func flock(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func funlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
