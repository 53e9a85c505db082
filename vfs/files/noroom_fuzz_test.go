package files

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// Writes refused for want of room, at any point of any change (each bit of faults but the
// first refuses one write, in the order the store makes them; the first turns the
// write-ahead log off): whatever was refused, the history agrees
// with the files after every step, and the files and the history are the same when the
// store is opened again, after a clean close or a crash of the machine.
func FuzzNoRoom(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 0, 3, 2, 0, 3, 6, 1, 1, 4}, uint64(0b101000100))
	f.Add([]byte{0, 0, 0, 1, 6, 0, 1, 1, 3, 0, 4, 0, 0, 2}, uint64(0x8420))
	f.Add([]byte{0, 0, 0, 1, 6, 0, 1, 1, 3, 0, 4, 0, 0, 2}, uint64(0x8421))
	f.Add([]byte{0, 1, 1, 1, 2, 7, 0, 1, 3, 1}, uint64(1<<10|1<<3))
	if bootID() == "" {
		f.Skip("no write-ahead log on this system: it needs the boot id that Linux, macOS and Windows give")
	}
	paths := []string{"/memories/a.md", "/memories/d/b.md", "/memories/d", "/memories/d/c.md", "/memories/e"}
	f.Fuzz(func(t *testing.T, ops []byte, faults uint64) {
		if len(ops) > 30 {
			return
		}
		ctx := context.Background()
		dir := t.TempDir()
		osfs, err := NewOSFs(dir)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		n := 0
		refuse := func(string) bool {
			mu.Lock()
			defer mu.Unlock()
			n++
			return n < 64 && faults>>n&1 == 1
		}
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		opts := []vfs.Option{vfs.WithHistory(vfs.HistoryConfig{Now: func() time.Time { return clock }})}
		if faults&1 == 1 { // faults' first bit: without the write-ahead log
			opts = append(opts, vfs.FlushEachChange())
		}
		s := vfs.NewStore(NewAferoStorage(outOfRoom{osfs, refuse}, opts...))
		defer s.Close()
		for i := 0; i+1 < len(ops); i += 2 {
			p, q := vfs.MustResolve(paths[int(ops[i+1])%len(paths)]), vfs.MustResolve(paths[int(ops[i+1])/len(paths)%len(paths)])
			data := []byte{'v', byte('0' + i%10), '\n'}
			clock = clock.Add(time.Minute)
			switch ops[i] % 5 {
			case 0:
				_, err = s.Apply(ctx, "create", func(tx *vfs.Tx) error { return tx.CreateFile(p, data) })
			case 1:
				_, err = s.Apply(ctx, "write", func(tx *vfs.Tx) error { return tx.WriteFile(p, data) })
			case 2:
				_, err = s.Apply(ctx, "rename", func(tx *vfs.Tx) error { return tx.Rename(p, q) })
			case 3:
				_, err = s.Apply(ctx, "delete", func(tx *vfs.Tx) error { return tx.RemoveAll(p) })
			case 4:
				_, err = s.Apply(ctx, "restore", func(tx *vfs.Tx) error {
					if err := tx.WriteFile(p, data); err != nil {
						return err
					}
					return tx.Rename(p, q)
				})
			}
			_ = err // refusals, for room or otherwise, are part of the mix
			if got, want := historyTree(t, s), treeOf(t, dir); !maps.Equal(got, want) {
				t.Fatalf("after step %d the history says %v, the files are %v", i/2, got, want)
			}
		}
		want, wantVersions := treeOf(t, dir), jsonOf(versionsOf(t, s))
		// The machine's crash: the files as they are, the log's records of another boot.
		crashed := copyTree(t, dir)
		if wal, _ := os.ReadFile(filepath.Join(dir, walName)); len(wal) > 0 && wal[0] != 0 {
			os.WriteFile(filepath.Join(crashed, walName), asOtherBoot(t, wal), 0o600)
		}
		s.Close()
		for how, dir := range map[string]string{"a clean close": dir, "a crash of the machine": crashed} {
			r, err := OpenOSStore(dir, opts...)
			if err != nil {
				t.Fatalf("after %s: %v", how, err)
			}
			if got := treeOf(t, dir); !maps.Equal(got, want) {
				t.Fatalf("after %s the files are %v, want %v", how, got, want)
			}
			if got := jsonOf(versionsOf(t, r)); got != wantVersions {
				t.Fatalf("after %s the history is\n%s\nwant\n%s", how, got, wantVersions)
			}
			r.Close()
		}
	})
}

// historyTree is the files as s's history says they are: path (relative) → content.
func historyTree(t *testing.T, s *vfs.Store) map[string]string {
	t.Helper()
	tree := map[string]string{}
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
