package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// The web page's operations on every backend: the tree with sizes and times, reading,
// conditional writes and deletes recorded as actor web, the limits and the credential
// guard, refusals worded for a person, and search.
func TestOperationsForPeople(t *testing.T) {
	seed := map[string][]byte{
		"notes.md":       []byte("# Notes\nThe user prefers tabs.\n"),
		"projects/":      nil,
		"projects/a.md":  []byte("Alpha ships on TUESDAY.\n"),
		".hidden.md":     []byte("hidden, but the model can read it\n"),
		"long.md":        []byte(strings.Repeat("é", 300) + "needle" + strings.Repeat("ü", 300) + "\n"),
		"projects/b.txt": []byte("nothing here\n"),
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fx := b.open(t, seed, noWrap)
			h := handlers.New(fx.store, handlers.Limits{MaxFileBytes: 64, MaxStoreBytes: 2000}, handlers.RejectSecrets())
			ctx := vfs.WithActor(context.Background(), vfs.ActorWeb)
			refused := func(err error, want string) {
				t.Helper()
				var r *handlers.Refusal
				if !errors.As(err, &r) || !strings.Contains(r.Msg, want) {
					t.Errorf("got %v, want a refusal saying %q", err, want)
				}
			}

			root, truncated, err := h.Files(ctx)
			if err != nil || truncated {
				t.Fatal(err, truncated)
			}
			var names []string
			var walk func(n handlers.FileNode)
			walk = func(n handlers.FileNode) {
				names = append(names, n.Path)
				for _, c := range n.Children {
					walk(c)
				}
			}
			walk(root)
			if got := strings.Join(names, " "); got != "/memories /memories/.hidden.md /memories/long.md /memories/notes.md /memories/projects /memories/projects/a.md /memories/projects/b.txt" {
				t.Errorf("tree: %s", got)
			}
			if root.Size != int64(len(seed["notes.md"])+len(seed["projects/a.md"])+len(seed[".hidden.md"])+len(seed["long.md"])+len(seed["projects/b.txt"])) {
				t.Errorf("root size %d", root.Size)
			}

			data, digest, err := h.Read(ctx, "/memories/notes.md")
			if err != nil || string(data) != string(seed["notes.md"]) || digest != vfs.DigestOf(data) {
				t.Fatalf("read: %q %v", data, err)
			}
			_, _, err = h.Read(ctx, "/memories/projects")
			refused(err, "is a directory")
			_, _, err = h.Read(ctx, "/memories/gone.md")
			refused(err, "does not exist")
			_, _, err = h.Read(ctx, "/etc/passwd")
			refused(err, "not a memory path")

			// A write based on what the person saw; then one based on a stale view.
			b1, err := h.Write(ctx, "/memories/notes.md", []byte("# Notes\nSpaces.\n"), &digest)
			if err != nil || b1 == nil || b1.Actor != vfs.ActorWeb || b1.Command != "edit" {
				t.Fatalf("write: %+v %v", b1, err)
			}
			_, err = h.Write(ctx, "/memories/notes.md", []byte("stale\n"), &digest)
			refused(err, "changed by someone else")
			var none vfs.Digest
			_, err = h.Write(ctx, "/memories/notes.md", []byte("new?\n"), &none)
			refused(err, "created by someone else")
			if b, err := h.Write(ctx, "/memories/new/deep/file.md", []byte("made on the page\n"), &none); err != nil || b.Changes[0].Kind != vfs.Created {
				t.Errorf("create through write: %+v %v", b, err)
			}
			if b, err := h.Write(ctx, "/memories/new/deep/file.md", []byte("made on the page\n"), nil); err != nil || b != nil {
				t.Errorf("an unchanged write: %+v %v", b, err)
			}
			_, err = h.Write(ctx, "/memories/notes.md/below.md", []byte("x"), nil)
			refused(err, "is a file")
			_, err = h.Write(ctx, "/memories/projects", []byte("x"), nil)
			refused(err, "is a directory")
			_, err = h.Write(ctx, "/memories", []byte("x"), nil)
			refused(err, "itself cannot be changed")
			_, err = h.Write(ctx, "/memories/big.md", []byte(strings.Repeat("x", 65)), nil)
			refused(err, "over the limit of 64 bytes")
			_, err = h.Write(ctx, "/memories/key.md", []byte("GITHUB_TOKEN=ghp_R7xK2mP9qL4vN8wT3yB6cF1hJ5sD0gA2eZ4u"), nil)
			refused(err, "credential")

			// Removing: conditional on a file's content, or a whole directory.
			_, d2, _ := h.Read(ctx, "/memories/notes.md")
			_, err = h.Remove(ctx, "/memories/notes.md", &digest)
			refused(err, "changed by someone else")
			if b, err := h.Remove(ctx, "/memories/notes.md", &d2); err != nil || b.Command != "delete" || b.Changes[0].Kind != vfs.Deleted {
				t.Errorf("remove: %+v %v", b, err)
			}
			if b, err := h.Remove(ctx, "/memories/projects", nil); err != nil || len(b.Changes) != 2 {
				t.Errorf("remove a directory: %+v %v", b, err)
			}
			_, err = h.Remove(ctx, "/memories/projects", nil)
			refused(err, "does not exist")

			vs, err := h.Log(ctx, handlers.LogQuery{Path: "/memories/notes.md"})
			if err != nil || len(vs) != 2 || vs[0].Command != "delete" || vs[1].Command != "edit" || vs[0].Actor != vfs.ActorWeb {
				t.Errorf("history of notes.md: %+v %v", vs, err)
			}
			root, _, _ = h.Files(ctx)
			if root.Changed.IsZero() || root.Children[len(root.Children)-1].Changed.IsZero() {
				t.Errorf("no last-change time: %+v", root)
			}

			// Search: names and lines, ignoring case, long lines cut around the match.
			matches, more, err := h.Search(ctx, "NEEDLE")
			if err != nil || more || len(matches) != 1 || matches[0].Line != 1 || !strings.Contains(matches[0].Text, "needle") ||
				len(matches[0].Text) > handlers.MaxMatchText+8 || !strings.HasPrefix(matches[0].Text, "…") {
				t.Errorf("search: %+v %v %v", matches, more, err)
			}
			if matches, _, _ := h.Search(ctx, "deep"); len(matches) != 0 {
				t.Errorf("a directory name matched: %+v", matches)
			}
			if matches, _, _ := h.Search(ctx, "FILE.md"); len(matches) != 1 || matches[0].Line != 0 || matches[0].Path != "/memories/new/deep/file.md" {
				t.Errorf("a file name: %+v", matches)
			}
			if matches, _, _ := h.Search(ctx, "model can"); len(matches) != 1 || matches[0].Path != "/memories/.hidden.md" {
				t.Errorf("a hidden file: %+v", matches)
			}
			_, _, err = h.Search(ctx, "  ")
			refused(err, "type something")
			_, _, err = h.Search(ctx, strings.Repeat("x", handlers.MaxSearchBytes+1))
			refused(err, "at most")

			ro := handlers.New(fx.store, handlers.DefaultLimits(), handlers.ReadOnly())
			_, err = ro.Write(ctx, "/memories/x.md", []byte("x"), nil)
			refused(err, "read-only")
			_, err = ro.Remove(ctx, "/memories/long.md", nil)
			refused(err, "read-only")
		})
	}
}

