package vfs

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// lockFileName is the storage-wide lock of an OS store, kept in its root directory.
const lockFileName = bookkeepingPrefix + ".lock"

// OSFs is an afero.Fs over a host directory, opened as an os.Root: every name is resolved
// inside the directory by the kernel, one element at a time, so neither ".." nor a symbolic
// link (absolute, relative or dangling) leads outside it, also when links are swapped
// while an operation runs. Errors carry names relative to the directory, never host paths;
// an escape attempt is reported as ErrEscape.
//
// OSFs also implements the optional interfaces the Store uses: Lstater, NoReplaceRenamer,
// DirSyncer and Locker.
type OSFs struct {
	root *os.Root

	lockMu  sync.Mutex
	lock    *os.File // nil when the lock file cannot be created (read-only storage)
	holders int      // this process's holders of the flock: any number shared, or one exclusive
}

var (
	_ afero.Fs         = (*OSFs)(nil)
	_ afero.Lstater    = (*OSFs)(nil)
	_ NoReplaceRenamer = (*OSFs)(nil)
	_ DirSyncer        = (*OSFs)(nil)
	_ Locker           = (*OSFs)(nil)
)

// NewOSFs opens dir, creating it (mode 0700) if needed, as a jailed filesystem.
func NewOSFs(dir string) (*OSFs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	f := &OSFs{root: root}
	lock, err := root.OpenFile(lockFileName, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		f.lock = lock
	}
	return f, nil
}

// NewReadOnlyOSFs opens an existing dir as a jailed filesystem without creating anything in
// it; it is meant for the overlay's lower layer.
func NewReadOnlyOSFs(dir string) (*OSFs, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &OSFs{root: root}, nil
}

// Close releases the directory and the lock file.
func (f *OSFs) Close() error {
	if f.lock != nil {
		f.lock.Close()
	}
	return f.root.Close()
}

// rel turns an afero name ("/a/b", "a/b", "/", "") into an os.Root name ("a/b", ".").
// Cleaning after prefixing "/" clamps any ".." at the root before the kernel sees it.
func rel(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return "."
	}
	return name
}

// wrap turns os.Root's escape error into ErrEscape, keeping the operation and relative name.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && isRootEscape(pe.Err) {
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: ErrEscape}
	}
	var le *os.LinkError
	if errors.As(err, &le) && isRootEscape(le.Err) {
		return &fs.PathError{Op: le.Op, Path: le.Old, Err: ErrEscape}
	}
	return err
}

// isRootEscape recognises os.Root's refusal. The standard library keeps that error
// unexported, so its text is the only handle; a test pins it.
func isRootEscape(err error) bool {
	return err != nil && err.Error() == "path escapes from parent"
}

// osFile hides the host path that *os.File.Name would report.
type osFile struct {
	*os.File
	name string
}

func (f osFile) Name() string { return f.name }

func (f *OSFs) file(name string, file *os.File, err error) (afero.File, error) {
	if err != nil {
		return nil, wrap(err)
	}
	return osFile{File: file, name: "/" + strings.TrimPrefix(rel(name), ".")}, nil
}

// Name identifies the filesystem type.
func (f *OSFs) Name() string { return "OSFs" }

// Create creates or truncates a file.
func (f *OSFs) Create(name string) (afero.File, error) {
	file, err := f.root.Create(rel(name))
	return f.file(name, file, err)
}

// Mkdir creates a directory.
func (f *OSFs) Mkdir(name string, perm os.FileMode) error { return wrap(f.root.Mkdir(rel(name), perm)) }

// MkdirAll creates a directory and its missing parents.
func (f *OSFs) MkdirAll(name string, perm os.FileMode) error {
	return wrap(f.root.MkdirAll(rel(name), perm))
}

// Open opens a file or directory for reading.
func (f *OSFs) Open(name string) (afero.File, error) {
	file, err := f.root.Open(rel(name))
	return f.file(name, file, err)
}

// OpenFile opens a file with the given flags.
func (f *OSFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.root.OpenFile(rel(name), flag, perm)
	return f.file(name, file, err)
}

