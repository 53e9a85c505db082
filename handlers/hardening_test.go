package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

func openOS(t *testing.T, dir string, opts ...vfs.Option) *vfs.Store {
	t.Helper()
	s, err := files.OpenOSStore(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func call(h *handlers.Memory, args map[string]any) handlers.Result {
	return h.Exec(context.Background(), args)
}

// A file that another program swaps for a fifo can neither block a call nor the store:
// view, str_replace and insert answer at once, and the next change goes through.
func TestFIFOSwap(t *testing.T) {
	dir := t.TempDir()
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits(), handlers.Timeout(5*time.Second))
	call(h, map[string]any{"command": "create", "path": "/memories/f.md", "file_text": "x"})
	os.Remove(filepath.Join(dir, "f.md"))
	if err := mkfifo(filepath.Join(dir, "f.md")); err != nil {
		t.Skipf("no fifos here: %v", err)
	}
	want := "Error: The path /memories/f.md is not a regular file or directory"
	for _, args := range []map[string]any{
		{"command": "view", "path": "/memories/f.md"},
		{"command": "str_replace", "path": "/memories/f.md", "old_str": "x", "new_str": "y"},
		{"command": "insert", "path": "/memories/f.md", "insert_line": float64(0), "insert_text": "y"},
	} {
		done := make(chan handlers.Result, 1)
		go func() { done <- call(h, args) }()
		select {
		case res := <-done:
			if res.Text != want {
				t.Errorf("%v: %q", args["command"], res.Text)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%v blocked on a fifo", args["command"])
		}
	}
	// The store's open, which comes after the type check, refuses a fifo too (the swap
	// can happen between the two).
	err := openOS(t, dir).View(context.Background(), func(tx *vfs.Tx) error {
		_, err := tx.ReadFile(vfs.MustResolve("/memories/f.md"))
		return err
	})
	if !errors.Is(err, vfs.ErrNotRegular) {
		t.Errorf("reading a fifo: %v", err)
	}
	if res := call(h, map[string]any{"command": "create", "path": "/memories/after.md", "file_text": "ok"}); res.IsError {
		t.Errorf("the store is stuck: %s", res.Text)
	}
}

// holdLock takes the storage lock of the store in dir as another process would, and
// returns what releases it.
func holdLock(t *testing.T, dir string) (unlock func()) {
	t.Helper()
	other, err := files.NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := other.LockStorage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return func() { other.UnlockStorage() }
}

// A call that cannot get the storage lock in time gives up with docs/behaviour.md §4's error and holds
// nothing; once the lock is free, calls work again.
func TestCallDeadline(t *testing.T) {
	dir := t.TempDir()
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits(), handlers.Timeout(300*time.Millisecond))
	unlock := holdLock(t, dir)
	start := time.Now()
	res := call(h, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"})
	if want := "Error: Could not create /memories/a.md: " + handlers.ReasonTimeout; res.Text != want {
		t.Errorf("got %q, want %q", res.Text, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v", d)
	}
	unlock()
	if res := call(h, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"}); res.IsError {
		t.Errorf("after the lock is free: %s", res.Text)
	}
}

// A caller's context with a deadline keeps it where it comes before the handlers' timeout,
// and gets the timeout where it comes later (or never).
func TestCallDeadlineFromContext(t *testing.T) {
	dir := t.TempDir()
	defer holdLock(t, dir)()
	for _, c := range []struct {
		name             string
		timeout, context time.Duration // the context's deadline from now; 0: none
		want             time.Duration
	}{
		{"context sooner", time.Hour, 300 * time.Millisecond, 300 * time.Millisecond},
		{"context later", 300 * time.Millisecond, 20 * time.Second, 300 * time.Millisecond},
		{"no context deadline", 300 * time.Millisecond, 0, 300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := handlers.New(openOS(t, dir), handlers.DefaultLimits(), handlers.Timeout(c.timeout))
			ctx := context.Background()
			if c.context > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.context)
				defer cancel()
			}
			start := time.Now()
			res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"})
			if want := "Error: Could not create /memories/a.md: " + handlers.ReasonTimeout; res.Text != want {
				t.Errorf("got %q, want %q", res.Text, want)
			}
			if d := time.Since(start); d < c.want-50*time.Millisecond || d > c.want+5*time.Second {
				t.Errorf("the call gave up after %v, want about %v", d, c.want)
			}
		})
	}
}