// Search stops at MaxMatches and says there were more.
func TestSearchBound(t *testing.T) {
	fx := backends()[1].open(t, map[string][]byte{"many.md": []byte(strings.Repeat("hit\n", handlers.MaxMatches+5))}, noWrap)
	h := handlers.New(fx.store, handlers.DefaultLimits())
	matches, more, err := h.Search(context.Background(), "hit")
	if err != nil || len(matches) != handlers.MaxMatches || !more {
		t.Errorf("%d matches, more %v, %v", len(matches), more, err)
	}
}

// The resources' list is every file of the memory, however many: it is not cut where the
// page's tree is.
func TestFileListHasEveryFile(t *testing.T) {
	store := files.NewMemoryStore()
	n := handlers.MaxTreeEntries + 50
	_, err := store.Apply(context.Background(), "create", func(tx *vfs.Tx) error {
		for i := range n {
			if err := tx.CreateFile(vfs.MustResolve(fmt.Sprintf("/memories/d%02d/f%05d.md", i%100, i)), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h := handlers.New(store, handlers.DefaultLimits())
	files, err := h.FileList(context.Background())
	if err != nil || len(files) != n {
		t.Fatalf("FileList: %d files, %v; want %d", len(files), err, n)
	}
	if _, truncated, _ := h.Files(context.Background()); !truncated {
		t.Error("the page's tree of as many entries is not said to be cut")
	}
}
