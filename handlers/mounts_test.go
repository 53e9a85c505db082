package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// mountedMemory is a main store in memory with a read-write memory mount "me" (a file
// limit of 10 bytes) and a read-only directory mount "team"; it returns the team directory.
func mountedMemory(t *testing.T) (*handlers.Memory, string) {
	t.Helper()
	team := t.TempDir()
	if err := os.MkdirAll(filepath.Join(team, "guides"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"style.md": "tabs\n", "guides/go.md": "gofmt\n"} {
		if err := os.WriteFile(filepath.Join(team, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	teamStore, err := files.OpenOSStore(team, vfs.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { teamStore.Close() })
	main := files.NewMemoryStore()
	me := handlers.New(files.NewMemoryStore(), handlers.Limits{MaxFileBytes: 10})
	h := handlers.New(main, handlers.Limits{}, handlers.WithMounts(
		handlers.Mount{Name: "team", Memory: handlers.New(teamStore, handlers.Limits{})},
		handlers.Mount{Name: "me", Memory: me},
	))
	return h, team
}

func TestMounts(t *testing.T) {
	h, team := mountedMemory(t)
	before := hashDir(t, team)
	calls := []struct {
		input map[string]any
		want  string
		isErr bool
	}{
		{map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "main\n"}, "File created successfully at: /memories/notes.md", false},
		{map[string]any{"command": "create", "path": "/memories/me/prefs.md", "file_text": "short\n"}, "File created successfully at: /memories/me/prefs.md", false},
		{map[string]any{"command": "view", "path": "/memories"}, "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n" +
			"22B\t/memories\n6B\t/memories/me/\n6B\t/memories/me/prefs.md\n5B\t/memories/notes.md\n11B\t/memories/team/\n6B\t/memories/team/guides/\n5B\t/memories/team/style.md", false},
		{map[string]any{"command": "view", "path": "/memories/team/"}, "Here're the files and directories up to 2 levels deep in /memories/team/, excluding hidden items and node_modules:\n" +
			"11B\t/memories/team/\n6B\t/memories/team/guides/\n6B\t/memories/team/guides/go.md\n5B\t/memories/team/style.md", false},
		{map[string]any{"command": "view", "path": "/memories/team/style.md"}, "Here's the content of /memories/team/style.md with line numbers:\n     1\ttabs\n     2\t", false},
		{map[string]any{"command": "view", "path": "/memories/me/none.md"}, "The path /memories/me/none.md does not exist. Please provide a valid path.", true},
		// Per-store limits: the mount's own 10-byte file limit.
		{map[string]any{"command": "create", "path": "/memories/me/big.md", "file_text": "0123456789ab"}, "Error: /memories/me/big.md would be 12 bytes, over the limit of 10 bytes per memory file", true},
		{map[string]any{"command": "create", "path": "/memories/big.md", "file_text": "0123456789ab"}, "File created successfully at: /memories/big.md", false},
		// Read-only mount: every changing command, the mount point included.
		{map[string]any{"command": "create", "path": "/memories/team/new.md", "file_text": "x"}, "Error: The memory store at /memories/team is read-only", true},
		{map[string]any{"command": "str_replace", "path": "/memories/team/style.md", "old_str": "tabs", "new_str": "spaces"}, "Error: The memory store at /memories/team is read-only", true},
		{map[string]any{"command": "insert", "path": "/memories/team/style.md", "insert_line": 0, "insert_text": "x\n"}, "Error: The memory store at /memories/team is read-only", true},
		{map[string]any{"command": "delete", "path": "/memories/team/guides"}, "Error: The memory store at /memories/team is read-only", true},
		{map[string]any{"command": "delete", "path": "/memories/team"}, "Error: The memory store at /memories/team is read-only", true},
		{map[string]any{"command": "rename", "old_path": "/memories/team/style.md", "new_path": "/memories/team/s.md"}, "Error: The memory store at /memories/team is read-only", true},
		{map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/team/notes.md"}, "Error: The memory store at /memories/team is read-only", true},
		// Mount points.
		{map[string]any{"command": "delete", "path": "/memories/me"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
		{map[string]any{"command": "delete", "path": "/memories/me/"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
		{map[string]any{"command": "rename", "old_path": "/memories/me", "new_path": "/memories/you"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
		{map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/me"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
		// Between stores.
		{map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/me/notes.md"}, "Error: Cannot move /memories/notes.md to /memories/me/notes.md: they are in different memory stores. Create it at /memories/me/notes.md and delete /memories/notes.md instead", true},
		{map[string]any{"command": "rename", "old_path": "/memories/me/prefs.md", "new_path": "/memories/p.md"}, "Error: Cannot move /memories/me/prefs.md to /memories/p.md: they are in different memory stores. Create it at /memories/p.md and delete /memories/me/prefs.md instead", true},
		// Within a mount, and the path rules first.
		{map[string]any{"command": "rename", "old_path": "/memories/me/prefs.md", "new_path": "/memories/me/dir/p.md"}, "Successfully renamed /memories/me/prefs.md to /memories/me/dir/p.md", false},
		{map[string]any{"command": "rename", "old_path": "/memories/me/dir/p.md", "new_path": "/memoriesX"}, "Error: Path must be /memories or start with /memories/, got: /memoriesX", true},
		{map[string]any{"command": "str_replace", "path": "/memories/me/dir/p.md", "old_str": "short", "new_str": "brief"}, "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tbrief\n     2\t", false},
		{map[string]any{"command": "delete", "path": "/memories/me/dir"}, "Successfully deleted /memories/me/dir", false},
		{map[string]any{"command": "view", "path": "/memories/me"}, "Here're the files and directories up to 2 levels deep in /memories/me, excluding hidden items and node_modules:\n0B\t/memories/me", false},
	}
	for i, c := range calls {
		res := h.Exec(context.Background(), c.input)
		if res.Text != c.want || res.IsError != c.isErr {
			t.Errorf("call %d %v:\n got (isError %v) %q\nwant (isError %v) %q", i, c.input, res.IsError, res.Text, c.isErr, c.want)
		}
	}
	if after := hashDir(t, team); after != before {
		t.Error("the read-only mount's directory changed")
	}
}

// A main store with an entry where a mount goes is refused, and mount names are checked.
func TestMountChecks(t *testing.T) {
	main := files.NewMemoryStore()
	if err := main.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/team/x.md"), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	h := handlers.New(main, handlers.Limits{}, handlers.WithMounts(handlers.Mount{Name: "team", Memory: handlers.New(files.NewMemoryStore(), handlers.Limits{})}))
	if err := h.CheckMounts(context.Background()); err == nil {
		t.Error("a main store holding /memories/team was accepted under a mount named team")
	}
	for _, name := range []string{"", ".hidden", "node_modules", "a/b", `a\b`, "..", "a\x00", ".memory-mcp"} {
		if handlers.ValidMountName(name) == nil {
			t.Errorf("mount name %q accepted", name)
		}
	}
	for _, name := range []string{"team", "me", "project-notes", "é"} {
		if err := handlers.ValidMountName(name); err != nil {
			t.Errorf("mount name %q refused: %v", name, err)
		}
	}
}

// The page's and the history commands' operations reach mounts by path, and show the
// paths the model sees.
func TestMountsForPeople(t *testing.T) {
	h, _ := mountedMemory(t)
	ctx := context.Background()
	if _, err := h.Write(ctx, "/memories/me/a.md", []byte("one\n"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(ctx, "/memories/me/a.md", []byte("two\n"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(ctx, "/memories/team/x.md", []byte("x"), nil); err == nil || err.Error() != "this memory is read-only: it can be looked at, not changed" {
		t.Errorf("a write to the read-only mount: %v", err)
	}
	if data, _, err := h.Read(ctx, "/memories/team/guides/go.md"); err != nil || string(data) != "gofmt\n" {
		t.Errorf("read under the team mount: %q, %v", data, err)
	}
	if _, _, err := h.Read(ctx, "/memories/me/none.md"); err == nil || err.Error() != "/memories/me/none.md does not exist (any more)" {
		t.Errorf("read of a missing file in a mount: %v", err)
	}
	root, _, err := h.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range root.Children {
		names = append(names, c.Path)
	}
	if strings.Join(names, " ") != "/memories/me /memories/team" || root.Children[1].Children[0].Path != "/memories/team/guides" {
		t.Errorf("the tree's top level: %v", names)
	}
	list, err := h.FileList(ctx)
	if err != nil || len(list) != 3 || list[0].Path != "/memories/me/a.md" || list[2].Path != "/memories/team/style.md" {
		t.Errorf("file list: %v, %v", list, err)
	}
	vs, err := h.Log(ctx, handlers.LogQuery{Path: "/memories/me"})
	if err != nil || len(vs) != 2 || vs[0].Path != "/memories/me/a.md" {
		t.Errorf("log of the mount: %v, %v", vs, err)
	}
	if vs, err := h.Log(ctx, handlers.LogQuery{}); err != nil || len(vs) != 2 || vs[0].Path != "/memories/me/a.md" {
		t.Errorf("log of the whole memory (the main store has none): %v, %v", vs, err)
	}
	d, err := h.Diff(ctx, "/memories/me/a.md")
	if err != nil || !strings.Contains(d, "--- /memories/me/a.md@") || !strings.Contains(d, "+two") {
		t.Errorf("diff in the mount:\n%s (%v)", d, err)
	}
	// The content is shown as it is, though it names a path like the store's.
	if _, err := h.Write(ctx, "/memories/me/p.md", []byte("/memories/x/y"), nil); err == nil || err.Error() != "/memories/me/p.md would be 13 bytes, over the limit of 10 bytes per memory file" {
		t.Errorf("a write over the mount's file limit: %v", err)
	}
	if _, err := h.Write(ctx, "/memories/me/p.md", []byte("/memories\n"), nil); err != nil {
		t.Fatal(err)
	}
	if d, err := h.Diff(ctx, "/memories/me/p.md"); err != nil || !strings.Contains(d, "+++ /memories/me/p.md@") || !strings.Contains(d, "\n+/memories\n") {
		t.Errorf("diff of a content that names a path, in the mount:\n%s (%v)", d, err)
	}
	if _, err := h.Remove(ctx, "/memories/me/p.md", nil); err != nil {
		t.Fatal(err)
	}
	if data, err := h.Show(ctx, "/memories/me/a.md", vs[1].Seq); err != nil || string(data) != "one\n" {
		t.Errorf("show in the mount: %q, %v", data, err)
	}
	if res, err := h.Restore(ctx, "/memories/me/a.md", vs[1].Seq); err != nil || len(res.Modified) != 1 || res.Modified[0] != "/memories/me/a.md" {
		t.Errorf("restore in the mount: %+v, %v", res, err)
	}
	if ms, _, err := h.Search(ctx, "gofmt"); err != nil || len(ms) != 1 || ms[0].Path != "/memories/team/guides/go.md" {
		t.Errorf("search: %+v, %v", ms, err)
	}
	sub := h.Subscribe(8)
	defer sub.Close()
	if _, err := h.Remove(ctx, "/memories/me/a.md", nil); err != nil {
		t.Fatal(err)
	}
	if b := <-sub.C; len(b.Changes) != 1 || b.Changes[0].Path != "/memories/me/a.md" {
		t.Errorf("the feed's change: %+v", b.Changes)
	}
}

// An entry of the main store at a mount's name, made behind the mount's back (the server
// refuses one at start), is hidden by the mount: neither listed nor counted, in the model's
// listing or the people's tree.
func TestMountHidesTheMainEntryBehindIt(t *testing.T) {
	h, _ := mountedMemory(t)
	ctx := context.Background()
	if _, err := h.Write(ctx, "/memories/me/a.md", []byte("one\n"), nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Store().Update(ctx, func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/me/behind.md"), []byte(strings.Repeat("x", 1000)))
	}); err != nil {
		t.Fatal(err)
	}
	root, _, err := h.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// me/a.md (4 bytes) and team's style.md and guides/go.md (5 + 6 bytes).
	if root.Size != 15 {
		t.Errorf("the tree's size is %d, want 15: the 1,000 bytes behind the mount count", root.Size)
	}
	res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"})
	if res.IsError || !strings.Contains(res.Text, "\n15B\t/memories\n") || strings.Contains(res.Text, "behind.md") {
		t.Errorf("the listing:\n%s", res.Text)
	}
}

// The log of the whole memory has every store's versions, newest first, and a restore of
// the whole memory to a time puts back each mount that can be changed too; the read-only
// mount stays as it is.
func TestWholeMemoryHistoryWithMounts(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opt := vfs.WithHistory(vfs.HistoryConfig{Now: func() time.Time { return clock }})
	team := handlers.New(files.NewMemoryStore(opt), handlers.Limits{})
	if _, err := team.Write(ctx, "/memories/style.md", []byte("tabs\n"), nil); err != nil {
		t.Fatal(err)
	}
	h := handlers.New(files.NewMemoryStore(opt), handlers.Limits{}, handlers.WithMounts(
		handlers.Mount{Name: "me", Memory: handlers.New(files.NewMemoryStore(opt), handlers.Limits{})},
		handlers.Mount{Name: "team", Memory: handlers.New(team.Store(), handlers.Limits{}, handlers.ReadOnly())},
	))
	write := func(path, text string) {
		t.Helper()
		clock = clock.Add(time.Minute)
		if _, err := h.Write(ctx, path, []byte(text), nil); err != nil {
			t.Fatal(err)
		}
	}
	write("/memories/a.md", "a1\n")
	write("/memories/me/b.md", "b1\n")
	before := clock
	write("/memories/me/b.md", "b2\n")
	write("/memories/a.md", "a2\n")
	write("/memories/me/c.md", "c\n")

	vs, err := h.Log(ctx, handlers.LogQuery{N: 4})
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s@%d", v.Path, v.Seq))
	}
	if want := "/memories/me/c.md@3 /memories/a.md@2 /memories/me/b.md@2 /memories/me/b.md@1"; err != nil || strings.Join(got, " ") != want {
		t.Errorf("log of the whole memory: %v, %v; want %s", got, err, want)
	}

	clock = clock.Add(time.Minute)
	res, err := h.RestoreAt(ctx, "/memories", before)
	if err != nil || res.Version != 3 || len(res.Mounts) != 1 || res.Mounts[0].Top != "/memories/me" || res.Mounts[0].Version != 4 {
		t.Fatalf("restore of the whole memory: %+v, %v", res, err)
	}
	if m := res.Mounts[0]; strings.Join(m.Modified, " ") != "/memories/me/b.md" || strings.Join(m.Deleted, " ") != "/memories/me/c.md" {
		t.Errorf("the mount's restore: %+v", m)
	}
	for path, want := range map[string]string{"/memories/a.md": "a1\n", "/memories/me/b.md": "b1\n", "/memories/team/style.md": "tabs\n"} {
		if data, _, err := h.Read(ctx, path); err != nil || string(data) != want {
			t.Errorf("%s after the restore: %q, %v; want %q", path, data, err, want)
		}
	}
	if _, _, err := h.Read(ctx, "/memories/me/c.md"); err == nil {
		t.Error("/memories/me/c.md, made after the time, is still there")
	}
	// A restore of one path stays in its store.
	if res, err := h.RestoreAt(ctx, "/memories/a.md", clock); err != nil || len(res.Mounts) != 0 {
		t.Errorf("restore of a file: %+v, %v", res, err)
	}

	// A mount that cannot go back (over its store limit then) is named; the rest goes back.
	seed := handlers.New(files.NewMemoryStore(opt), handlers.Limits{})
	h = handlers.New(files.NewMemoryStore(opt), handlers.Limits{}, handlers.WithMounts(
		handlers.Mount{Name: "small", Memory: handlers.New(seed.Store(), handlers.Limits{MaxStoreBytes: 4})},
	))
	write("/memories/a.md", "a\n")
	clock = clock.Add(time.Minute)
	if _, err := seed.Write(ctx, "/memories/big.md", []byte("12345678"), nil); err != nil {
		t.Fatal(err)
	}
	before = clock
	write("/memories/a.md", "b\n")
	clock = clock.Add(time.Minute)
	if _, err := seed.Remove(ctx, "/memories/big.md", nil); err != nil {
		t.Fatal(err)
	}
	res, err = h.RestoreAt(ctx, "/memories", before)
	var partial *handlers.NotRestored
	var refusal *handlers.Refusal
	if !errors.As(err, &partial) || partial.Top != "/memories/small" || !errors.As(partial.Err, &refusal) || res.Version == 0 {
		t.Errorf("restore with a mount that cannot go back: %+v, %v", res, err)
	}
	if data, _, err := h.Read(ctx, "/memories/a.md"); err != nil || string(data) != "a\n" {
		t.Errorf("the main store after it: %q, %v", data, err)
	}
}

// A mount whose store fails (its directory gone) is left out of what spans the whole
// memory, for the model and for people alike: the rest of /memories is listed, and works.
func TestFailingMountLeftOut(t *testing.T) {
	ctx := context.Background()
	fsys := &vfstest.DownFS{FS: files.NewMemFs()}
	h := handlers.New(files.NewMemoryStore(), handlers.Limits{}, handlers.WithMounts(handlers.Mount{Name: "me", Memory: handlers.New(vfs.NewStore(files.NewAferoStorage(fsys)), handlers.Limits{})}))
	for _, p := range []string{"/memories/a.md", "/memories/me/b.md"} {
		if res := h.Exec(ctx, map[string]any{"command": "create", "path": p, "file_text": "x"}); res.IsError {
			t.Fatal(res.Text)
		}
	}
	fsys.Down.Store(true)
	want := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n1B\t/memories\n1B\t/memories/a.md"
	if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}); res.Text != want {
		t.Errorf("view /memories: %q", res.Text)
	}
	if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories/me"}); res.Text != "Error: Could not view /memories/me: "+handlers.ReasonGone {
		t.Errorf("view /memories/me: %q", res.Text)
	}
	if root, _, err := h.Files(ctx); err != nil || len(root.Children) != 1 || root.Children[0].Path != "/memories/a.md" {
		t.Errorf("the page's tree: %+v, %v", root, err)
	}
	var left *handlers.MountsLeftOut
	if list, err := h.FileList(ctx); !errors.As(err, &left) || fmt.Sprint(left.Tops) != "[/memories/me]" || len(list) != 1 || list[0].Path != "/memories/a.md" {
		t.Errorf("the resources: %+v, %v", list, err)
	}
	if vs, err := h.Log(ctx, handlers.LogQuery{}); !errors.As(err, &left) || fmt.Sprint(left.Tops) != "[/memories/me]" || len(vs) != 1 || vs[0].Path != "/memories/a.md" {
		t.Errorf("the whole memory's log: %+v, %v", vs, err)
	}
	if ms, _, err := h.Search(ctx, "x"); err != nil || len(ms) != 1 || ms[0].Path != "/memories/a.md" {
		t.Errorf("the page's search: %+v, %v", ms, err)
	}
}
