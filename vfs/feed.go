package vfs

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// ChangeKind says what a change did to a file.
type ChangeKind string

// The kinds of changes.
const (
	Created  ChangeKind = "created"
	Modified ChangeKind = "modified"
	Deleted  ChangeKind = "deleted"
	Moved    ChangeKind = "moved"
	// Changed: something at or below Path changed, and the feed cannot say what (a
	// change made by another process, noticed through the storage's change counter).
	Changed ChangeKind = "changed"
)

// Change is one file's change.
type Change struct {
	Kind ChangeKind `json:"kind"`
	// Path is the file's virtual path: where it is after the change, or was, for a delete.
	Path string `json:"path"`
	// From is, for a move, the virtual path the file had before.
	From string `json:"from,omitempty"`
	// Sizes and SHA-256 digests (hex) of the content before and after; a digest is ""
	// where there was no file.
	SizeBefore   int64  `json:"size_before"`
	SizeAfter    int64  `json:"size_after"`
	SHA256Before string `json:"sha256_before,omitempty"`
	SHA256After  string `json:"sha256_after,omitempty"`
}

// Batch is what one committed transaction changed: a directory delete or rename lists every
// file below the directory.
type Batch struct {
	Seq     uint64    `json:"seq"` // this store's publication number, from 1, in commit order
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`   // see WithActor
	Command string    `json:"command"` // see WithCommand
	// External marks changes another process made (one Changed entry for Root).
	External bool     `json:"external,omitempty"`
	Changes  []Change `json:"changes"`
}

// Bytes returns the total size of the changed files before and after the batch.
func (b *Batch) Bytes() (before, after int64) {
	for _, c := range b.Changes {
		before += c.SizeBefore
		after += c.SizeAfter
	}
	return before, after
}

// Actors other than a tenant's name.
const (
	ActorLocal    = "local"    // the server's own memory, without tenants
	ActorExec     = "exec"     // memory-mcp exec
	ActorExpiry   = "expiry"   // the expiry sweep
	ActorExternal = "external" // another process, noticed through the change counter
)

type (
	actorKey   struct{}
	commandKey struct{}
)

// WithActor returns ctx carrying who makes the changes: a tenant's name, or one of the
// Actor constants.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor ctx carries (ActorLocal when none).
func ActorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		return a
	}
	return ActorLocal
}

// WithCommand returns ctx carrying the command that makes the changes.
func WithCommand(ctx context.Context, command string) context.Context {
	return context.WithValue(ctx, commandKey{}, command)
}

// CommandOf returns the command ctx carries ("" when none).
func CommandOf(ctx context.Context) string {
	c, _ := ctx.Value(commandKey{}).(string)
	return c
}

// Subscription receives the store's batches on C, in commit order. Publishing never waits
// for a subscriber: when C's buffer is full, the batch is dropped for this subscriber and
// counted in Missed, so a slow subscriber learns that it must resynchronise (for example
// by listing the store again) and never holds back a writer.
type Subscription struct {
	C      <-chan Batch
	c      chan Batch
	missed atomic.Uint64
	f      *feed
}

// Subscribe registers a subscriber whose channel holds up to buffer batches.
func (s *Store) Subscribe(buffer int) *Subscription {
	c := make(chan Batch, buffer)
	sub := &Subscription{C: c, c: c, f: &s.feed}
	s.feed.mu.Lock()
	s.feed.subs = append(s.feed.subs, sub)
	s.feed.mu.Unlock()
	return sub
}

// Missed returns how many batches this subscriber missed because its buffer was full.
func (sub *Subscription) Missed() uint64 { return sub.missed.Load() }

// Close unregisters the subscriber; C receives nothing more (it is not closed, so a reader
// selecting on it never sees a zero batch).
func (sub *Subscription) Close() {
	sub.f.mu.Lock()
	defer sub.f.mu.Unlock()
	sub.f.subs = slices.DeleteFunc(sub.f.subs, func(s *Subscription) bool { return s == sub })
}