// When the storage directory is removed, calls say so (not "internal error"), and the store
// serves again as soon as the directory is back, without a restart.
func TestVanishedRoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits())
	call(h, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for cmd, args := range map[string]map[string]any{
		"view":   {"command": "view", "path": "/memories"},
		"create": {"command": "create", "path": "/memories/b.md", "file_text": "y"},
	} {
		want := "Error: Could not " + cmd + " /memories" + map[string]string{"view": "", "create": "/b.md"}[cmd] + ": " + handlers.ReasonGone
		if res := call(h, args); res.Text != want {
			t.Errorf("%s: got %q, want %q", cmd, res.Text, want)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if res := call(h, map[string]any{"command": "create", "path": "/memories/b.md", "file_text": "y"}); res.IsError {
		t.Fatalf("after the directory is back: %s", res.Text)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "b.md")); err != nil || string(data) != "y" {
		t.Errorf("the file did not land in the new directory: %q %v", data, err)
	}
}

// deepChain makes dir/d/d/…/d (levels deep) with a file at the bottom, one level at a time
// through os.Root: the host path is longer than the system allows in one name.
func deepChain(t testing.TB, dir string, levels int) {
	os.MkdirAll(dir, 0o700)
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	for range levels {
		if err := r.Mkdir("d", 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := r.OpenRoot("d")
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		r = next
	}
	defer r.Close()
	if err := r.WriteFile("f", []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A directory chain as deep as paths allow (2,040 levels) is listed in linear time: it took
// 13 s when every directory was opened from the root. The bound protects users, with a wide
// margin for slow machines and the race detector.
func TestDeepChainListing(t *testing.T) {
	dir := t.TempDir()
	deepChain(t, dir, 2040)
	deepChain(t, filepath.Join(dir, "e"), 2000)
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits())
	start := time.Now()
	res := call(h, map[string]any{"command": "view", "path": "/memories"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("listing two deep chains took %v", d)
	}
	want := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n10B\t/memories\n5B\t/memories/d/\n5B\t/memories/d/d/\n5B\t/memories/e/\n5B\t/memories/e/d/"
	if res.Text != want {
		t.Errorf("got\n%s\nwant\n%s", res.Text, want)
	}
}

// Writer fairness across processes: while another process serves a continuous stream of
// overlapping views, a writer still gets in (without the gate, its shared lock would never
// drop, and the writes would wait for ever). files.TestWriterGoesBeforeLaterReaders proves
// the order.
func TestWriterFairness(t *testing.T) {
	dir := t.TempDir()
	readers := handlers.New(openOS(t, dir), handlers.DefaultLimits())
	writer := handlers.New(openOS(t, dir), handlers.DefaultLimits()) // its own lock descriptors, as another process
	for i := range 50 {
		call(writer, map[string]any{"command": "create", "path": "/memories/n/" + string(rune('a'+i%26)) + strings.Repeat("x", i), "file_text": strings.Repeat("line\n", 200)})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var views atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					call(readers, map[string]any{"command": "view", "path": "/memories"})
					views.Add(1)
				}
			}
		})
	}
	for views.Load() < 100 { // the views overlap
		runtime.Gosched()
	}
	for i := range 10 {
		res := call(writer, map[string]any{"command": "create", "path": "/memories/w" + string(rune('a'+i)), "file_text": "x"})
		if res.IsError {
			t.Errorf("write %d: %s", i, res.Text)
		}
	}
	close(stop)
	wg.Wait()
}

