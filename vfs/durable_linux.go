package vfs

import (
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

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

// startWriteback starts writing fd's dirty pages in [off, off+n) to the disk and returns
// without waiting for them: sync_file_range(2) with SYNC_FILE_RANGE_WRITE alone, which
// makes nothing durable by itself (the flush that follows does, and finds the write under
// way or done).
func startWriteback(fd int, off, n int64) error {
	return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// StartWriteback starts writing the file's data in [off, off+n) to the disk and returns
// without waiting for it (see writebackStarter).
func (f osFile) StartWriteback(off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Control(func(fd uintptr) { werr = retryErr(func() error { return startWriteback(int(fd), off, n) }) }); err != nil {
		return err
	}
	return werr
}

// unlinked reports whether the file described by fi has no name left (it was removed).
func unlinked(fi os.FileInfo) bool {
	_, _, nlink, ok := sysStat(fi)
	return ok && nlink == 0
}
