package files

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// OSFs is an afero.Fs over a host directory, opened as an os.Root: every name is resolved
// inside the directory by the kernel, one element at a time, so neither ".." nor a symbolic
// link (absolute, relative or dangling) leads outside it, also when links are swapped
// while an operation runs. A symbolic link whose absolute target lies inside the directory
// is followed too: the target is rewritten relative to the directory and resolved through
// the os.Root again, so the text of the link is never trusted. Errors carry names relative
// to the directory, never host paths; an escape attempt is reported as ErrEscape.
//
// Nothing it opens can block: files are opened non-blocking and must turn out to be
// regular files or directories (a fifo swapped in by another program is refused).
//
// OSFs meets the FS contract of NewAferoStorage.
type OSFs struct {
	dir      string // the host directory as given, to notice that it vanished and reopen it
	real     string // dir with symbolic links resolved, for absolute links into it
	readOnly bool

	root      *os.Root
	rootInfo  os.FileInfo   // the directory root opened, to tell whether f.dir is still it
	foldsCase bool          // the filesystem ignores case (see Canonical)
	reopened  atomic.Uint64 // times checkRoot opened a directory put in f.dir's place

	lockMu  sync.Mutex
	lock    *os.File // the data lock; nil when it cannot be had (read-only storage without one)
	gate    *os.File // the turnstile that a waiting writer holds (see LockStorage)
	holders int      // this process's holders of the data lock: any number shared, or one exclusive
	gateMu  sync.Mutex
}

// lockFileName and gateFileName are the storage-wide locks of an OS store, kept in its root.
const (
	lockFileName = vfs.BookkeepingPrefix + ".lock"
	gateFileName = vfs.BookkeepingPrefix + ".gate"
)

// NewOSFs opens dir, creating it (mode 0700) if needed, as a jailed filesystem.
func NewOSFs(dir string) (*OSFs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return openOSFs(dir, false)
}

// NewReadOnlyOSFs opens an existing dir as a jailed filesystem without creating anything in
// it: the storage locks are used when they exist. It is meant for read-only stores and the
// overlay's lower layer.
func NewReadOnlyOSFs(dir string) (*OSFs, error) { return openOSFs(dir, true) }

func openOSFs(dir string, readOnly bool) (*OSFs, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	f := &OSFs{dir: abs, real: abs, readOnly: readOnly}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		f.real = real
	}
	if err := f.open(); err != nil {
		return nil, err
	}
	return f, nil
}

// open opens the directory and its lock files.
func (f *OSFs) open() error {
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return err
	}
	flag := os.O_RDWR | os.O_CREATE
	if f.readOnly {
		flag = os.O_RDONLY
	}
	lock, lerr := root.OpenFile(lockFileName, flag|openNonblock, 0o600)
	gate, gerr := root.OpenFile(gateFileName, flag|openNonblock, 0o600)
	info, err := root.Stat(".")
	if err != nil {
		root.Close()
		return err
	}
	f.root, f.rootInfo, f.lock, f.gate = root, info, nil, nil
	f.foldsCase = foldsCase(root)
	if lerr == nil && gerr == nil {
		f.lock, f.gate = lock, gate
	} else {
		closeAll(lock, lerr, gate, gerr)
	}
	return nil
}

func closeAll(a *os.File, aerr error, b *os.File, berr error) {
	if aerr == nil {
		a.Close()
	}
	if berr == nil {
		b.Close()
	}
}

// Close releases the directory and the lock files.
func (f *OSFs) Close() error {
	if f.lock != nil {
		f.lock.Close()
		f.gate.Close()
	}
	return f.root.Close()
}

// checkRoot notices a storage directory that was removed or replaced: it fails with
// ErrStorageGone while nothing is at the host path, and reopens the directory once one is
// there again. It runs when no transaction of this process is using the root.
func (f *OSFs) checkRoot() error {
	fi, err := os.Stat(f.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return vfs.ErrStorageGone
		}
		return err
	}
	if os.SameFile(fi, f.rootInfo) {
		return nil
	}
	if !fi.IsDir() {
		return vfs.ErrStorageGone
	}
	old := []io.Closer{f.root}
	if f.lock != nil {
		old = append(old, f.lock, f.gate)
	}
	if err := f.open(); err != nil {
		return err
	}
	for _, c := range old {
		c.Close()
	}
	f.reopened.Add(1)
	return nil
}

