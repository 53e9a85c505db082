package vfs

import (
	"context"
	"errors"
	"time"
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

// caseFolder is a Txn on storage that does not tell names apart by case (a directory on
// macOS or Windows, as they are usually formatted): there /memories/notes.md opens the file
// /memories/Notes.md. Canonical returns p with each element that names an existing entry
// spelled as that entry is; the rest stays as given.
type caseFolder interface {
	FoldsCase() bool
	Canonical(ctx context.Context, p Path) Path
}

// durable waits until what t did and saw is durable (see durableTxn).
func durable(t Txn) error {
	if d, ok := t.(durableTxn); ok {
		return d.Durable()
	}
	return nil
}

// ErrChangesKept is returned by Rollback when the changes the transaction made stay.
var ErrChangesKept = errors.New("vfs: the storage cannot undo a transaction's changes")
