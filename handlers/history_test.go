package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
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
)

// historyScript is every command, a failure and a view (neither makes a version), on a
// store holding one file from before the history (old.md, in the lower layer on overlays).
var historyScript = []map[string]any{
	{"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\n"},
	{"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "gamma"},
	{"command": "insert", "path": "/memories/notes.md", "insert_line": float64(0), "insert_text": "title"},
	{"command": "view", "path": "/memories/notes.md"},
	{"command": "create", "path": "/memories/notes.md", "file_text": "refused: exists"},
	{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n.md"},
	{"command": "create", "path": "/memories/p/a.md", "file_text": "a\n"},
	{"command": "create", "path": "/memories/p/sub/b.md", "file_text": "b\n"},
	{"command": "rename", "old_path": "/memories/p", "new_path": "/memories/q"},
	{"command": "delete", "path": "/memories/old.md"},
	{"command": "delete", "path": "/memories/q"},
}

func runHistoryScript(t *testing.T, h *handlers.Memory) {
	t.Helper()
	ctx := vfs.WithActor(context.Background(), "tenant-a")
	for _, in := range historyScript {
		res := h.Exec(ctx, in)
		text, _ := in["file_text"].(string)
		if res.IsError != strings.HasPrefix(text, "refused") {
			t.Fatalf("%v: %s", in, res.Text)
		}
	}
}

// The versions of every command are the same on every backend: the golden file holds them
// (times left out), then those of a restore of the deleted directory, its undo, and a
// redaction.
func TestHistoryGolden(t *testing.T) {
	var first []byte
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := b.open(t, map[string][]byte{"old.md": []byte("from before\n")}, noWrap)
			h := handlers.New(f.store, handlers.DefaultLimits())
			runHistoryScript(t, h)
			ctx := vfs.WithActor(context.Background(), "person")
			res, err := h.Restore(ctx, "/memories/q", 8)
			if err != nil || len(res.Created) != 2 {
				t.Fatalf("restore of the deleted directory: %+v, %v", res, err)
			}
			if res, err := h.Restore(ctx, "/memories/q", res.Version-1); err != nil || len(res.Deleted) != 2 {
				t.Fatalf("undo of the restore: %+v, %v", res, err)
			}
			if _, err := h.Redact(ctx, "/memories/notes.md", 1); err != nil {
				t.Fatalf("redact: %v", err)
			}
			vs, err := h.Log(ctx, handlers.LogQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			for i := len(vs) - 1; i >= 0; i-- {
				v := vs[i]
				v.Time = time.Time{}
				if v.Redacted != nil {
					v.Redacted.Time = time.Time{}
				}
				line, _ := json.Marshal(v)
				out.Write(append(line, '\n'))
			}
			golden(t, "../testdata/history/commands.jsonl", out.Bytes())
			if first != nil && !bytes.Equal(first, out.Bytes()) {
				t.Error("this backend's versions differ from the first backend's")
			}
			first = out.Bytes()
		})
	}
}

