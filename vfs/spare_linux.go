package vfs

import (
	"errors"
	"io/fs"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// spareFile is a file made in advance for the next creation: an unnamed file (O_TMPFILE) in
// the storage's filesystem, which a creation fills and then names with linkat, where it would
// otherwise create a temporary file and rename it.
//
// Why: allocating the inode is the dearest part of creating a file, and on ext4 without a
// journal it scans past every inode freed in the last minute or more (fs/ext4/ialloc.c,
// recently_deleted): 0.3 ms per creation at the median, 1.2 ms at the 90th percentile, in a
// side-by-side run (README), where the other server frees an inode per edit on the same
// disk. Made while the change that took the last spare waits for its flush, and while the
// client reads the answer, the next one is ready when the next creation comes. The inode and
// what a crash leaves are the same either way: the file is named only once it is written
// (and, with sync, flushed), with the same refusal as the rename to replace a name that
// exists; an unnamed file has no name to leave behind, and the kernel frees it when the
// process ends. (On ext4 without a journal, a crash of the machine can leave its inode
// allocated until the next fsck, as it can for any file open after its removal.)
//
// One spare at a time, made in the storage root by one goroutine; it is named in whatever
// directory the creation is in (a link within one filesystem; another filesystem mounted
// below the root takes the temporary file's way). A creation that finds no spare ready
// takes the temporary file's way, and asks for one. Where the filesystem cannot make
// unnamed files, or the process cannot name them, spares stop.
type spareFile struct {
	mu     sync.Mutex
	fd     int  // the spare's descriptor, when have
	have   bool // a spare is ready
	dir    int  // a descriptor of the storage root to make the next one in, when ask
	ask    bool // a creation took the spare (or found none): make the next
	making bool // a goroutine is making one
	off    bool // spares are not possible here, or the filesystem is closed
	made   sync.WaitGroup
	named  int // spares named so far (tests read it)
}

// linkByDescriptor names a spare through its descriptor (linkat with AT_EMPTY_PATH), where
// the kernel lets the process that opened it do that (Linux 6.10 and later; before, only
// with CAP_DAC_READ_SEARCH); otherwise, and when it is false (tests), through /proc/self/fd.
var linkByDescriptor = true

// takeSpare hands out the spare, if one is ready, and asks for the next, to be made in the
// storage root (root, duplicated) once the storage lock is released (startSpare): the rest
// of this change does not compete with it then, and the flush the change waits for hides it.
func (f *OSFs) takeSpare(root int) (fd int, ok bool) {
	s := &f.spare
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return 0, false
	}
	fd, ok = s.fd, s.have
	s.have = false
	if !s.making && !s.ask {
		if dup, err := unix.FcntlInt(uintptr(root), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			s.dir, s.ask = dup, true
		}
	}
	return fd, ok
}

// startSpare starts making the spare that takeSpare asked for, if it asked.
func (f *OSFs) startSpare() {
	s := &f.spare
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ask {
		return
	}
	s.ask = false
	if s.off {
		unix.Close(s.dir)
		return
	}
	s.making = true
	s.made.Add(1)
	go f.makeSpare(s.dir)
}

// makeSpare makes an unnamed file in the directory dir, for the next creation, and closes
// dir.
func (f *OSFs) makeSpare(dir int) {
	s := &f.spare
	defer s.made.Done()
	fd, err := retry(func() (int, error) {
		return unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	})
	unix.Close(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.making = false
	switch {
	case err != nil:
		// EOPNOTSUPP (ext2, NFS, …), or EISDIR or EINVAL from kernels before O_TMPFILE:
		// never here. Anything else (out of inodes or descriptors) may pass.
		if err == unix.EOPNOTSUPP || err == unix.EISDIR || err == unix.EINVAL {
			s.off = true
		}
	case s.off || s.have:
		unix.Close(fd) // the filesystem was closed meanwhile
	default:
		s.fd, s.have = fd, true
	}
}

// closeSpare frees the spare and makes no more.
func (f *OSFs) closeSpare() {
	s := &f.spare
	s.mu.Lock()
	s.off = true
	s.mu.Unlock()
	s.made.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.have {
		unix.Close(s.fd)
		s.have = false
	}
	if s.ask {
		unix.Close(s.dir)
		s.ask = false
	}
}

// errNoSpareWay tells createNew's caller to take the temporary file's way.
var errNoSpareWay = errors.New("vfs: the spare cannot be named there")

// createNew writes data as the new file name through the spare; ok is false where that does
// not apply (no spare ready, no directory kept open for name, another filesystem there), and
// the caller then takes the temporary file's way. With sync the file is flushed before it is
// named, and the directory after. It fails with fs.ErrExist where name exists.
func (f *OSFs) createNew(name string, data []byte, sync bool) (err error, ok bool) {
	if f.readOnly {
		return nil, false
	}
	n := rel(name)
	dirfd, base, ok := f.at(n) // the directories are real ones, opened with O_NOFOLLOW
	if !ok {
		return nil, false
	}
	root, ok := f.dirAt(".")
	if !ok {
		return nil, false
	}
	fd, ok := f.takeSpare(root)
	if !ok {
		return nil, false
	}
	spare := &fdFile{fd: fd, name: shownName(name)}
	defer spare.Close()
	if _, err := spare.WriteAt(data, 0); err != nil {
		return err, true
	}
	if sync {
		if err := spare.Sync(); err != nil {
			return err, true
		}
	}
	switch err := f.linkSpare(fd, dirfd, base); {
	case err == errNoSpareWay:
		return nil, false
	case err != nil:
		return &fs.PathError{Op: "link", Path: n, Err: err}, true
	}
	f.spare.mu.Lock()
	f.spare.named++
	f.spare.mu.Unlock()
	if sync {
		if err := retryErr(func() error { return unix.Fsync(dirfd) }); err != nil {
			return &fs.PathError{Op: "sync", Path: n, Err: err}, true
		}
	}
	return nil, true
}

// linkSpare names the unnamed file fd base in dirfd (see linkByDescriptor). It returns
// errNoSpareWay where the link cannot be made here (another filesystem) or at all (no
// permission and no /proc: spares stop then).
func (f *OSFs) linkSpare(fd, dirfd int, base string) error {
	var err error = unix.ENOENT
	if linkByDescriptor {
		err = unix.Linkat(fd, "", dirfd, base, unix.AT_EMPTY_PATH)
	}
	if err == unix.ENOENT || err == unix.EPERM {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, base, unix.AT_SYMLINK_FOLLOW)
		if err == unix.ENOENT || err == unix.EPERM {
			if st := (unix.Stat_t{}); unix.Fstat(dirfd, &st) == nil && st.Nlink > 0 {
				f.spare.mu.Lock()
				f.spare.off = true // the directory is there: naming the spare is what fails
				f.spare.mu.Unlock()
				return errNoSpareWay
			}
		}
	}
	if err == unix.EXDEV {
		return errNoSpareWay
	}
	return err
}
