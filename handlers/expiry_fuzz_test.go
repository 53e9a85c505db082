package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// Every backend expires the same files: whatever the model viewed, made, edited, deleted
// and moved, and however the clock went, each expiry (or dry run) on the os, overlay and
// PostgreSQL backends reports what the memory backend reports, and leaves the same files
// and history; so do two os stores on one directory taking turns (bit k of who picks the
// one for the k-th step), each seeing the other's uses. Each op is two bytes: what to do,
// and on which paths.
func FuzzExpiryAgrees(f *testing.F) {
	f.Add([]byte{1, 0, 5, 2, 0, 0, 5, 3, 5, 4}, uint64(0b0110))
	f.Add([]byte{1, 2, 1, 4, 5, 2, 4, 14, 0, 3, 5, 3, 5, 3}, uint64(0b1011010))
	f.Add([]byte{1, 2, 1, 5, 5, 3, 2, 2, 4, 21, 5, 1, 5, 12, 3, 0, 5, 4}, uint64(0b100110101))
	f.Add([]byte{1, 0, 5, 1, 0, 0, 5, 2, 5, 3}, uint64(0b01010))
	dsn := vfstest.PostgresDSN(f)
	db, err := postgres.Open(context.Background(), dsn, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(db.Close)
	f.Fuzz(func(t *testing.T, ops []byte, who uint64) {
		if len(ops) > 48 {
			return
		}
		ctx := context.Background()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		opt := vfs.WithHistory(vfs.HistoryConfig{Now: now})
		stores, kinds := everyBackend(t, db, opt)
		shared := t.TempDir()
		stores = append(stores, openOS(t, shared, opt), openOS(t, shared, opt))
		kinds = append(kinds, "os (one of two)", "os (the other)")
		var mems []*handlers.Memory
		for _, st := range stores {
			if err := st.TrackAccess(now); err != nil {
				t.Fatal(err)
			}
			mems = append(mems, handlers.New(st, handlers.DefaultLimits()))
		}
		steps := 0
		agree := func(what string, step func(h *handlers.Memory) string) {
			t.Helper()
			want := step(mems[0])
			for i, h := range mems[1:] {
				if k := i + 1; k >= 4 && steps < 64 && who>>steps&1 != uint64(k-4) && !strings.HasPrefix(what, "the ") {
					continue // the other one's turn
				}
				if got := step(h); got != want {
					t.Fatalf("%s:\n%8s: %s\n  memory: %s", what, kinds[i+1], got, want)
				}
			}
			steps++
		}
		names := []string{"a.md", "d/b.md", "d/e/c.md", "d", "f.md"}
		for i := 0; i+1 < len(ops); i += 2 {
			a, b := int(ops[i]), int(ops[i+1])
			p, q := "/memories/"+names[b%len(names)], "/memories/"+names[b/len(names)%len(names)]
			var input map[string]any
			switch a % 6 {
			case 0:
				input = map[string]any{"command": "view", "path": p}
			case 1:
				input = map[string]any{"command": "create", "path": p, "file_text": "x\n"}
			case 2:
				input = map[string]any{"command": "insert", "path": p, "insert_line": 0, "insert_text": "y"}
			case 3:
				input = map[string]any{"command": "delete", "path": p}
			case 4:
				input = map[string]any{"command": "rename", "old_path": p, "new_path": q}
			case 5:
				clock = clock.Add(time.Duration(b%8) * time.Hour)
				dry := b&8 != 0
				agree(fmt.Sprintf("expire at %v (dry run %v)", clock, dry), func(h *handlers.Memory) string {
					gone, err := h.Store().Expire(ctx, 3*time.Hour, dry)
					return fmt.Sprintf("%+v %v", gone, err)
				})
				continue
			}
			clock = clock.Add(time.Hour / 2)
			agree(fmt.Sprint(input), func(h *handlers.Memory) string {
				r := h.Exec(ctx, input)
				return fmt.Sprintf("%q %v", r.Text, r.IsError)
			})
		}
		agree("the files", func(h *handlers.Memory) string { return fmt.Sprint(filesOf(t, h)) })
		agree("the history", func(h *handlers.Memory) string {
			log, err := h.Log(ctx, handlers.LogQuery{})
			for i := range log {
				log[i].Time = log[i].Time.UTC()
			}
			return fmt.Sprintf("%+v %v", log, err)
		})
	})
}