// The typed Go API goes through the same guard as Call: read-only, a done context.
func TestTypedCommandsAreGuarded(t *testing.T) {
	ctx := context.Background()
	s := files.NewMemoryStore()
	ro := handlers.New(s, handlers.DefaultLimits(), handlers.ReadOnly())
	for name, res := range map[string]handlers.Result{
		"create":      ro.Create(ctx, handlers.CreateArgs{Path: "/memories/a.md", FileText: "x"}),
		"str_replace": ro.StrReplace(ctx, handlers.StrReplaceArgs{Path: "/memories/a.md", OldStr: "x"}),
		"insert":      ro.Insert(ctx, handlers.InsertArgs{Path: "/memories/a.md", InsertText: "x"}),
		"delete":      ro.Delete(ctx, handlers.DeleteArgs{Path: "/memories/a.md"}),
		"rename":      ro.Rename(ctx, handlers.RenameArgs{OldPath: "/memories/a.md", NewPath: "/memories/b.md"}),
	} {
		if res.Text != "Error: The memory store is read-only" {
			t.Errorf("%s on a read-only store: %q", name, res.Text)
		}
	}
	if res := ro.View(ctx, handlers.ViewArgs{Path: "/memories"}); res.IsError {
		t.Errorf("view: %s", res.Text)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	rw := handlers.New(s, handlers.DefaultLimits())
	if res := rw.Create(cancelled, handlers.CreateArgs{Path: "/memories/a.md", FileText: "x"}); res.Text != "Error: Could not create /memories/a.md: internal error" {
		t.Errorf("create with a done context: %q", res.Text)
	}
	if res := rw.View(ctx, handlers.ViewArgs{Path: "/memories"}); strings.Contains(res.Text, "a.md") {
		t.Errorf("something was written: %s", res.Text)
	}
	// A read-only store makes its handlers read-only, whatever the options.
	if res := handlers.New(files.NewMemoryStore(vfs.ReadOnly()), handlers.DefaultLimits()).Create(ctx, handlers.CreateArgs{Path: "/memories/a.md", FileText: "x"}); res.Text != "Error: The memory store is read-only" {
		t.Errorf("create on a read-only store: %q", res.Text)
	}
}

// Views that count the store's size at the same time (the first in a process) do not race
// (run with -race).
func TestConcurrentUsage(t *testing.T) {
	for range 20 {
		s := files.NewMemoryStore()
		s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a"), []byte("abc")) })
		s.Update(context.Background(), func(tx *vfs.Tx) error { return errors.New("a failed change forgets the total") })
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				s.View(context.Background(), func(tx *vfs.Tx) error {
					if n, err := tx.Usage(); err != nil || n != 3 {
						t.Errorf("usage %d, %v", n, err)
					}
					return nil
				})
			})
		}
		wg.Wait()
	}
}

// Expire on a store that records no access is an error, not a crash; on a read-only store it
// touches nothing.
func TestExpireWithoutTracking(t *testing.T) {
	if _, err := files.NewMemoryStore().Expire(context.Background(), time.Hour, false); !errors.Is(err, vfs.ErrNotTracked) {
		t.Errorf("untracked: %v", err)
	}
	ro := files.NewMemoryStore(vfs.ReadOnly())
	ro.TrackAccess(time.Now)
	if _, err := ro.Expire(context.Background(), time.Hour, false); !errors.Is(err, vfs.ErrReadOnlyStore) {
		t.Errorf("read-only: %v", err)
	}
}

// A symbolic link in the storage whose absolute target lies inside the storage is followed
// like a relative one; one whose absolute target lies outside is an escape.
func TestAbsoluteLinkInside(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "real"), 0o700)
	os.WriteFile(filepath.Join(dir, "real", "f.md"), []byte("inside"), 0o600)
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "relative")); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("no"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "out"))
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits())
	for _, link := range []string{"abs", "relative"} {
		if res := call(h, map[string]any{"command": "view", "path": "/memories/" + link + "/f.md"}); res.Text != "Here's the content of /memories/"+link+"/f.md with line numbers:\n     1\tinside" {
			t.Errorf("view through %s: %q", link, res.Text)
		}
		if res := call(h, map[string]any{"command": "create", "path": "/memories/" + link + "/new-" + link, "file_text": "x"}); res.IsError {
			t.Errorf("create through %s: %q", link, res.Text)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "real", "new-abs")); err != nil {
		t.Errorf("the create through the absolute link did not land inside: %v", err)
	}
	if res := call(h, map[string]any{"command": "view", "path": "/memories/out/secret"}); res.Text != "Error: Path /memories/out/secret would escape /memories directory" {
		t.Errorf("outside link: %q", res.Text)
	}
}

