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
// Package vfs/files holds the backends kept as files (a host directory through os.Root,
// memory, and a copy-on-write overlay), with their lock, history files and write-ahead log;
// package vfs/postgres holds the PostgreSQL backend. Both meet Storage, and neither is
// imported by this package, so what depends on vfs alone (the commands) links no database
// driver.
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
