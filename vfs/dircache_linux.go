package vfs

import (
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// dirCache keeps the directories used while the storage lock is held open, so that a change
// opens each directory once, not once per operation: os.Root opens every parent of a name
// on every call, and a change with history makes a dozen calls in the history's
// directories alone. The directories are opened below the root one element at a time, each
// relative to its parent with O_NOFOLLOW (so the jail holds, and a symbolic link on the way
// sends the operation the os.Root way, which follows it inside the root); the operations then
// name only a final element relative to them, with O_NOFOLLOW too. They are bare descriptors:
// an *os.File would ask for the flags and try the poller at every open. The cache lives from
// the first holder of the lock to the last (see LockStorage), and forgets a directory that
// this process renames or removes. An edit by hand that moves a directory while a
// transaction runs is a race either way: the operation then lands in the moved directory.
// The root's own descriptor is kept from one lock period to the next, as the os.Root keeps
// its own, until the root is opened again (reset).
type dirCache struct {
	mu     sync.Mutex
	active bool
	root   int // the root directory, where rooted
	rooted bool
	dirs   map[string]int // directories below the root (os.Root names) → descriptor
	opened map[string]int // this period: directory → times opened (tests read it)
}

// start begins a lock period.
func (c *dirCache) start() {
	c.mu.Lock()
	c.active = true
	clear(c.opened)
	c.mu.Unlock()
}

// stop ends it, closing the directories below the root.
func (c *dirCache) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = false
	for k, fd := range c.dirs {
		unix.Close(fd)
		delete(c.dirs, k)
	}
}

// reset closes the root's descriptor too: the root was opened again, or is closed.
func (c *dirCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rooted {
		unix.Close(c.root)
	}
	c.rooted = false
}

// forget drops the directory n and those below it (after a rename or removal of n).
func (c *dirCache) forget(n string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, fd := range c.dirs {
		if k == n || strings.HasPrefix(k, n+"/") || n == "." {
			unix.Close(fd)
			delete(c.dirs, k)
		}
	}
}

// at returns a descriptor of the directory that holds the os.Root name n, and n's final
// element; ok is false outside a lock period or when n has no parent to open.
func (f *OSFs) at(n string) (dirfd int, base string, ok bool) {
	dir, base := path.Split(n)
	if base == "" || base == "." || base == ".." {
		return 0, "", false
	}
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	dirfd, ok = f.dirAt(dir)
	return dirfd, base, ok
}

// dirAt returns a descriptor of the directory dir (an os.Root name) from the cache, opening
// it, and those above it that are not there yet, first; ok is false outside a lock period,
// or where the way meets anything but a directory (the os.Root way then decides).
func (f *OSFs) dirAt(dir string) (dirfd int, ok bool) {
	c := &f.dirs
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return 0, false
	}
	if !c.rooted {
		d, err := f.root.OpenFile(".", openDir, 0)
		if err != nil {
			return 0, false
		}
		fd, err := unix.FcntlInt(d.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		d.Close()
		if err != nil {
			return 0, false
		}
		c.root, c.rooted = fd, true
		if c.dirs == nil {
			c.dirs, c.opened = map[string]int{}, map[string]int{}
		}
		c.opened["."]++
	}
	if dir == "." {
		return c.root, true
	}
	if fd, ok := c.dirs[dir]; ok {
		return fd, true
	}
	parent, done := c.root, ""
	for elem := range strings.SplitSeq(dir, "/") {
		if elem == "" || elem == "." || elem == ".." { // not a cleaned name: the os.Root way
			return 0, false
		}
		done = path.Join(done, elem)
		if fd, ok := c.dirs[done]; ok {
			parent = fd
			continue
		}
		fd, err := retry(func() (int, error) {
			return unix.Openat(parent, elem, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|openNonblock, 0)
		})
		if err != nil {
			return 0, false // a symbolic link, absent, not a directory: the os.Root way
		}
		c.dirs[done] = fd
		c.opened[done]++
		parent = fd
	}
	return parent, true
}

// openAt is OpenFile's way through the cache; ok is false where it does not apply. A
// regular file comes back as reg (an fdFile shown as shown), anything else as file.
func (f *OSFs) openAt(n, shown string, flag int, perm os.FileMode) (reg afero.File, file *os.File, err error, ok bool) {
	dirfd, base, ok := f.at(n)
	if !ok {
		return nil, nil, nil, false
	}
	fd, err := retry(func() (int, error) {
		return unix.Openat(dirfd, base, flag|openNonblock|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	})
	if err == unix.ELOOP {
		return nil, nil, nil, false // a symbolic link: the os.Root way follows it, inside the root
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: n, Err: err}, true
	}
	r := &fdFile{fd: fd, name: shown, append: flag&os.O_APPEND != 0}
	if err := statAtNoTimes(fd, "", unix.AT_EMPTY_PATH, &r.st); err != nil {
		unix.Close(fd)
		return nil, nil, &fs.PathError{Op: "stat", Path: n, Err: err}, true
	}
	if r.st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		return r, nil, nil, true
	}
	return nil, os.NewFile(uintptr(fd), "/"+n), nil, true // f.file checks what it is
}

// statAt is Lstat (or, with follow, Stat) through the cache; ok is false where it does not
// apply (for Stat, a symbolic link).
func (f *OSFs) statAt(n string, follow bool) (os.FileInfo, error, bool) {
	dirfd, base, ok := f.at(n)
	name, flags := base, unix.AT_SYMLINK_NOFOLLOW
	if n == "." { // the root itself
		dirfd, ok = f.dirAt(".")
		base, name, flags = ".", "", unix.AT_EMPTY_PATH
	}
	if !ok {
		return nil, nil, false
	}
	var st unix.Stat_t
	err := statAtNoTimes(dirfd, name, flags, &st)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: n, Err: err}, true
	}
	fi := &statInfo{name: base, st: st}
	if follow && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, false
	}
	return fi, nil, true
}

// removeAt is Remove through the cache.
func (f *OSFs) removeAt(n string) (error, bool) {
	dirfd, base, ok := f.at(n)
	if !ok {
		return nil, false
	}
	err := unix.Unlinkat(dirfd, base, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		if derr := unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR); derr != unix.ENOTDIR {
			err = derr
		}
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: n, Err: err}, true
	}
	return nil, true
}

// renameAt is a rename through the cache, with renameat2's flags (RENAME_NOREPLACE); ok is
// false where it does not apply, or where the filesystem lacks the flag.
func (f *OSFs) renameAt(o, n string, flags uint) (error, bool) {
	ofd, obase, ok := f.at(o)
	if !ok {
		return nil, false
	}
	nfd, nbase, ok := f.at(n)
	if !ok {
		return nil, false
	}
	err := unix.Renameat2(ofd, obase, nfd, nbase, flags)
	if flags != 0 && unsupported(err) {
		return nil, false
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: o, New: n, Err: err}, true
	}
	return nil, true
}

// statInfo is an os.FileInfo from statAtNoTimes: its ModTime is the zero Unix time.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	}
	if s.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

const renameNoReplaceFlag = unix.RENAME_NOREPLACE
