package handlers_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

func sum(s string) vfs.Digest { return vfs.DigestOf([]byte(s)) }

// next returns the next batch the subscription gets, failing after a generous wait.
func next(t *testing.T, sub *vfs.Subscription) vfs.Batch {
	t.Helper()
	select {
	case b := <-sub.C:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch on the change feed")
		return vfs.Batch{}
	}
}

// Every command that changes something yields one batch: the files it changed with their
// sizes and digests before and after, the actor and the command; a directory delete or
// rename lists every file below the directory. The result carries the same batch.
func TestChangeFeed(t *testing.T) {
	seed := map[string][]byte{"a.md": []byte("alpha\n"), "d/x.md": []byte("x"), "d/e/y.md": []byte("yy"), "d/link-free/": nil}
	type step struct {
		input map[string]any
		want  []vfs.Change
	}
	steps := []step{
		{map[string]any{"command": "create", "path": "/memories/new.md", "file_text": "hello"},
			[]vfs.Change{{Kind: vfs.Created, Path: "/memories/new.md", SizeAfter: 5, SHA256After: sum("hello")}}},
		{map[string]any{"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "beta"},
			[]vfs.Change{{Kind: vfs.Modified, Path: "/memories/a.md", SizeBefore: 6, SHA256Before: sum("alpha\n"), SizeAfter: 5, SHA256After: sum("beta\n")}}},
		{map[string]any{"command": "insert", "path": "/memories/a.md", "insert_line": float64(0), "insert_text": "top"},
			[]vfs.Change{{Kind: vfs.Modified, Path: "/memories/a.md", SizeBefore: 5, SHA256Before: sum("beta\n"), SizeAfter: 9, SHA256After: sum("top\nbeta\n")}}},
		{map[string]any{"command": "rename", "old_path": "/memories/d", "new_path": "/memories/moved/d"},
			[]vfs.Change{
				{Kind: vfs.Moved, From: "/memories/d/e/y.md", Path: "/memories/moved/d/e/y.md", SizeBefore: 2, SizeAfter: 2, SHA256Before: sum("yy"), SHA256After: sum("yy")},
				{Kind: vfs.Moved, From: "/memories/d/x.md", Path: "/memories/moved/d/x.md", SizeBefore: 1, SizeAfter: 1, SHA256Before: sum("x"), SHA256After: sum("x")},
			}},
		{map[string]any{"command": "rename", "old_path": "/memories/new.md", "new_path": "/memories/n.md"},
			[]vfs.Change{{Kind: vfs.Moved, From: "/memories/new.md", Path: "/memories/n.md", SizeBefore: 5, SizeAfter: 5, SHA256Before: sum("hello"), SHA256After: sum("hello")}}},
		{map[string]any{"command": "delete", "path": "/memories/moved"},
			[]vfs.Change{
				{Kind: vfs.Deleted, Path: "/memories/moved/d/e/y.md", SizeBefore: 2, SHA256Before: sum("yy")},
				{Kind: vfs.Deleted, Path: "/memories/moved/d/x.md", SizeBefore: 1, SHA256Before: sum("x")},
			}},
		{map[string]any{"command": "delete", "path": "/memories/n.md"},
			[]vfs.Change{{Kind: vfs.Deleted, Path: "/memories/n.md", SizeBefore: 5, SHA256Before: sum("hello")}}},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fx := b.open(t, seed, noWrap)
			sub := fx.store.Subscribe(16)
			defer sub.Close()
			// A function subscriber has each batch by the time the change returns.
			var inline []vfs.Batch
			var inlineMu sync.Mutex
			fsub := fx.store.SubscribeFunc(func(b vfs.Batch) {
				inlineMu.Lock()
				inline = append(inline, b)
				inlineMu.Unlock()
			})
			inlineHas := func() []vfs.Batch {
				inlineMu.Lock()
				defer inlineMu.Unlock()
				return slices.Clone(inline)
			}
			h := handlers.New(fx.store, handlers.DefaultLimits())
			ctx := vfs.WithActor(context.Background(), "alice")
			var seq uint64
			for i, s := range steps {
				res := h.Exec(ctx, s.input)
				if res.IsError {
					t.Fatalf("%v: %s", s.input, res.Text)
				}
				got := next(t, sub)
				if in := inlineHas(); len(in) != i+1 || !reflect.DeepEqual(in[i], got) {
					t.Errorf("%v: the function subscriber had %d batches when the change returned, want %d, the last the channel's %+v", s.input, len(in), i+1, got)
				}
				if got.Actor != "alice" || got.Command != s.input["command"] || got.External {
					t.Errorf("%v: actor %q, command %q, external %v", s.input, got.Actor, got.Command, got.External)
				}
				if got.Seq <= seq {
					t.Errorf("sequence %d after %d", got.Seq, seq)
				}
				seq = got.Seq
				if !reflect.DeepEqual(got.Changes, s.want) {
					t.Errorf("%v: changes\n%+v\nwant\n%+v", s.input, got.Changes, s.want)
				}
				if res.Batch == nil || res.Batch.Seq != got.Seq || !reflect.DeepEqual(res.Batch.Changes, got.Changes) {
					t.Errorf("%v: the result's batch %+v is not the published one", s.input, res.Batch)
				}
			}
			// Reads and refused changes publish nothing.
			for _, in := range []map[string]any{
				{"command": "view", "path": "/memories"},
				{"command": "view", "path": "/memories/a.md"},
				{"command": "create", "path": "/memories/a.md", "file_text": "again"},
				{"command": "str_replace", "path": "/memories/a.md", "old_str": "absent", "new_str": "x"},
				{"command": "delete", "path": "/memories/none"},
			} {
				if res := h.Exec(ctx, in); res.Batch != nil {
					t.Errorf("%v: result has a batch %+v", in, res.Batch)
				}
			}
			select {
			case b := <-sub.C:
				t.Errorf("a read or refused change published %+v", b)
			default:
			}
			if in := inlineHas(); len(in) != len(steps) {
				t.Errorf("the function subscriber had %d batches after the reads, want %d", len(in), len(steps))
			}
			// Once closed, it hears of nothing more.
			fsub.Close()
			if res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/later.md", "file_text": "l"}); res.IsError {
				t.Fatal(res.Text)
			}
			next(t, sub)
			if in := inlineHas(); len(in) != len(steps) {
				t.Errorf("the function subscriber had %d batches after its Close and one more change, want %d", len(in), len(steps))
			}
		})
	}
}

