package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// MemFs is an in-memory afero.Fs that behaves like the OS where afero.MemMapFs does not:
// creating a file or directory needs an existing parent directory, removing a non-empty
// directory fails, a rename never replaces a directory and needs the destination's parent,
// and no operation replaces a directory by a file. It also serialises every structural
// change, because MemMapFs crashes the process (an unrecoverable "RUnlock of unlocked
// RWMutex") when a Rename and a Remove of one name race.
//
// Names are cleaned and made absolute before they reach MemMapFs, which otherwise treats
// "a" and "/a" as two files.
type MemFs struct {
	mu       sync.RWMutex
	fs       *afero.MemMapFs
	mu2      sync.Mutex // guards counters
	counters Counters   // (see LockStorage)
}

// NewMemFs returns an empty in-memory filesystem whose root directory exists.
func NewMemFs() *MemFs {
	m := &MemFs{fs: &afero.MemMapFs{}}
	_ = m.fs.Mkdir("/", 0o700)
	return m
}

func abs(name string) string { return path.Clean("/" + name) }

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// checkParent returns nil when name's parent is an existing directory. Callers hold mu.
func (m *MemFs) checkParent(op, name string) error {
	parent := path.Dir(name)
	fi, err := m.fs.Stat(parent)
	if err != nil {
		return pathErr(op, name, syscall.ENOENT)
	}
	if !fi.IsDir() {
		return pathErr(op, name, syscall.ENOTDIR)
	}
	return nil
}

// stat is Stat without locking; a name that runs through a file is "not a directory".
func (m *MemFs) stat(name string) (os.FileInfo, error) {
	for dir := path.Dir(name); dir != "/"; dir = path.Dir(dir) {
		if fi, err := m.fs.Stat(dir); err == nil && !fi.IsDir() {
			return nil, pathErr("stat", name, syscall.ENOTDIR)
		}
	}
	fi, err := m.fs.Stat(name)
	if err != nil {
		return nil, pathErr("stat", name, syscall.ENOENT)
	}
	return fi, nil
}

// Name identifies the filesystem type.
func (m *MemFs) Name() string { return "MemFs" }

