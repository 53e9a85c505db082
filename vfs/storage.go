package vfs

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/afero"
)

// Storage is the seam between the memory store and wherever its files live: every access is
// a transaction begun with Begin and ended with Commit or Rollback. A Store runs the
// commands' transactions on a Storage and turns what they change into the change feed, so a
// new backend (a database, say) implements these two interfaces and gets the commands, the
// feed and the whole conformance suite (package vfstest) for free.
//
// The three backends on afero filesystems (OS directory, memory, overlay) share one
// implementation, NewAferoStorage, over the FS contract below.
type Storage interface {
	// Begin starts a transaction: with write, an exclusive one that may change the
	// storage (no other transaction of any process runs beside it); without, a read-only
	// one that sees a consistent tree and runs beside other readers. It waits at most until
	// ctx is done, and then fails with ctx's error.
	Begin(ctx context.Context, write bool) (Txn, error)
	// ReadOnly reports whether the storage refuses every change (Begin with write fails
	// with ErrReadOnlyStore).
	ReadOnly() bool
	// TrackAccess makes the storage record when each file is viewed or changed, by the
	// clock now, for Expire.
	TrackAccess(now func() time.Time) error
	// Close releases what the storage holds open.
	Close() error
}

// Txn is one transaction on a Storage. Paths are validated virtual paths (Resolve); every
// operation gives up when its ctx is done. A failed change leaves the storage as it was.
// Errors are typed: IsNotExist, fs.ErrExist (create and rename never replace),
// ErrEscape, ErrNotRegular, ErrStorageGone, or a storage failure for Reason.
type Txn interface {
	// Stat describes the entry at p without following a final symbolic link.
	Stat(ctx context.Context, p Path) (Entry, error)
	// ReadFile returns the content of the regular file at p.
	ReadFile(ctx context.Context, p Path) ([]byte, error)
	// List returns the entries of the directory at p, sorted by name in byte order.
	List(ctx context.Context, p Path) ([]Entry, error)
	// Tree describes the directory at p down to depth levels, with the total size of
	// the files below every directory at any depth (see Node); entries for which skip
	// reports true are neither listed nor counted.
	Tree(ctx context.Context, p Path, depth int, skip func(name string) bool) (Node, error)
	// Usage returns the bytes of all files in the storage.
	Usage(ctx context.Context) (int64, error)
	// LastAccess returns, for every file, when it was last viewed or changed (storage
	// name → Unix seconds); a file without a record starts one now. It fails with
	// ErrNotTracked unless TrackAccess was called. In a write transaction the record is
	// compacted on commit.
	LastAccess(ctx context.Context) (map[string]int64, error)

	// WriteFile replaces the content of the existing regular file at p atomically.
	WriteFile(ctx context.Context, p Path, data []byte) error
	// CreateFile creates the file at p, and its missing parent directories; it never
	// replaces anything (fs.ErrExist).
	CreateFile(ctx context.Context, p Path, data []byte) error
	// Rename moves the entry at oldp to newp, creating newp's missing parents; it never
	// replaces anything (fs.ErrExist).
	Rename(ctx context.Context, oldp, newp Path) error
	// RemoveAll deletes the entry at p with everything below it.
	RemoveAll(ctx context.Context, p Path) error
	// RemoveDir deletes the directory at p if it is empty (bookkeeping aside).
	RemoveDir(ctx context.Context, p Path) error

	// History returns the store's history as this transaction sees it, nil when the
	// store keeps none. Its changes (Keep, Record, Settle, Redact) need a write
	// transaction; they are part of the transaction, as the files' changes are.
	History() History

	// External reports whether another process changed the storage since this storage
	// value's previous transaction (so what it knows may be stale).
	External() bool
	// Commit ends the transaction, keeping its changes. Rollback ends it after a failure
	// and undoes its changes; storage that cannot undo (the afero backends, where every
	// change is atomic by itself, and a command makes at most one) returns
	// ErrChangesKept when the transaction had changed something, so that the feed still
	// reports what stayed.
	Commit() error
	Rollback() error
}

