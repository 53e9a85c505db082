package files

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// Writes refused for want of room, at any point of any change: whatever was refused, the
// history agrees with the files after every step, and the files and the history are the
// same when the store is opened again, after a clean close or a crash of the machine.
// Each pair of ops is a change (below 240 fuzzChange's, mod 5; a restore of the memory up
// to 249, a redaction from 250) and its paths.
// faults' first two bits choose the store (os with the write-ahead log, os without it, an
// overlay whose lower layer holds a.md and d/b.md, os with the log and pruning to one
// version a file); each of bits 2–39 refuses one write,
// and each of bits 40–63 one flush of a file, move or new directory, in the order the store
// makes them.
func FuzzNoRoom(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 0, 3, 2, 0, 3, 6, 1, 1, 4}, uint64(0b1010001000))
	f.Add([]byte{0, 0, 0, 1, 6, 0, 1, 1, 3, 0, 4, 0, 0, 2}, uint64(0x10840))
	f.Add([]byte{0, 0, 0, 1, 6, 0, 1, 1, 3, 0, 4, 0, 0, 2}, uint64(0x10841))
	f.Add([]byte{0, 1, 1, 1, 2, 7, 0, 1, 3, 1}, uint64(1<<11|1<<4))
	f.Add([]byte{2, 22}, uint64(1<<5|2)) // an overlay's directory moved, with no room for the whiteout
	f.Add([]byte{0, 0, 1, 0, 1, 0, 1, 0, 2, 5, 1, 0, 3, 0}, uint64(1<<12|1<<9|3))
	f.Add([]byte{0, 0, 1, 0, 0, 1, 251, 0, 252, 2, 0, 3}, uint64(1<<9|1<<14))
	f.Add([]byte{0, 0, 1, 128, 0, 1, 0, 130, 2, 2, 3, 128, 0, 131}, uint64(1<<4|1<<7|1<<12))
	f.Add([]byte{0, 0, 0, 1, 1, 0, 3, 1, 240, 1, 241, 3}, uint64(1<<13|1<<17))
	paths := []string{"/memories/a.md", "/memories/d/b.md", "/memories/d", "/memories/d/c.md", "/memories/e"}
	f.Fuzz(func(t *testing.T, ops []byte, faults uint64) {
		if len(ops) > 30 {
			return
		}
		kind := faults & 3
		if (kind == 0 || kind == 3) && bootID() == "" {
			t.Skip("no write-ahead log on this system: it needs the boot id that Linux, macOS and Windows give")
		}
		ctx := context.Background()
		dir, lowerDir := t.TempDir(), t.TempDir()
		var mu sync.Mutex
		n, m := 1, 39
		refuse := func(string) bool {
			mu.Lock()
			defer mu.Unlock()
			n++
			return n < 40 && faults>>n&1 == 1
		}
		refuseMeta := func(string) bool {
			mu.Lock()
			defer mu.Unlock()
			m++
			return m < 64 && faults>>m&1 == 1
		}
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		cfg := vfs.HistoryConfig{Now: func() time.Time { return clock }}
		step := time.Minute
		if kind == 3 { // pruning: an hour a step, a version a file
			cfg.MaxVersions, step = 1, time.Hour
		}
		opts := []vfs.Option{vfs.WithHistory(cfg)}
		osfs, err := NewOSFs(dir)
		if err != nil {
			t.Fatal(err)
		}
		var fsys FS = outOfRoom{osfs, refuse, refuseMeta, nil}
		open := func() (*vfs.Store, error) { return OpenOSStore(dir, opts...) }
		switch kind {
		case 1:
			opts = append(opts, vfs.FlushEachChange())
		case 2:
			writeHostFiles(t, lowerDir, map[string]string{"a.md": "lower a\n", "d/b.md": "lower b\n"})
			lower, err := NewReadOnlyOSFs(lowerDir)
			if err != nil {
				t.Fatal(err)
			}
			defer lower.Close()
			if fsys, err = NewOverlayFs(lower, fsys); err != nil {
				t.Fatal(err)
			}
			open = func() (*vfs.Store, error) { return OpenOverlayStore(lowerDir, dir, opts...) }
		}
		s := vfs.NewStore(NewAferoStorage(fsys, opts...))
		defer s.Close()
		initial := storeTree(t, s)
		// With the log, another process on the same directory, which always has room, makes
		// the changes whose second byte is 128 or more.
		other := s
		if kind == 0 || kind == 3 {
			if other, err = open(); err != nil {
				t.Fatal(err)
			}
			defer other.Close()
		}
		stores := [2]*vfs.Store{s, other}
		for i := 0; i+1 < len(ops); i += 2 {
			s := stores[ops[i+1]>>7]
			p, q := vfs.MustResolve(paths[int(ops[i+1])%len(paths)]), vfs.MustResolve(paths[int(ops[i+1])/len(paths)%len(paths)])
			data := []byte{'v', byte('0' + i%10), '\n'}
			clock = clock.Add(step)
			op := ops[i] % 5
			switch {
			case ops[i] >= 250:
				op = 5
			case ops[i] >= 240:
				op = 6
			}
			switch op {
			case 0, 1, 2, 3, 4:
				err = fuzzChange(s, int(op), p, q, data)
			case 5: // a content purged from the history, while no file holds it (as people may)
				gone := []byte{'v', byte('0' + int(ops[i+1])%10), '\n'}
				if slices.Contains(slices.Collect(maps.Values(storeTree(t, s))), string(gone)) {
					break
				}
				err = s.Update(ctx, func(tx *vfs.Tx) error { _, err := tx.Redact(vfs.DigestOf(gone)); return err })
			case 6: // the memory back as it was after a version, as people restore it
				_, err = handlers.New(s, handlers.DefaultLimits()).Restore(ctx, "/memories", uint64(ops[i+1]%8))
			}
			_ = err // refusals, for room or otherwise, are part of the mix
			want := storeTree(t, s)
			if got := historyTree(t, s, initial); !maps.Equal(got, want) {
				t.Fatalf("after step %d the history says %v, the files are %v", i/2, got, want)
			}
			if got, want := jsonOf(versionsOf(t, stores[1])), jsonOf(versionsOf(t, stores[0])); got != want {
				t.Fatalf("after step %d the processes' histories differ:\n%s\n%s", i/2, got, want)
			}
			if wal, _ := os.ReadFile(filepath.Join(dir, walName)); len(wal) > 0 && wal[0] != 0 {
				// The machine's crash now: the files as they are, the log's records of
				// another boot.
				crashed := copyTree(t, dir)
				os.WriteFile(filepath.Join(crashed, walName), asOtherBoot(t, wal), 0o600)
				same(t, fmt.Sprintf("a crash of the machine after step %d", i/2), want, jsonOf(versionsOf(t, s)), func() (*vfs.Store, error) { return OpenOSStore(crashed, opts...) })
			}
		}
		want, wantVersions := storeTree(t, s), jsonOf(versionsOf(t, s))
		s.Close()
		other.Close()
		same(t, "a clean close", want, wantVersions, open)
	})
}

