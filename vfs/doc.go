// Package vfs is the core of the storage behind the memory directory: virtual paths and
// their rules, the Storage interface every backend implements, transactions, the change
// feed, the history's types and planning, typed failures, and export/import. It knows no
// host path and links no database driver: the backends live in vfs/files (a host
// directory through os.Root, memory, a copy-on-write overlay) and vfs/postgres, and
// package vfstest is the conformance suite they all run.
//
// The model sees one tree, /memories. Resolve validates a virtual path (docs/behaviour.md
// §1, rules P1–P3) as a pure function. A Store runs every access in a transaction (View,
// or Update/Apply for changes) on a Storage, and publishes what each committed transaction
// changed on its change feed (Subscribe).
//
// What the backends promise (docs/behaviour.md §6, DESIGN.md): no virtual path reaches
// anything outside the storage, nor the server's own bookkeeping files; no error the
// model sees holds a host path (Reason maps failures to neutral words); every change is
// atomic for every reader (a new content replaces the old by rename, never in place) and
// durable once acknowledged; changes are serialised within a process and across
// processes, while views run in parallel.
package vfs
