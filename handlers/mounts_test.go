package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
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