// A listing shows what another program (an editor, a shell) did to the files since the
// last listing, though the os backend remembers the entries' sizes between listings.
func TestListingSeesChangesByOtherPrograms(t *testing.T) {
	dir := t.TempDir()
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits(), handlers.Timeout(5*time.Second))
	call(h, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"})
	call(h, map[string]any{"command": "create", "path": "/memories/sub/b.md", "file_text": "bravo\n"})
	view := func() string {
		t.Helper()
		r := call(h, map[string]any{"command": "view", "path": "/memories"})
		if r.IsError {
			t.Fatal(r.Text)
		}
		return r.Text
	}
	head := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"
	if got, want := view(), head+"12B\t/memories\n6B\t/memories/a.md\n6B\t/memories/sub/\n6B\t/memories/sub/b.md"; got != want {
		t.Fatalf("first listing:\n%s\nwant\n%s", got, want)
	}
	f, err := os.OpenFile(filepath.Join(dir, "sub", "b.md"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(strings.Repeat("x", 2000))
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "c.md"), []byte("charlie\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "a.md"), 1); err != nil {
		t.Fatal(err)
	}
	if got, want := view(), head+"2.0K\t/memories\n1B\t/memories/a.md\n8B\t/memories/c.md\n2.0K\t/memories/sub/\n2.0K\t/memories/sub/b.md"; got != want {
		t.Fatalf("after the edits by hand:\n%s\nwant\n%s", got, want)
	}
}

// When the history's own files are broken (its log made a directory), a change fails with
// the storage message, not with a message about the model's own path.
func TestBrokenBookkeepingIsAStorageFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".memory-mcp-history", "log"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := handlers.New(s, handlers.DefaultLimits())
	res := h.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"})
	if want := "Error: Could not create /memories/a.md: internal error"; res.Text != want {
		t.Errorf("create with the log a directory: %q, want %q", res.Text, want)
	}
}

// A directory is not moved where a file below it would get a path longer than a path may
// be: the file could no longer be named, nor the store exported and imported again.
func TestRenameKeepsPathsWithinTheLimit(t *testing.T) {
	seg := strings.Repeat("x", 200)
	deep := "d"
	for vfs.MaxPathBytes-len(vfs.Root+"/"+deep+"/"+"/f.md") > vfs.MaxNameBytes {
		deep += "/" + seg
	}
	// A file whose path has the greatest length a path may have.
	deep += "/" + strings.Repeat("z", vfs.MaxPathBytes-len(vfs.Root+"/"+deep+"/"+"/f.md")) + "/f.md"
	long := "/memories/" + strings.Repeat("y", 250)
	for _, b := range append(backends(), postgresBackend) {
		t.Run(b.name, func(t *testing.T) {
			fx := b.open(t, nil, noWrap) // made through the store: a host path this long fails
			h := handlers.New(fx.store, handlers.DefaultLimits())
			ctx := context.Background()
			if res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/" + deep, "file_text": "deep"}); res.IsError {
				t.Fatal(res.Text)
			}
			res := h.Exec(ctx, map[string]any{"command": "rename", "old_path": "/memories/d", "new_path": long})
			moved := long + deep[1:]
			want := "Error: Path " + handlers.Echo(moved) + " is too long: each name may have at most 255 bytes and the whole path at most 4096 bytes"
			if !res.IsError || res.Text != want {
				t.Errorf("rename: %s, want %s", res.Text, want)
			}
			if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories/" + deep}); res.IsError || !strings.Contains(res.Text, "deep") {
				t.Errorf("the file after the refused rename: %s", res.Text)
			}
			if res := h.Exec(ctx, map[string]any{"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}); res.IsError {
				t.Errorf("a rename that keeps the paths short: %s", res.Text)
			}
		})
	}
}