// golden compares got with the file, or writes it with -update; a missing file fails.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// Log, Show, Diff, Restore and Redact on every backend.
func TestHistoryOperations(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := b.open(t, map[string][]byte{"old.md": []byte("from before\n")}, noWrap)
			h := handlers.New(f.store, handlers.Limits{MaxStoreBytes: 1000})
			runHistoryScript(t, h)
			ctx := context.Background()
			read := func(p string) string {
				var data []byte
				f.store.View(ctx, func(tx *vfs.Tx) (err error) {
					data, err = tx.ReadFile(vfs.MustResolve(p))
					return err
				})
				return string(data)
			}

			// log PATH follows the file back through its rename.
			vs, err := h.Log(ctx, handlers.LogQuery{Path: "/memories/n.md"})
			if err != nil || len(vs) != 4 || vs[0].Command != "rename" || vs[3].Command != "create" {
				t.Errorf("log /memories/n.md: %+v, %v", vs, err)
			}
			if vs, _ := h.Log(ctx, handlers.LogQuery{Path: "/memories/q", N: 2}); len(vs) != 2 || vs[0].Kind != vfs.Deleted {
				t.Errorf("log -n 2 /memories/q: %+v", vs)
			}
			if vs, _ := h.Log(ctx, handlers.LogQuery{Actor: "nobody"}); len(vs) != 0 {
				t.Errorf("log -actor nobody: %+v", vs)
			}
			if vs, _ := h.Log(ctx, handlers.LogQuery{Since: time.Now().Add(time.Hour)}); len(vs) != 0 {
				t.Errorf("log -since the future: %+v", vs)
			}

			// show and diff.
			if data, err := h.Show(ctx, "/memories/notes.md", 2); err != nil || string(data) != "alpha\ngamma\n" {
				t.Errorf("show notes.md@2: %q, %v", data, err)
			}
			if data, err := h.Show(ctx, "/memories/old.md", 7); err != nil || string(data) != "from before\n" {
				t.Errorf("show old.md@7 (before its delete, older than the history): %q, %v", data, err)
			}
			if _, err := h.Show(ctx, "/memories/notes.md", 99); err == nil || !strings.Contains(err.Error(), "the versions go up to 9") {
				t.Errorf("show of a version that does not exist: %v", err)
			}
			if _, err := h.Show(ctx, "/memories/notes.md", 5); err == nil || !strings.Contains(err.Error(), "did not exist after version 5") {
				t.Errorf("show of a moved file: %v", err)
			}
			want := "--- /memories/notes.md@1\n+++ /memories/notes.md@2\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n"
			if d, err := h.Diff(ctx, "/memories/notes.md", 2); err != nil || d != want {
				t.Errorf("diff notes.md 2:\n%s%v", d, err)
			}
			if d, err := h.Diff(ctx, "/memories/n.md"); err != nil || !strings.Contains(d, "/memories/notes.md@3\n+++ /memories/n.md@4") {
				t.Errorf("diff of the last change (a rename): %q, %v", d, err)
			}
			if d, err := h.Diff(ctx, "/memories/notes.md", 1, 3); err != nil || !strings.Contains(d, "+title\n alpha\n-beta\n+gamma") {
				t.Errorf("diff notes.md 1 3:\n%s%v", d, err)
			}

			// restore a file to a version, and undo it.
			res, err := h.Restore(ctx, "/memories/n.md", 4)
			if err != nil || res.Version != 0 {
				t.Errorf("restore of a file that did not differ: %+v, %v", res, err)
			}
			res, err = h.Restore(ctx, "/memories/notes.md", 2)
			if err != nil || len(res.Created) != 1 || len(res.Modified)+len(res.Deleted) != 0 {
				t.Fatalf("restore notes.md@2: %+v, %v", res, err)
			}
			if got := read("/memories/notes.md"); got != "alpha\ngamma\n" {
				t.Errorf("after the restore: %q", got)
			}
			if _, err := h.Restore(ctx, "/memories/notes.md", res.Version-1); err != nil || read("/memories/notes.md") != "" {
				t.Errorf("undo of the restore: %v, file %q", err, read("/memories/notes.md"))
			}

			// The whole store as it was at a time: before anything but old.md.
			all, _ := h.Log(ctx, handlers.LogQuery{})
			first := all[len(all)-1].Time
			res, err = h.RestoreAt(ctx, "/memories", first.Add(-time.Nanosecond))
			if err != nil {
				t.Fatalf("restore -at: %v", err)
			}
			if got := strings.Join(append(append(res.Created, res.Modified...), res.Deleted...), " "); got != "/memories/old.md /memories/n.md" {
				t.Errorf("restore -at changed %q", got)
			}
			if read("/memories/old.md") != "from before\n" || read("/memories/n.md") != "" {
				t.Errorf("after restore -at: old.md %q, n.md %q", read("/memories/old.md"), read("/memories/n.md"))
			}

			// The size limits hold: the store may hold 1000 bytes.
			big := strings.Repeat("x", 900)
			h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/big", "file_text": big})
			h.Exec(ctx, map[string]any{"command": "delete", "path": "/memories/big"})
			h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/big2", "file_text": big})
			last, _ := h.Log(ctx, handlers.LogQuery{N: 1})
			if _, err := h.Restore(ctx, "/memories/big", last[0].Seq-2); err == nil || !strings.Contains(err.Error(), "over its limit of 1000 bytes") {
				t.Errorf("a restore over the store's limit: %v", err)
			}

			// Redaction: refused while a file holds the content, then done.
			if _, err := h.Redact(ctx, "/memories/big2", last[0].Seq); err == nil || !strings.Contains(err.Error(), "still holds this content") {
				t.Errorf("redact of a file's current content: %v", err)
			}
			n, err := h.Redact(ctx, "/memories/notes.md", 2)
			if err != nil || n != 2 { // version 2, and the restore that brought it back
				t.Errorf("redact notes.md@2: %d, %v", n, err)
			}
			if _, err := h.Show(ctx, "/memories/notes.md", 2); err == nil || !strings.Contains(err.Error(), "redacted") {
				t.Errorf("show of a redacted version: %v", err)
			}
			var he *handlers.Refusal
			if _, err := h.Show(ctx, "notes.md", 2); !errors.As(err, &he) || !strings.Contains(err.Error(), "paths start with /memories") {
				t.Errorf("show of a path outside /memories: %v", err)
			}
		})
	}
}