// Create creates or truncates a file.
func (m *MemFs) Create(name string) (afero.File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Mkdir creates a directory whose parent exists.
func (m *MemFs) Mkdir(name string, perm os.FileMode) error {
	name = abs(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkParent("mkdir", name); err != nil {
		return err
	}
	if _, err := m.fs.Stat(name); err == nil {
		return pathErr("mkdir", name, syscall.EEXIST)
	}
	return m.fs.Mkdir(name, perm)
}

// MkdirAll creates a directory and its missing parents; it fails if a file is in the way.
func (m *MemFs) MkdirAll(name string, perm os.FileMode) error {
	name = abs(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for dir := name; ; dir = path.Dir(dir) {
		fi, err := m.fs.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return pathErr("mkdir", name, syscall.ENOTDIR)
			}
			break
		}
		missing = append(missing, dir)
		if dir == "/" {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := m.fs.Mkdir(missing[i], perm); err != nil {
			return err
		}
	}
	return nil
}

// Open opens a file or directory for reading.
func (m *MemFs) Open(name string) (afero.File, error) {
	name = abs(name)
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, err := m.stat(name); err != nil {
		return nil, err
	}
	return m.fs.Open(name)
}

// OpenFile opens a file; creating one needs an existing parent directory.
func (m *MemFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	name = abs(name)
	if flag&(os.O_CREATE|os.O_WRONLY|os.O_RDWR|os.O_TRUNC) == 0 {
		return m.Open(name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fi, err := m.stat(name)
	switch {
	case err == nil && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathErr("open", name, syscall.EEXIST)
	case err == nil && fi.IsDir():
		return nil, pathErr("open", name, syscall.EISDIR)
	case err != nil && flag&os.O_CREATE == 0:
		return nil, err
	case err != nil:
		if err := m.checkParent("open", name); err != nil {
			return nil, err
		}
	}
	return m.fs.OpenFile(name, flag, perm)
}

// Remove removes a file or an empty directory.
func (m *MemFs) Remove(name string) error {
	name = abs(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	fi, err := m.stat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if names, err := m.children(name); err != nil {
			return err
		} else if len(names) > 0 {
			return pathErr("remove", name, syscall.ENOTEMPTY)
		}
	}
	return m.fs.Remove(name)
}

// RemoveAll removes a path and everything below it; a missing path is not an error.
func (m *MemFs) RemoveAll(name string) error {
	name = abs(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if name == "/" {
		return pathErr("removeall", name, syscall.EINVAL)
	}
	fi, err := m.stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return m.removeTree(name, fi)
}

// removeTree removes name and what is below it, one entry at a time: MemMapFs's RemoveAll
// scans every path in the filesystem, which made a delete cost O(files in the store).
func (m *MemFs) removeTree(name string, fi os.FileInfo) error {
	if fi.IsDir() {
		children, err := m.children(name)
		if err != nil {
			return err
		}
		for _, c := range children {
			if err := m.removeTree(path.Join(name, c.Name()), c); err != nil {
				return err
			}
		}
	}
	return m.fs.Remove(name)
}

// children lists the directory name. Callers hold mu.
func (m *MemFs) children(name string) ([]os.FileInfo, error) {
	d, err := m.fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdir(-1)
}

// Rename moves a file or directory. An existing file at newname is replaced by a file; an
// existing directory is never replaced.
func (m *MemFs) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rename(abs(oldname), abs(newname), false)
}

// RenameNoReplace moves a file or directory and fails with fs.ErrExist if newname exists.
func (m *MemFs) RenameNoReplace(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rename(abs(oldname), abs(newname), true)
}

func (m *MemFs) rename(oldname, newname string, noReplace bool) error {
	src, err := m.stat(oldname)
	if err != nil {
		return err
	}
	if oldname == "/" || newname == "/" || (src.IsDir() && len(newname) > len(oldname) && newname[:len(oldname)+1] == oldname+"/") {
		return pathErr("rename", oldname, syscall.EINVAL)
	}
	if err := m.checkParent("rename", newname); err != nil {
		return err
	}
	if dst, err := m.stat(newname); err == nil {
		switch {
		case noReplace:
			return pathErr("rename", newname, syscall.EEXIST)
		case dst.IsDir():
			return pathErr("rename", newname, syscall.EEXIST)
		case src.IsDir():
			return pathErr("rename", newname, syscall.ENOTDIR)
		}
	}
	return m.move(oldname, newname, src)
}

// move moves the entry oldname, described by fi, to newname, one entry at a time: a file
// is written anew (keeping its mode and time) and the old one removed, a directory made
// anew, its entries moved, and the old one removed. MemMapFs's Rename scans every path in
// the filesystem for descendants, even for a file, which made a rename cost O(files in the
// store); this costs O(entries moved). Callers hold mu, and the checks are done.
func (m *MemFs) move(oldname, newname string, fi os.FileInfo) error {
	if fi.IsDir() {
		children, err := m.children(oldname)
		if err != nil {
			return err
		}
		if err := m.fs.Mkdir(newname, fi.Mode().Perm()); err != nil {
			return err
		}
		for _, c := range children {
			if err := m.move(path.Join(oldname, c.Name()), path.Join(newname, c.Name()), c); err != nil {
				return err
			}
		}
	} else {
		src, err := m.fs.Open(oldname)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(src)
		src.Close()
		if err != nil {
			return err
		}
		dst, err := m.fs.OpenFile(newname, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
		if err != nil {
			return err
		}
		_, err = dst.Write(data)
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := m.fs.Chtimes(newname, fi.ModTime(), fi.ModTime()); err != nil {
		return err
	}
	return m.fs.Remove(oldname)
}

// WriteFileAtomic replaces (or, with noReplace, creates) the file at name in one step under
// the filesystem's lock. In memory a temporary file and a rename buy nothing (there is no
// crash to survive, and the Store keeps readers out while it writes), and MemMapFs's rename
// scans every file in the filesystem for descendants, which made each write cost O(files).
func (m *MemFs) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	name = abs(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	fi, err := m.stat(name)
	switch {
	case err == nil && noReplace:
		return pathErr("open", name, syscall.EEXIST)
	case err == nil && fi.IsDir():
		return pathErr("open", name, syscall.EISDIR)
	case err != nil:
		if err := m.checkParent("open", name); err != nil {
			return err
		}
	}
	f, err := m.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stat returns the file info.
func (m *MemFs) Stat(name string) (os.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.stat(abs(name))
}

// LstatIfPossible is Stat: MemFs has no symbolic links.
func (m *MemFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := m.Stat(name)
	return fi, false, err
}

// Chmod changes the mode of a file.
func (m *MemFs) Chmod(name string, mode os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fs.Chmod(abs(name), mode)
}

// Chown changes the owner of a file.
func (m *MemFs) Chown(name string, uid, gid int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fs.Chown(abs(name), uid, gid)
}

// Chtimes changes the times of a file.
func (m *MemFs) Chtimes(name string, atime, mtime time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fs.Chtimes(abs(name), atime, mtime)
}

// SyncDir does nothing: memory has nothing to flush.
func (m *MemFs) SyncDir(string) error { return nil }

// OpenDir opens a directory for a walk by names.
func (m *MemFs) OpenDir(name string) (DirHandle, error) { return openNamedDir(m, name) }

// LockStorage returns the change counter. Memory is not shared with other processes, so
// there is no lock to take beyond the Store's own; the counter still tells two stores over
// one MemFs (as tests build them) about each other's changes.
func (m *MemFs) LockStorage(ctx context.Context, exclusive bool) (Counters, error) {
	m.mu2.Lock()
	defer m.mu2.Unlock()
	return m.counters, ctx.Err()
}

// SetGeneration stores a new change counter.
func (m *MemFs) SetGeneration(gen uint64) error {
	m.mu2.Lock()
	m.counters.Generation = gen
	m.mu2.Unlock()
	return nil
}

// SetUsage stores the usage as of generation gen.
func (m *MemFs) SetUsage(gen uint64, usage int64) error {
	m.mu2.Lock()
	m.counters.Usage, m.counters.UsageGen = usage, gen
	m.mu2.Unlock()
	return nil
}

// SetLost stores when access events were last lost.
func (m *MemFs) SetLost(sec int64) error {
	m.mu2.Lock()
	if sec > m.counters.Lost {
		m.counters.Lost = sec
	}
	m.mu2.Unlock()
	return nil
}

// UnlockStorage does nothing (see LockStorage).
func (m *MemFs) UnlockStorage() error { return nil }

// Reload does nothing: a MemFs caches nothing of itself.
func (m *MemFs) Reload() error { return nil }

// ReachesBookkeeping is false: a MemFs has no symbolic links.
func (m *MemFs) ReachesBookkeeping(string, bool) bool { return false }
