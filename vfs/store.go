package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/afero"
	"golang.org/x/sync/semaphore"
)

// Optional interfaces a filesystem given to a Store may implement.
type (
	// NoReplaceRenamer renames without ever replacing an existing destination, failing
	// with fs.ErrExist, in one step. Without it the Store checks and then renames under
	// its lock.
	NoReplaceRenamer interface {
		RenameNoReplace(oldname, newname string) error
	}

	// DirSyncer flushes a directory's entries to stable storage.
	DirSyncer interface {
		SyncDir(name string) error
	}

	// Locker is storage that several processes may serve at once. LockStorage blocks until
	// it holds the storage-wide lock (exclusive for changes), or ctx is done, and returns the
	// change counter kept with it; SetGeneration stores a new counter while the lock is held
	// exclusively. A writer waiting for the lock must get it within a bounded time however
	// many readers come and go in other processes.
	Locker interface {
		LockStorage(ctx context.Context, exclusive bool) (generation uint64, err error)
		SetGeneration(generation uint64) error
		UnlockStorage() error
	}

	// atomicWriter is storage that replaces a file's content in one step of its own, where
	// a temporary file and a rename would only cost time (MemFs).
	atomicWriter interface {
		writeFileAtomic(name string, data []byte, noReplace bool) error
	}

	// reloader is storage that caches state of its own (the overlay's whiteouts) and must
	// re-read it when another process has changed the storage.
	reloader interface {
		Reload() error
	}
)

// tmpPrefix starts the names of the temporary files of atomic writes.
const tmpPrefix = bookkeepingPrefix + "-tmp-"

// Store is the memory directory: a filesystem behind the jail, with the locking, atomic
// writes and size accounting that docs/behaviour.md §5 and §6 ask for. Every access goes through a
// transaction: View for reads, Update for changes. Changes are serialised within the
// process and, when the filesystem is a Locker, across processes too; reads run in parallel
// with each other but never with a change.
type Store struct {
	fs      afero.Fs
	closers []io.Closer

	// lock admits transactions: a View takes one unit, an Update all of them. Its waiters
	// are served in order, so a waiting Update holds back Views that come after it (a
	// stream of overlapping Views cannot starve a writer), and waiting ends with the
	// call's context.
	lock *semaphore.Weighted

	cacheMu    sync.Mutex // guards the fields below, which Views may refresh concurrently
	gen        uint64     // the storage's change counter as this process last knew it
	genKnown   bool
	usage      int64 // bytes of all files at virtual paths; valid when usageKnown
	usageKnown bool

	access   *accessLog // nil unless TrackAccess was called
	readOnly bool       // Update always fails; nothing is written, not even bookkeeping
}

// ErrReadOnlyStore is returned by Update on a store opened read-only.
var ErrReadOnlyStore = errors.New("vfs: the store is read-only")

// An Option changes how a store is opened.
type Option func(*options)

type options struct{ readOnly bool }

// ReadOnly opens a store that refuses every change and writes nothing into the storage:
// no lock file is created (an existing one is still used to stay out of writers' way), and
// no access is recorded.
func ReadOnly() Option { return func(o *options) { o.readOnly = true } }

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// NewStore returns a Store over any afero filesystem whose root directory is /memories.
// The filesystem must behave like the OS (see MemFs); NewMemoryStore, OpenOSStore and
// OpenOverlayStore build the three supported ones.
func NewStore(fsys afero.Fs) *Store {
	return &Store{fs: fsys, lock: semaphore.NewWeighted(maxReaders)}
}

// maxReaders is the weight of an Update: more Views than this never run at once.
const maxReaders = 1 << 20

// NewMemoryStore returns an empty store held in memory.
func NewMemoryStore(opts ...Option) *Store {
	s := NewStore(NewMemFs())
	s.readOnly = collect(opts).readOnly
	return s
}

// OpenOSStore opens (creating it, mode 0700, if needed) a host directory as the store. A
// read-only store's directory must exist.
func OpenOSStore(dir string, opts ...Option) (*Store, error) {
	o := collect(opts)
	open := NewOSFs
	if o.readOnly {
		open = NewReadOnlyOSFs
	}
	osfs, err := open(dir)
	if err != nil {
		return nil, err
	}
	s := NewStore(osfs)
	s.readOnly = o.readOnly
	s.closers = append(s.closers, osfs)
	return s, nil
}