// A read-only store shows its history but restores and redacts nothing.
func TestHistoryReadOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.md"), []byte("from before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	runHistoryScript(t, handlers.New(s, handlers.DefaultLimits()))
	s.Close()
	ro, err := files.OpenOSStore(dir, vfs.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	h := handlers.New(ro, handlers.DefaultLimits())
	ctx := context.Background()
	if vs, err := h.Log(ctx, handlers.LogQuery{}); err != nil || len(vs) == 0 {
		t.Errorf("log of a read-only store: %d versions, %v", len(vs), err)
	}
	if _, err := h.Restore(ctx, "/memories/q", 8); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("restore on a read-only store: %v", err)
	}
	if _, err := h.Redact(ctx, "/memories/notes.md", 1); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("redact on a read-only store: %v", err)
	}
}

// A diff names the two versions it compares by the numbers the log shows: the file's own
// version before, not the change's number less one; a side whose content was redacted is
// shown as such instead of failing the diff.
func TestDiffNamesTheVersionsCompared(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := b.open(t, nil, noWrap)
			h := handlers.New(f.store, handlers.DefaultLimits())
			ctx := context.Background()
			for _, in := range []map[string]any{
				{"command": "create", "path": "/memories/status.md", "file_text": "one\n"},                    // 1
				{"command": "create", "path": "/memories/other.md", "file_text": "x\n"},                       // 2
				{"command": "create", "path": "/memories/third.md", "file_text": "y\n"},                       // 3
				{"command": "str_replace", "path": "/memories/status.md", "old_str": "one", "new_str": "two"}, // 4
				{"command": "str_replace", "path": "/memories/other.md", "old_str": "x", "new_str": "z"},      // 5
				{"command": "str_replace", "path": "/memories/status.md", "old_str": "two", "new_str": "six"}, // 6
			} {
				if res := h.Exec(ctx, in); res.IsError {
					t.Fatal(res.Text)
				}
			}
			want := "--- /memories/status.md@4\n+++ /memories/status.md@6\n@@ -1 +1 @@\n-two\n+six\n"
			if d, err := h.Diff(ctx, "/memories/status.md"); err != nil || d != want {
				t.Errorf("diff of the last change:\n%s%v\nwant\n%s", d, err, want)
			}
			if d, err := h.Diff(ctx, "/memories/status.md", 1); err != nil || !strings.HasPrefix(d, "--- /memories/status.md (before @1)\n+++ /memories/status.md@1\n") {
				t.Errorf("diff of the create:\n%s%v", d, err)
			}
			if _, err := h.Redact(ctx, "/memories/status.md", 4); err != nil {
				t.Fatal(err)
			}
			want = "--- /memories/status.md@4 (redacted)\n+++ /memories/status.md@6\n@@ -0,0 +1 @@\n+six\n"
			if d, err := h.Diff(ctx, "/memories/status.md", 6); err != nil || d != want {
				t.Errorf("diff with the earlier side redacted:\n%s%v\nwant\n%s", d, err, want)
			}

			// A change may touch a file twice: its diff runs from before the first time.
			b, err := f.store.Apply(ctx, "update", func(tx *vfs.Tx) error {
				p := vfs.MustResolve
				if err := tx.CreateFile(p("/memories/twice.md"), []byte("first\n")); err != nil {
					return err
				}
				if err := tx.WriteFile(p("/memories/twice.md"), []byte("second\n")); err != nil {
					return err
				}
				if err := tx.Rename(p("/memories/other.md"), p("/memories/o2.md")); err != nil {
					return err
				}
				return tx.WriteFile(p("/memories/o2.md"), []byte("w\n"))
			})
			if err != nil {
				t.Fatal(err)
			}
			n := b.Version
			want = fmt.Sprintf("--- /memories/twice.md (before @%d)\n+++ /memories/twice.md@%d\n@@ -0,0 +1 @@\n+second\n", n, n)
			if d, err := h.Diff(ctx, "/memories/twice.md"); err != nil || d != want {
				t.Errorf("diff of a file created and written in one change:\n%s%v\nwant\n%s", d, err, want)
			}
			want = fmt.Sprintf("--- /memories/other.md@5\n+++ /memories/o2.md@%d\n@@ -1 +1 @@\n-z\n+w\n", n)
			if d, err := h.Diff(ctx, "/memories/o2.md", n); err != nil || d != want {
				t.Errorf("diff of a file renamed and written in one change:\n%s%v\nwant\n%s", d, err, want)
			}
		})
	}
}

