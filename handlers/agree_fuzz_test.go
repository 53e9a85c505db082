package handlers_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// Every backend tells the same story: whatever the model's commands, a person's writes and
// deletes, and restores do, each answer on the os, overlay and PostgreSQL backends is the
// one the memory backend gives, to the byte (show, diff and log included), and so are the
// files, the history and the export after them. Each op is two bytes: what to do, and on
// which of a few paths (files and directories that may take each other's place). The
// limits are the same on every backend too (cfg picks tight ones, see tightLimits): the
// same calls are refused, with the same sizes in the message, and pruning keeps the same
// versions.
func FuzzBackendsAgree(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 10, 2, 5, 13, 0, 2, 4, 6}, uint8(0), uint8(0))
	f.Add([]byte{1, 2, 1, 4, 0, 1, 5, 26, 19, 2, 8, 4, 0, 1}, uint8(0), uint8(0))
	f.Add([]byte{1, 2, 7, 3, 12, 30, 21, 1, 4, 1, 8, 0, 0, 0}, uint8(0), uint8(0))
	f.Add([]byte{10, 2, 14, 1, 23, 4, 5, 9, 0, 3, 17, 2, 8, 2, 6, 2}, uint8(0), uint8(0))
	f.Add([]byte{1, 0, 3, 0, 3, 0, 3, 0, 1, 5, 3, 5, 2, 0, 10, 0, 11, 0}, uint8(0b1111111), uint8(0))
	f.Add([]byte{1, 0, 3, 0, 3, 0, 7, 0, 3, 0, 9, 0, 10, 0, 2, 0}, uint8(0b0010100), uint8(0))
	f.Add([]byte{1, 0, 3, 0, 3, 0, 7, 0, 3, 0, 9, 0, 10, 0, 2, 0, 11, 0}, uint8(0b10010100), uint8(0))
	f.Add([]byte{1, 0, 1, 5, 3, 0, 7, 5, 3, 0, 2, 5, 10, 0, 5, 5, 11, 2}, uint8(0b11101000), uint8(0))
	f.Add([]byte{1, 0, 3, 0, 7, 0, 1, 5, 2, 5, 4, 5, 7, 0}, uint8(0), uint8(12))
	f.Add([]byte{1, 2, 7, 2, 5, 14, 7, 0, 3, 0, 7, 0}, uint8(0b101000), uint8(6))
	dsn := vfstest.PostgresDSN(f)
	db, err := postgres.Open(context.Background(), dsn, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(db.Close)
	f.Fuzz(func(t *testing.T, ops []byte, cfg, red uint8) {
		if len(ops) > 48 {
			return
		}
		ctx := context.Background()
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		limits, keep, tick := tightLimits(cfg)
		keep.Now = func() time.Time { return clock }
		stores, kinds := everyBackend(t, db, vfs.WithHistory(keep))
		var mems []*handlers.Memory
		for _, st := range stores {
			mems = append(mems, handlers.New(st, limits))
		}
		// agree runs one step on every backend and fails unless each says what the memory
		// backend says.
		agree := func(what string, step func(h *handlers.Memory) string) {
			t.Helper()
			want := step(mems[0])
			for i, h := range mems[1:] {
				if got := step(h); got != want {
					t.Fatalf("%s:\n%8s: %s\n  memory: %s", what, kinds[i+1], got, want)
				}
			}
		}
		agreeingSteps(t, ops, &clock, tick, agree)
		if red == 0 {
			return
		}
		// Then a redaction (red picks the path and the version), and the store after it.
		p := "/memories/" + agreeingNames[red%6]
		seq := uint64(red / 6 % uint8(len(ops)/2+1))
		clock = clock.Add(tick)
		agree(fmt.Sprintf("redact %s@%d", p, seq), func(h *handlers.Memory) string {
			n, err := h.Redact(ctx, p, seq)
			return fmt.Sprint(n, err)
		})
		for v := range seq + 2 {
			agree(fmt.Sprintf("show %s@%d after the redaction", p, v), func(h *handlers.Memory) string {
				data, err := h.Show(ctx, p, v)
				return fmt.Sprintf("%q %v", data, err)
			})
		}
		agreeOnTheStore(t, agree)
	})
}

