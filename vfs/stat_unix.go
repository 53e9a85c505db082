//go:build unix && !linux

package vfs

import "golang.org/x/sys/unix"

// statAtNoTimes is fstatat(dirfd, name, st, flags). (On Linux it leaves the times out; see
// stat_linux.go.)
func statAtNoTimes(dirfd int, name string, flags int, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, name, st, flags)
		if err != unix.EINTR {
			return err
		}
	}
}

// entryStats reads the status of a directory's entries (see stat_linux.go).
type entryStats struct{}

// stat is statAtNoTimes(dirfd, name, flags, st).
func (*entryStats) stat(dirfd int, name string, flags int, st *unix.Stat_t) error {
	return statAtNoTimes(dirfd, name, flags, st)
}