// OpenOverlayStore opens a copy-on-write store: lowerDir is read and never written; changes
// go to upperDir, or to memory when upperDir is "".
func OpenOverlayStore(lowerDir, upperDir string, opts ...Option) (*Store, error) {
	o := collect(opts)
	lower, err := NewReadOnlyOSFs(lowerDir)
	if err != nil {
		return nil, err
	}
	var upper afero.Fs = NewMemFs()
	closers := []io.Closer{lower}
	if upperDir != "" {
		open := NewOSFs
		if o.readOnly {
			open = NewReadOnlyOSFs
		}
		u, err := open(upperDir)
		if err != nil {
			lower.Close()
			return nil, err
		}
		upper = u
		closers = append(closers, u)
	}
	ov, err := NewOverlayFs(lower, upper)
	if err != nil {
		for _, c := range closers {
			c.Close()
		}
		return nil, err
	}
	s := NewStore(ov)
	s.readOnly = o.readOnly
	s.closers = closers
	return s, nil
}

// Close releases the store's directories and locks.
func (s *Store) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Fs returns the filesystem behind the store, for tests and tools that inspect storage.
func (s *Store) Fs() afero.Fs { return s.fs }

// View runs fn with read access to the store. It waits for the lock at most until ctx is
// done, and then fails with ctx's error; fn should give up when ctx is done, too (Tree does).
func (s *Store) View(ctx context.Context, fn func(*Tx) error) error {
	full, err := s.view(ctx, fn)
	if full {
		s.compactAccess(ctx) // after the shared lock is released: it needs the exclusive one
	}
	return err
}

func (s *Store) view(ctx context.Context, fn func(*Tx) error) (journalFull bool, err error) {
	if err := s.lock.Acquire(ctx, 1); err != nil {
		return false, err
	}
	defer s.lock.Release(1)
	unlock, err := s.lockStorage(ctx, false)
	if err != nil {
		return false, err
	}
	defer unlock()
	tx := &Tx{s: s, ctx: ctx}
	err = fn(tx)
	return tx.flushAccess(), err
}

// Update runs fn with exclusive access to the store: no other transaction of this process,
// nor of any other process serving the same directory, runs at the same time.
func (s *Store) Update(ctx context.Context, fn func(*Tx) error) error {
	if s.readOnly {
		return ErrReadOnlyStore
	}
	if err := s.lock.Acquire(ctx, maxReaders); err != nil {
		return err
	}
	defer s.lock.Release(maxReaders)
	unlock, err := s.lockStorage(ctx, true)
	if err != nil {
		return err
	}
	defer unlock()
	tx := &Tx{s: s, ctx: ctx, write: true}
	err = fn(tx)
	if err != nil {
		// A change that failed half-way may have changed sizes it did not account for.
		s.setUsageUnknown()
	}
	tx.flushAccess()
	return err
}

func (s *Store) setUsageUnknown() {
	s.cacheMu.Lock()
	s.usageKnown = false
	s.cacheMu.Unlock()
}

func (s *Store) lockStorage(ctx context.Context, exclusive bool) (unlock func(), err error) {
	l, ok := s.fs.(Locker)
	if !ok {
		return func() {}, nil
	}
	gen, err := l.LockStorage(ctx, exclusive)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("lock storage: %w", err)
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.genKnown && gen != s.gen {
		// Another process changed the storage: what this one cached may be stale.
		s.usageKnown = false
		if r, ok := s.fs.(reloader); ok {
			if err := r.Reload(); err != nil {
				l.UnlockStorage()
				return nil, err
			}
		}
	}
	s.gen, s.genKnown = gen, true
	return func() { l.UnlockStorage() }, nil
}

// Tx is one transaction on a Store. Its methods take validated virtual paths.
type Tx struct {
	s       *Store
	ctx     context.Context
	write   bool
	changed bool     // the generation was bumped for this transaction
	journal []string // access events to record when the transaction ends
}

// ReadOnly reports whether the store refuses every change.
func (s *Store) ReadOnly() bool { return s.readOnly }

// ErrReadOnlyTx is returned by a change attempted inside View.
var ErrReadOnlyTx = errors.New("vfs: change inside a read-only transaction")

// beforeChange runs once before a transaction's first change: it tells other processes
// that the storage is changing before anything is touched, so that even a crash half-way
// leaves them knowing their caches are stale.
func (tx *Tx) beforeChange() error {
	if !tx.write {
		return ErrReadOnlyTx
	}
	if tx.changed {
		return nil
	}
	tx.changed = true
	l, ok := tx.s.fs.(Locker)
	if !ok {
		return nil
	}
	tx.s.cacheMu.Lock()
	defer tx.s.cacheMu.Unlock()
	tx.s.gen++
	return l.SetGeneration(tx.s.gen)
}