// Reopened counts the times the storage directory was found replaced (moved or removed,
// another put at its path) and the new one opened: a descriptor of a bookkeeping file kept
// from before is the old directory's.
func (f *OSFs) Reopened() uint64 { return f.reopened.Load() }

// rel turns an afero name ("/a/b", "a/b", "/", "") into an os.Root name ("a/b", ".").
// Cleaning after prefixing "/" clamps any ".." at the root before the kernel sees it.
func rel(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return "."
	}
	return name
}

// wrap turns os.Root's escape error, however deeply wrapped, into ErrEscape, keeping the
// operation and relative name.
func wrap(err error) error {
	if err == nil || !isEscape(err) {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: vfs.ErrEscape}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: le.Old, Err: vfs.ErrEscape}
	}
	return vfs.ErrEscape
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

// file wraps an opened file, after checking that it is a regular file or a directory:
// anything else (a fifo, socket or device) is closed again and refused with ErrNotRegular.
func (f *OSFs) file(name string, file *os.File, err error) (afero.File, error) {
	if err != nil {
		return nil, wrap(err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if t := fi.Mode().Type(); t != 0 && t != fs.ModeDir {
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: rel(name), Err: vfs.ErrNotRegular}
	}
	return osFile{File: file, name: shownName(name)}, nil
}

// shownName is the name an opened file reports: the storage's, never the host's.
func shownName(name string) string { return "/" + strings.TrimPrefix(rel(name), ".") }

// follow runs op on the name, and once more on the name with absolute symbolic links into
// the storage rewritten (see resolveLinks) when os.Root refused it as an escape.
func (f *OSFs) follow(name string, last bool, op func(string) error) error {
	n := rel(name)
	err := op(n)
	if !isEscape(err) {
		return wrap(err)
	}
	if alt, ok := f.resolveLinks(n, last); ok && alt != n {
		err = op(alt)
	}
	return wrap(err)
}

func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e == vfs.ErrEscape || isRootEscape(e) {
			return true
		}
	}
	return false
}

// resolveLinks rewrites name so that no element but (unless last) the final one is a
// symbolic link: a link with a relative target is replaced by its target, and one with an
// absolute target inside the storage directory by that target made relative. It gives up
// (ok false) on a link that leads outside, or after 40 links. The result is only a name to
// try again through the os.Root, which checks it once more.
func (f *OSFs) resolveLinks(name string, last bool) (string, bool) {
	resolved, ok, _ := f.walkLinks(name, last)
	return resolved, ok
}

// ReachesBookkeeping reports whether name, its symbolic links followed (the final one only
// with last), runs through one of the server's own files: a link planted in the storage
// must not lead the model into the history or the locks, though they are inside the root.
// The server names its own files directly, never through a link, so only names that pass
// through a link are looked at.
func (f *OSFs) ReachesBookkeeping(name string, last bool) bool {
	_, _, bookkeeping := f.walkLinks(rel(name), last)
	return bookkeeping
}

