package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// plantLinks puts symbolic links that lead outside into dir, next to an ordinary file, and
// returns the directory they point into.
func plantLinks(t *testing.T, dir, outside string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(outside, "outdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o600)
	os.WriteFile(filepath.Join(outside, "outdir", "inside.txt"), []byte("outside file\n"), 0o600)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("ok\n"), 0o600)
	rel, _ := filepath.Rel(dir, filepath.Join(outside, "secret.txt"))
	for name, target := range map[string]string{
		"file-link":    filepath.Join(outside, "secret.txt"),
		"rel-link":     rel,
		"dir-link":     filepath.Join(outside, "outdir"),
		"dangling":     filepath.Join(outside, "nothere.txt"),
		"dangling-rel": "../../nothere.txt",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// Symbolic links planted in the storage that lead outside are refused, as either path of
// every command, with the escape message; the outside stays untouched.
func TestSymlinksOutsideAreRefused(t *testing.T) {
	stores := map[string]func(t *testing.T, outside string) (*vfs.Store, []string){
		"os": func(t *testing.T, outside string) (*vfs.Store, []string) {
			dir := filepath.Join(t.TempDir(), "store")
			plantLinks(t, dir, outside)
			s, err := files.OpenOSStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, []string{dir}
		},
		"overlay-lower": func(t *testing.T, outside string) (*vfs.Store, []string) {
			lower := filepath.Join(t.TempDir(), "lower")
			upper := filepath.Join(t.TempDir(), "upper")
			plantLinks(t, lower, outside)
			s, err := files.OpenOverlayStore(lower, upper)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, []string{lower, upper}
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "outside")
			store, dirs := open(t, outside)
			before := hashDir(t, outside)
			h := handlers.New(store, handlers.DefaultLimits())
			var calls []map[string]any
			for _, link := range []string{"file-link", "rel-link", "dir-link", "dangling", "dangling-rel"} {
				p := "/memories/" + link
				calls = append(calls,
					map[string]any{"command": "view", "path": p},
					map[string]any{"command": "create", "path": p, "file_text": "x"},
					map[string]any{"command": "str_replace", "path": p, "old_str": "secret", "new_str": "pwned"},
					map[string]any{"command": "insert", "path": p, "insert_line": float64(0), "insert_text": "pwned"},
					map[string]any{"command": "delete", "path": p},
					map[string]any{"command": "rename", "old_path": p, "new_path": "/memories/moved"},
					map[string]any{"command": "rename", "old_path": "/memories/ok.txt", "new_path": p},
				)
			}
			through := "/memories/dir-link/inside.txt"
			calls = append(calls,
				map[string]any{"command": "view", "path": through},
				map[string]any{"command": "view", "path": "/memories/dir-link"},
				map[string]any{"command": "create", "path": "/memories/dir-link/new.txt", "file_text": "x"},
				map[string]any{"command": "str_replace", "path": through, "old_str": "outside", "new_str": "pwned"},
				map[string]any{"command": "insert", "path": through, "insert_line": float64(0), "insert_text": "pwned"},
				map[string]any{"command": "delete", "path": through},
				map[string]any{"command": "rename", "old_path": through, "new_path": "/memories/stolen.txt"},
				map[string]any{"command": "rename", "old_path": "/memories/ok.txt", "new_path": "/memories/dir-link/planted.txt"},
				map[string]any{"command": "rename", "old_path": "/memories/ok.txt", "new_path": "/memories/dir-link/sub/planted.txt"},
			)
			for _, call := range calls {
				res := h.Exec(context.Background(), call)
				sent, _ := call["path"].(string)
				if sent == "" {
					sent = call["old_path"].(string)
					if !strings.Contains(sent, "link") && !strings.Contains(sent, "dangling") {
						sent = call["new_path"].(string)
					}
				}
				want := "Error: Path " + sent + " would escape /memories directory"
				if !res.IsError || res.Text != want {
					t.Errorf("%v:\n got %q\nwant %q", call, res.Text, want)
				}
				for _, d := range append(dirs, outside) {
					if strings.Contains(res.Text, d) {
						t.Errorf("%v: output shows a host path: %q", call, res.Text)
					}
				}
			}
			if after := hashDir(t, outside); after != before {
				t.Errorf("the directory outside the storage changed")
			}
			// The listing neither follows nor shows the links.
			res := h.Exec(context.Background(), map[string]any{"command": "view", "path": "/memories"})
			want := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n3B\t/memories\n3B\t/memories/ok.txt"
			if res.Text != want {
				t.Errorf("listing:\n%s\nwant\n%s", res.Text, want)
			}
		})
	}
}

// Links that stay inside, and special files, are not regular files: view and the edits say
// so, listings leave them out, and delete removes the link itself.
func TestSymlinkInsideAndSpecialFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "target.txt"), []byte("target\n"), 0o600)
	os.Symlink("target.txt", filepath.Join(dir, "in-link"))
	if err := mkfifo(filepath.Join(dir, "fifo")); err != nil {
		t.Fatal(err)
	}
	s, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := handlers.New(s, handlers.DefaultLimits())
	for _, p := range []string{"/memories/in-link", "/memories/fifo"} {
		for _, call := range []map[string]any{
			{"command": "view", "path": p},
			{"command": "str_replace", "path": p, "old_str": "target", "new_str": "x"},
			{"command": "insert", "path": p, "insert_line": float64(0), "insert_text": "x"},
		} {
			res := h.Exec(context.Background(), call)
			if want := "Error: The path " + p + " is not a regular file or directory"; res.Text != want {
				t.Errorf("%v: got %q, want %q", call, res.Text, want)
			}
		}
	}
	res := h.Exec(context.Background(), map[string]any{"command": "view", "path": "/memories"})
	if strings.Contains(res.Text, "in-link") || strings.Contains(res.Text, "fifo") {
		t.Errorf("listing shows a link or a fifo:\n%s", res.Text)
	}
	res = h.Exec(context.Background(), map[string]any{"command": "delete", "path": "/memories/in-link"})
	if res.IsError {
		t.Fatalf("delete of an inside link: %s", res.Text)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "target.txt")); err != nil || string(data) != "target\n" {
		t.Errorf("deleting the link touched its target: %q, %v", data, err)
	}
}

