package files

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// seedLog returns the history log and the write-ahead log (marked as written in an
// earlier boot; nil without a log here) of a store after a few changes of every kind.
func seedLog(f *testing.F) (history, wal []byte) {
	dir := f.TempDir()
	s, err := OpenOSStore(dir)
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	for _, step := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a\n")) },
		func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("b\n")) },
		func(tx *vfs.Tx) error {
			return tx.Rename(vfs.MustResolve("/memories/a.md"), vfs.MustResolve("/memories/d/c.md"))
		},
		func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/d")) },
	} {
		if _, err := s.Apply(ctx, "fuzz", step); err != nil {
			f.Fatal(err)
		}
	}
	if wal, err = os.ReadFile(filepath.Join(dir, walName)); err == nil {
		boot := []byte(`"boot":"` + bootID() + `"`)
		wal = bytes.Replace(bytes.TrimRight(wal, "\x00"), boot, []byte(`"boot":"an earlier boot"`), 1)
	}
	history, err = os.ReadFile(filepath.Join(dir, historyLogName))
	if err != nil {
		f.Fatal(err)
	}
	s.Close()
	return history, wal
}

// change makes one change and reports whether it was made: whatever the bookkeeping files
// hold, a store answers (it may refuse) rather than crash or hang.
func change(t *testing.T, s *vfs.Store) bool {
	t.Helper()
	s.View(context.Background(), func(tx *vfs.Tx) error {
		_, err := tx.Versions()
		return err
	})
	_, err := s.Apply(context.Background(), "fuzz", func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/new.md"), []byte("new\n"))
	})
	return err == nil
}

// A history log damaged in any way (by a crash, a disk or a hand) is read without a
// crash, and a change that succeeds on it is in the history the next reader sees.
func FuzzHistoryLog(f *testing.F) {
	history, _ := seedLog(f)
	f.Add(history)
	f.Add(history[:len(history)/2])
	f.Add(bytes.ReplaceAll(history, []byte(`"seq":3`), []byte(`"seq":1`)))
	f.Add(bytes.ReplaceAll(history, []byte(`"size":2`), []byte(`"size":-9223372036854775808`)))
	f.Add([]byte("{}\n{\"g\":1}\n\x00\x00"))
	f.Fuzz(func(t *testing.T, log []byte) {
		fsys := NewMemFs()
		if err := fsys.MkdirAll(historyObjects, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFileAtomic(historyLogName, log, false); err != nil {
			t.Fatal(err)
		}
		if !change(t, vfs.NewStore(NewAferoStorage(fsys))) {
			return
		}
		var vs []vfs.Version
		if err := vfs.NewStore(NewAferoStorage(fsys)).View(context.Background(), func(tx *vfs.Tx) (err error) {
			vs, err = tx.Versions()
			return err
		}); err != nil {
			t.Fatalf("the history of a change that was made cannot be read: %v", err)
		}
		if len(vs) == 0 || vs[len(vs)-1].Path != "/memories/new.md" {
			t.Fatalf("the change made is not the last version: %+v", vs)
		}
	})
}

// A write-ahead log of another boot, damaged in any way, is recovered or refused without
// a crash, and the store opened on it takes changes.
func FuzzWALRecovery(f *testing.F) {
	_, wal := seedLog(f)
	if bootID() == "" {
		f.Skip("no write-ahead log on this system: it needs the boot id that Linux, macOS and Windows give")
	}
	f.Add(wal)
	f.Add(wal[:len(wal)*2/3])
	f.Add(bytes.Replace(wal, []byte(`"from":`), []byte(`"from":1`), 1))
	f.Add([]byte(`{"wal":3,"boot":"an earlier boot","cycle":"x"}` + "\n" + `{"g":5,"v":[{"seq":1,"kind":"created","path":"/memories/../x"}]}` + "\n"))
	f.Fuzz(func(t *testing.T, log []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, historyDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, walName), log, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenOSStore(dir)
		if err != nil {
			return // refused: the log is not ours to trust
		}
		defer s.Close()
		if !change(t, s) {
			t.Fatal("a store opened on a recovered log refuses a change")
		}
	})
}