// durableTxn is a Txn whose changes become durable after its locks are released (the os
// backend's write-ahead log, shared by the transactions that end about the same time):
// Durable returns once they are, and the Store answers only then.
type durableTxn interface {
	Durable() error
}

// durable waits until what t did and saw is durable (see durableTxn).
func durable(t Txn) error {
	if d, ok := t.(durableTxn); ok {
		return d.Durable()
	}
	return nil
}

// FS is the contract of an afero filesystem under NewAferoStorage, met by OSFs, MemFs and
// OverlayFs (checked at compile time). It is afero.Fs behaving like the OS (see MemFs), plus
// what the storage needs in one step rather than several: renaming without replacing,
// atomic writes, flushing a directory, a lock shared with other processes, and directory
// handles for walks. A wrapper that embeds an FS (tests inject faults that way) forwards
// all of it, so it runs the same code as the filesystem it wraps.
type FS interface {
	afero.Fs
	afero.Lstater

	// RenameNoReplace renames without ever replacing an existing destination, failing
	// with fs.ErrExist, in one step.
	RenameNoReplace(oldname, newname string) error
	// WriteFileAtomic writes data to name so that a crash leaves the old content or the
	// new, never a mix, and flushes it: with noReplace it fails with fs.ErrExist rather
	// than replace anything. The parent directory must exist. (On disk: a temporary file,
	// a flush, a rename and a flush of the directory.)
	WriteFileAtomic(name string, data []byte, noReplace bool) error
	// SyncDir flushes a directory's entries to stable storage.
	SyncDir(name string) error
	// OpenDir opens a directory for a walk.
	OpenDir(name string) (DirHandle, error)

	// LockStorage blocks until it holds the storage-wide lock (exclusive for changes), or
	// ctx is done, and returns the counters kept with it; SetGeneration stores a new change
	// counter, and SetUsage the store's usage as of a generation, while the lock is held
	// exclusively. A writer waiting for the lock must get it within a bounded time however
	// many readers come and go in other processes.
	LockStorage(ctx context.Context, exclusive bool) (Counters, error)
	SetGeneration(generation uint64) error
	SetUsage(generation uint64, usage int64) error
	UnlockStorage() error
	// Reload re-reads what the filesystem caches of its own state (the overlay's
	// whiteouts), after another process changed the storage.
	Reload() error
	// ReachesBookkeeping reports whether a symbolic link on name's way (the final one too
	// with last) leads into the server's own files; always false without links.
	ReachesBookkeeping(name string, last bool) bool
}

// Counters are what the storage lock keeps for every process that serves the storage: the
// change counter, and the bytes of all files as of generation UsageGen. The usage holds
// only while UsageGen is the current Generation: a change bumps the generation before it
// touches anything, so a process that dies half-way leaves the usage unknown, and so does
// an older memory-mcp that knows nothing of it.
type Counters struct {
	Generation uint64
	Usage      int64
	UsageGen   uint64
}

// usage returns the usage when it holds for the current generation.
func (c Counters) usage() (int64, bool) {
	return c.Usage, c.UsageGen != 0 && c.UsageGen == c.Generation && c.Usage >= 0
}

// ErrChangesKept is returned by Rollback when the changes the transaction made stay.
var ErrChangesKept = errors.New("vfs: the storage cannot undo a transaction's changes")

// DirHandle is an open directory during a walk.
type DirHandle interface {
	// Entries lists the directory, unsorted, bookkeeping included, without following links.
	Entries() ([]Entry, error)
	// Child opens the subdirectory name (never through a symbolic link).
	Child(name string) (DirHandle, error)
	Close()
}

// Compile-time checks: each backend meets the contracts.
var (
	_ FS      = (*OSFs)(nil)
	_ FS      = (*MemFs)(nil)
	_ FS      = (*OverlayFs)(nil)
	_ Storage = (*AferoStorage)(nil)
	_ Txn     = (*aferoTx)(nil)
)
