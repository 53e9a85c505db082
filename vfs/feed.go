package vfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
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
	// Sizes of the content before and after (0 where there was no file).
	SizeBefore int64 `json:"size_before"`
	SizeAfter  int64 `json:"size_after"`
	// SHA-256 digests of the content before and after: zero where there was no file, and
	// zero when the store had no subscriber as the transaction began (then nobody needs
	// them, and a delete or rename need not read the files it touches).
	SHA256Before Digest `json:"sha256_before,omitzero"`
	SHA256After  Digest `json:"sha256_after,omitzero"`
}

// Digest is a SHA-256 digest of a file's content; its text form is hexadecimal.
type Digest [sha256.Size]byte

// DigestOf returns the digest of data.
func DigestOf(data []byte) Digest { return sha256.Sum256(data) }

// IsZero reports whether d is the zero digest (no digest).
func (d Digest) IsZero() bool { return d == Digest{} }

// String returns d in hexadecimal.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText returns d in hexadecimal.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Batch is what one committed transaction changed: a directory delete or rename lists every
// file below the directory.
type Batch struct {
	Seq     uint64    `json:"seq"` // this store's publication number, from 1, in commit order
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`   // see WithActor
	Command string    `json:"command"` // the command that made the changes
	// Version is the transaction's number in the store's history (0 when it keeps none).
	Version uint64 `json:"version,omitempty"`
	// External marks changes another process made (one Changed entry for Root).
	External bool `json:"external,omitempty"`
	// Changes are shared by every subscriber and the caller of Apply: read them, never
	// modify them.
	Changes []Change `json:"changes"`
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
	ActorWeb      = "web"      // a person, on the web page
)

type actorKey struct{}

// Client is the MCP client a change came through, recorded with its versions besides the
// actor: the name and version it gave (in initialize, or a request's _meta), the tenant,
// and the transport (stdio, http or sse).
type Client struct {
	Name      string `json:"name,omitempty"`
	Version   string `json:"version,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
	Transport string `json:"transport,omitempty"`
}

// String is the client as log shows it: "claude-code 2.1 (http, tenant alice)".
func (c *Client) String() string {
	if c == nil {
		return ""
	}
	s := strings.TrimSpace(c.Name + " " + c.Version)
	var how []string
	for _, x := range []struct{ k, v string }{{"", c.Transport}, {"tenant ", c.Tenant}} {
		if x.v != "" {
			how = append(how, x.k+x.v)
		}
	}
	if len(how) > 0 {
		s = strings.TrimSpace(s + " (" + strings.Join(how, ", ") + ")")
	}
	return s
}

type clientKey struct{}

// WithClient returns ctx carrying the MCP client that makes the changes, its names made
// labels (see Label): the client chose them.
func WithClient(ctx context.Context, c Client) context.Context {
	c = Client{Name: Label(c.Name), Version: Label(c.Version), Tenant: Label(c.Tenant), Transport: Label(c.Transport)}
	return context.WithValue(ctx, clientKey{}, &c)
}

// ClientOf returns the client ctx carries (nil when none: not through MCP).
func ClientOf(ctx context.Context) *Client {
	c, _ := ctx.Value(clientKey{}).(*Client)
	return c
}

// WithActor returns ctx carrying who makes the changes: a tenant's name, or one of the
// Actor constants. The name is made a label (see Label); one with nothing printable is
// ActorLocal.
func WithActor(ctx context.Context, actor string) context.Context {
	if actor = Label(actor); actor == "" {
		actor = ActorLocal
	}
	return context.WithValue(ctx, actorKey{}, actor)
}

// Label is a name given from outside as the history records it, so that log prints it
// safely and an import takes it again: without invalid UTF-8, control, format and
// line-separator characters, trimmed, and cut to maxLabelBytes.
func Label(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !labelRune(r) {
			return -1
		}
		return r
	}, s)
	for len(s) > maxLabelBytes {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return strings.TrimSpace(s)
}

// labelRune reports whether r may stand in a label.
func labelRune(r rune) bool {
	return !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) && r != '\u2028' && r != '\u2029'
}

// ActorOf returns the actor ctx carries (ActorLocal when none).
func ActorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		return a
	}
	return ActorLocal
}

// Subscription receives the store's batches on C, in commit order. Publishing never waits
// for a subscriber: when C's buffer is full, the batch is dropped for this subscriber and
// counted in Missed, so a slow subscriber learns that it must resynchronise (for example
// by listing the store again) and never holds back a writer.
//
// A subscription made with SubscribeFunc has no channel: its function is called instead.
type Subscription struct {
	C      <-chan Batch
	c      chan Batch
	fn     func(Batch)
	missed atomic.Uint64
	f      *feed
}

// Subscribe registers a subscriber whose channel holds up to buffer batches.
func (s *Store) Subscribe(buffer int) *Subscription {
	c := make(chan Batch, buffer)
	return s.feed.add(&Subscription{C: c, c: c, f: &s.feed})
}

// SubscribeFunc registers a subscriber that fn receives the batches of, in commit order:
// the goroutine that publishes a batch calls fn with the feed's lock held, so that no
// later change commits before fn returns. fn must return at once: it must not wait for
// anything, nor use the store (whose lock its caller may hold). It suits a subscriber
// whose work is some bookkeeping and sends that do not wait, and saves it a goroutine
// woken for every change. It never misses a batch.
func (s *Store) SubscribeFunc(fn func(Batch)) *Subscription {
	return s.feed.add(&Subscription{fn: fn, f: &s.feed})
}

func (f *feed) add(sub *Subscription) *Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, sub)
	f.n.Store(int32(len(f.subs)))
	return sub
}

// Missed returns how many batches this subscriber missed because its buffer was full.
func (sub *Subscription) Missed() uint64 { return sub.missed.Load() }

// Close unregisters the subscriber; C receives nothing more (it is not closed, so a reader
// selecting on it never sees a zero batch), and a SubscribeFunc's function is not called
// once Close has returned.
func (sub *Subscription) Close() {
	sub.f.mu.Lock()
	defer sub.f.mu.Unlock()
	sub.f.subs = slices.DeleteFunc(sub.f.subs, func(s *Subscription) bool { return s == sub })
	sub.f.n.Store(int32(len(sub.f.subs)))
}