// importSource is a store after changes of every kind, some of them in one transaction.
func importSource(f *testing.F) *vfs.Store {
	src := NewMemoryStore()
	for _, step := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a\n")) },
		func(tx *vfs.Tx) error {
			if err := tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("b\n")); err != nil {
				return err
			}
			return tx.Rename(vfs.MustResolve("/memories/a.md"), vfs.MustResolve("/memories/d/c.md"))
		},
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e/f.md"), []byte("f\n")) },
		func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/d")) },
	} {
		if _, err := src.Apply(context.Background(), "fuzz", step); err != nil {
			f.Fatal(err)
		}
	}
	return src
}

// An import stream is hostile: whatever it holds, Import takes all of it or nothing, and
// what it takes is a store like any other: it exports again, byte for byte, and takes a
// change after the imported history.
func FuzzImport(f *testing.F) {
	src := importSource(f)
	for _, history := range []bool{true, false} {
		var stream bytes.Buffer
		if err := src.Export(context.Background(), &stream, history); err != nil {
			f.Fatal(err)
		}
		f.Add(stream.Bytes())
	}
	f.Fuzz(func(t *testing.T, stream []byte) { checkImport(t, stream) })
}

// The history of an import stream, where most of its checks are: FuzzImport's mutations
// of a whole stream rarely get past the tar headers' checksums.
func FuzzImportHistory(f *testing.F) {
	var stream bytes.Buffer
	if err := importSource(f).Export(context.Background(), &stream, true); err != nil {
		f.Fatal(err)
	}
	// The stream's entries, the history last (Export writes it last).
	var entries []*tar.Header
	var datas [][]byte
	tr := tar.NewReader(&stream)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		entries, datas = append(entries, hdr), append(datas, data)
	}
	f.Add(datas[len(datas)-1])
	f.Add([]byte("{")) // refused after the files: they go again
	f.Add([]byte(`{"seq":1,"time":"2026-01-01T00:00:00Z","actor":"a","command":"create","kind":"created","path":"/memories/x","size":1,"sha256":"` + vfs.DigestOf([]byte("x")).String() + `"}` + "\n"))
	f.Fuzz(func(t *testing.T, history []byte) {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i, hdr := range entries {
			data := datas[i]
			if i == len(entries)-1 {
				data = history
			}
			h := *hdr
			h.Size = int64(len(data))
			tw.WriteHeader(&h)
			tw.Write(data)
		}
		tw.Close()
		checkImport(t, b.Bytes())
	})
}

// checkImport imports stream into a new store (see FuzzImport).
func checkImport(t *testing.T, stream []byte) {
	ctx := context.Background()
	lim := vfs.ImportLimits{MaxFileBytes: 1 << 16, MaxStoreBytes: 1 << 20}
	s := NewMemoryStore()
	if _, err := s.Import(ctx, bytes.NewReader(stream), lim); err != nil {
		s.View(ctx, func(tx *vfs.Tx) error {
			entries, _ := tx.List(vfs.MustResolve(vfs.Root))
			vs, _ := tx.Versions()
			if len(entries)+len(vs) > 0 {
				t.Errorf("a refused import (%v) left %d entries and %d versions", err, len(entries), len(vs))
			}
			return nil
		})
		return
	}
	var out, again bytes.Buffer
	if err := s.Export(ctx, &out, true); err != nil {
		t.Fatal(err)
	}
	s2 := NewMemoryStore()
	if _, err := s2.Import(ctx, bytes.NewReader(out.Bytes()), lim); err != nil {
		t.Fatalf("the export of an imported store does not import: %v", err)
	}
	if err := s2.Export(ctx, &again, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Errorf("export, import, export changed the stream")
	}
	b, err := s.Apply(ctx, "fuzz", func(tx *vfs.Tx) error {
		return tx.WriteFile(vfs.MustResolve("/memories/after-import.md"), []byte("x\n"))
	})
	if err != nil {
		return // the imported tree may hold a file where its parent would be
	}
	var vs []vfs.Version
	s.View(ctx, func(tx *vfs.Tx) error { vs, err = tx.Versions(); return err })
	for _, v := range vs[:len(vs)-1] {
		if v.Seq >= b.Version {
			t.Errorf("the change after the import has number %d, not after the imported %d", b.Version, v.Seq)
		}
	}
}
