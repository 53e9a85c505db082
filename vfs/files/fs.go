package files

import (
	"context"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

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
	// SetLost records, under the lock (shared or exclusive), that a process could not
	// journal the access events of time sec (see accessLog.lost), keeping the latest such
	// time. It need not be cleared: once every file's record is past it, it changes nothing.
	SetLost(sec int64) error
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
// an older memory-mcp that knows nothing of it. Lost is the last time a process could not
// journal its access events (0: never).
type Counters struct {
	Generation uint64
	Usage      int64
	UsageGen   uint64
	Lost       int64
}

// usage returns the usage when it holds for the current generation.
func (c Counters) usage() (int64, bool) {
	return c.Usage, c.UsageGen != 0 && c.UsageGen == c.Generation && c.Usage >= 0
}

// DirHandle is an open directory during a walk.
type DirHandle interface {
	// Entries lists the directory, unsorted, bookkeeping included, without following links.
	Entries() ([]vfs.Entry, error)
	// Child opens the subdirectory name (never through a symbolic link).
	Child(name string) (DirHandle, error)
	Close()
}

// Compile-time checks: each backend meets the contracts.
var (
	_ FS          = (*OSFs)(nil)
	_ FS          = (*MemFs)(nil)
	_ FS          = (*OverlayFs)(nil)
	_ vfs.Storage = (*AferoStorage)(nil)
	_ vfs.Txn     = (*aferoTx)(nil)
)
