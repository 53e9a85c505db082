// Package files holds the memory-mcp stores kept as files: a host directory opened as an
// os.Root (OSFs), memory (MemFs) and a copy-on-write overlay of a read-only directory
// (OverlayFs), all under one vfs.Storage implementation (AferoStorage) with its storage
// lock, access journal, history files and, on Linux, the write-ahead log that makes each
// change durable with one shared flush.
package files

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
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"golang.org/x/sync/semaphore"
)

// tmpPrefix starts the names of the temporary files of atomic writes.
const tmpPrefix = vfs.BookkeepingPrefix + "-tmp-"

// AferoStorage is the Storage of the three afero backends: a filesystem behind the jail,
// with the locking, atomic writes and size accounting that docs/behaviour.md §5 and §6 ask
// for. Changes are serialised within the process and, through the filesystem's storage
// lock, across processes too; reads run in parallel with each other but never with a change.
type AferoStorage struct {
	fs      FS
	closers []io.Closer

	// lock admits transactions: a reader takes one unit, a writer all of them. Its
	// waiters are served in order, so a waiting writer holds back readers that come after
	// it (a stream of overlapping reads cannot starve a writer), and waiting ends with the
	// call's context.
	lock *semaphore.Weighted

	cacheMu     sync.Mutex // guards the fields below, which readers may refresh concurrently
	gen         uint64     // the storage's change counter as this process last knew it
	genKnown    bool
	usage       int64 // bytes of all files at virtual paths; valid when usageKnown
	usageKnown  bool
	usageShared bool // the storage lock holds usage as of gen (see Counters)

	access   *accessLog   // nil unless TrackAccess was called
	readOnly bool         // a change always fails; nothing is written, not even bookkeeping
	history  *fileHistory // nil when the store keeps no history
}

// NewAferoStorage returns the Storage over fsys, whose root directory is /memories.
func NewAferoStorage(fsys FS, opts ...vfs.Option) *AferoStorage {
	o := vfs.ReadOptions(opts...)
	s := &AferoStorage{fs: fsys, lock: semaphore.NewWeighted(maxReaders), readOnly: o.ReadOnly}
	if cfg := o.History; cfg != nil {
		s.history = &fileHistory{cfg: *cfg}
		if d, ok := walFS(fsys); ok && !o.ReadOnly && !o.NoWAL {
			s.history.wal = newWALState(d)
		}
	}
	return s
}

// walOn reports whether changes are made durable by the write-ahead log (see wal.go),
// rather than each by flushing its own files.
func (s *AferoStorage) walOn() bool { return s.history != nil && s.history.wal != nil }

// writeFile writes data to name atomically, by a rename over it (docs/behaviour.md §6):
// flushed unless the write-ahead log records the change.
func (s *AferoStorage) writeFile(name string, data []byte, noReplace bool) error {
	if s.walOn() {
		return s.history.wal.fs.WriteFileUnsynced(name, data, noReplace)
	}
	return s.fs.WriteFileAtomic(name, data, noReplace)
}

// syncDir flushes a directory unless the write-ahead log records the change.
func (s *AferoStorage) syncDir(name string) error {
	if s.walOn() {
		return nil
	}
	return s.fs.SyncDir(name)
}

// maxReaders is the weight of a writer: more readers than this never run at once.
const maxReaders = 1 << 20

// NewMemoryStore returns an empty store held in memory.
func NewMemoryStore(opts ...vfs.Option) *vfs.Store {
	return vfs.NewStore(NewAferoStorage(NewMemFs(), opts...))
}

// OpenOSStore opens (creating it, mode 0700, if needed) a host directory as the store. A
// read-only store's directory must exist.
func OpenOSStore(dir string, opts ...vfs.Option) (*vfs.Store, error) {
	o := vfs.ReadOptions(opts...)
	open := NewOSFs
	if o.ReadOnly {
		open = NewReadOnlyOSFs
	}
	osfs, err := open(dir)
	if err != nil {
		return nil, err
	}
	if d, ok := walFS(osfs); ok && !o.ReadOnly && walNeedsRecovery(osfs, d) {
		// The machine crashed with changes in the write-ahead log: recover them now, with
		// the history on whatever the options say, so that no reader sees the files
		// without them.
		rec := NewAferoStorage(osfs)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t, err := rec.Begin(ctx, true)
		if err == nil {
			if _, err = t.(*aferoTx).History().(*historyTx).writer(); err == nil {
				err = t.Commit()
			} else {
				t.Rollback()
			}
		}
		cancel()
		rec.Close() // the log's descriptor, should a flush have opened one
		if err != nil {
			osfs.Close()
			return nil, fmt.Errorf("recover the write-ahead log: %w", err)
		}
	}
	st := NewAferoStorage(osfs, opts...)
	st.closers = append(st.closers, osfs)
	return vfs.NewStore(st), nil
}

