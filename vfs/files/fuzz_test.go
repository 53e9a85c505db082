package files

import (
	"bytes"
	"context"
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
