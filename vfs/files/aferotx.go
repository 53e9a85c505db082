package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// aferoTx is one transaction on an AferoStorage.
type aferoTx struct {
	s          *AferoStorage
	write      bool
	weight     int64
	external   bool
	done       bool
	changed    bool       // the generation was bumped for this transaction
	journal    []string   // access events to record when the transaction ends
	compact    bool       // fold the access journal into the snapshot on commit
	lost       int64      // the accessLog's lost when LastAccess journaled it for every file
	sharedLost int64      // the storage lock's Counters.Lost when the transaction began
	hist       *historyTx // the history as this transaction uses it, once asked for
	waitFor    uint64     // where a flush of the write-ahead log must reach before it answers
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
	if tx.hist != nil { // under the exclusive lock still
		if failed {
			tx.hist.dropUnnamed()
		} else {
			tx.hist.afterCommit()
		}
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

// logged reports whether a record of the write-ahead log covers the operation under way
// (the history was told of it, and not yet of its outcome): its files are then written
// without a flush, the record's flush making the change durable. Anything else (what an
// import writes, a directory removed empty) flushes itself.
func (tx *aferoTx) logged() bool {
	return tx.s.walOn() && tx.hist != nil && len(tx.hist.group) > 0
}

// writeFile writes data to name atomically, by a rename over it (docs/behaviour.md §6):
// flushed unless a record covers it (see logged).
func (tx *aferoTx) writeFile(name string, data []byte, noReplace bool) error {
	if tx.logged() {
		return tx.s.history.wal.fs.WriteFileUnsynced(name, data, noReplace)
	}
	return tx.s.fs.WriteFileAtomic(name, data, noReplace)
}

// syncDir flushes a directory unless a record covers the change (see logged).
func (tx *aferoTx) syncDir(name string) error {
	if tx.logged() {
		return nil
	}
	return tx.s.fs.SyncDir(name)
}

// Durable returns, after Commit or Rollback, once what the transaction did and saw is
// durable: with the write-ahead log, a flush of it that the transactions ending about
// now share (see wal.go); without it, at once (every change flushed its own files). When
// the log's flush fails, a checkpoint flushes the files themselves: the change is made,
// and only when that fails too is it reported as failed.
func (tx *aferoTx) Durable() error {
	if tx.waitFor == 0 {
		return nil
	}
	if err := tx.s.history.wal.flushTo(tx.s.fs, tx.waitFor); err != nil {
		if cerr := tx.s.checkpoint(); cerr != nil {
			return fmt.Errorf("flush the write-ahead log: %w", errors.Join(err, cerr))
		}
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

// enter starts an operation on ps: each passes the jail (see last there), and ctx is not
// done.
func (tx *aferoTx) enter(ctx context.Context, last bool, ps ...vfs.Path) error {
	for _, p := range ps {
		if err := tx.jail(p, last); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// enterChange is enter for a change: beforeChange has run too.
func (tx *aferoTx) enterChange(ctx context.Context, last bool, ps ...vfs.Path) error {
	if err := tx.enter(ctx, last, ps...); err != nil {
		return err
	}
	return tx.beforeChange()
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

// FoldsCase reports whether the filesystem ignores case (see OSFs.FoldsCase).
func (tx *aferoTx) FoldsCase() bool { return tx.s.FoldsCase() }

// Canonical spells p as the filesystem does where it ignores case (see OSFs.Canonical).
func (tx *aferoTx) Canonical(ctx context.Context, p vfs.Path) vfs.Path {
	if name := tx.canonicalName(p.Name()); name != p.Name() {
		if c, err := vfs.Resolve(vfs.Root + "/" + name); err == nil {
			return c
		}
	}
	return p
}

func (tx *aferoTx) canonicalName(name string) string {
	if c, ok := tx.s.fs.(interface{ Canonical(string) string }); ok && name != "" {
		return c.Canonical(name)
	}
	return name
}

// Stat describes the entry at p without following a final symbolic link. A symbolic link
// anywhere on the way that leads outside the storage gives ErrEscape; so does a final link
// that points outside. A path that runs through a file reports IsNotExist.
func (tx *aferoTx) Stat(ctx context.Context, p vfs.Path) (vfs.Entry, error) {
	if err := tx.enter(ctx, true, p); err != nil {
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
	if err := tx.enter(ctx, true, p); err != nil {
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
	if err := tx.enter(ctx, true, p); err != nil {
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
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()) + bytes.MinRead) // room for the whole file and the read that sees EOF
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// List returns the entries of the directory at p, sorted by name in byte order, without the
// server's bookkeeping files, described without following links.
func (tx *aferoTx) List(ctx context.Context, p vfs.Path) ([]vfs.Entry, error) {
	if err := tx.enter(ctx, true, p); err != nil {
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
	if err := tx.enterChange(ctx, true, p); err != nil {
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
	if err := tx.writeFile(p.Name(), data, false); err != nil {
		return err
	}
	tx.s.addUsage(int64(len(data)) - was)
	tx.touch(p.Name())
	return nil
}

// CreateFile creates a new file at p with data as its content, creating missing parent
// directories; it fails with fs.ErrExist if p exists, and never replaces anything.
func (tx *aferoTx) CreateFile(ctx context.Context, p vfs.Path, data []byte) error {
	if err := tx.enterChange(ctx, true, p); err != nil {
		return err
	}
	undo, err := tx.mkdirParents(p)
	if err != nil {
		return err
	}
	if err := tx.writeFile(p.Name(), data, true); err != nil {
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
	// Each directory made lasts in its parent; the file written in the deepest flushes that
	// one.
	for _, name := range missing {
		if err := tx.syncDir(path.Dir(name)); err != nil {
			undo()
			return nil, err
		}
	}
	return undo, nil
}

// RemoveAll deletes the file or directory at p with everything below it.
func (tx *aferoTx) RemoveAll(ctx context.Context, p vfs.Path) error {
	if err := tx.enterChange(ctx, false, p); err != nil {
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
	return tx.syncDir(p.Parent().Name())
}

// RemoveDir deletes the directory at p if nothing is in it.
func (tx *aferoTx) RemoveDir(ctx context.Context, p vfs.Path) error {
	if err := tx.enterChange(ctx, false, p); err != nil {
		return err
	}
	if err := tx.s.fs.Remove(p.Name()); err != nil {
		return err
	}
	return tx.syncDir(p.Parent().Name())
}

// Rename moves oldp to newp, creating missing parents of newp. It fails with fs.ErrExist if
// newp exists; the check and the move are one step, so a concurrent create is never
// overwritten.
func (tx *aferoTx) Rename(ctx context.Context, oldp, newp vfs.Path) error {
	if err := tx.enterChange(ctx, false, oldp, newp); err != nil {
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
	if err := tx.syncDir(oldp.Parent().Name()); err != nil {
		return err
	}
	if newp.Parent() == oldp.Parent() {
		return nil // one directory: flushed once
	}
	return tx.syncDir(newp.Parent().Name())
}
