// Package vfs is the storage behind the memory directory, and the only code in memory-mcp
// that knows host paths.
//
// The model sees one tree, /memories. Resolve validates a virtual path (docs/behaviour.md §1, rules
// P1–P3) as a pure function and gives its storage name. A Store runs every access in a
// transaction (View, or Update/Apply for changes) on a Storage, the interface every backend
// implements (package vfstest is its conformance suite), and publishes what each committed
// transaction changed on its change feed (Subscribe).
//
// # Backends
//
// The three below are afero filesystems meeting the FS contract, under one Storage
// implementation (AferoStorage).
//
//   - OSFs: a host directory opened as an os.Root. The kernel resolves every name inside
//     the directory one element at a time, so ".." and symbolic links (absolute, relative,
//     dangling, or swapped in during an operation) cannot lead outside; such attempts
//     surface as ErrEscape (rule P4). Errors carry names relative to the directory.
//   - MemFs: afero.MemMapFs made to behave like the OS (no implicit parents, no removal of
//     non-empty directories, no rename over directories) and safe under concurrent use.
//   - OverlayFs: a read-only lower layer under a writable upper layer (a directory or
//     memory). Deletes and renames of lower entries are recorded as whiteouts, persisted
//     in the upper layer, so they stay done.
//
// # Trust model
//
// What the jail guarantees: no virtual path reaches a file outside the storage directory,
// through "..", percent-encoding, look-alike characters or symbolic links planted in the
// storage; no error the model sees contains a host path (Reason maps storage errors to
// neutral words); the server's bookkeeping files (temporary files, the lock, whiteouts)
// are never reachable through a virtual path.
//
// What it does not do: it does not protect the storage directory from other programs of
// the same user, and it follows symbolic links that stay inside the storage for
// directories on the way (a final link is never followed: it is not a regular file).
//
// # Durability and concurrency
//
// Every content change writes a temporary file in the target's directory, flushes it,
// renames it over the target and flushes the directory, so a crash leaves the old or the
// new content. Renames never replace (renameat2 RENAME_NOREPLACE on Linux). Update
// transactions are serialised within the process and, through a lock file in the storage,
// across processes; View transactions run in parallel with each other. Files are created
// 0600 and directories 0700.
package vfs