// walkLinks is resolveLinks, also reporting whether the target of a link followed on the
// way names bookkeeping.
func (f *OSFs) walkLinks(name string, last bool) (resolved string, ok, bookkeeping bool) {
	parts := strings.Split(name, "/")
	done := ""
	for hops := 0; len(parts) > 0; {
		c := parts[0]
		parts = parts[1:]
		cand := path.Join(done, c)
		if len(parts) == 0 && !last {
			return cand, true, bookkeeping
		}
		fi, err := f.root.Lstat(cand)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = cand
			continue
		}
		if hops++; hops > 40 {
			return "", false, bookkeeping
		}
		target, err := f.root.Readlink(cand)
		if err != nil {
			return "", false, bookkeeping
		}
		var next string
		switch {
		case !path.IsAbs(target):
			next = path.Join(done, target)
		case target == f.dir || target == f.real:
			next = "."
		case strings.HasPrefix(target, f.dir+"/"):
			next = strings.TrimPrefix(target, f.dir+"/")
		case strings.HasPrefix(target, f.real+"/"):
			next = strings.TrimPrefix(target, f.real+"/")
		default:
			return "", false, bookkeeping
		}
		inside := next // the target's names within the storage (the root's own may be anything)
		if !path.IsAbs(target) {
			inside = target
		}
		if slices.ContainsFunc(strings.Split(inside, "/"), vfs.IsBookkeeping) {
			bookkeeping = true // even a target that leaves the bookkeeping again by ".."
		}
		next = path.Clean(next)
		if next == ".." || strings.HasPrefix(next, "../") {
			return "", false, bookkeeping
		}
		rest := parts
		parts = nil
		if next != "." {
			parts = strings.Split(next, "/")
		}
		parts = append(parts, rest...)
		done = ""
	}
	if done == "" {
		done = "."
	}
	return done, true, bookkeeping
}

// Name identifies the filesystem type.
func (f *OSFs) Name() string { return "OSFs" }

