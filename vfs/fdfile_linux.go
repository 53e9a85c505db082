package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdFile is a regular file opened through the directory cache, used by its descriptor
// alone. An *os.File costs two more system calls per open on Linux (fcntl to read the
// flags, then epoll_ctl, which refuses a regular file, to try the poller), about a
// fifth of a change's calls; a regular file never waits, so the poller has nothing to
// give it. One goroutine uses a file at a time, as with every file the storage opens.
type fdFile struct {
	fd     int
	name   string // as the storage shows it
	append bool
	st     unix.Stat_t // read at the open; serves the first Stat if nothing was written
	stale  bool
}

func (f *fdFile) pathErr(op string, err error) error {
	if f.fd < 0 {
		err = os.ErrClosed
	}
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

// retry runs a system call again while a signal interrupts it.
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// retryErr is retry for a call that returns only an error.
func retryErr(call func() error) error {
	_, err := retry(func() (int, error) { return 0, call() })
	return err
}

// do runs call (see retryErr), its error naming the file and op.
func (f *fdFile) do(op string, call func() error) error {
	if err := retryErr(call); err != nil {
		return f.pathErr(op, err)
	}
	return nil
}

// writeAll writes all of p, as io.Writer and io.WriterAt promise: write(b, done) writes b,
// the part of p from done on.
func (f *fdFile) writeAll(p []byte, write func(b []byte, done int) (int, error)) (int, error) {
	f.stale = true
	done := 0
	for done < len(p) {
		n, err := retry(func() (int, error) { return write(p[done:], done) })
		if err == nil && n == 0 {
			err = io.ErrShortWrite // nothing written and no reason: do not spin
		}
		if err != nil {
			return done, f.pathErr("write", err)
		}
		done += n
	}
	return done, nil
}

func (f *fdFile) Name() string { return f.name }

func (f *fdFile) Close() error {
	if f.fd < 0 {
		return f.pathErr("close", os.ErrClosed)
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return f.pathErr("close", err)
	}
	return nil
}

func (f *fdFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := retry(func() (int, error) { return unix.Read(f.fd, p) })
	if err != nil {
		return 0, f.pathErr("read", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (f *fdFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, f.pathErr("readat", errors.New("negative offset"))
	}
	done := 0
	for done < len(p) {
		n, err := retry(func() (int, error) { return unix.Pread(f.fd, p[done:], off+int64(done)) })
		if err != nil {
			return done, f.pathErr("read", err)
		}
		if n == 0 {
			return done, io.EOF
		}
		done += n
	}
	return done, nil
}

func (f *fdFile) Write(p []byte) (int, error) {
	return f.writeAll(p, func(b []byte, _ int) (int, error) { return unix.Write(f.fd, b) })
}

func (f *fdFile) WriteAt(p []byte, off int64) (int, error) {
	if f.append {
		return 0, errors.New("os: invalid use of WriteAt on file opened with O_APPEND")
	}
	if off < 0 {
		return 0, f.pathErr("writeat", errors.New("negative offset"))
	}
	return f.writeAll(p, func(b []byte, done int) (int, error) { return unix.Pwrite(f.fd, b, off+int64(done)) })
}

func (f *fdFile) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

func (f *fdFile) Seek(offset int64, whence int) (int64, error) {
	off, err := unix.Seek(f.fd, offset, whence)
	if err != nil {
		return 0, f.pathErr("seek", err)
	}
	return off, nil
}

// Stat returns the file's status. The first call, if nothing was written since the open,
// returns the status read at the open (open, Stat, read is the common way); every later
// call reads it again, so a file kept open sees its size and links change. The times are
// left out (zero; see statMask).
func (f *fdFile) Stat() (os.FileInfo, error) {
	if f.fd < 0 {
		return nil, f.pathErr("stat", os.ErrClosed)
	}
	if f.stale {
		if err := statAtNoTimes(f.fd, "", unix.AT_EMPTY_PATH, &f.st); err != nil { // retries EINTR itself
			return nil, f.pathErr("stat", err)
		}
	}
	f.stale = true
	return &statInfo{name: path.Base(f.name), st: f.st}, nil
}

func (f *fdFile) Sync() error { return f.do("sync", func() error { return unix.Fsync(f.fd) }) }

// DataSync flushes the file's data and what is needed to read it back (fdatasync(2)).
func (f *fdFile) DataSync() error {
	return f.do("sync", func() error { return unix.Fdatasync(f.fd) })
}

// StartWriteback starts writing the file's data in [off, off+n) to the disk and returns
// without waiting for it (see writebackStarter).
func (f *fdFile) StartWriteback(off, n int64) error {
	return f.do("sync", func() error { return startWriteback(f.fd, off, n) })
}

func (f *fdFile) Truncate(size int64) error {
	f.stale = true
	return f.do("truncate", func() error { return unix.Ftruncate(f.fd, size) })
}

func (f *fdFile) Readdir(int) ([]os.FileInfo, error) {
	return nil, f.pathErr("readdirent", syscall.ENOTDIR)
}

func (f *fdFile) Readdirnames(int) ([]string, error) {
	return nil, f.pathErr("readdirent", syscall.ENOTDIR)
}

// overwritable reports whether the file, as opened, can be written over in place to hold
// n bytes (see inplace.go): a regular file with no other name (writing through it would
// change the other too), of size bytes unless size is -1, that n bytes do not make
// shorter, with the blocks for them allocated first, so that the write cannot run out of
// space half-way.
func (f *fdFile) overwritable(n, size int64) bool {
	if f.st.Mode&syscall.S_IFMT != syscall.S_IFREG || f.st.Nlink != 1 || n < f.st.Size || size >= 0 && f.st.Size != size {
		return false
	}
	return n == f.st.Size || retryErr(func() error { return unix.Fallocate(f.fd, unix.FALLOC_FL_KEEP_SIZE, 0, n) }) == nil
}