// everyBackend opens an empty store of each backend with opts, closed when the test ends,
// the memory one first, and names their kinds.
func everyBackend(t *testing.T, db *postgres.DB, opts ...vfs.Option) ([]*vfs.Store, []string) {
	t.Helper()
	ov, err := files.OpenOverlayStore(t.TempDir(), filepath.Join(t.TempDir(), "upper"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	pg, err := db.Store(context.Background(), vfstest.UniqueName(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return []*vfs.Store{files.NewMemoryStore(opts...), openOS(t, t.TempDir(), opts...), ov, pg}, []string{"memory", "os", "overlay", "postgres"}
}

// tightLimits returns the limits, the history's bounds and the clock's tick per step that
// cfg picks, each bit a bound small enough for a few steps to reach: a file's bytes, the
// store's, what a view shows, the versions kept per path (two bits), the history's bytes,
// its age (three ticks); the last bit makes a tick an hour (pruning's longest interval)
// rather than a minute.
func tightLimits(cfg uint8) (handlers.Limits, vfs.HistoryConfig, time.Duration) {
	limits, keep, tick := handlers.DefaultLimits(), vfs.HistoryConfig{}, time.Minute
	if cfg&128 != 0 {
		tick = time.Hour
	}
	if cfg&1 != 0 {
		limits.MaxFileBytes = 16
	}
	if cfg&2 != 0 {
		limits.MaxStoreBytes = 30
	}
	if cfg&4 != 0 {
		limits.MaxViewChars = 24
	}
	keep.MaxVersions = int(cfg >> 3 & 3)
	if cfg&32 != 0 {
		keep.MaxBytes = 24
	}
	if cfg&64 != 0 {
		keep.MaxAge = 3 * tick
	}
	return limits, keep, tick
}

// Two processes sharing one store, taking turns, act as one store: whichever of them does
// each step (bit k of who picks it for the k-th), every answer, the files, the history and
// the export are what a single memory store gives. Both are asked at the end. A read or a
// refused change by one, between the other's changes, must not make it forget them. The
// pairs: two os stores on one directory, two overlays on the same layers. Each keeps to the
// store's limits (cfg's first three bits, see tightLimits) whatever the other has written.
func FuzzTwoProcesses(f *testing.F) {
	f.Add([]byte{1, 0, 1, 5, 1, 2, 0, 0, 1, 4}, uint64(0b11010), uint8(0))
	f.Add([]byte{1, 0, 0, 0, 1, 2, 4, 0, 1, 0}, uint64(0b10110), uint8(0))
	f.Add([]byte{1, 2, 1, 2, 0, 2, 1, 4, 9, 0, 10, 2}, uint64(0b101010), uint8(0))
	f.Add([]byte{1, 0, 5, 12, 1, 0, 2, 0, 7, 1, 8, 1, 11, 0}, uint64(0b1100110), uint8(0))
	f.Add([]byte{1, 0, 1, 5, 3, 0, 3, 5, 3, 0, 7, 2, 3, 5, 1, 2}, uint64(0b10101010), uint8(3))
	f.Fuzz(func(t *testing.T, ops []byte, who uint64, cfg uint8) {
		if len(ops) > 48 {
			return
		}
		takingTurns(t, ops, who, cfg, func(opts []vfs.Option) [2]*vfs.Store {
			dir := t.TempDir()
			return [2]*vfs.Store{openOS(t, dir, opts...), openOS(t, dir, opts...)}
		})
		takingTurns(t, ops, who, cfg, func(opts []vfs.Option) [2]*vfs.Store {
			lower, upper := t.TempDir(), t.TempDir()
			var pair [2]*vfs.Store
			for i := range pair {
				st, err := files.OpenOverlayStore(lower, upper, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				pair[i] = st
			}
			return pair
		})
	})
}

// The same for two replicas of one PostgreSQL store.
func FuzzTwoReplicas(f *testing.F) {
	f.Add([]byte{1, 0, 1, 5, 1, 2, 0, 0, 1, 4}, uint64(0b11010), uint8(0))
	f.Add([]byte{1, 2, 1, 2, 0, 2, 1, 4, 9, 0, 10, 2}, uint64(0b101010), uint8(0))
	f.Add([]byte{1, 0, 1, 5, 3, 0, 3, 5, 3, 0, 7, 2, 3, 5, 1, 2}, uint64(0b10101010), uint8(3))
	dsn := vfstest.PostgresDSN(f)
	var dbs [2]*postgres.DB
	for i := range dbs {
		db, err := postgres.Open(context.Background(), dsn, true)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(db.Close)
		dbs[i] = db
	}
	f.Fuzz(func(t *testing.T, ops []byte, who uint64, cfg uint8) {
		if len(ops) > 48 {
			return
		}
		takingTurns(t, ops, who, cfg, func(opts []vfs.Option) [2]*vfs.Store {
			name := vfstest.UniqueName(t)
			var pair [2]*vfs.Store
			for i, db := range dbs {
				st, err := db.Store(context.Background(), name, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				pair[i] = st
			}
			return pair
		})
	})
}

// takingTurns runs ops on a pair of stores opened by open, who choosing which one does each
// step, against a memory store, under the limits of cfg's first three bits (the history's
// are left out: each process prunes on its own schedule).
func takingTurns(t *testing.T, ops []byte, who uint64, cfg uint8, open func([]vfs.Option) [2]*vfs.Store) {
	t.Helper()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := []vfs.Option{vfs.WithHistory(vfs.HistoryConfig{Now: func() time.Time { return clock }})}
	limits, _, _ := tightLimits(cfg & 7)
	one := handlers.New(files.NewMemoryStore(opts...), limits)
	var both [2]*handlers.Memory
	for i, st := range open(opts) {
		both[i] = handlers.New(st, limits)
	}
	steps := 0
	agree := func(what string, step func(h *handlers.Memory) string) {
		t.Helper()
		want := step(one)
		for i, h := range both {
			if steps < 64 && who>>steps&1 != uint64(i) && !strings.HasPrefix(what, "the ") {
				continue // the other one's turn
			}
			if got := step(h); got != want {
				t.Fatalf("%s, by the store %d of the pair:\n     got %s\n     one: %s", what, i, got, want)
			}
		}
		steps++
	}
	agreeingSteps(t, ops, &clock, time.Minute, agree)
}

// result describes a command's result, its version and changes included, for agree.
func result(r handlers.Result) string {
	s := fmt.Sprintf("%q error=%v code=%q", r.Text, r.IsError, r.Code)
	if r.Batch != nil {
		changes, _ := json.Marshal(r.Batch.Changes)
		s += fmt.Sprintf(" version=%d %s %s", r.Batch.Version, r.Batch.Command, changes)
	}
	return s
}

// agreeingNames are the paths below /memories that agreeingSteps acts on.
var agreeingNames = []string{"a.md", "d", "d/b.md", "d/e", "d/e/c.md", "f.md"}

// agreeingSteps runs ops, two bytes each, through agree, which does each step on every
// memory compared and fails unless they say the same; then it compares the files, the
// listing, the history and the export. Each step advances clock by tick.
func agreeingSteps(t *testing.T, ops []byte, clock *time.Time, tick time.Duration, agree func(what string, step func(h *handlers.Memory) string)) {
	t.Helper()
	ctx := context.Background()
	names := agreeingNames
	contents := []string{"alpha\nbeta\n", "", "x", "line\n\nline\n", "ünï\tcode\r\n"}
	tokens := []string{"alpha", "beta\n", "line", "", "\n"}
	for i := 0; i+1 < len(ops); i += 2 {
		*clock = clock.Add(tick)
		a, b := int(ops[i]), int(ops[i+1])
		p, q := "/memories/"+names[b%len(names)], "/memories/"+names[b/len(names)%len(names)]
		var input map[string]any
		switch a % 12 {
		case 0:
			input = map[string]any{"command": "view", "path": p}
		case 1:
			input = map[string]any{"command": "create", "path": p, "file_text": contents[a/10%len(contents)]}
		case 2:
			input = map[string]any{"command": "str_replace", "path": p, "old_str": tokens[a/10%len(tokens)], "new_str": tokens[b/36%len(tokens)]}
		case 3:
			input = map[string]any{"command": "insert", "path": p, "insert_line": a / 10 % 4, "insert_text": "new\n"}
		case 4:
			input = map[string]any{"command": "delete", "path": p}
		case 5:
			input = map[string]any{"command": "rename", "old_path": p, "new_path": q}
		case 6:
			input = map[string]any{"command": "view", "path": p, "view_range": []any{a/10%3 + 1, b/36%3 - 1}}
		}
		if input != nil {
			agree(fmt.Sprint(input), func(h *handlers.Memory) string { return result(h.Exec(ctx, input)) })
			continue
		}
		seq := uint64(a / 36 % (i/2 + 2))
		switch a % 12 {
		case 7:
			data := []byte(contents[a/10%len(contents)])
			agree("a person writes "+p, func(h *handlers.Memory) string {
				batch, err := h.Write(ctx, p, data, nil)
				return fmt.Sprint(batch != nil, err)
			})
		case 8:
			agree("a person deletes "+p, func(h *handlers.Memory) string {
				batch, err := h.Remove(ctx, p, nil)
				return fmt.Sprint(batch != nil, err)
			})
		case 9:
			dir := []string{"/memories", "/memories/d", p}[a/12%3]
			agree(fmt.Sprintf("restore %s to %d", dir, seq), func(h *handlers.Memory) string {
				res, err := h.Restore(ctx, dir, seq)
				return fmt.Sprintf("%+v %v", res, err)
			})
		case 10:
			agree(fmt.Sprintf("show %s@%d", p, seq), func(h *handlers.Memory) string {
				data, err := h.Show(ctx, p, seq)
				return fmt.Sprintf("%q %v", data, err)
			})
			agree("the log of "+p, func(h *handlers.Memory) string {
				log, err := h.Log(ctx, handlers.LogQuery{Path: p})
				return fmt.Sprintf("%d %v", len(log), err)
			})
		case 11:
			agree(fmt.Sprintf("diff %s %d", p, seq), func(h *handlers.Memory) string {
				diff, err := h.Diff(ctx, p, seq)
				return fmt.Sprintf("%q %v", diff, err)
			})
			at := clock.Add(-time.Duration(b) * tick / 4)
			agree(fmt.Sprintf("restore %s to %v", p, at), func(h *handlers.Memory) string {
				res, err := h.RestoreAt(ctx, p, at)
				return fmt.Sprintf("%+v %v", res, err)
			})
		}
	}
	agreeOnTheStore(t, agree)
}

// agreeOnTheStore compares, through agree, the files, the listing, the history and the export.
func agreeOnTheStore(t *testing.T, agree func(what string, step func(h *handlers.Memory) string)) {
	t.Helper()
	ctx := context.Background()
	agree("the files", func(h *handlers.Memory) string { return fmt.Sprint(filesOf(t, h)) })
	agree("the listing", func(h *handlers.Memory) string {
		return result(h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}))
	})
	agree("the history", func(h *handlers.Memory) string {
		log, err := h.Log(ctx, handlers.LogQuery{})
		for i := range log {
			log[i].Time = log[i].Time.UTC()
		}
		data, _ := json.Marshal(log) // the redactions' records, not their pointers
		return fmt.Sprintf("%s %v", data, err)
	})
	agree("the export", func(h *handlers.Memory) string {
		var tar bytes.Buffer
		if err := h.Store().Export(ctx, &tar, true); err != nil {
			return err.Error()
		}
		return readableTar(t, tar.Bytes())
	})
}

// readableTar lists a tar stream's entries with their contents, or gives the stream as it
// is where it does not read as one.
func readableTar(t testing.TB, stream []byte) string {
	var out strings.Builder
	tr := tar.NewReader(bytes.NewReader(stream))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out.String()
		}
		data, rerr := io.ReadAll(tr)
		if err != nil || rerr != nil {
			return fmt.Sprintf("%q", stream)
		}
		fmt.Fprintf(&out, "%s %o %v: %q\n", hdr.Name, hdr.Mode, hdr.ModTime.Unix(), data)
	}
}
