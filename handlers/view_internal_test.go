package handlers

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// A file larger than one answer can show is viewed by reading it in pieces; the answer is
// the same, byte for byte, as the one made from the whole content, whatever the lines, the
// characters (invalid UTF-8 too) and the range.
func TestViewLargeAnswersAsViewFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "bc", "\n", "\n\n", "é", "日本", "\xff", "\xe6\x97", "\r", "\t", "0123456789"}
	dir := t.TempDir()
	store, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for name, s := range map[string]*vfs.Store{"os": store, "memory": files.NewMemoryStore()} {
		h := New(s, Limits{MaxViewChars: 60, MaxFileBytes: 1 << 20, MaxStoreBytes: 100 << 20})
		for i := range 400 {
			var b bytes.Buffer
			for n := rng.IntN(3000); b.Len() < n; {
				p := pieces[rng.IntN(len(pieces))]
				if rng.IntN(50) == 0 {
					p = string(bytes.Repeat([]byte("x"), rng.IntN(400))) // a long line
				}
				b.WriteString(p)
			}
			content := b.Bytes()
			path := "/memories/f" + string(rune('a'+i%26)) + ".txt"
			h.Exec(context.Background(), map[string]any{"command": "delete", "path": path})
			if err := writeRaw(s, path, content); err != nil {
				t.Fatal(err)
			}
			var vr []int
			args := map[string]any{"command": "view", "path": path}
			if rng.IntN(2) == 0 {
				lines := bytes.Count(content, []byte("\n")) + 1
				vr = []int{rng.IntN(lines+3) - 1, -1}
				if rng.IntN(2) == 0 {
					vr[1] = vr[0] + rng.IntN(lines+1) - 1
				}
				args["view_range"] = []any{float64(vr[0]), float64(vr[1])}
			}
			got := h.Exec(context.Background(), args)
			want := h.viewFile(path, content, vr)
			if got.Text != want.Text || got.IsError != want.IsError {
				t.Fatalf("%s: file %q, range %v:\n got %q\nwant %q", name, content, vr, got.Text, want.Text)
			}
		}
	}
}

// writeRaw puts content at path as it is (no guard, no limit), through the store.
func writeRaw(s *vfs.Store, path string, content []byte) error {
	_, err := s.Apply(context.Background(), "create", func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve(path), content)
	})
	return err
}

// A huge file placed in the storage by hand is viewed without holding it: the view reads
// it in pieces, and what it allocates is a small part of the file's size.
func TestViewOfAHugeFileHoldsLittle(t *testing.T) {
	dir := t.TempDir()
	line := bytes.Repeat([]byte("all work and no play makes a dull memory. "), 2)
	line[len(line)-1] = '\n'
	huge := bytes.Repeat(line, (64<<20)/len(line))
	if err := os.WriteFile(filepath.Join(dir, "huge.md"), huge, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(huge, []byte("\n")) + 1
	huge = nil
	s, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := New(s, DefaultLimits())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := h.Exec(context.Background(), map[string]any{"command": "view", "path": "/memories/huge.md", "view_range": []any{float64(lines - 2), float64(-1)}})
	runtime.ReadMemStats(&after)
	if res.IsError || !bytes.HasSuffix([]byte(res.Text), []byte("\t")) || !bytes.Contains([]byte(res.Text), []byte("dull memory.")) {
		t.Fatalf("view of the end of a huge file: %.200q", res.Text)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("viewing the end of a 64 MiB file allocated %d bytes", alloc)
	}
}