// Expiry's deletions reach the feed with actor "expiry", every file listed.
func TestChangeFeedExpiry(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fx := b.open(t, map[string][]byte{"old/a.md": []byte("aa"), "old/b.md": []byte("b"), "fresh.md": []byte("f")}, noWrap)
			now := time.Unix(2_000_000, 0)
			if err := fx.store.TrackAccess(func() time.Time { return now }); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := fx.store.Expire(ctx, time.Hour, false); err != nil { // starts every file's grace period
				t.Fatal(err)
			}
			now = now.Add(2 * time.Hour)
			h := handlers.New(fx.store, handlers.DefaultLimits())
			if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories/fresh.md"}); res.IsError {
				t.Fatal(res.Text)
			}
			sub := fx.store.Subscribe(4)
			defer sub.Close()
			expired, err := fx.store.Expire(ctx, time.Hour, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(expired) != 3 { // two files and their directory
				t.Errorf("expired %+v", expired)
			}
			got := next(t, sub)
			want := []vfs.Change{
				{Kind: vfs.Deleted, Path: "/memories/old/a.md", SizeBefore: 2, SHA256Before: sum("aa")},
				{Kind: vfs.Deleted, Path: "/memories/old/b.md", SizeBefore: 1, SHA256Before: sum("b")},
			}
			if got.Actor != vfs.ActorExpiry || got.Command != "expire" || !reflect.DeepEqual(got.Changes, want) {
				t.Errorf("batch %+v\nwant actor expiry, command expire, changes %+v", got, want)
			}
		})
	}
}