// Links planted in the storage that lead into the server's own files (the history, the
// locks), by a relative or an absolute target or through a directory, are refused like
// links that leave it: the model can neither read nor change the history through them.
func TestSymlinksIntoBookkeepingAreRefused(t *testing.T) {
	plant := func(t *testing.T, dir string) {
		t.Helper()
		for name, target := range map[string]string{
			"h":     ".memory-mcp-history",
			"habs":  filepath.Join(dir, ".memory-mcp-history"),
			"lock":  ".memory-mcp.lock",
			"d/up":  "../.memory-mcp-history",
			"round": ".memory-mcp-history/..",
		} {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700)
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, open := range map[string]func(t *testing.T) (*vfs.Store, string){
		"os": func(t *testing.T) (*vfs.Store, string) {
			dir := filepath.Join(t.TempDir(), "store")
			s, err := files.OpenOSStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			plant(t, dir)
			return s, dir
		},
		"overlay-upper": func(t *testing.T) (*vfs.Store, string) {
			lower, upper := filepath.Join(t.TempDir(), "lower"), filepath.Join(t.TempDir(), "upper")
			os.MkdirAll(lower, 0o700)
			s, err := files.OpenOverlayStore(lower, upper)
			if err != nil {
				t.Fatal(err)
			}
			plant(t, upper)
			return s, upper
		},
		"overlay-lower": func(t *testing.T) (*vfs.Store, string) {
			lower, upper := filepath.Join(t.TempDir(), "lower"), filepath.Join(t.TempDir(), "upper")
			ls, err := files.OpenOSStore(lower) // a store of its own, with a history
			if err != nil {
				t.Fatal(err)
			}
			handlers.New(ls, handlers.DefaultLimits()).Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/low.md", "file_text": "low\n"})
			ls.Close()
			plant(t, lower)
			s, err := files.OpenOverlayStore(lower, upper)
			if err != nil {
				t.Fatal(err)
			}
			return s, lower
		},
	} {
		t.Run(name, func(t *testing.T) {
			store, dir := open(t)
			t.Cleanup(func() { store.Close() })
			h := handlers.New(store, handlers.DefaultLimits())
			for _, call := range []map[string]any{
				{"command": "create", "path": "/memories/notes.md", "file_text": "one\n"},
				{"command": "str_replace", "path": "/memories/notes.md", "old_str": "one", "new_str": "two"},
			} {
				if res := h.Exec(context.Background(), call); res.IsError {
					t.Fatalf("%v: %s", call, res.Text)
				}
			}
			hist := filepath.Join(dir, ".memory-mcp-history")
			if _, err := os.Stat(hist); err != nil {
				t.Fatalf("no history to attack: %v", err)
			}
			before := hashDir(t, hist)
			var calls []map[string]any
			for _, p := range []string{"/memories/h", "/memories/habs", "/memories/d/up", "/memories/round/.memory-mcp-history"} {
				calls = append(calls,
					map[string]any{"command": "view", "path": p},
					map[string]any{"command": "view", "path": p + "/log"},
					map[string]any{"command": "view", "path": p + "/wal"},
					map[string]any{"command": "create", "path": p + "/objects/evil", "file_text": "x"},
					map[string]any{"command": "str_replace", "path": p + "/log", "old_str": "a", "new_str": "b"},
					map[string]any{"command": "insert", "path": p + "/log", "insert_line": float64(0), "insert_text": "x"},
					map[string]any{"command": "delete", "path": p + "/log"},
					map[string]any{"command": "delete", "path": p + "/objects"},
					map[string]any{"command": "rename", "old_path": p + "/log", "new_path": "/memories/stolen"},
					map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": p + "/log2"},
				)
			}
			calls = append(calls,
				map[string]any{"command": "view", "path": "/memories/lock"},
				map[string]any{"command": "str_replace", "path": "/memories/lock", "old_str": "a", "new_str": "b"},
			)
			for _, call := range calls {
				res := h.Exec(context.Background(), call)
				sent, _ := call["path"].(string)
				if sent == "" {
					sent = call["old_path"].(string)
					if !strings.Contains(sent, "/h") && !strings.Contains(sent, "/d/") && !strings.Contains(sent, "round") {
						sent = call["new_path"].(string)
					}
				}
				want := "Error: Path " + sent + " would escape /memories directory"
				if !res.IsError || res.Text != want {
					t.Errorf("%v:\n got %q\nwant %q", call, res.Text, want)
				}
			}
			// What the resources and the web page read goes through the same jail.
			for _, p := range []string{"/memories/h/log", "/memories/d/up/log", "/memories/habs/log"} {
				if data, _, err := h.Read(context.Background(), p); err == nil {
					t.Errorf("Read %s gave the history's log: %q", p, data)
				}
			}
			if hashDir(t, hist) != before {
				t.Errorf("the history changed through a link")
			}
			if _, err := os.Stat(filepath.Join(dir, "stolen")); err == nil {
				t.Errorf("the history's log was moved out")
			}
			// A link that only passes by the bookkeeping's parent stays an inside link.
			if res := h.Exec(context.Background(), map[string]any{"command": "view", "path": "/memories/d"}); res.IsError {
				t.Errorf("view of a directory holding a link: %s", res.Text)
			}
		})
	}
}