// Remove removes a file or an empty directory.
func (f *OSFs) Remove(name string) error { return wrap(f.root.Remove(rel(name))) }

// RemoveAll removes a path and everything below it.
func (f *OSFs) RemoveAll(name string) error { return wrap(f.root.RemoveAll(rel(name))) }

// Rename renames a file or directory, replacing an existing file at newname.
func (f *OSFs) Rename(oldname, newname string) error {
	return wrap(f.root.Rename(rel(oldname), rel(newname)))
}

// Stat returns the file info, following symbolic links that stay inside the root.
func (f *OSFs) Stat(name string) (os.FileInfo, error) {
	fi, err := f.root.Stat(rel(name))
	return fi, wrap(err)
}

// LstatIfPossible returns the file info without following a final symbolic link.
func (f *OSFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := f.root.Lstat(rel(name))
	return fi, true, wrap(err)
}

// Chmod changes the mode of a file.
func (f *OSFs) Chmod(name string, mode os.FileMode) error {
	return wrap(f.root.Chmod(rel(name), mode))
}

// Chown changes the owner of a file.
func (f *OSFs) Chown(name string, uid, gid int) error {
	return wrap(f.root.Chown(rel(name), uid, gid))
}

// Chtimes changes the times of a file.
func (f *OSFs) Chtimes(name string, atime, mtime time.Time) error {
	return wrap(f.root.Chtimes(rel(name), atime, mtime))
}

// SyncDir flushes a directory's entries to disk, so that a rename into it survives a crash.
func (f *OSFs) SyncDir(name string) error {
	d, err := f.root.Open(rel(name))
	if err != nil {
		return wrap(err)
	}
	defer d.Close()
	return d.Sync()
}

// RenameNoReplace renames oldname to newname and fails with fs.ErrExist if newname exists;
// the check and the move are one step (see renameNoReplace for the platform's way).
func (f *OSFs) RenameNoReplace(oldname, newname string) error {
	return wrap(f.renameNoReplace(rel(oldname), rel(newname)))
}

// renameCheckFirst is the fallback where the kernel cannot rename without replacing: the
// Store's storage lock keeps other memory-mcp processes out of the window between the two.
func (f *OSFs) renameCheckFirst(oldname, newname string) error {
	if _, err := f.root.Lstat(newname); err == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	return f.root.Rename(oldname, newname)
}

// LockStorage takes the lock shared by every process that serves this directory: exclusive
// for changes, shared for reads. It blocks until the lock is free. The returned generation
// is the change counter kept in the lock file.
//
// A flock belongs to the open descriptor, which all of this process's callers share: the
// first shared holder takes it and the last one releases it, so reads of one process run in
// parallel. Callers must not ask for the exclusive lock while they hold the shared one (the
// Store's own lock sees to that).
func (f *OSFs) LockStorage(exclusive bool) (generation uint64, err error) {
	if f.lock == nil {
		return 0, nil
	}
	f.lockMu.Lock()
	defer f.lockMu.Unlock()
	if f.holders == 0 {
		if err := flock(f.lock, exclusive); err != nil {
			return 0, err
		}
	}
	f.holders++
	var buf [8]byte
	if n, _ := f.lock.ReadAt(buf[:], 0); n == 8 {
		generation = binary.LittleEndian.Uint64(buf[:])
	}
	return generation, nil
}

// SetGeneration records a new change counter; only valid while the lock is held exclusively.
func (f *OSFs) SetGeneration(generation uint64) error {
	if f.lock == nil {
		return nil
	}
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], generation)
	_, err := f.lock.WriteAt(buf[:], 0)
	return err
}

// UnlockStorage releases the lock taken by LockStorage.
func (f *OSFs) UnlockStorage() error {
	if f.lock == nil {
		return nil
	}
	f.lockMu.Lock()
	defer f.lockMu.Unlock()
	if f.holders--; f.holders > 0 {
		return nil
	}
	return funlock(f.lock)
}