// Create creates or truncates a file.
func (f *OSFs) Create(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Mkdir creates a directory.
func (f *OSFs) Mkdir(name string, perm os.FileMode) error {
	return f.follow(name, false, func(n string) error { return f.root.Mkdir(n, perm) })
}

// MkdirAll creates a directory and its missing parents.
func (f *OSFs) MkdirAll(name string, perm os.FileMode) error {
	return f.follow(name, true, func(n string) error { return f.root.MkdirAll(n, perm) })
}

// Open opens a file or directory for reading.
func (f *OSFs) Open(name string) (afero.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile opens a file with the given flags, never blocking (see OSFs).
func (f *OSFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	var file *os.File
	err := f.follow(name, true, func(n string) (err error) {
		file, err = f.root.OpenFile(n, flag|openNonblock, perm)
		return err
	})
	return f.file(name, file, err)
}

// Remove removes a file or an empty directory.
func (f *OSFs) Remove(name string) error {
	return f.follow(name, false, func(n string) error { return held(func() error { return f.root.Remove(n) }) })
}

// RemoveAll removes a path and everything below it.
func (f *OSFs) RemoveAll(name string) error {
	return f.follow(name, false, func(n string) error { return held(func() error { return f.root.RemoveAll(n) }) })
}

// Rename renames a file or directory, replacing an existing file at newname.
func (f *OSFs) Rename(oldname, newname string) error {
	return f.rename2(oldname, newname, f.heldRename)
}

// heldRename renames, retrying while another program holds a file open (see retryWhile).
func (f *OSFs) heldRename(oldname, newname string) error {
	return held(func() error { return f.root.Rename(oldname, newname) })
}

// rename2 runs a two-name operation, following absolute links into the storage in the
// parents of either name.
func (f *OSFs) rename2(oldname, newname string, op func(o, n string) error) error {
	return f.follow(oldname, false, func(o string) error {
		return f.follow(newname, false, func(n string) error { return op(o, n) })
	})
}

// Stat returns the file info, following symbolic links that stay inside the root.
func (f *OSFs) Stat(name string) (os.FileInfo, error) {
	var fi os.FileInfo
	err := f.follow(name, true, func(n string) (err error) {
		fi, err = f.root.Stat(n)
		return err
	})
	return fi, err
}

// LstatIfPossible returns the file info without following a final symbolic link.
func (f *OSFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	var fi os.FileInfo
	err := f.follow(name, false, func(n string) (err error) {
		fi, err = f.root.Lstat(n)
		return err
	})
	return fi, true, err
}

// Chmod changes the mode of a file.
func (f *OSFs) Chmod(name string, mode os.FileMode) error {
	return f.follow(name, true, func(n string) error { return f.root.Chmod(n, mode) })
}

// Chown changes the owner of a file.
func (f *OSFs) Chown(name string, uid, gid int) error {
	return f.follow(name, true, func(n string) error { return f.root.Chown(n, uid, gid) })
}

// Chtimes changes the times of a file.
func (f *OSFs) Chtimes(name string, atime, mtime time.Time) error {
	return f.follow(name, true, func(n string) error { return f.root.Chtimes(n, atime, mtime) })
}

// SyncDir flushes a directory's entries to disk, so that a rename into it survives a crash.
func (f *OSFs) SyncDir(name string) error {
	d, err := f.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncDir(d.(osFile).File)
}

// WriteFileAtomic writes a temporary file beside name, flushes it, renames it to name and
// flushes the directory (docs/behaviour.md §6).
func (f *OSFs) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	return writeFile(f, name, data, noReplace, true)
}

// WriteFileUnsynced is WriteFileAtomic without the flushes: a crash of the process leaves
// the old content or the new, but a crash of the machine may lose the change, so it is for
// changes that a flushed write-ahead log records first (see durableFS).
func (f *OSFs) WriteFileUnsynced(name string, data []byte, noReplace bool) error {
	return writeFile(f, name, data, noReplace, false)
}

// BootID names this boot of the machine ("" where unknown, which keeps the write-ahead
// log off).
func (f *OSFs) BootID() string {
	if f.readOnly {
		return ""
	}
	return bootID()
}

// Reload does nothing: an OSFs caches nothing that another process could change.
func (f *OSFs) Reload() error { return nil }

// RenameNoReplace renames oldname to newname and fails with fs.ErrExist if newname exists;
// the check and the move are one step (see renameNoReplace for the platform's way).
func (f *OSFs) RenameNoReplace(oldname, newname string) error {
	return f.rename2(oldname, newname, f.renameNoReplace)
}

// renameCheckFirst is the fallback where the kernel cannot rename without replacing: the
// Store's storage lock keeps other memory-mcp processes out of the window between the two.
func (f *OSFs) renameCheckFirst(oldname, newname string) error {
	if _, err := f.root.Lstat(newname); err == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	return f.heldRename(oldname, newname)
}

// LockStorage takes the lock shared by every process that serves this directory: exclusive
// for changes, shared for reads. It waits until the lock is free or ctx is done. The
// returned counters are kept in the lock file: the change counter in its first 8 bytes,
// the usage's generation and the usage in the next 16, and Lost in the 8 after them (all
// little-endian).
//
// A flock belongs to the open descriptor, which all of this process's callers share: the
// first shared holder takes it and the last one releases it, so reads of one process run in
// parallel. Callers must not ask for the exclusive lock while they hold the shared one (the
// Store's own lock sees to that).
//
// Fairness between processes: flock lets shared holders overlap forever, so a writer could
// wait behind a stream of reads. Every taker therefore passes a turnstile first, the gate
// file, which a writer keeps locked while it waits for the data lock: new readers of every
// process queue at the gate, the current ones finish, and the writer gets in.
func (f *OSFs) LockStorage(ctx context.Context, exclusive bool) (c Counters, err error) {
	f.gateMu.Lock()
	defer f.gateMu.Unlock()
	f.lockMu.Lock()
	if f.holders == 0 {
		if err := f.checkRoot(); err != nil {
			f.lockMu.Unlock()
			return c, err
		}
	}
	if f.lock == nil {
		f.holders++
		f.lockMu.Unlock()
		return c, nil
	}
	f.lockMu.Unlock()
	if err := flockWait(ctx, f.gate, true); err != nil {
		return c, err
	}
	defer funlock(f.gate)
	f.lockMu.Lock()
	defer f.lockMu.Unlock()
	if f.holders == 0 {
		if err := flockWait(ctx, f.lock, exclusive); err != nil {
			return c, err
		}
	}
	f.holders++
	var buf [32]byte
	n, _ := f.lock.ReadAt(buf[:], 0)
	if n >= 8 {
		c.Generation = binary.LittleEndian.Uint64(buf[:8])
	}
	if n >= 24 {
		c.UsageGen = binary.LittleEndian.Uint64(buf[8:16])
		c.Usage = int64(binary.LittleEndian.Uint64(buf[16:24]))
	}
	if n == 32 {
		c.Lost = int64(binary.LittleEndian.Uint64(buf[24:32]))
	}
	return c, nil
}

// SetGeneration records a new change counter; only valid while the lock is held exclusively.
func (f *OSFs) SetGeneration(generation uint64) error {
	if f.lock == nil || f.readOnly {
		return nil
	}
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], generation)
	_, err := f.lock.WriteAt(buf[:], 0)
	return err
}

