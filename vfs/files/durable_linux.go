package files

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// retryErr runs call again while it is interrupted by a signal (EINTR).
func retryErr(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

// bootID names this boot of the machine: a write-ahead log written in another boot may
// hold changes that the crash (or power cut) which ended that boot kept from the disk.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// syncFS flushes everything written to the filesystem that holds d (syncfs(2)): one call
// for all the files and directories a checkpoint must make durable.
func syncFS(d *os.File) error {
	return retryErr(func() error { return unix.Syncfs(int(d.Fd())) })
}

// datasync flushes f's data and what is needed to read it back (fdatasync(2)).
func datasync(f *os.File) error {
	return retryErr(func() error { return unix.Fdatasync(int(f.Fd())) })
}

// unlinked reports whether the file described by fi has no name left (it was removed).
func unlinked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
