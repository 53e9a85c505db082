package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// Whatever path and version a person's request names, a failure is a refusal that says
// what to do (the web page's 4xx), never a storage failure (its 500), and never names the
// host's directory. The memory has files, directories and history, and a mount.
func FuzzPeopleRefusals(f *testing.F) {
	for _, p := range []string{"/memories/a.md", "/memories/d", "/memories/d/b.md", "/memories/m", "/memories/m/c.md", "/memories", "", "/", "/memories/../etc", "/memories/a.md/x", "/memories/\x00", "memories/a.md", "/memories/d/", "/memories//a.md", "/memories/nope"} {
		f.Add(p, uint8(0), uint64(1))
	}
	f.Add("/memories/a.md", uint8(9), uint64(1<<63))
	f.Fuzz(func(t *testing.T, p string, op uint8, seq uint64) {
		ctx := context.Background()
		dir := t.TempDir()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		open := func(sub string) *handlers.Memory {
			s, err := files.OpenOSStore(dir+"/"+sub, vfs.WithHistory(vfs.HistoryConfig{Now: func() time.Time { return clock }}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return handlers.New(s, handlers.DefaultLimits())
		}
		mount := open("mount")
		h := handlers.New(open("main").Store(), handlers.DefaultLimits(), handlers.WithMounts(handlers.Mount{Name: "m", Memory: mount}))
		for _, in := range []map[string]any{
			{"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"},
			{"command": "create", "path": "/memories/d/b.md", "file_text": "beta\n"},
			{"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "gamma"},
			{"command": "create", "path": "/memories/m/c.md", "file_text": "in the mount\n"},
		} {
			if res := h.Exec(ctx, in); res.IsError {
				t.Fatal(res.Text)
			}
		}
		var err error
		switch op % 11 {
		case 0:
			_, _, err = h.Read(ctx, p)
		case 1:
			_, err = h.Show(ctx, p, seq)
		case 2:
			_, err = h.Diff(ctx, p)
		case 3:
			_, err = h.Diff(ctx, p, seq)
		case 4:
			_, err = h.Diff(ctx, p, seq, seq/2)
		case 5:
			_, err = h.Log(ctx, handlers.LogQuery{Path: p})
		case 6:
			_, err = h.Write(ctx, p, []byte("by a person"), nil)
		case 7:
			_, err = h.Remove(ctx, p, nil)
		case 8:
			_, err = h.Restore(ctx, p, seq)
		case 9:
			_, err = h.Redact(ctx, p, seq)
		case 10:
			_, _, err = h.Search(ctx, p)
		}
		var refusal *handlers.Refusal
		if err != nil && !errors.As(err, &refusal) {
			t.Fatalf("op %d on %q@%d: %T %v, want a refusal", op%11, p, seq, err, err)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Fatalf("op %d on %q@%d: %v names the host directory", op%11, p, seq, err)
		}
	})
}