// fuzzChange makes change k on s: 0 creates p with data, 1 writes data to p, 2 moves p to
// q, 3 deletes p, 4 writes data to p and moves it to q in one change.
func fuzzChange(s *vfs.Store, k int, p, q vfs.Path, data []byte) error {
	_, err := s.Apply(context.Background(), []string{"create", "write", "rename", "delete", "restore"}[k], func(tx *vfs.Tx) error {
		switch k {
		case 0:
			return tx.CreateFile(p, data)
		case 1:
			return tx.WriteFile(p, data)
		case 2:
			return tx.Rename(p, q)
		case 3:
			return tx.RemoveAll(p)
		}
		if err := tx.WriteFile(p, data); err != nil {
			return err
		}
		return tx.Rename(p, q)
	})
	return err
}

// same fails t unless the store open returns has the files want and the history
// wantVersions (as JSON).
func same(t *testing.T, after string, want map[string]string, wantVersions string, open func() (*vfs.Store, error)) {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatalf("after %s: %v", after, err)
	}
	defer r.Close()
	if got := storeTree(t, r); !maps.Equal(got, want) {
		t.Fatalf("after %s the files are %v, want %v", after, got, want)
	}
	if got := jsonOf(versionsOf(t, r)); got != wantVersions {
		t.Fatalf("after %s the history is\n%s\nwant\n%s", after, got, wantVersions)
	}
}

// writeHostFiles writes files (relative name → content) under dir.
func writeHostFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// storeTree is the files of s as the model sees them: path (below /memories) → content.
func storeTree(t *testing.T, s *vfs.Store) map[string]string {
	t.Helper()
	tree := map[string]string{}
	var walk func(tx *vfs.Tx, p vfs.Path, rel string) error
	walk = func(tx *vfs.Tx, p vfs.Path, rel string) error {
		entries, err := tx.List(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			switch {
			case e.IsDir():
				if err := walk(tx, p.Join(e.Name), rel+e.Name+"/"); err != nil {
					return err
				}
			case e.IsRegular():
				data, err := tx.ReadFile(p.Join(e.Name))
				if err != nil {
					return err
				}
				tree[rel+e.Name] = string(data)
			}
		}
		return nil
	}
	if err := s.View(context.Background(), func(tx *vfs.Tx) error { return walk(tx, vfs.MustResolve(vfs.Root), "") }); err != nil {
		t.Fatal(err)
	}
	return tree
}

// historyTree is the files as s's history says they are, from the files before it
// (initial): path (below /memories) → content.
func historyTree(t *testing.T, s *vfs.Store, initial map[string]string) map[string]string {
	t.Helper()
	tree := maps.Clone(initial)
	err := s.View(context.Background(), func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for i := len(vs) - 1; i >= 0; i-- {
			for _, p := range []string{vs[i].Path, vs[i].NewPath} {
				if p == "" || seen[p] {
					continue
				}
				seen[p] = true
				delete(tree, p[len("/memories/"):])
				if st := vs[i].After(p); st.Exists {
					data, err := tx.Content(st.SHA256)
					if err != nil {
						return err
					}
					tree[p[len("/memories/"):]] = string(data)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}