// A change another process makes on the same storage reaches the feed as "something under
// /memories changed", through the change counter, while this process is idle (Watch).
func TestChangeFeedOtherProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	store, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := handlers.New(store, handlers.DefaultLimits())
	if res := h.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/mine.md", "file_text": "m"}); res.IsError {
		t.Fatal(res.Text)
	}
	sub := store.Subscribe(4)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go store.Watch(ctx, 20*time.Millisecond)

	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), "MEMORY_MCP_TEST_CHILD=create", "MEMORY_MCP_TEST_DIR="+dir, "MEMORY_MCP_TEST_PATH=/memories/theirs.md")
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := next(t, sub)
	want := []vfs.Change{{Kind: vfs.Changed, Path: "/memories"}}
	if !got.External || got.Actor != vfs.ActorExternal || !reflect.DeepEqual(got.Changes, want) {
		t.Errorf("batch %+v, want an external change of /memories", got)
	}
	// Our own later change is ours again, not external.
	if res := h.Exec(vfs.WithActor(context.Background(), "bob"), map[string]any{"command": "delete", "path": "/memories/theirs.md"}); res.IsError {
		t.Fatal(res.Text)
	}
	for {
		b := next(t, sub)
		if b.External {
			continue // Watch may have looked again before the delete
		}
		if b.Actor != "bob" || len(b.Changes) != 1 || b.Changes[0].Path != "/memories/theirs.md" {
			t.Errorf("own change %+v", b)
		}
		break
	}
}

// A subscriber that does not read never holds back a writer: its batches are dropped and
// counted.
func TestChangeFeedSlowSubscriber(t *testing.T) {
	store := files.NewMemoryStore()
	slow := store.Subscribe(1)
	defer slow.Close()
	h := handlers.New(store, handlers.DefaultLimits())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			h.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), "file_text": "x"})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writers were held back by a subscriber that does not read")
	}
	if got := slow.Missed(); got != 49 {
		t.Errorf("missed %d batches, want 49 (one fits the buffer)", got)
	}
}

// secondRemoveFails lets the first RemoveAll through and fails the next ones.
type secondRemoveFails struct {
	files.FS
	n int
}

func (f *secondRemoveFails) RemoveAll(name string) error {
	if f.n++; f.n > 1 {
		return syscall.EIO
	}
	return f.FS.RemoveAll(name)
}

// When a transaction fails after a change that the storage cannot undo, the feed still
// reports the change that stayed.
func TestChangeFeedKeptAfterFailure(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fx := b.open(t, map[string][]byte{"old/a.md": []byte("aa"), "old/b.md": []byte("b")}, func(fsys files.FS) files.FS { return &secondRemoveFails{FS: fsys} })
			now := time.Unix(2_000_000, 0)
			fx.store.TrackAccess(func() time.Time { return now })
			ctx := context.Background()
			if _, err := fx.store.Expire(ctx, time.Hour, true); err != nil {
				t.Fatal(err)
			}
			now = now.Add(2 * time.Hour)
			sub := fx.store.Subscribe(4)
			defer sub.Close()
			if _, err := fx.store.Expire(ctx, time.Hour, false); err == nil {
				t.Fatal("the second removal did not fail")
			}
			got := next(t, sub)
			want := []vfs.Change{{Kind: vfs.Deleted, Path: "/memories/old/a.md", SizeBefore: 2, SHA256Before: sum("aa")}}
			if !reflect.DeepEqual(got.Changes, want) {
				t.Errorf("batch %+v, want %+v", got.Changes, want)
			}
		})
	}
}

// Without a subscriber the batch still gives every change's kind, paths and sizes (the
// audit line's sums), but no digests: nobody needs them, and a delete then reads nothing.
func TestChangeFeedNoSubscriber(t *testing.T) {
	// Without history either: then nothing needs the digests.
	store := files.NewMemoryStore(vfs.WithHistory(vfs.HistoryConfig{Off: true}))
	h := handlers.New(store, handlers.DefaultLimits())
	ctx := context.Background()
	h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/d/a.md", "file_text": "abc"})
	res := h.Exec(ctx, map[string]any{"command": "delete", "path": "/memories/d"})
	want := []vfs.Change{{Kind: vfs.Deleted, Path: "/memories/d/a.md", SizeBefore: 3}}
	if res.Batch == nil || !reflect.DeepEqual(res.Batch.Changes, want) || res.Batch.Actor != vfs.ActorLocal {
		t.Errorf("batch %+v, want %+v by %s", res.Batch, want, vfs.ActorLocal)
	}
}
