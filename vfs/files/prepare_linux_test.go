package files

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// generationOf reads the storage's change counter, as another process would.
func generationOf(t *testing.T, s *vfs.Store) uint64 {
	t.Helper()
	st := s.Storage().(*AferoStorage)
	c, err := st.fs.LockStorage(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.fs.UnlockStorage()
	return c.Generation
}

// Prepare makes ready what the first change would otherwise make on its way: the history's
// directories and log, the write-ahead log written in advance and flushed, and the flush
// path. The first change then appends its record and flushes it as every later one does,
// and the history holds its version alone. A second store on the directory (another
// process) finds it ready and tells no other process of a change.
func TestPrepareReadiesTheFirstChange(t *testing.T) {
	needWAL(t)
	dir := filepath.Join(t.TempDir(), "m")
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := s.Storage().(*AferoStorage)
	w := st.history.wal
	if err := st.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(filepath.Join(dir, walName))
	if err != nil {
		t.Fatal("no write-ahead log after Prepare:", err)
	}
	if len(wal) != walChunk || len(bytes.TrimRight(wal, "\x00")) != 0 {
		t.Errorf("the log after Prepare: %d bytes, %d before its zeros; want %d of zeros", len(wal), len(bytes.TrimRight(wal, "\x00")), walChunk)
	}
	for _, name := range []string{historyObjects, historyLogName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s after Prepare: %v", name, err)
		}
	}
	w.mu.Lock()
	file := w.file != nil
	w.mu.Unlock()
	if !file {
		t.Error("after Prepare, no descriptor of the log is kept for the flushes")
	}

	logFlushes := w.logFlushes.Load()
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/first.md"), []byte("first"))
	}); err != nil {
		t.Fatal(err)
	}
	if n := w.logFlushes.Load() - logFlushes; n != 1 {
		t.Errorf("the first change flushed the log %d times, want once", n)
	}
	if got := walPaths(t, dir); !slices.Equal(got, []string{"/memories/first.md"}) {
		t.Errorf("records after the first change: %v", got)
	}
	if vs := versionsOf(t, s); len(vs) != 1 || vs[0].Path != "/memories/first.md" || vs[0].Seq != 1 {
		t.Errorf("versions after the first change: %v", vs)
	}

	other, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	gen := generationOf(t, s)
	if err := other.Storage().(*AferoStorage).Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := generationOf(t, s); got != gen {
		t.Errorf("preparing a ready store moved the change counter from %d to %d", gen, got)
	}
	if got := walPaths(t, dir); !slices.Equal(got, []string{"/memories/first.md"}) {
		t.Errorf("records after the second Prepare: %v", got)
	}
}

// A log shorter than a chunk that holds records (one written by appending, before logs
// were written in advance) keeps them: Prepare writes zeros after them, and a crash of the
// machine still recovers every change they hold.
func TestPrepareKeepsTheRecords(t *testing.T) {
	needWAL(t)
	live := t.TempDir()
	s, err := OpenOSStore(live)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve(fmt.Sprintf("/memories/%d.md", i)), []byte("x"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	disk := copyTree(t, live)
	s.Close()
	wal, err := os.ReadFile(filepath.Join(disk, walName))
	if err != nil {
		t.Fatal(err)
	}
	records := bytes.TrimRight(wal, "\x00")
	if err := os.WriteFile(filepath.Join(disk, walName), records, 0o600); err != nil {
		t.Fatal(err)
	}
	want := walPaths(t, disk)

	d, err := OpenOSStore(disk)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Storage().(*AferoStorage).Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(disk, walName))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != walChunk || !bytes.Equal(got[:len(records)], records) || len(bytes.TrimRight(got, "\x00")) != len(records) {
		t.Errorf("the log after Prepare: %d bytes, records kept %v; want %d bytes, its %d bytes of records, then zeros",
			len(got), bytes.Equal(got[:min(len(got), len(records))], records), walChunk, len(records))
	}
	if paths := walPaths(t, disk); !slices.Equal(paths, want) || len(want) != 3 {
		t.Errorf("records after Prepare: %v, want %v", paths, want)
	}
	crashed := copyTree(t, disk)
	d.Close()
	crashDisk(t, crashed, disk) // the records, as a crash of the machine leaves them
	r, err := OpenOSStore(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if vs := versionsOf(t, r); len(vs) != 3 {
		t.Errorf("versions recovered after Prepare: %d, want 3", len(vs))
	}
}

// Prepare runs in the background and Close waits for it, whenever it is called; a
// read-only store, the memory backend, and a store already closed prepare nothing.
func TestPrepareInTheBackground(t *testing.T) {
	needWAL(t)
	for i := range 20 {
		dir := filepath.Join(t.TempDir(), "m")
		s, err := OpenOSStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int32
		count := func(error) { calls.Add(1) }
		s.Prepare(count)
		if i%2 == 0 {
			s.Prepare(count) // a second call finds it ready or waits its turn
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s.Prepare(count) // after Close: nothing starts
		if want := int32(2 + 1 - i%2); calls.Load() != want {
			t.Errorf("done called %d times for %d calls of Prepare", calls.Load(), want)
		}
		if i%4 == 0 { // the store left by an interrupted Prepare opens and changes as ever
			r, err := OpenOSStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Update(context.Background(), func(tx *vfs.Tx) error {
				return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a"))
			}); err != nil {
				t.Fatal(err)
			}
			if vs := versionsOf(t, r); len(vs) != 1 {
				t.Errorf("versions after a change: %d, want 1", len(vs))
			}
			r.Close()
		}
	}

	dir := t.TempDir()
	ro, err := OpenOSStore(dir, vfs.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	ro.Prepare(nil)
	ro.Close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a read-only store's Prepare wrote %v", entries)
	}
	m := NewMemoryStore()
	m.Prepare(nil)
	m.Close()

	// A panic while preparing is reported to done, not left to end the process.
	p := vfs.NewStore(panicky{NewAferoStorage(NewMemFs())})
	got := make(chan error, 1)
	p.Prepare(func(err error) { got <- err })
	if err := <-got; err == nil || !strings.Contains(err.Error(), "panic while preparing the store: boom") {
		t.Errorf("a panic while preparing gave %v", err)
	}
	p.Close()
}

// panicky is storage whose preparation panics.
type panicky struct{ *AferoStorage }

func (panicky) Prepare(context.Context) error { panic("boom") }

// BenchmarkFirstChange is what Prepare saves: the first change of a new os store (a
// create), as a fresh process makes it, without and with the store prepared before.
func BenchmarkFirstChange(b *testing.B) {
	if bootID() == "" {
		b.Skip("no write-ahead log on this system")
	}
	for _, prepared := range []bool{false, true} {
		b.Run(map[bool]string{false: "as-opened", true: "prepared"}[prepared], func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s, err := OpenOSStore(filepath.Join(b.TempDir(), fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				if prepared {
					if err := s.Storage().(*AferoStorage).Prepare(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
					return tx.CreateFile(vfs.MustResolve("/memories/first.md"), []byte("# notes\nfirst line\n"))
				}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
}
