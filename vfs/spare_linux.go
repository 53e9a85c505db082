package vfs

import (
	"errors"
	"io/fs"
	"strconv"
	"sync"
	"time"

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
// One spare at a time. It is made in a directory of its own (spareDir, under the history's
// directory, placed by ext4's spreading allocator as the quiet block is: see spreadMkdir),
// where the storage has a history directory, else in the storage root; it is named in
// whatever directory the creation is in (a link within one filesystem; another filesystem
// mounted below the root takes the temporary file's way). A creation that finds no spare
// ready takes the temporary file's way, and asks for one. Where the filesystem cannot make
// unnamed files, or the process cannot name them, spares stop.
//
// Why a directory of its own: the inode allocator starts in the block group of the
// directory the file is made in, and the storage directory's group is where the files
// other programs make and remove come and go (server-filesystem's edits, test suites, a
// user's tools in /tmp): making the spare there took 55–190 µs of a CPU, in the kernel,
// where it cannot be preempted. In a group that the spreading allocator picked, the same
// call took about 20 µs, cheap enough to make the spare on the change's own
// goroutine, as its storage lock is released, while its record's write is under way:
// no goroutine is started and no thread woken. Should it take longer than spareSyncMax
// (that group's inodes freed in bulk by a removal of many memories), the next one is made
// by a goroutine as before, while the change waits for its flush, until one is quick again.
type spareFile struct {
	mu     sync.Mutex
	fd     int  // the spare's descriptor, when have
	have   bool // a spare is ready
	dir    int  // a descriptor of the storage root to make the next one in, when ask
	ask    bool // a creation took the spare (or found none): make the next
	making bool // one is being made
	off    bool // spares are not possible here, or the filesystem is closed
	quick  bool // the last one took under spareSyncMax to make: make the next on the change's goroutine
	made   sync.WaitGroup
	named  int // spares named so far (tests read it)

	dirTried bool // the making of spareDir was tried (once the history's directory was there)
	// How the spares so far were made: in spareDir, and on the change's goroutine (tests
	// read them).
	inSpareDir, onChange int
}

// spareDir is the directory the spares are made in (see spareFile).
const spareDir = historyDir + "/spare"

// spareSyncMax is how long making a spare may take for the next one to be made on the
// change's own goroutine (see spareFile); a variable for tests.
var spareSyncMax = 50 * time.Microsecond

// linkByDescriptor names a spare through its descriptor (linkat with AT_EMPTY_PATH), where
// the kernel lets the process that opened it do that (Linux 6.10 and later; before, only
// with CAP_DAC_READ_SEARCH); otherwise, and when it is false (tests), through /proc/self/fd.
var linkByDescriptor = true

// takeSpare hands out the spare, if one is ready, and asks for the next, to be made in
// spareDir (or the storage root, root) once the storage lock is released (startSpare): the
// rest of this change does not compete with it then, and the write of its record, under
// way, or the flush it waits for hides it. Creations run under the storage's exclusive
// lock: one at a time.
func (f *OSFs) takeSpare(root int) (fd int, ok bool) {
	s := &f.spare
	s.mu.Lock()
	if s.off {
		s.mu.Unlock()
		return 0, false
	}
	fd, ok = s.fd, s.have
	s.have = false
	ask, tried := !s.making && !s.ask, s.dirTried
	s.mu.Unlock()
	if !ask {
		return fd, ok
	}
	dir, inSpareDir, madeDir, err := f.spareDirAt(root, !tried)
	if err != nil {
		return fd, ok
	}
	s.mu.Lock()
	s.dir, s.ask = dir, true
	s.dirTried = s.dirTried || madeDir
	if inSpareDir {
		s.inSpareDir++
	}
	s.mu.Unlock()
	return fd, ok
}

// spareDirAt opens spareDir beneath root, first making it, with mkdir, where the history's
// directory exists (madeDir: it tried); where it cannot be had, it duplicates root instead.
func (f *OSFs) spareDirAt(root int, mkdir bool) (dir int, inSpareDir, madeDir bool, err error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	dir, err = unix.Openat2(root, spareDir, &how)
	if err == unix.ENOENT && mkdir {
		if fi, _, serr := f.LstatIfPossible(historyDir); serr == nil && fi.IsDir() {
			// Made under a random name, then renamed: ext4 starts its search for a group
			// at a hash of the new directory's name, so one fixed name would put every
			// store's spares in the same group.
			madeDir = true
			tmp := spareDir + ".tmp-" + newEpoch()
			if spreadMkdir(f, tmp) == nil && f.RenameNoReplace(tmp, spareDir) != nil {
				f.Remove(tmp) // another process's landed first: use it
			}
			dir, err = unix.Openat2(root, spareDir, &how)
		}
	}
	if err == nil {
		return dir, true, madeDir, nil
	}
	dir, err = unix.FcntlInt(uintptr(root), unix.F_DUPFD_CLOEXEC, 0)
	return dir, false, madeDir, err
}

// startSpare makes the spare that takeSpare asked for, if it asked: on the caller's
// goroutine when the last one was quick to make, else on a goroutine of its own.
func (f *OSFs) startSpare() {
	s := &f.spare
	s.mu.Lock()
	if !s.ask {
		s.mu.Unlock()
		return
	}
	s.ask = false
	if s.off {
		unix.Close(s.dir)
		s.mu.Unlock()
		return
	}
	s.making = true
	s.made.Add(1)
	dir, now := s.dir, s.quick
	if now {
		s.onChange++
	}
	s.mu.Unlock()
	if now {
		f.makeSpare(dir)
	} else {
		go f.makeSpare(dir)
	}
}

// makeSpare makes an unnamed file in the directory dir, for the next creation, and closes
// dir.
func (f *OSFs) makeSpare(dir int) {
	s := &f.spare
	defer s.made.Done()
	start := time.Now()
	fd, err := retry(func() (int, error) {
		return unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	})
	took := time.Since(start)
	unix.Close(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.making = false
	s.quick = err == nil && took < spareSyncMax
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

// rootReopened lets the next creation make spareDir in a storage directory put in the
// place of the one opened before.
func (f *OSFs) rootReopened() {
	f.spare.mu.Lock()
	f.spare.dirTried = false
	f.spare.mu.Unlock()
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
