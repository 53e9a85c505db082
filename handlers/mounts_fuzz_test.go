package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// A mount answers as its store would alone, with /memories/team for /memories in every
// path: each op is a model's command, a person's write or read, or a restore, sent once
// under the mount of a memory and once to a memory of its own holding the same files.
// Commands on the main store's paths, in between, leave the mount alone, and a command
// across the two is refused.
func FuzzMounts(f *testing.F) {
	f.Add([]byte{0, 10, 38, 5, 6, 31, 8, 13, 9})
	f.Add([]byte{20, 14, 100, 46, 36, 27, 1, 60, 148})
	f.Add([]byte{30, 2, 68, 3, 18, 12, 25, 140, 200, 99})
	names := []string{"a.md", "d", "d/b.md", "d/e", "d/e/c.md", "team", "team/x.md"}
	// The paths of the alone memory, as the mount shows them (never inside file text).
	shown := regexp.MustCompile(`/memories\b`)
	show := func(s string) string { return shown.ReplaceAllString(s, "/memories/team") }
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 40 {
			return
		}
		ctx := context.Background()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		cfg := vfs.HistoryConfig{Now: func() time.Time { return clock }}
		memory := func() *vfs.Store {
			return vfs.NewStore(files.NewAferoStorage(files.NewMemFs(), vfs.WithHistory(cfg)))
		}
		team := handlers.New(memory(), handlers.DefaultLimits())
		main := handlers.New(memory(), handlers.DefaultLimits(), handlers.WithMounts(handlers.Mount{Name: "team", Memory: team}))
		alone := handlers.New(memory(), handlers.DefaultLimits())
		same := func(what string, got, want any) {
			t.Helper()
			if g, w := fmt.Sprintf("%+v", got), show(fmt.Sprintf("%+v", want)); g != w {
				t.Fatalf("%s:\n mount: %s\n alone: %s", what, g, w)
			}
		}
		for i, op := range ops {
			clock = clock.Add(time.Minute)
			n, m := names[int(op/10)%len(names)], names[int(op/70+op)%len(names)]
			p, q := "/memories/"+n, "/memories/"+m
			input := fuzzCommand(op, i, p, q)
			switch op % 10 {
			case 7:
				// On the main store, or across the two: the mount's files stay as they are.
				p = "/memories/" + names[int(op/10)%5] // not under /memories/team
				in := map[string]any{"command": "create", "path": p, "file_text": "main\n"}
				if op/10%2 == 1 {
					in = map[string]any{"command": "rename", "old_path": p, "new_path": "/memories/team/" + m}
				}
				res := main.Exec(ctx, in)
				if r := regexp.MustCompile(`^Error: Cannot move .* they are in different memory stores`); in["command"] == "rename" && !r.MatchString(res.Text) {
					t.Fatalf("op %d %v: %q", i, in, res.Text)
				}
				continue
			case 8:
				dir := p
				if op/10%2 == 1 {
					dir = "/memories"
				}
				seq := uint64(op/20) % uint64(i+1)
				r1, err1 := main.Restore(ctx, show(dir), seq)
				r2, err2 := alone.Restore(ctx, dir, seq)
				same(fmt.Sprintf("op %d: restore %s@%d", i, dir, seq), []any{r1, err1}, []any{r2, err2})
				continue
			case 9:
				b1, err1 := main.Write(ctx, show(p), []byte("beta "+strconv.Itoa(i)), nil)
				b2, err2 := alone.Write(ctx, p, []byte("beta "+strconv.Itoa(i)), nil)
				same(fmt.Sprintf("op %d: write %s", i, p), []any{b1 != nil, err1}, []any{b2 != nil, err2})
				d1, _, err1 := main.Read(ctx, show(q))
				d2, _, err2 := alone.Read(ctx, q)
				same(fmt.Sprintf("op %d: read %s", i, q), []any{string(d1), err1}, []any{string(d2), err2})
				continue
			}
			sent := map[string]any{}
			for k, v := range input {
				if s, ok := v.(string); ok && (k == "path" || k == "old_path" || k == "new_path") {
					v = show(s)
				}
				sent[k] = v
			}
			got, want := main.Exec(ctx, sent), alone.Exec(ctx, input)
			if got.Text != show(want.Text) || got.IsError != want.IsError {
				t.Fatalf("op %d %v:\n mount: %q (error %v)\n alone: %q (error %v)", i, sent, got.Text, got.IsError, want.Text, want.IsError)
			}
		}
		if got, want := fmt.Sprint(filesOf(t, team)), fmt.Sprint(filesOf(t, alone)); got != want {
			t.Fatalf("files:\n mount: %s\n alone: %s", got, want)
		}
		l1, err1 := main.Log(ctx, handlers.LogQuery{Path: "/memories/team"})
		l2, err2 := alone.Log(ctx, handlers.LogQuery{})
		same("log", []any{l1, err1}, []any{l2, err2})
		// The mounted store is the same store: it exports to the same bytes, which import.
		var e1, e2 bytes.Buffer
		err1, err2 = team.Store().Export(ctx, &e1, true), alone.Store().Export(ctx, &e2, true)
		if err1 != nil || err2 != nil || !bytes.Equal(e1.Bytes(), e2.Bytes()) {
			t.Fatalf("exports differ (%v, %v)", err1, err2)
		}
		if _, err := files.NewMemoryStore().Import(ctx, &e1, vfs.ImportLimits{}); err != nil {
			t.Fatalf("the export does not import: %v", err)
		}
	})
}