// Where pruning dropped versions, the history no longer guesses: show, diff and restore
// refuse what they would need a dropped version for, instead of answering with the
// content of a later one, and answer as before from there on.
func TestPrunedHistoryDoesNotGuess(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := vfs.HistoryConfig{MaxVersions: 1, Now: func() time.Time { return clock }}
	h := handlers.New(files.NewMemoryStore(vfs.WithHistory(cfg)), handlers.DefaultLimits())
	ctx := context.Background()
	for _, text := range []string{"a\n", "b\n", "c\n"} { // versions 1, 2, 3
		clock = clock.Add(2 * time.Hour) // a pruning pass at each change
		if _, err := h.Write(ctx, "/memories/f.md", []byte(text), nil); err != nil {
			t.Fatal(err)
		}
	}
	refused := "the history was pruned up to version 2 by its limits (-history-max-age, -history-max-bytes, -history-max-versions) and no longer knows that state: choose a later version"
	if data, err := h.Show(ctx, "/memories/f.md", 1); err == nil || err.Error() != refused {
		t.Errorf("show of a pruned version: %q, %v", data, err)
	}
	if d, err := h.Diff(ctx, "/memories/f.md", 1, 3); err == nil || err.Error() != refused {
		t.Errorf("diff from a pruned version: %q, %v", d, err)
	}
	if res, err := h.Restore(ctx, "/memories/f.md", 1); err == nil || err.Error() != refused {
		t.Errorf("restore to a pruned version: %+v, %v", res, err)
	}
	if data, err := h.Show(ctx, "/memories/f.md", 2); err != nil || string(data) != "b\n" {
		t.Errorf("show after the last pruned version: %q, %v", data, err)
	}
	if _, err := h.Restore(ctx, "/memories/f.md", 2); err != nil {
		t.Fatal(err)
	}
	if data, _, err := h.Read(ctx, "/memories/f.md"); err != nil || string(data) != "b\n" {
		t.Errorf("after the restore to version 2: %q, %v", data, err)
	}
}

// A history that has a file where another file's directory must be, after one version (a
// directory made by hand where a file had been, which the history never saw), refuses a
// restore to that version with the two paths, and changes nothing, rather than restore the
// first and fail on the second.
func TestRestoreOfAFileAndAFileBelowIt(t *testing.T) {
	dir := t.TempDir()
	h := handlers.New(openOS(t, dir), handlers.DefaultLimits())
	ctx := context.Background()
	exec := func(in map[string]any) {
		t.Helper()
		if res := h.Exec(ctx, in); res.IsError {
			t.Fatalf("%v: %s", in, res.Text)
		}
	}
	exec(map[string]any{"command": "create", "path": "/memories/d/e", "file_text": "a file\n"}) // 1
	exec(map[string]any{"command": "delete", "path": "/memories/d"})                            // 2
	os.MkdirAll(filepath.Join(dir, "d", "e"), 0o700)
	os.WriteFile(filepath.Join(dir, "d", "e", "c.md"), []byte("by hand\n"), 0o600)
	exec(map[string]any{"command": "delete", "path": "/memories/d"}) // 3: c.md as it was before
	before := filesOf(t, h)
	_, err := h.Restore(ctx, "/memories", 1)
	want := "/memories/d/e/c.md cannot be restored: the history has /memories/d/e as a file after version 1 too, where its directory must be (an edit made outside memory-mcp that the history did not see)"
	if err == nil || err.Error() != want {
		t.Errorf("restore: %v\nwant: %s", err, want)
	}
	if after := filesOf(t, h); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the refused restore changed the memory: %v, was %v", after, before)
	}
	if vs, _ := h.Log(ctx, handlers.LogQuery{}); len(vs) != 3 {
		t.Errorf("the refused restore made versions: %+v", vs)
	}
}

// A redaction refused because files still hold the content names the same one every time:
// the first by name.
func TestRedactNamesTheFirstHolder(t *testing.T) {
	ctx := context.Background()
	h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	for _, p := range []string{"/memories/z.md", "/memories/b.md", "/memories/m.md"} {
		if r := h.Exec(ctx, map[string]any{"command": "create", "path": p, "file_text": "the same\n"}); r.IsError {
			t.Fatal(r.Text)
		}
	}
	for range 20 {
		if _, err := h.Redact(ctx, "/memories/z.md", 1); err == nil || !strings.HasPrefix(err.Error(), "/memories/b.md still holds this content") {
			t.Fatalf("redact of a content three files hold: %v, want the refusal naming /memories/b.md", err)
		}
	}
}
