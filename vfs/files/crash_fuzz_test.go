package files

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// A crash of the machine loses nothing acknowledged, whatever the changes before it and
// however many processes made them: after changes of every kind by two stores on one
// directory taking turns (bit k of who picks the k-th), with a checkpoint somewhere among
// them, the disk holds what the checkpoint left, the flushed log, and each file written
// since as it was at some moment after the checkpoint, or lost to zeros (three bits of
// keep a file, in name order, choose which; the history log's name counts as one).
// Recovery gives the files and the versions the stores had, the store exports and imports,
// and the next change takes the next number.
func FuzzMachineCrash(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 4, 0, 2, 2, 3, 1, 0, 3, 5, 3}, uint64(0b0110), uint64(0))
	f.Add([]byte{0, 2, 4, 0, 1, 2, 2, 1, 0, 0, 3, 2, 1, 4}, uint64(0b1011), uint64(0o7777777))
	f.Add([]byte{0, 0, 0, 3, 2, 0, 4, 0, 1, 0, 2, 4, 3, 3, 0, 5}, uint64(0b10101), uint64(0o1234567))
	f.Add([]byte{0, 0, 1, 0, 5, 0, 0, 4}, uint64(0b0101), uint64(0o2020202))
	if bootID() == "" {
		f.Skip("no write-ahead log on this system: it needs the boot id that Linux, macOS and Windows give")
	}
	paths := []string{"/memories/a.md", "/memories/d/b.md", "/memories/d", "/memories/e/c.md", "/memories/f.md", "/memories/e"}
	f.Fuzz(func(t *testing.T, ops []byte, who, keep uint64) {
		if len(ops) > 40 {
			return
		}
		ctx := context.Background()
		live := t.TempDir()
		var stores [2]*vfs.Store
		for i := range stores {
			s, err := OpenOSStore(live)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			stores[i] = s
		}
		disk := ""
		var since []map[string]string // the files after each step since the checkpoint
		for i := 0; i+1 < len(ops); i += 2 {
			s := stores[who>>(i/2)&1]
			p, q := vfs.MustResolve(paths[int(ops[i+1])%len(paths)]), vfs.MustResolve(paths[int(ops[i+1])/len(paths)%len(paths)])
			data := []byte{'v', byte('0' + i%10), '\n'}
			var err error
			switch ops[i] % 7 {
			case 0:
				_, err = s.Apply(ctx, "create", func(tx *vfs.Tx) error { return tx.CreateFile(p, data) })
			case 1:
				_, err = s.Apply(ctx, "write", func(tx *vfs.Tx) error { return tx.WriteFile(p, data) })
			case 2:
				_, err = s.Apply(ctx, "rename", func(tx *vfs.Tx) error { return tx.Rename(p, q) })
			case 3:
				_, err = s.Apply(ctx, "delete", func(tx *vfs.Tx) error { return tx.RemoveAll(p) })
			case 4:
				if disk == "" {
					checkpointNow(t, s)
					disk = copyTree(t, live)
				}
			case 5:
				err = s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.List(vfs.MustResolve(vfs.Root)); return err })
			case 6: // several operations in one change
				_, err = s.Apply(ctx, "restore", func(tx *vfs.Tx) error {
					if err := tx.WriteFile(p, data); err != nil {
						return err
					}
					return tx.Rename(p, q)
				})
			}
			_ = err // refusals (exists, not found, a directory in the way) are part of the mix
			since = append(since, treeOf(t, live))
			if ops[i]%7 == 4 {
				since = since[len(since)-1:]
			}
		}
		if disk == "" {
			disk = t.TempDir() // no checkpoint: nothing but the log reached the disk
			since = append([]map[string]string{{}}, since...)
		}
		want, wantVersions := treeOf(t, live), versionsOf(t, stores[0])
		crashDisk(t, disk, live)
		names := map[string]bool{historyLogName: true}
		for _, files := range since {
			for rel := range files {
				names[rel] = true
			}
		}
		for i, rel := range slices.Sorted(maps.Keys(names)) {
			k := int(keep >> (3 * (i % 21)) & 7)
			switch {
			case k == 0: // as the checkpoint left it
			case rel == historyLogName:
				if b, err := os.ReadFile(filepath.Join(live, rel)); err == nil {
					os.WriteFile(filepath.Join(disk, rel), b, 0o600)
				}
			case k == 7: // the name reached the disk, its data did not (written since only)
				if content, ok := want[rel]; ok && content != since[0][rel] && os.MkdirAll(filepath.Dir(filepath.Join(disk, rel)), 0o700) == nil {
					os.WriteFile(filepath.Join(disk, rel), make([]byte, len(content)), 0o600)
				}
			default: // as it was at a moment since
				content, ok := since[(k-1)*len(since)/6][rel]
				if !ok {
					os.Remove(filepath.Join(disk, rel))
				} else if os.MkdirAll(filepath.Dir(filepath.Join(disk, rel)), 0o700) == nil {
					os.WriteFile(filepath.Join(disk, rel), []byte(content), 0o600)
				}
			}
		}
		r, err := OpenOSStore(disk)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if got := treeOf(t, disk); !maps.Equal(got, want) {
			t.Fatalf("files after recovery:\n got %v\nwant %v", got, want)
		}
		gotVersions := versionsOf(t, r)
		if g, w := jsonOf(gotVersions), jsonOf(wantVersions); g != w {
			t.Fatalf("history after recovery:\n got %s\nwant %s", g, w)
		}
		exportImports(t, r)
		if err := r.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/next.md"), nil) }); err != nil {
			t.Fatal(err)
		}
		if vs := versionsOf(t, r); len(wantVersions) > 0 && vs[len(vs)-1].Seq != wantVersions[len(wantVersions)-1].Seq+1 {
			t.Fatalf("the next change is number %d, want %d", vs[len(vs)-1].Seq, wantVersions[len(wantVersions)-1].Seq+1)
		}
	})
}
