package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// The history stays true when people edit the store's directory by hand between the
// model's commands: each version's before side is what the file held just before it
// (edits by hand included), show gives what each version left, a restore puts back what each
// file held before the next version changed it, and a restore is undone by a restore
// to the version before it, edits by hand included. Ops are the model's commands and edits
// by hand (op%8 >= 5) on a few paths that may be files or directories; one write by hand in
// four writes a file whose name no path may hold.
func FuzzOutsideEdits(f *testing.F) {
	f.Add([]byte{0, 5, 1, 6, 8, 2, 21, 11, 13}, uint8(1), false)
	f.Add([]byte{8, 5, 16, 4, 13, 3, 17, 8, 14}, uint8(0), true)
	f.Add([]byte{0, 7, 5, 2, 6, 0, 4, 5}, uint8(2), false)
	names := []string{"a.md", "d/b.md", "d", "d/e/c.md", "e.md", "d/e"}
	f.Fuzz(func(t *testing.T, ops []byte, to uint8, dirOnly bool) {
		if len(ops) > 30 {
			return
		}
		ctx := context.Background()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		dir := filepath.Join(t.TempDir(), "store")
		store, err := files.OpenOSStore(dir, vfs.WithHistory(vfs.HistoryConfig{Now: func() time.Time { return clock }}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		h := handlers.New(store, handlers.DefaultLimits())
		host := func(p string) string {
			return filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, "/memories/")))
		}
		snapshot := func() map[string]string { return filesOf(t, h) }
		type seen struct {
			before, after map[string]string
		}
		states := map[uint64]seen{}
		var versions []uint64
		for i, op := range ops {
			clock = clock.Add(time.Minute)
			p, q := "/memories/"+names[int(op/8)%len(names)], "/memories/"+names[int(op/48+op)%len(names)]
			text := "beta " + strconv.Itoa(i) + "\n"
			before := snapshot()
			var res handlers.Result
			switch op % 8 {
			case 0:
				res = h.Exec(ctx, map[string]any{"command": "create", "path": p, "file_text": text})
			case 1:
				res = h.Exec(ctx, map[string]any{"command": "str_replace", "path": p, "old_str": "beta", "new_str": "gamma"})
			case 2:
				res = h.Exec(ctx, map[string]any{"command": "delete", "path": p})
			case 3:
				res = h.Exec(ctx, map[string]any{"command": "rename", "old_path": p, "new_path": q})
			case 4:
				res = h.Exec(ctx, map[string]any{"command": "insert", "path": p, "insert_line": 0, "insert_text": "by the model"})
			case 5, 6:
				name := host(p)
				if op%16 == 14 {
					// A name no path may hold beside it: every command, restore and
					// export leaves it alone, or refuses.
					name = filepath.Join(filepath.Dir(name), "by\nhand")
				}
				os.MkdirAll(filepath.Dir(name), 0o700)
				os.WriteFile(name, []byte("by hand "+text), 0o600)
				continue
			case 7:
				os.RemoveAll(host(p))
				continue
			}
			if res.Batch == nil || res.Batch.Version == 0 {
				continue
			}
			v := res.Batch.Version
			versions = append(versions, v)
			states[v] = seen{before, snapshot()}
		}
		if len(versions) == 0 {
			return
		}
		// Whatever follows, the history that edits by hand, restores and undos leave moves
		// to another store.
		defer func() {
			if t.Failed() {
				return
			}
			var out bytes.Buffer
			if err := store.Export(ctx, &out, true); err != nil {
				t.Fatalf("export: %v", err)
			}
			if _, err := files.NewMemoryStore().Import(ctx, &out, vfs.ImportLimits{}); err != nil {
				t.Fatalf("the export does not import: %v", err)
			}
		}()
		log, err := h.Log(ctx, handlers.LogQuery{})
		if err != nil {
			t.Fatal(err)
		}
		digest := func(m map[string]string, p string) vfs.FileState {
			data, ok := m[p]
			if !ok {
				return vfs.FileState{}
			}
			return vfs.FileState{Exists: true, Size: int64(len(data)), SHA256: vfs.DigestOf([]byte(data))}
		}
		for _, v := range log {
			st := states[v.Seq]
			for _, p := range []string{v.Path, v.NewPath} {
				if p == "" {
					continue
				}
				// Only a change's first touch of a path sees it as it was before the change.
				if first := v.Kind != vfs.Moved || p == v.Path; first && v.Kind != vfs.Created && v.Before(p) != digest(st.before, p) {
					t.Fatalf("version %d (%s %s): before %+v, but the file held %q", v.Seq, v.Kind, p, v.Before(p), st.before[p])
				}
				data, err := h.Show(ctx, p, v.Seq)
				if want, ok := st.after[p]; ok != (err == nil) || string(data) != want {
					t.Fatalf("show %s@%d: %q, %v; want %q (exists: %v)", p, v.Seq, data, err, want, ok)
				}
			}
		}
		target := versions[int(to)%len(versions)]
		top := "/memories"
		if dirOnly {
			top = "/memories/d"
		}
		before := snapshot()
		r, err := h.Restore(ctx, top, target)
		if err != nil {
			if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a refused restore (%v) changed the memory", err)
			}
			return
		}
		// Each file a later version changed holds what it held just before the first of
		// them: the history cannot tell when between two versions an edit by hand came,
		// and so takes it as made just before the next version.
		after := snapshot()
		done := map[string]bool{}
		for i := len(log) - 1; i >= 0; i-- { // oldest first
			v := log[i]
			for _, p := range []string{v.Path, v.NewPath} {
				if v.Seq <= target || p == "" || done[p] || !(p == top || strings.HasPrefix(p, top+"/")) {
					continue
				}
				done[p] = true
				want, ok := states[v.Seq].before[p]
				if v.Kind == vfs.Moved && p == v.NewPath && p != v.Path {
					want, ok = "", false // a rename never replaces: nothing was there
				}
				if got, exists := after[p]; exists != ok || got != want {
					t.Fatalf("restore of %s to %d: %s holds %q (exists: %v), want %q (exists: %v)", top, target, p, got, exists, want, ok)
				}
			}
		}
		if r.Version == 0 {
			return
		}
		if _, err := h.Restore(ctx, top, r.Version-1); err != nil {
			t.Fatalf("undo of the restore: %v", err)
		}
		if got := snapshot(); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("undo of the restore:\n got %v\nwant %v", got, before)
		}
	})
}