// Stat describes the entry at p without following a final symbolic link. A symbolic link
// anywhere on the way that leads outside the storage gives ErrEscape; so does a final link
// that points outside. A path that runs through a file reports IsNotExist.
func (tx *Tx) Stat(p Path) (Entry, error) {
	name := p.Name()
	fi, err := tx.lstat(name)
	if err != nil {
		return Entry{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if _, err := tx.s.fs.Stat(name); errors.Is(err, ErrEscape) {
			return Entry{}, err
		}
	}
	e := Entry{Name: fi.Name(), Mode: fi.Mode().Type()}
	if e.IsRegular() {
		e.Size = fi.Size()
	}
	return e, nil
}

func (tx *Tx) lstat(name string) (fs.FileInfo, error) {
	if l, ok := tx.s.fs.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(name)
		return fi, err
	}
	return tx.s.fs.Stat(name)
}

// ReadFile returns the content of the file at p.
func (tx *Tx) ReadFile(p Path) ([]byte, error) {
	f, err := tx.s.fs.Open(p.Name())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p.String(), Err: ErrNotRegular}
	}
	tx.touch(p.Name())
	// One allocation of the right size; the +1 lets ReadAll see EOF without growing.
	buf := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
	}
}

// WriteFile replaces the content of the existing file at p, atomically: a crash leaves the
// old or the new content, never a mix.
func (tx *Tx) WriteFile(p Path, data []byte) error {
	if err := tx.beforeChange(); err != nil {
		return err
	}
	var old int64
	tx.s.cacheMu.Lock()
	known := tx.s.usageKnown
	tx.s.cacheMu.Unlock()
	if known {
		if fi, err := tx.s.fs.Stat(p.Name()); err == nil {
			old = fi.Size()
		}
	}
	if err := tx.writeAtomic(p.Name(), data, false); err != nil {
		return err
	}
	tx.s.addUsage(int64(len(data)) - old)
	tx.touch(p.Name())
	return nil
}

// addUsage adjusts the known total by delta (a no-op while the total is unknown).
func (s *Store) addUsage(delta int64) {
	s.cacheMu.Lock()
	s.usage += delta
	s.cacheMu.Unlock()
}

// CreateFile creates a new file at p with data as its content, creating missing parent
// directories; it fails with fs.ErrExist if p exists, and never replaces anything.
func (tx *Tx) CreateFile(p Path, data []byte) error {
	if err := tx.beforeChange(); err != nil {
		return err
	}
	undo, err := tx.mkdirParents(p)
	if err != nil {
		return err
	}
	if err := tx.writeAtomic(p.Name(), data, true); err != nil {
		undo()
		return err
	}
	tx.s.addUsage(int64(len(data)))
	tx.touch(p.Name())
	return nil
}

// mkdirParents creates the missing parent directories of p. undo removes the ones it
// created, for a change that then fails: a refused change leaves nothing behind.
func (tx *Tx) mkdirParents(p Path) (undo func(), err error) {
	var missing []string // deepest first
	for q := p.Parent(); !q.IsRoot(); q = q.Parent() {
		if _, err := tx.lstat(q.Name()); err == nil {
			break
		}
		missing = append(missing, q.Name())
	}
	undo = func() {
		for _, name := range missing {
			tx.s.fs.Remove(name) // only if still empty: Remove never deletes a non-empty directory
		}
	}
	if len(missing) == 0 {
		return func() {}, nil
	}
	if err := tx.s.fs.MkdirAll(p.Parent().Name(), 0o700); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// writeAtomic writes a temporary file beside the target, flushes it, renames it over the
// target and flushes the directory (docs/behaviour.md §6).
func (tx *Tx) writeAtomic(name string, data []byte, noReplace bool) error {
	if w, ok := tx.s.fs.(atomicWriter); ok {
		return w.writeFileAtomic(name, data, noReplace)
	}
	rename := tx.s.fs.Rename
	if noReplace {
		rename = tx.renameNoReplace
	}
	return writeAtomic(tx.s.fs, name, data, rename)
}

// writeAtomic writes data to a new temporary file in name's directory, flushes it, moves it
// to name with rename and flushes the directory, so that a crash at any moment leaves the
// old or the new content and, at worst, a temporary file that no virtual path reaches.
func writeAtomic(fsys afero.Fs, name string, data []byte, rename func(oldname, newname string) error) (err error) {
	dir := path.Dir("/" + name)
	tmp := path.Join(dir, fmt.Sprintf("%s%016x", tmpPrefix, rand.Uint64()))
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fsys.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = rename(tmp, name); err != nil {
		return err
	}
	if d, ok := fsys.(DirSyncer); ok {
		return d.SyncDir(dir)
	}
	return nil
}

func (tx *Tx) renameNoReplace(oldname, newname string) error {
	if r, ok := tx.s.fs.(NoReplaceRenamer); ok {
		return r.RenameNoReplace(oldname, newname)
	}
	if _, err := tx.lstat(newname); err == nil {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrExist}
	}
	return tx.s.fs.Rename(oldname, newname)
}