// OpenOverlayStore opens a copy-on-write store: lowerDir is read and never written; changes
// go to upperDir, or to memory when upperDir is "".
func OpenOverlayStore(lowerDir, upperDir string, opts ...vfs.Option) (*vfs.Store, error) {
	o := vfs.ReadOptions(opts...)
	lower, err := NewReadOnlyOSFs(lowerDir)
	if err != nil {
		return nil, err
	}
	var upper FS = NewMemFs()
	closers := []io.Closer{lower}
	if upperDir != "" {
		open := NewOSFs
		if o.ReadOnly {
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
	st := NewAferoStorage(ov, opts...)
	st.closers = closers
	return vfs.NewStore(st), nil
}

// Close releases the storage's directories and locks, after a checkpoint of the
// write-ahead log when this process wrote to it (so that a clean stop leaves nothing to
// recover).
func (s *AferoStorage) Close() error {
	if s.walOn() && s.history.wal.records.Load() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if t, err := s.Begin(ctx, true); err == nil {
			tx := t.(*aferoTx)
			tx.History().(*historyTx).checkpoint(s.history)
			tx.end(false)
		}
		cancel()
	}
	if s.walOn() {
		s.history.wal.close()
	}
	if s.access != nil {
		s.access.close()
	}
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Prepare makes the write-ahead log ready for the first change (see Store.Prepare): in a
// write transaction, the history's directories and the log written in advance; after it,
// the log's first flush, which opens the descriptor flushes keep.
func (s *AferoStorage) Prepare(ctx context.Context) error {
	if s.history == nil || s.readOnly {
		return nil
	}
	t, err := s.Begin(ctx, true)
	if err != nil {
		return err
	}
	tx := t.(*aferoTx)
	if !s.walOn() { // read under the lock: a change's load rewrites s.history
		tx.end(false)
		return nil
	}
	w := s.history.wal
	if err := tx.History().(*historyTx).prepareLog(s.history); err != nil {
		tx.end(true)
		return err
	}
	tx.end(false)
	return w.ready(s.fs)
}

// ReadOnly reports whether the storage refuses every change.
func (s *AferoStorage) ReadOnly() bool { return s.readOnly }

// Begin starts a transaction (see Storage).
func (s *AferoStorage) Begin(ctx context.Context, write bool) (vfs.Txn, error) {
	if write && s.readOnly {
		return nil, vfs.ErrReadOnlyStore
	}
	weight := int64(1)
	if write {
		weight = maxReaders
	}
	if err := s.lock.Acquire(ctx, weight); err != nil {
		return nil, err
	}
	external, err := s.lockStorage(ctx, write)
	if err != nil {
		s.lock.Release(weight)
		return nil, err
	}
	return &aferoTx{s: s, write: write, weight: weight, external: external}, nil
}

func (s *AferoStorage) setUsageUnknown() {
	s.cacheMu.Lock()
	s.usageKnown = false
	s.cacheMu.Unlock()
}

// lockStorage takes the storage lock and notices, through the change counter, whether
// another process changed the storage since this one last looked.
func (s *AferoStorage) lockStorage(ctx context.Context, exclusive bool) (external bool, err error) {
	c, err := s.fs.LockStorage(ctx, exclusive)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("lock storage: %w", err)
	}
	gen := c.Generation
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.genKnown && gen != s.gen {
		// Another process changed the storage: what this one cached may be stale. The
		// usage it left in the lock holds if it finished its change (else the next Usage
		// walks the store). A process still walks once when it starts, which also counts
		// what was edited by hand meanwhile.
		external = true
		s.usage, s.usageKnown = c.usage()
		s.usageShared = s.usageKnown
		if err := s.fs.Reload(); err != nil {
			s.fs.UnlockStorage()
			return false, err
		}
	}
	s.gen, s.genKnown = gen, true
	return external, nil
}

// shareUsage leaves the usage in the storage lock for other processes, at the end of a
// write transaction that did not fail (while the lock is still held exclusively).
func (s *AferoStorage) shareUsage() {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if !s.usageKnown || s.usageShared {
		return
	}
	if s.fs.SetUsage(s.gen, s.usage) == nil {
		s.usageShared = true
	}
}

// aferoTx is one transaction on an AferoStorage.
type aferoTx struct {
	s        *AferoStorage
	write    bool
	weight   int64
	external bool
	done     bool
	changed  bool       // the generation was bumped for this transaction
	journal  []string   // access events to record when the transaction ends
	compact  bool       // fold the access journal into the snapshot on commit
	hist     *historyTx // the history as this transaction uses it, once asked for
	waitFor  uint64     // where a flush of the write-ahead log must reach before it answers
}

// External reports whether another process changed the storage before this transaction.
func (tx *aferoTx) External() bool { return tx.external }

// Commit ends the transaction: its access events are appended to the journal while the
// storage lock is still held, then the locks are released.
func (tx *aferoTx) Commit() error { return tx.end(false) }

// Rollback ends a transaction after a failure: a change that failed half-way may have
// changed sizes it did not account for.
func (tx *aferoTx) Rollback() error { return tx.end(true) }

func (tx *aferoTx) end(failed bool) error {
	if tx.done {
		return nil
	}
	tx.done = true
	s := tx.s
	if failed && tx.write {
		s.setUsageUnknown()
	}
	if !failed && tx.hist != nil {
		tx.hist.afterCommit() // under the exclusive lock still
	}
	if !failed && tx.write {
		s.shareUsage()
	}
	if tx.hist != nil {
		tx.hist.closeLog(false)
	}
	full := tx.flushAccess()
	if s.walOn() {
		tx.waitFor = s.history.wal.pending(tx.external)
	}
	s.fs.UnlockStorage()
	s.lock.Release(tx.weight)
	if full {
		s.compactAccess() // after the shared lock is released: it needs the exclusive one
	}
	if failed && tx.changed {
		return vfs.ErrChangesKept
	}
	return nil
}

// Durable returns, after Commit or Rollback, once what the transaction did and saw is
// durable: with the write-ahead log, a flush of it that the transactions ending about
// now share (see wal.go); without it, at once (every change flushed its own files).
func (tx *aferoTx) Durable() error {
	if tx.waitFor == 0 {
		return nil
	}
	if err := tx.s.history.wal.flushTo(tx.s.fs, tx.waitFor); err != nil {
		return fmt.Errorf("flush the write-ahead log: %w", err)
	}
	return nil
}

// jail refuses a path that a symbolic link in the storage leads into the server's own files
// (the history, the locks), though they lie inside the root: rule P4 for bookkeeping. With
// last, a final link counts too.
func (tx *aferoTx) jail(p vfs.Path, last bool) error {
	if !p.IsRoot() && tx.s.fs.ReachesBookkeeping(p.Name(), last) {
		return &fs.PathError{Op: "open", Path: p.Name(), Err: vfs.ErrEscape}
	}
	return nil
}

// beforeChange runs once before a transaction's first change: it tells other processes
// that the storage is changing before anything is touched, so that even a crash half-way
// leaves them knowing their caches are stale.
func (tx *aferoTx) beforeChange() error {
	if !tx.write {
		return vfs.ErrReadOnlyTx
	}
	if tx.changed {
		return nil
	}
	tx.changed = true
	tx.s.cacheMu.Lock()
	defer tx.s.cacheMu.Unlock()
	tx.s.gen++
	tx.s.usageShared = false
	return tx.s.fs.SetGeneration(tx.s.gen)
}

// Stat describes the entry at p without following a final symbolic link. A symbolic link
// anywhere on the way that leads outside the storage gives ErrEscape; so does a final link
// that points outside. A path that runs through a file reports IsNotExist.
func (tx *aferoTx) Stat(ctx context.Context, p vfs.Path) (vfs.Entry, error) {
	if err := tx.jail(p, true); err != nil {
		return vfs.Entry{}, err
	}
	if err := ctx.Err(); err != nil {
		return vfs.Entry{}, err
	}
	name := p.Name()
	fi, _, err := tx.s.fs.LstatIfPossible(name)
	if err != nil {
		return vfs.Entry{}, err
	}
	e := vfs.Entry{Name: fi.Name(), Kind: vfs.KindOf(fi.Mode())}
	switch e.Kind {
	case vfs.KindLink:
		if _, err := tx.s.fs.Stat(name); errors.Is(err, vfs.ErrEscape) {
			return vfs.Entry{}, err
		}
	case vfs.KindFile:
		e.Size = fi.Size()
	}
	return e, nil
}

// ReadFile returns the content of the file at p.
func (tx *aferoTx) ReadFile(ctx context.Context, p vfs.Path) ([]byte, error) {
	if err := tx.jail(p, true); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := readRegular(tx.s.fs, p.Name(), p.String())
	if err == nil {
		tx.touch(p.Name())
	}
	return data, err
}

// OpenFile opens the regular file at p for reading, so that a large file can be read in
// pieces (see Tx.Open).
func (tx *aferoTx) OpenFile(ctx context.Context, p vfs.Path) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := tx.jail(p, true); err != nil {
		return nil, err
	}
	f, err := tx.s.fs.Open(p.Name())
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errors.Join(err, &fs.PathError{Op: "read", Path: p.String(), Err: vfs.ErrNotRegular})
	}
	tx.touch(p.Name())
	return f, nil
}