// SetUsage records the store's usage as of generation gen; only valid while the lock is
// held exclusively.
func (f *OSFs) SetUsage(gen uint64, usage int64) error {
	if f.lock == nil || f.readOnly {
		return nil
	}
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], gen)
	binary.LittleEndian.PutUint64(buf[8:], uint64(usage))
	_, err := f.lock.WriteAt(buf[:], 8)
	return err
}

// SetLost keeps the time of lost access events in the lock file's bytes 24 to 32: within
// the block the lock file already has, they need no room a full disk lacks (where the
// filesystem writes in place). Two processes may race to set it; each keeps its own time
// too (accessLog.lost).
func (f *OSFs) SetLost(sec int64) error {
	if f.lock == nil || f.readOnly {
		return nil
	}
	var buf [8]byte
	if n, _ := f.lock.ReadAt(buf[:], 24); n == 8 && int64(binary.LittleEndian.Uint64(buf[:])) >= sec {
		return nil
	}
	binary.LittleEndian.PutUint64(buf[:], uint64(sec))
	_, err := f.lock.WriteAt(buf[:], 24)
	return err
}

// UnlockStorage releases the lock taken by LockStorage.
func (f *OSFs) UnlockStorage() error {
	f.lockMu.Lock()
	if f.holders--; f.holders > 0 {
		f.lockMu.Unlock()
		return nil
	}
	var err error
	if f.lock != nil {
		err = funlock(f.lock)
	}
	f.lockMu.Unlock()
	return err
}

// flockWait takes a flock without blocking in the kernel, retrying with growing pauses
// until it has it or ctx is done: a blocked flock could not be given up.
func flockWait(ctx context.Context, file *os.File, exclusive bool) error {
	pause := 50 * time.Microsecond
	for {
		err := tryFlock(file, exclusive)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errWouldBlock) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// OpenDir opens the directory name for a walk. Each directory of the walk is an os.Root
// of its own, opened from its parent's, so a walk costs one open per directory however
// deep it goes (a chain of 2,000 directories opened from the top each time would cost
// millions of steps), and never leaves the storage.
func (f *OSFs) OpenDir(name string) (DirHandle, error) {
	var r *os.Root
	err := f.follow(name, true, func(n string) (err error) {
		r, err = f.root.OpenRoot(n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rootDir{r}, nil
}

// rootDir is a directory of an OSFs opened for a walk.
type rootDir struct{ r *os.Root }

func (d rootDir) Close() { d.r.Close() }

// Entries reads the names, then describes each without following links. Bookkeeping
// entries are reported by name only: every caller leaves them out or goes by their names.
func (d rootDir) Entries() ([]vfs.Entry, error) {
	dir, err := d.r.Open(".")
	if err != nil {
		return nil, err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, err
	}
	entries := make([]vfs.Entry, 0, len(names))
	for _, n := range names {
		if vfs.IsBookkeeping(n) {
			entries = append(entries, vfs.Entry{Name: n, Kind: vfs.KindOther})
			continue
		}
		fi, err := d.r.Lstat(n)
		if err != nil {
			continue // gone since the names were read
		}
		e := vfs.Entry{Name: n, Kind: vfs.KindOf(fi.Mode())}
		if e.Kind == vfs.KindFile {
			e.Size = fi.Size()
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// Child opens the subdirectory name, never through a symbolic link: a link put in its
// place meanwhile is refused.
func (d rootDir) Child(name string) (DirHandle, error) {
	before, err := d.r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !before.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	c, err := d.r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if now, err := c.Stat("."); err != nil || !os.SameFile(before, now) {
		c.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	return rootDir{c}, nil
}
