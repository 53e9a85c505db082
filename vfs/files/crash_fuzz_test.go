package files

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// A crash of the machine loses nothing acknowledged, whatever the changes before it and
// however many processes made them: after changes of every kind (redactions, and pruning
// when bits 32-33 of who keep that many versions a file) by two stores on one directory
// taking turns (bit k of who picks the k-th), the disk holds what the last checkpoint left
// (one is an op; redactions and pruning make their own), the flushed log, and each file
// written since as it was at some moment after the checkpoint, or lost to zeros (three
// bits of keep a file, in name order, choose which; the history log's name counts as
// one). Recovery gives the files and the versions the stores had, leaves no redacted
// content on disk, exports and imports, and the next change takes the next number.
func FuzzMachineCrash(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 4, 0, 2, 2, 3, 1, 0, 3, 5, 3}, uint64(0b0110), uint64(0))
	f.Add([]byte{0, 2, 4, 0, 1, 2, 2, 1, 0, 0, 3, 2, 1, 4}, uint64(0b1011), uint64(0o7777777))
	f.Add([]byte{0, 0, 0, 3, 2, 0, 4, 0, 1, 0, 2, 4, 3, 3, 0, 5}, uint64(0b10101), uint64(0o1234567))
	f.Add([]byte{0, 0, 1, 0, 5, 0, 0, 4}, uint64(0b0101), uint64(0o2020202))
	f.Add([]byte{0, 0, 1, 0, 1, 0, 4, 0, 1, 0, 7, 0, 1, 0, 2, 4}, uint64(1<<32|0b1010), uint64(0o3333333))
	f.Add([]byte{0, 0, 0, 4, 1, 0, 1, 4, 6, 0, 1, 0, 3, 4, 7, 2}, uint64(2<<32|0b0110), uint64(0o1765432))
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
		// An hour between steps, so that each change may prune, keeping who's bits 32-33
		// versions a file (0: all).
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		opts := vfs.WithHistory(vfs.HistoryConfig{MaxVersions: int(who >> 32 & 3), Now: func() time.Time { return clock }})
		stores := [2]*vfs.Store{openOSStore(t, live, opts), openOSStore(t, live, opts)}
		disk := ""
		var redacted []vfs.Digest
		var since []map[string]string // the files after each step since the checkpoint
		for i := 0; i+1 < len(ops); i += 2 {
			s := stores[who>>(i/2)&1]
			p, q := vfs.MustResolve(paths[int(ops[i+1])%len(paths)]), vfs.MustResolve(paths[int(ops[i+1])/len(paths)%len(paths)])
			data := []byte{'v', byte('0' + i%10), '\n'}
			if ops[i]%8 < 2 || ops[i]%8 == 6 {
				// Written again, a content is not redacted any more (a refused create keeps it too).
				redacted = slices.DeleteFunc(redacted, func(d vfs.Digest) bool { return d == vfs.DigestOf(data) })
			}
			var err error
			clock = clock.Add(time.Hour)
			switch k := ops[i] % 8; k {
			case 0, 1, 2, 3:
				err = fuzzChange(s, int(k), p, q, data)
			case 4:
				checkpointNow(t, s)
			case 5:
				err = s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.List(vfs.MustResolve(vfs.Root)); return err })
			case 6:
				err = fuzzChange(s, 4, p, q, data)
			case 7: // a content purged from the history, while no file holds it (as people may)
				gone := []byte{'v', byte('0' + int(ops[i+1])%10), '\n'}
				if slices.Contains(slices.Collect(maps.Values(treeOf(t, live))), string(gone)) {
					break
				}
				err = s.Update(ctx, func(tx *vfs.Tx) error {
					n, err := tx.Redact(vfs.DigestOf(gone))
					if n > 0 {
						redacted = append(redacted, vfs.DigestOf(gone))
					}
					return err
				})
			}
			_ = err // refusals (exists, not found, a directory in the way) are part of the mix
			since = append(since, treeOf(t, live))
			if wal, err := os.ReadFile(filepath.Join(live, walName)); err == nil && (len(wal) == 0 || wal[0] == 0) {
				// A checkpoint (this one's, or a redaction's or pruning's): what the disk
				// surely holds from now on.
				disk, since = copyTree(t, live), since[len(since)-1:]
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
		r := openOSStore(t, disk, opts)
		if got := treeOf(t, disk); !maps.Equal(got, want) {
			t.Fatalf("files after recovery:\n got %v\nwant %v", got, want)
		}
		gotVersions := versionsOf(t, r)
		if g, w := jsonOf(gotVersions), jsonOf(wantVersions); g != w {
			t.Fatalf("history after recovery:\n got %s\nwant %s", g, w)
		}
		exportImports(t, r)
		// A content redacted, and named by no version since, is gone from the disk.
		named := map[vfs.Digest]bool{}
		for _, v := range wantVersions {
			named[v.SHA256], named[v.Prev] = true, true
		}
		for _, d := range redacted {
			if _, err := os.Stat(filepath.Join(disk, objectName(d))); !named[d] && err == nil {
				t.Fatalf("the redacted content %s is back on disk", d)
			}
		}
		if err := r.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/next.md"), nil) }); err != nil {
			t.Fatal(err)
		}
		if vs := versionsOf(t, r); len(wantVersions) > 0 && vs[len(vs)-1].Seq != wantVersions[len(wantVersions)-1].Seq+1 {
			t.Fatalf("the next change is number %d, want %d", vs[len(vs)-1].Seq, wantVersions[len(wantVersions)-1].Seq+1)
		}
	})
}