func (tx *Tx) syncDir(dir string) error {
	if d, ok := tx.s.fs.(DirSyncer); ok {
		return d.SyncDir(dir)
	}
	return nil
}

// RemoveAll deletes the file or directory at p with everything below it, and returns the
// bytes of the files it removed.
func (tx *Tx) RemoveAll(p Path) (int64, error) {
	if err := tx.beforeChange(); err != nil {
		return 0, err
	}
	size, err := tx.sizeOf(p.Name())
	if err != nil {
		return 0, err
	}
	if err := tx.s.fs.RemoveAll(p.Name()); err != nil {
		return 0, err
	}
	tx.s.addUsage(-size)
	tx.forget(p.Name())
	return size, tx.syncDir(p.Parent().Name())
}

// SizeOf returns the bytes of the file at p, or of the files below the directory at p.
func (tx *Tx) SizeOf(p Path) (int64, error) { return tx.sizeOf(p.Name()) }

// Rename moves oldp to newp, creating missing parents of newp. It fails with fs.ErrExist if
// newp exists; the check and the move are one step, so a concurrent create is never
// overwritten.
func (tx *Tx) Rename(oldp, newp Path) error {
	if err := tx.beforeChange(); err != nil {
		return err
	}
	undo, err := tx.mkdirParents(newp)
	if err != nil {
		return err
	}
	if err := tx.renameNoReplace(oldp.Name(), newp.Name()); err != nil {
		undo()
		return err
	}
	tx.move(oldp.Name(), newp.Name())
	if err := tx.syncDir(oldp.Parent().Name()); err != nil {
		return err
	}
	return tx.syncDir(newp.Parent().Name())
}

// Usage returns the bytes of all files at virtual paths (hidden files included, the server's
// bookkeeping not). The first call in a process, and the first after another process
// changed the storage, walks the whole store; later changes keep the total up to date.
// In a change transaction the walk also removes temporary files that a crash left behind:
// no other writer can be using them while the exclusive lock is held.
func (tx *Tx) Usage() (int64, error) {
	tx.s.cacheMu.Lock()
	usage, known := tx.s.usage, tx.s.usageKnown
	tx.s.cacheMu.Unlock()
	if known {
		return usage, nil
	}
	var total int64
	if err := tx.walkFiles("", tx.write, func(_ string, size int64) { total += size }); err != nil {
		return 0, err
	}
	tx.s.cacheMu.Lock()
	tx.s.usage, tx.s.usageKnown = total, true
	tx.s.cacheMu.Unlock()
	return total, nil
}

func (tx *Tx) sizeOf(name string) (int64, error) {
	fi, err := tx.lstat(name)
	if err != nil {
		return 0, err
	}
	if fi.IsDir() {
		var total int64
		err := tx.walkFiles(name, false, func(_ string, size int64) { total += size })
		return total, err
	}
	if fi.Mode().IsRegular() {
		return fi.Size(), nil
	}
	return 0, nil
}

// walkFiles calls fn for every regular file below dir, hidden ones included, bookkeeping
// not. With sweep it also removes the temporary files that a crash left behind.
func (tx *Tx) walkFiles(dir string, sweep bool, fn func(name string, size int64)) error {
	d, err := tx.openDir(dir)
	if err != nil {
		return err
	}
	return tx.walkFilesIn(d, dir, sweep, fn)
}

func (tx *Tx) walkFilesIn(d dirHandle, dir string, sweep bool, fn func(name string, size int64)) error {
	defer d.close()
	if err := tx.ctx.Err(); err != nil {
		return err
	}
	entries, err := d.entries()
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := path.Join(dir, e.Name)
		switch {
		case IsBookkeeping(e.Name):
			if sweep && strings.HasPrefix(e.Name, tmpPrefix) {
				tx.s.fs.Remove(name)
			}
		case e.IsDir():
			child, err := d.child(e.Name)
			if err != nil {
				continue // no longer a directory
			}
			if err := tx.walkFilesIn(child, name, sweep, fn); err != nil {
				return err
			}
		case e.IsRegular():
			fn(name, e.Size)
		}
	}
	return nil
}