// readRegular reads the regular file name whole (shown in an error as display).
func readRegular(fsys FS, name, display string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: display, Err: vfs.ErrNotRegular}
	}
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

// List returns the entries of the directory at p, sorted by name in byte order, without the
// server's bookkeeping files, described without following links.
func (tx *aferoTx) List(ctx context.Context, p vfs.Path) ([]vfs.Entry, error) {
	if err := tx.jail(p, true); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := tx.s.fs.OpenDir(p.Name())
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.Entries()
	if err != nil {
		return nil, err
	}
	return sorted(entries), nil
}

// WriteFile replaces the content of the existing file at p, atomically: a crash leaves the
// old or the new content, never a mix.
func (tx *aferoTx) WriteFile(ctx context.Context, p vfs.Path, data []byte) error {
	if err := tx.jail(p, true); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tx.beforeChange(); err != nil {
		return err
	}
	var was int64
	tx.s.cacheMu.Lock()
	known := tx.s.usageKnown
	tx.s.cacheMu.Unlock()
	if known {
		if fi, err := tx.s.fs.Stat(p.Name()); err == nil {
			was = fi.Size()
		}
	}
	if err := tx.s.writeFile(p.Name(), data, false); err != nil {
		return err
	}
	tx.s.addUsage(int64(len(data)) - was)
	tx.touch(p.Name())
	return nil
}