// A file made outside memory-mcp with a name no path may end in (a newline, an escape
// code, invalid UTF-8, a slash look-alike) is left out of listings, resources, searches,
// the person's tree and exports: a newline in a listed name would forge a line of the
// listing, and an export holding it would not import. A delete or rename of a directory
// holding one is refused: the history could not record the change, nor undo it.
func TestNamesNoPathCanHold(t *testing.T) {
	dir := t.TempDir()
	seed := map[string][]byte{}
	for _, name := range []string{"a\n1B\tforged.md", "c\x1b[31m.md", string([]byte{0xff, 'z'}), "a\u2215b.md", "ok.md", "d/ok.md", "d/a\nb.md"} {
		seed[name] = []byte("x\n")
	}
	writeHostTree(t, dir, seed)
	st := openOS(t, dir)
	h := handlers.New(st, handlers.DefaultLimits())
	ctx := context.Background()
	want := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4B\t/memories\n2B\t/memories/d/\n2B\t/memories/d/ok.md\n2B\t/memories/ok.md"
	if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}); res.Text != want {
		t.Errorf("listing:\n%s\nwant:\n%s", res.Text, want)
	}
	if paths, err := listedPaths(h); err != nil || paths != "/memories/d/ok.md /memories/ok.md" {
		t.Errorf("file list: %q, %v", paths, err)
	}
	tree, _, err := h.Files(ctx)
	if err != nil || len(tree.Children) != 2 || len(tree.Children[0].Children) != 1 || tree.Size != 4 {
		t.Errorf("the person's tree: %+v, %v", tree, err)
	}
	if ms, _, err := h.Search(ctx, "x"); err != nil || len(ms) != 2 {
		t.Errorf("search: %+v, %v", ms, err)
	}

	refused := `Error: Path "/memories/d/a\nb.md" contains characters that are not allowed`
	if res := h.Exec(ctx, map[string]any{"command": "delete", "path": "/memories/d"}); res.Text != refused {
		t.Errorf("delete: %s\nwant: %s", res.Text, refused)
	}
	if res := h.Exec(ctx, map[string]any{"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}); res.Text != refused {
		t.Errorf("rename: %s\nwant: %s", res.Text, refused)
	}
	_, err = h.Remove(ctx, "/memories/d", nil)
	if want := `/memories/d holds "/memories/d/a\nb.md", a name no memory path may hold: remove or rename it outside memory-mcp first`; err == nil || err.Error() != want {
		t.Errorf("a person's delete: %v\nwant: %s", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "d", "a\nb.md")); err != nil {
		t.Errorf("after the refusals: %v", err)
	}

	var tar bytes.Buffer
	if err := st.Export(ctx, &tar, true); err != nil {
		t.Fatal(err)
	}
	again := files.NewMemoryStore()
	if got, err := again.Import(ctx, &tar, vfs.ImportLimits{}); err != nil || got.Files != 2 {
		t.Errorf("import of the export: %+v, %v", got, err)
	}
}

// A file made outside memory-mcp so deep that its path is longer than any path may be
// (every name in it valid) is left out of resources and exports, like a name no path may
// hold: an export holding it would not import at all.
func TestPathsTooLongToName(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.md"), []byte("x\n"), 0o600)
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	name := strings.Repeat("d", 250)
	for depth := range vfs.MaxPathBytes/len(name) + 1 {
		sub := strings.Repeat(name+"/", depth) + name
		if err := r.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WriteFile(strings.Repeat(name+"/", vfs.MaxPathBytes/len(name)+1)+"deep.md", []byte("deep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := openOS(t, dir)
	h := handlers.New(st, handlers.DefaultLimits())
	ctx := context.Background()
	if paths, err := listedPaths(h); err != nil || paths != "/memories/ok.md" {
		t.Errorf("file list: %q, %v", paths, err)
	}
	// The page's tree and the model's listing leave it out too, and count no byte of it.
	root, _, err := h.Files(ctx)
	var deepest func(n handlers.FileNode) int
	deepest = func(n handlers.FileNode) int {
		d := len(n.Path)
		for _, c := range n.Children {
			d = max(d, deepest(c))
		}
		return d
	}
	if err != nil || deepest(root) > vfs.MaxPathBytes || root.Size != 2 {
		t.Errorf("page tree: deepest path %d bytes, %d bytes in all, %v", deepest(root), root.Size, err)
	}
	if got := h.View(ctx, handlers.ViewArgs{Path: vfs.Root}); got.IsError || !strings.Contains(got.Text, "2B\t/memories\n") {
		t.Errorf("listing: %+v", got)
	}
	var tar bytes.Buffer
	if err := st.Export(ctx, &tar, true); err != nil {
		t.Fatal(err)
	}
	if got, err := files.NewMemoryStore().Import(ctx, &tar, vfs.ImportLimits{}); err != nil || got.Files != 1 {
		t.Errorf("import of the export: %+v, %v", got, err)
	}
}

// listedPaths is the paths of the memory's file list (its resources), in order.
func listedPaths(h *handlers.Memory) (string, error) {
	list, err := h.FileList(context.Background())
	var paths []string
	for _, f := range list {
		paths = append(paths, f.Path)
	}
	return strings.Join(paths, " "), err
}
