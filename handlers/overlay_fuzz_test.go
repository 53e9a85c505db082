package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// An overlay answers every command as a memory holding the same files does, keeps the same
// history, and keeps what it was told when it is opened again: its deletes and renames of
// what the lower directory holds stay done. Each op is a model's command, a person's write
// or a restore on one of a few paths (files and directories that may take each other's
// place), or (op%10 == 7) the overlay opened anew.
func FuzzOverlay(f *testing.F) {
	f.Add(uint8(0b111), []byte{3, 2, 7, 0, 7, 5})
	f.Add(uint8(0b101), []byte{24, 9, 7, 13, 7, 12, 23, 1, 0, 1, 7, 38})
	f.Add(uint8(0b011), []byte{4, 1, 0, 1, 7, 33, 4, 7, 48, 19})
	names := []string{"a.md", "d", "d/b.md", "d/e", "d/e/c.md", "f.md", "d/f.md"}
	lowerFiles := []string{"a.md", "d/b.md", "d/e/c.md"}
	f.Fuzz(func(t *testing.T, lowerSet uint8, ops []byte) {
		if len(ops) > 40 {
			return
		}
		ctx := context.Background()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		cfg := vfs.HistoryConfig{Now: func() time.Time { return clock }}
		seed := map[string][]byte{}
		for i, n := range lowerFiles {
			if lowerSet&(1<<i) != 0 {
				seed[n] = []byte("alpha\nbeta\n")
			}
		}
		lowerDir, upperDir := filepath.Join(t.TempDir(), "lower"), filepath.Join(t.TempDir(), "upper")
		writeHostTree(t, lowerDir, seed)
		var overlay *vfs.Store
		open := func() *handlers.Memory {
			if overlay != nil {
				overlay.Close()
			}
			var err error
			if overlay, err = files.OpenOverlayStore(lowerDir, upperDir, vfs.WithHistory(cfg)); err != nil {
				t.Fatal(err)
			}
			return handlers.New(overlay, handlers.DefaultLimits())
		}
		ov := open()
		t.Cleanup(func() { overlay.Close() })
		m := files.NewMemFs()
		writeAferoTree(t, m, seed)
		refStore := vfs.NewStore(files.NewAferoStorage(m, vfs.WithHistory(cfg)))
		ref := handlers.New(refStore, handlers.DefaultLimits())
		same := func(what string, got, want any) {
			if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
				t.Fatalf("%s:\noverlay: %s\n memory: %s", what, g, w)
			}
		}
		for i, op := range ops {
			clock = clock.Add(time.Minute)
			p, q := "/memories/"+names[int(op/10)%len(names)], "/memories/"+names[int(op/70+op)%len(names)]
			input := fuzzCommand(op, i, p, q)
			switch op % 10 {
			case 7:
				ov = open()
				input = map[string]any{"command": "view", "path": "/memories"}
			case 8:
				dir := "/memories"
				if op/10%2 == 1 {
					dir = "/memories/d"
				}
				seq := uint64(op/20) % uint64(i+1)
				r1, err1 := ov.Restore(ctx, dir, seq)
				r2, err2 := ref.Restore(ctx, dir, seq)
				same(fmt.Sprintf("op %d: restore %s@%d", i, dir, seq), []any{r1, err1}, []any{r2, err2})
				continue
			case 9:
				b1, err1 := ov.Write(ctx, p, []byte("beta "+strconv.Itoa(i)), nil)
				b2, err2 := ref.Write(ctx, p, []byte("beta "+strconv.Itoa(i)), nil)
				same(fmt.Sprintf("op %d: write %s", i, p), []any{b1 != nil, err1}, []any{b2 != nil, err2})
				continue
			}
			got, want := ov.Exec(ctx, input), ref.Exec(ctx, input)
			if got.Text != want.Text || got.IsError != want.IsError {
				t.Fatalf("op %d %v:\noverlay: %q (error %v)\n memory: %q (error %v)", i, input, got.Text, got.IsError, want.Text, want.IsError)
			}
		}
		same("files", filesOf(t, ov), filesOf(t, ref))
		l1, err1 := ov.Log(ctx, handlers.LogQuery{})
		l2, err2 := ref.Log(ctx, handlers.LogQuery{})
		same("log", []any{l1, err1}, []any{l2, err2})
		// The same store exports to the same bytes on either, and the stream imports.
		var e1, e2 bytes.Buffer
		err1, err2 = overlay.Export(ctx, &e1, true), refStore.Export(ctx, &e2, true)
		if err1 != nil || err2 != nil || !bytes.Equal(e1.Bytes(), e2.Bytes()) {
			t.Fatalf("exports differ (%v, %v)", err1, err2)
		}
		if _, err := files.NewMemoryStore().Import(ctx, &e1, vfs.ImportLimits{}); err != nil {
			t.Fatalf("the export does not import: %v", err)
		}
	})
}

// fuzzCommand is the model's command that op makes, in step i, on p (and q, a rename's
// destination): op%10 from 0 to 6 is create, str_replace, insert, delete, rename, view of p
// and view of /memories; nil for the other ops.
func fuzzCommand(op byte, i int, p, q string) map[string]any {
	switch op % 10 {
	case 0:
		return map[string]any{"command": "create", "path": p, "file_text": "beta " + strconv.Itoa(i) + "\n"}
	case 1:
		return map[string]any{"command": "str_replace", "path": p, "old_str": "beta", "new_str": "gamma"}
	case 2:
		return map[string]any{"command": "insert", "path": p, "insert_line": 1, "insert_text": "line " + strconv.Itoa(i)}
	case 3:
		return map[string]any{"command": "delete", "path": p}
	case 4:
		return map[string]any{"command": "rename", "old_path": p, "new_path": q}
	case 5:
		return map[string]any{"command": "view", "path": p}
	case 6:
		return map[string]any{"command": "view", "path": "/memories"}
	}
	return nil
}