// addUsage adjusts the known total by delta (a no-op while the total is unknown).
func (s *AferoStorage) addUsage(delta int64) {
	s.cacheMu.Lock()
	s.usage += delta
	s.cacheMu.Unlock()
}

// CreateFile creates a new file at p with data as its content, creating missing parent
// directories; it fails with fs.ErrExist if p exists, and never replaces anything.
func (tx *aferoTx) CreateFile(ctx context.Context, p vfs.Path, data []byte) error {
	if err := tx.jail(p, true); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tx.beforeChange(); err != nil {
		return err
	}
	undo, err := tx.mkdirParents(p)
	if err != nil {
		return err
	}
	if err := tx.s.writeFile(p.Name(), data, true); err != nil {
		undo()
		return err
	}
	tx.s.addUsage(int64(len(data)))
	tx.touch(p.Name())
	return nil
}

// mkdirParents creates the missing parent directories of p. undo removes the ones it
// created, for a change that then fails: a refused change leaves nothing behind.
func (tx *aferoTx) mkdirParents(p vfs.Path) (undo func(), err error) {
	var missing []string // deepest first
	for q := p.Parent(); !q.IsRoot(); q = q.Parent() {
		if _, _, err := tx.s.fs.LstatIfPossible(q.Name()); err == nil {
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

// writeAtomic writes data to a new temporary file in name's directory, flushes it, moves it
// to name with rename and flushes the directory, so that a crash at any moment leaves the
// old or the new content and, at worst, a temporary file that no virtual path reaches. It
// is WriteFileAtomic for the filesystems on disk.
func writeAtomic(fsys FS, name string, data []byte, noReplace bool) (err error) {
	return writeFile(fsys, name, data, noReplace, true)
}

// writeFile is writeAtomic, with the flushes only when sync is set.
func writeFile(fsys FS, name string, data []byte, noReplace, sync bool) (err error) {
	rename := fsys.Rename
	if noReplace {
		rename = fsys.RenameNoReplace
	}
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
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = rename(tmp, name); err != nil || !sync {
		return err
	}
	return fsys.SyncDir(dir)
}

// RemoveAll deletes the file or directory at p with everything below it.
func (tx *aferoTx) RemoveAll(ctx context.Context, p vfs.Path) error {
	if err := tx.jail(p, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tx.beforeChange(); err != nil {
		return err
	}
	size, err := tx.sizeOf(ctx, p.Name())
	if err != nil {
		return err
	}
	if err := tx.s.fs.RemoveAll(p.Name()); err != nil {
		return err
	}
	tx.s.addUsage(-size)
	tx.forget(p.Name())
	return tx.s.syncDir(p.Parent().Name())
}

// RemoveDir deletes the directory at p if nothing is in it.
func (tx *aferoTx) RemoveDir(ctx context.Context, p vfs.Path) error {
	if err := tx.jail(p, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tx.beforeChange(); err != nil {
		return err
	}
	if err := tx.s.fs.Remove(p.Name()); err != nil {
		return err
	}
	return tx.s.syncDir(p.Parent().Name())
}

// Rename moves oldp to newp, creating missing parents of newp. It fails with fs.ErrExist if
// newp exists; the check and the move are one step, so a concurrent create is never
// overwritten.
func (tx *aferoTx) Rename(ctx context.Context, oldp, newp vfs.Path) error {
	if err := errors.Join(tx.jail(oldp, false), tx.jail(newp, false)); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tx.beforeChange(); err != nil {
		return err
	}
	undo, err := tx.mkdirParents(newp)
	if err != nil {
		return err
	}
	if err := tx.s.fs.RenameNoReplace(oldp.Name(), newp.Name()); err != nil {
		undo()
		return err
	}
	tx.move(oldp.Name(), newp.Name())
	if err := tx.s.syncDir(oldp.Parent().Name()); err != nil {
		return err
	}
	if newp.Parent() == oldp.Parent() {
		return nil // one directory: flushed once
	}
	return tx.s.syncDir(newp.Parent().Name())
}

// Usage returns the bytes of all files at virtual paths (hidden files included, the server's
// bookkeeping not). The first call in a process, and the first after another process
// changed the storage, walks the whole store; later changes keep the total up to date.
// In a change transaction the walk also removes temporary files that a crash left behind:
// no other writer can be using them while the exclusive lock is held.
func (tx *aferoTx) Usage(ctx context.Context) (int64, error) {
	tx.s.cacheMu.Lock()
	usage, known := tx.s.usage, tx.s.usageKnown
	tx.s.cacheMu.Unlock()
	if known {
		return usage, nil
	}
	var total int64
	if err := tx.walkFiles(ctx, "", tx.write, func(_ string, size int64) { total += size }); err != nil {
		return 0, err
	}
	tx.s.cacheMu.Lock()
	tx.s.usage, tx.s.usageKnown = total, true
	tx.s.cacheMu.Unlock()
	return total, nil
}

func (tx *aferoTx) sizeOf(ctx context.Context, name string) (int64, error) {
	fi, _, err := tx.s.fs.LstatIfPossible(name)
	if err != nil {
		return 0, err
	}
	if fi.IsDir() {
		var total int64
		err := tx.walkFiles(ctx, name, false, func(_ string, size int64) { total += size })
		return total, err
	}
	if fi.Mode().IsRegular() {
		return fi.Size(), nil
	}
	return 0, nil
}

// walkFiles calls fn for every regular file below dir, hidden ones included, bookkeeping
// not. With sweep it also removes the temporary files that a crash left behind.
func (tx *aferoTx) walkFiles(ctx context.Context, dir string, sweep bool, fn func(name string, size int64)) error {
	d, err := tx.s.fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return tx.walkFilesIn(ctx, d, dir, sweep, fn)
}

func (tx *aferoTx) walkFilesIn(ctx context.Context, d DirHandle, dir string, sweep bool, fn func(name string, size int64)) error {
	defer d.Close()
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := d.Entries()
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := path.Join(dir, e.Name)
		switch {
		case vfs.IsBookkeeping(e.Name):
			if sweep && strings.HasPrefix(e.Name, tmpPrefix) {
				tx.s.fs.Remove(name)
			}
		case e.IsDir():
			child, err := d.Child(e.Name)
			if err != nil {
				continue // no longer a directory
			}
			if err := tx.walkFilesIn(ctx, child, name, sweep, fn); err != nil {
				return err
			}
		case e.IsRegular():
			fn(name, e.Size)
		}
	}
	return nil
}
