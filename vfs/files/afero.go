// Package files holds the memory-mcp stores kept as files: a host directory opened as an
// os.Root (OSFs), memory (MemFs) and a copy-on-write overlay of a read-only directory
// (OverlayFs), all under one vfs.Storage implementation (AferoStorage) with its storage
// lock, access journal, history files and the write-ahead log that makes each change
// durable with one shared flush.
package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
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

// maxReaders is the weight of a writer: more readers than this never run at once.
const maxReaders = 1 << 20

// Close releases the storage's directories and locks, after a checkpoint of the
// write-ahead log when this process wrote to it (so that a clean stop leaves nothing to
// recover).
func (s *AferoStorage) Close() error {
	if s.walOn() && s.history.wal.records.Load() > 0 {
		s.checkpoint()
	}
	if s.walOn() {
		s.history.wal.close()
	}
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// checkpoint flushes what the write-ahead log's records name and empties the log, under
// the store's exclusive lock.
func (s *AferoStorage) checkpoint() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := s.Begin(ctx, true)
	if err != nil {
		return err
	}
	tx := t.(*aferoTx)
	defer tx.end(false)
	ht := tx.History().(*historyTx)
	// A change whose end the history's log lacks is settled there first, as the log's
	// records have it: they are gone after this. (Pruning waits for the next change.)
	if _, err := ht.writer(); err != nil {
		return err
	}
	ht.wrote = false
	return ht.checkpoint(s.history)
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
	external, lost, err := s.lockStorage(ctx, write)
	if err != nil {
		s.lock.Release(weight)
		return nil, err
	}
	return &aferoTx{s: s, write: write, weight: weight, external: external, sharedLost: lost}, nil
}

func (s *AferoStorage) setUsageUnknown() {
	s.cacheMu.Lock()
	s.usageKnown = false
	s.cacheMu.Unlock()
}

// lockStorage takes the storage lock and notices, through the change counter, whether
// another process changed the storage since this one last looked; lost is the lock's
// Counters.Lost.
func (s *AferoStorage) lockStorage(ctx context.Context, exclusive bool) (external bool, lost int64, err error) {
	c, err := s.fs.LockStorage(ctx, exclusive)
	if err != nil {
		if ctx.Err() != nil {
			return false, 0, ctx.Err()
		}
		return false, 0, fmt.Errorf("lock storage: %w", err)
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
		if h := s.history; h != nil {
			// The next change reads what the other appended to the history and the log,
			// whichever transaction comes first (a read, a change that fails before it
			// writes).
			h.stale = true
			if h.wal != nil {
				h.wal.stale = true
			}
		}
		s.usageShared = s.usageKnown
		if err := s.fs.Reload(); err != nil {
			s.fs.UnlockStorage()
			return false, 0, err
		}
	}
	s.gen, s.genKnown = gen, true
	return external, c.Lost, nil
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

// addUsage adjusts the known total by delta (a no-op while the total is unknown).
func (s *AferoStorage) addUsage(delta int64) {
	s.cacheMu.Lock()
	s.usage += delta
	s.cacheMu.Unlock()
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
