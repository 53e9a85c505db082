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
// them, the disk is what the checkpoint left plus the flushed log, and any of the files
// written since (bit i of keep, in name order, for the i-th; the history log with them at
// keep's top bit). Recovery gives the files and the versions the stores had, the store
// exports and imports, and the next change takes the next number.
func FuzzMachineCrash(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 4, 0, 2, 2, 3, 1, 0, 3, 5, 3}, uint64(0b0110), uint8(0))
	f.Add([]byte{0, 2, 4, 0, 1, 2, 2, 1, 0, 0, 3, 2, 1, 4}, uint64(0b1011), uint8(0xff))
	f.Add([]byte{0, 0, 0, 3, 2, 0, 4, 0, 1, 0, 2, 4, 3, 3, 0, 5}, uint64(0b10101), uint8(0x35))
	f.Add([]byte{0, 0, 1, 0, 5, 0, 0, 4}, uint64(0b0101), uint8(0x81))
	if bootID() == "" {
		f.Skip("no write-ahead log on this system: it needs the boot id that Linux, macOS and Windows give")
	}
	paths := []string{"/memories/a.md", "/memories/d/b.md", "/memories/d", "/memories/e/c.md", "/memories/f.md", "/memories/e"}
	f.Fuzz(func(t *testing.T, ops []byte, who uint64, keep uint8) {
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
		for i := 0; i+1 < len(ops); i += 2 {
			s := stores[who>>(i/2)&1]
			p, q := vfs.MustResolve(paths[int(ops[i+1])%len(paths)]), vfs.MustResolve(paths[int(ops[i+1])/len(paths)%len(paths)])
			data := []byte{'v', byte('0' + i%10), '\n'}
			var err error
			switch ops[i] % 6 {
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
			}
			_ = err // refusals (exists, not found, a directory in the way) are part of the mix
		}
		if disk == "" {
			disk = t.TempDir() // no checkpoint: nothing but the log reached the disk
		}
		want, wantVersions := treeOf(t, live), versionsOf(t, stores[0])
		crashDisk(t, disk, live)
		var written []string
		for rel := range want {
			written = append(written, rel)
		}
		for rel := range treeOf(t, disk) {
			if _, ok := want[rel]; !ok {
				written = append(written, rel) // deleted or moved since the checkpoint
			}
		}
		slices.Sort(written)
		for i, rel := range written {
			if keep>>(i%7)&1 == 0 {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(live, rel)); err == nil {
				os.MkdirAll(filepath.Dir(filepath.Join(disk, rel)), 0o700)
				os.WriteFile(filepath.Join(disk, rel), b, 0o600)
			} else {
				os.Remove(filepath.Join(disk, rel))
			}
		}
		if keep&0x80 != 0 {
			if b, err := os.ReadFile(filepath.Join(live, historyLogName)); err == nil {
				os.WriteFile(filepath.Join(disk, historyLogName), b, 0o600)
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
