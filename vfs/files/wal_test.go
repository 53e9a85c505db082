package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// treeOf reads every file below dir (bookkeeping aside): relative name → content.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if vfs.IsBookkeeping(d.Name()) && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// copyTree copies dir to a new directory, bookkeeping included.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o600)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func versionsOf(t *testing.T, s *vfs.Store) []vfs.Version {
	t.Helper()
	var vs []vfs.Version
	if err := s.View(context.Background(), func(tx *vfs.Tx) error {
		var err error
		vs, err = tx.Versions()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return vs
}

// A crash of the machine may keep from the disk any write made after the last checkpoint
// but the write-ahead log's flushed records. The test builds that disk: the directory as
// the checkpoint left it, the log as the changes left it (marked as written in another
// boot), and of the files and the history log some, none or all as the changes left them.
// Opening it recovers every change: the files, the history and its contents are those of
// the store that did not crash, and a failed change is not redone.
func TestWALRecoversAfterMachineCrash(t *testing.T) {
	needWAL(t)
	// "data-lost": the names reached the disk but not all of the data: the files written
	// since the checkpoint show empty or zeros, as a filesystem that allocates late or orders
	// nothing leaves them. "appended": as "all", with a log that has no zeros past its
	// records, as a nearly full disk leaves it (walAppend).
	for _, keep := range []string{"none", "some", "all", "files-not-history", "data-lost", "appended"} {
		t.Run(keep, func(t *testing.T) {
			live := t.TempDir()
			s, err := OpenOSStore(live)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			up := func(fn func(tx *vfs.Tx) error) error { return s.Update(ctx, fn) }
			create := func(p, text string) {
				if err := up(func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve(p), []byte(text)) }); err != nil {
					t.Fatal(err)
				}
			}
			create("/memories/a.md", "alpha\n")
			create("/memories/dir/b.md", "beta\n")
			create("/memories/c.md", "gamma\n")
			// The checkpoint: what the disk surely holds.
			checkpointNow(t, s)
			disk := copyTree(t, live)

			// Changes after it, of every kind, and one that fails.
			if err := up(func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("alpha 2\n")) }); err != nil {
				t.Fatal(err)
			}
			if err := up(func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("alpha 3\n")) }); err != nil {
				t.Fatal(err)
			}
			if err := up(func(tx *vfs.Tx) error {
				return tx.Rename(vfs.MustResolve("/memories/dir"), vfs.MustResolve("/memories/moved"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := up(func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/c.md")) }); err != nil {
				t.Fatal(err)
			}
			create("/memories/c.md", "gamma again\n")
			create("/memories/new/d.md", "delta\n")
			// A rename onto an existing file fails: recorded, then settled as failed.
			if err := up(func(tx *vfs.Tx) error {
				return tx.Rename(vfs.MustResolve("/memories/a.md"), vfs.MustResolve("/memories/c.md"))
			}); err == nil {
				t.Fatal("a rename onto an existing file succeeded")
			}
			want := treeOf(t, live)
			wantVersions := versionsOf(t, s)

			// The crashed disk.
			crashDisk(t, disk, live)
			if keep == "appended" {
				wal, _ := os.ReadFile(filepath.Join(disk, walName))
				os.WriteFile(filepath.Join(disk, walName), bytes.TrimRight(wal, "\x00"), 0o600)
			}
			persist := func(rel string) {
				b, err := os.ReadFile(filepath.Join(live, rel))
				if err != nil {
					os.Remove(filepath.Join(disk, rel))
					return
				}
				os.MkdirAll(filepath.Dir(filepath.Join(disk, rel)), 0o700)
				os.WriteFile(filepath.Join(disk, rel), b, 0o600)
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(keep))))
			for _, rel := range []string{"a.md", "dir/b.md", "moved/b.md", "c.md", "new/d.md"} {
				if keep == "all" || keep == "appended" || keep == "files-not-history" || keep == "data-lost" || keep == "some" && rng.IntN(2) == 0 {
					persist(rel)
				}
			}
			if keep == "all" || keep == "appended" || keep == "some" || keep == "data-lost" {
				persist(historyLogName)
			}
			if keep == "data-lost" {
				os.WriteFile(filepath.Join(disk, "a.md"), make([]byte, 4096), 0o600)
				os.WriteFile(filepath.Join(disk, "moved/b.md"), make([]byte, len("beta\n")), 0o600)
				os.WriteFile(filepath.Join(disk, "c.md"), nil, 0o600)
				os.WriteFile(filepath.Join(disk, "new/d.md"), nil, 0o600)
			}
			s.Close() // (its checkpoint is of the live directory, not of the disk)

			r, err := OpenOSStore(disk)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := treeOf(t, disk); !maps.Equal(got, want) {
				t.Errorf("files after recovery:\n got %v\nwant %v", got, want)
			}
			gotVersions := versionsOf(t, r)
			if g, w := jsonOf(gotVersions), jsonOf(wantVersions); g != w {
				t.Errorf("history after recovery:\n got %s\nwant %s", g, w)
			}
			for _, v := range gotVersions {
				if v.SHA256.IsZero() {
					continue
				}
				if err := r.View(ctx, func(tx *vfs.Tx) error { _, err := tx.Content(v.SHA256); return err }); err != nil {
					t.Errorf("content of version %d (%s) after recovery: %v", v.Seq, v.Path, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(disk, walName)); len(b) != 0 {
				t.Errorf("the log was not emptied by recovery: %d bytes", len(b))
			}
			exportImports(t, r)
			// The history goes on from where it was.
			if err := r.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e.md"), []byte("e")) }); err != nil {
				t.Fatal(err)
			}
			vs := versionsOf(t, r)
			if last := vs[len(vs)-1]; last.Seq != wantVersions[len(wantVersions)-1].Seq+1 {
				t.Errorf("the next change is number %d, want %d", last.Seq, wantVersions[len(wantVersions)-1].Seq+1)
			}
		})
	}
}

// Recovery after a crash of the machine keeps the history the store's options keep: it
// used to run with the default limits, so that a store told to keep every version lost
// those older than half a year, and those past 256 MiB of contents, when it was opened.
func TestWALRecoveryKeepsWhatTheOptionsKeep(t *testing.T) {
	needWAL(t)
	live := t.TempDir()
	long := vfs.WithHistory(vfs.HistoryConfig{Now: func() time.Time { return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }})
	s := openOSStore(t, live, long)
	checkpointNow(t, s)
	disk := copyTree(t, live)
	for i, text := range []string{"one", "two", "three"} {
		if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
			if i == 0 {
				return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte(text))
			}
			return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte(text))
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := versionsOf(t, s)
	crashDisk(t, disk, live)
	r := openOSStore(t, disk, vfs.WithHistory(vfs.HistoryConfig{}))
	if got := versionsOf(t, r); jsonOf(got) != jsonOf(want) {
		t.Errorf("history after recovery:\n got %s\nwant %s", jsonOf(got), jsonOf(want))
	}
}

// openOSStore opens the os store in dir, closed when the test ends.
func openOSStore(t *testing.T, dir string, opts ...vfs.Option) *vfs.Store {
	t.Helper()
	s, err := OpenOSStore(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// needWAL skips a test where the write-ahead log is off.
func needWAL(t *testing.T) {
	if bootID() == "" {
		t.Skip("no write-ahead log on this system: it needs the boot id that Linux, macOS and Windows give")
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A file edited by hand after the crash's last record is left as it is; the write-ahead
// log never holds a redacted content; a store closed cleanly leaves nothing to recover.
func TestWALEdgeCases(t *testing.T) {
	needWAL(t)
	dir := t.TempDir()
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	secret := "ghp_" + strings.Repeat("A", 36)
	if err := s.Update(ctx, func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/s.md"), []byte(secret))
	}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, walName)); !bytes.Contains(b, []byte("Z2hwX")) { // base64 of "ghp_"
		t.Fatalf("the change's record does not carry its content: %.300s", b)
	}
	if err := s.Update(ctx, func(tx *vfs.Tx) error {
		if err := tx.WriteFile(vfs.MustResolve("/memories/s.md"), []byte("nothing secret")); err != nil {
			return err
		}
		_, err := tx.Redact(vfs.DigestOf([]byte(secret)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, walName)); len(bytes.TrimRight(b, "\x00")) != 0 {
		t.Errorf("after a redaction the log still holds %q", b)
	}
	if err := s.Update(ctx, func(tx *vfs.Tx) error {
		return tx.WriteFile(vfs.MustResolve("/memories/s.md"), []byte("by memory-mcp"))
	}); err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(filepath.Join(dir, walName))
	if len(wal) == 0 {
		t.Fatal("no record of the change")
	}
	s.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, walName)); len(bytes.TrimRight(b, "\x00")) != 0 {
		t.Errorf("a clean close left records in the log: %q", b)
	}

	// As if the machine had crashed before the close, and someone edited the file by hand
	// since: the record must not overwrite the hand's edit.
	os.WriteFile(filepath.Join(dir, walName), asOtherBoot(t, wal), 0o600)
	os.WriteFile(filepath.Join(dir, "s.md"), []byte("by hand"), 0o600)
	r, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "s.md")); string(b) != "by hand" {
		t.Errorf("recovery overwrote a hand edit: %q", b)
	}
}

// Recovery records the files edited by hand since the crash, but not those whose names no
// path may hold (made outside memory-mcp): a version of one could not be imported, and the
// store's export would no longer import anywhere.
func TestWALRecoveryLeavesNamesNoPathCanHold(t *testing.T) {
	needWAL(t)
	dir := t.TempDir()
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Update(ctx, func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("by memory-mcp"))
	}); err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(filepath.Join(dir, walName))
	s.Close()
	os.WriteFile(filepath.Join(dir, walName), asOtherBoot(t, wal), 0o600)
	os.WriteFile(filepath.Join(dir, "a.md"), []byte("by hand"), 0o600)
	bad := []string{"new\nline.md", "not-utf8-\xff.md"}
	for _, name := range bad {
		os.WriteFile(filepath.Join(dir, name), []byte("by hand"), 0o600)
	}
	r, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for _, v := range versionsOf(t, r) {
		got = append(got, fmt.Sprintf("%s %s %s", v.Command, v.Kind, v.Path))
	}
	if want := []string{"update created /memories/a.md", "recover modified /memories/a.md"}; !slices.Equal(got, want) {
		t.Errorf("versions after recovery:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, name := range bad {
		if b, err := os.ReadFile(filepath.Join(dir, name)); string(b) != "by hand" {
			t.Errorf("%q after recovery: %q, %v", name, b, err)
		}
	}
	exportImports(t, r)
}

// A store opened without history after a machine crash still recovers what the log holds.
func TestWALRecoversWithHistoryOff(t *testing.T) {
	needWAL(t)
	dir := t.TempDir()
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("acknowledged"))
	}); err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(filepath.Join(dir, walName))
	s.Close()
	// The disk as a crash left it: the record, but not the file.
	os.Remove(filepath.Join(dir, "a.md"))
	os.WriteFile(filepath.Join(dir, walName), asOtherBoot(t, wal), 0o600)
	r, err := OpenOSStore(dir, vfs.WithHistory(vfs.HistoryConfig{Off: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := os.ReadFile(filepath.Join(dir, "a.md")); string(b) != "acknowledged" {
		t.Errorf("a.md after recovery: %q, %v", b, err)
	}
}

// Changes are acknowledged after a flush of the log that they share, and their files and
// history lines are written before it: a crash of the machine may keep those of a change
// whose record it lost, which was never acknowledged. The test builds such disks: the log
// cut after its first record (flushed with its header), and the files and the history
// log as the later changes left them, or not. Recovery keeps the acknowledged change, and
// leaves files and history that agree, every content a version names kept: a file that a
// lost change wrote is recorded as it is, never overwritten.
func TestWALRecoversLostRecords(t *testing.T) {
	needWAL(t)
	for _, keep := range []string{"files-and-history", "files", "history", "nothing"} {
		t.Run(keep, func(t *testing.T) {
			live := t.TempDir()
			s, err := OpenOSStore(live)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			up := func(fn func(tx *vfs.Tx) error) {
				t.Helper()
				if err := s.Update(ctx, fn); err != nil {
					t.Fatal(err)
				}
			}
			up(func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("alpha\n")) })
			up(func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/b.md"), []byte("beta\n")) })
			checkpointNow(t, s)
			disk := copyTree(t, live)
			checkpointFiles := treeOf(t, disk)

			// The acknowledged change: the first record after the checkpoint.
			up(func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("alpha 2\n")) })
			wal, err := os.ReadFile(filepath.Join(live, walName))
			if err != nil {
				t.Fatal(err)
			}
			// Changes whose records the crash loses.
			up(func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/b.md"), []byte("beta 2\n")) })
			up(func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/c.md"), []byte("gamma\n")) })
			up(func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/a.md")) })

			wal = asOtherBoot(t, wal)
			if n := bytes.Count(wal, []byte("\n")); n != 2 {
				t.Fatalf("the log after the first change holds %d lines, want its header and one record", n)
			}
			os.WriteFile(filepath.Join(disk, walName), wal, 0o600)
			if keep == "files-and-history" || keep == "history" {
				b, _ := os.ReadFile(filepath.Join(live, historyLogName))
				os.WriteFile(filepath.Join(disk, historyLogName), b, 0o600)
			}
			if keep == "files-and-history" || keep == "files" {
				for _, name := range []string{"a.md", "b.md", "c.md"} {
					os.Remove(filepath.Join(disk, name))
					if b, err := os.ReadFile(filepath.Join(live, name)); err == nil {
						os.WriteFile(filepath.Join(disk, name), b, 0o600)
					}
				}
			}
			s.Close()

			r, err := OpenOSStore(disk)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			files := treeOf(t, disk)
			// Every file old or new, and the acknowledged change there unless a later
			// (lost) change's file replaced it.
			switch keep {
			case "files-and-history", "files":
				want := map[string]string{"b.md": "beta 2\n", "c.md": "gamma\n"}
				if !maps.Equal(files, want) {
					t.Errorf("files after recovery: %v, want %v (as the lost changes left them)", files, want)
				}
			default:
				want := maps.Clone(checkpointFiles)
				want["a.md"] = "alpha 2\n"
				if !maps.Equal(files, want) {
					t.Errorf("files after recovery: %v, want %v (the checkpoint and the acknowledged change)", files, want)
				}
			}
			vs := versionsOf(t, r)
			state := map[string]string{}
			acked := false
			for _, v := range vs {
				switch v.Kind {
				case vfs.Created, vfs.Modified:
					state[strings.TrimPrefix(v.Path, vfs.Root+"/")] = v.SHA256.String()
				case vfs.Deleted:
					delete(state, strings.TrimPrefix(v.Path, vfs.Root+"/"))
				case vfs.Moved:
					delete(state, strings.TrimPrefix(v.Path, vfs.Root+"/"))
					state[strings.TrimPrefix(v.NewPath, vfs.Root+"/")] = v.SHA256.String()
				}
				if v.Path == "/memories/a.md" && v.SHA256 == vfs.DigestOf([]byte("alpha 2\n")) && v.Command != "recover" {
					acked = true
				}
				for _, d := range []vfs.Digest{v.SHA256, v.Prev} {
					if d.IsZero() {
						continue
					}
					if err := r.View(ctx, func(tx *vfs.Tx) error { _, err := tx.Content(d); return err }); err != nil {
						t.Errorf("content %s of version %d (%s %s) after recovery: %v", d, v.Seq, v.Kind, v.Path, err)
					}
				}
			}
			if !acked {
				t.Errorf("the acknowledged change is not in the history: %s", jsonOf(vs))
			}
			got := map[string]string{}
			for name, text := range files {
				got[name] = vfs.DigestOf([]byte(text)).String()
			}
			if !maps.Equal(got, state) {
				t.Errorf("history and files disagree after recovery:\nfiles   %v\nhistory %v\n%s", got, state, jsonOf(vs))
			}
			if b, _ := os.ReadFile(filepath.Join(disk, walName)); len(b) != 0 {
				t.Errorf("the log was not emptied by recovery: %d bytes", len(b))
			}
			exportImports(t, r)
		})
	}
}

// gatedFS holds every flush of the write-ahead log (a Sync of a descriptor opened to flush
// it) until gate is closed, once armed, and counts them.
type gatedFS struct {
	*OSFs
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
	open    sync.Once
	syncs   atomic.Int32
	fail    atomic.Bool // the next flush fails with an I/O error, writing nothing

	mu     sync.Mutex
	events []string // the log's writes, writebacks started and flushes, in order (note)
}

// release lets held and later flushes through (also when a test fails while one is held,
// so that closing the store does not wait for it forever).
func (g *gatedFS) release() { g.open.Do(func() { close(g.gate) }) }

// gatedStore opens a store on dir through a gatedFS, closed (after a release) when the test
// ends.
func gatedStore(t *testing.T, dir string) (*gatedFS, *vfs.Store) {
	t.Helper()
	osfs, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedFS{OSFs: osfs, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	s := vfs.NewStore(NewAferoStorage(g))
	t.Cleanup(func() { s.Close(); osfs.Close() })
	t.Cleanup(g.release) // runs first
	return g, s
}

// held waits until a flush is held.
func (g *gatedFS) held(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the change never flushed the log")
	}
}

// unanswered checks that no call sends on done for a while (what: the failure's words).
func unanswered(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s (err %v)", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

// answered waits for n calls to send on done, each without an error.
func answered(t *testing.T, done <-chan error, n int) {
	t.Helper()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := g.OSFs.OpenFile(name, flag, perm)
	switch {
	case err != nil || name != walName:
		return f, err
	case flag == os.O_WRONLY:
		return &gatedFile{File: f, g: g}, nil
	case flag == os.O_RDWR|os.O_CREATE: // the descriptor changes append through
		return &appendFile{File: f, g: g}, nil
	}
	return f, err
}

// note records one event of the log's files, in order (see appendFile).
func (g *gatedFS) note(event string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, event)
}

// appendFile is the log as changes append to it: it notes each write (with the text
// written, zeros left out) and each writeback started.
type appendFile struct {
	afero.File
	g *gatedFS
}

func (f *appendFile) WriteAt(p []byte, off int64) (int, error) {
	f.g.note(fmt.Sprintf("write %d %d %s", off, len(p), bytes.TrimRight(p, "\x00")))
	return f.File.WriteAt(p, off)
}

type gatedFile struct {
	afero.File
	g *gatedFS
}

func (f *gatedFile) Sync() error {
	f.g.syncs.Add(1)
	f.g.note("sync")
	if f.g.armed.Load() {
		select {
		case f.g.entered <- struct{}{}:
		default:
		}
		<-f.g.gate
	}
	if f.g.fail.CompareAndSwap(true, false) {
		f.g.note("sync failed")
		return &fs.PathError{Op: "sync", Path: walName, Err: syscall.EIO}
	}
	return f.File.Sync()
}

// eventsAfter returns the events noted after the first one that starts with from (all of
// them for "").
func (g *gatedFS) eventsAfter(from string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if from == "" {
		return slices.Clone(g.events)
	}
	for i, e := range g.events {
		if strings.HasPrefix(e, from) {
			return slices.Clone(g.events[i+1:])
		}
	}
	return nil
}

// gatedCreates opens a gatedStore in a new directory and makes its first change (flushed
// with the log's header, under the lock); create makes the file name, holding its name.
func gatedCreates(t *testing.T) (dir string, g *gatedFS, create func(name string) error) {
	t.Helper()
	needWAL(t)
	dir = t.TempDir()
	g, s := gatedStore(t, dir)
	create = func(name string) error {
		return s.Update(context.Background(), func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve("/memories/"+name), []byte(name))
		})
	}
	if err := create("first.md"); err != nil {
		t.Fatal(err)
	}
	return dir, g, create
}

// awaitWritten waits until the file at path exists, failing the test past deadline (the
// failure says the file was not so).
func awaitWritten(t *testing.T, path string, deadline time.Time, so string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not %s", filepath.Base(path), so)
		}
		time.Sleep(time.Millisecond)
	}
}

// A change does not hold the store's lock while its record is flushed, is answered only
// after the flush, and the changes made during one flush share the next.
func TestWALGroupCommit(t *testing.T) {
	dir, g, create := gatedCreates(t)
	g.armed.Store(true)
	g.syncs.Store(0)
	done := make(chan error, 4)
	go func() { done <- create("a.md") }()
	g.held(t)
	// a.md's flush is held: other changes still get the lock and make their changes.
	for _, name := range []string{"b.md", "c.md", "d.md"} {
		go func() { done <- create(name) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range []string{"a.md", "b.md", "c.md", "d.md"} {
		awaitWritten(t, filepath.Join(dir, name), deadline, "written while another change's flush was held: the lock is held across the flush")
	}
	unanswered(t, done, "a change was answered before its record was flushed")
	g.release()
	answered(t, done, 4)
	if n := g.syncs.Load(); n != 2 {
		t.Errorf("%d flushes for 4 changes, want 2: a.md's, then one shared by the three made during it", n)
	}
}

// A failed flush of the log fails none of the changes it was to make durable, and no later
// flush of the log answers for a record until a checkpoint: the kernel may have dropped
// the records it failed to write, and recovery stops reading at the hole. The checkpoint
// flushes the files themselves, and the log is used again after it.
func TestWALFailedFlushCheckpoints(t *testing.T) {
	dir, g, create := gatedCreates(t)
	readFile := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	g.fail.Store(true)
	g.armed.Store(true)
	done := make(chan error, 2)
	go func() { done <- create("a.md") }()
	g.held(t)
	go func() { done <- create("b.md") }()
	// b.md's record is written: it waits for the flush after a.md's.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(g.eventsAfter(""), func(e string) bool { return strings.Contains(e, "/memories/b.md") }) {
		if time.Now().After(deadline) {
			t.Fatal("b.md's record was never written")
		}
		time.Sleep(time.Millisecond)
	}
	g.armed.Store(false)
	g.release()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("a change failed though its file was written and a checkpoint could flush it: %v", err)
		}
	}
	if after := g.eventsAfter("sync failed"); len(after) > 0 {
		t.Fatalf("after the failed flush, before a checkpoint, the log was used: %q", after)
	}
	if recs := scanWAL(readFile(walName)).records; len(recs) > 0 {
		t.Fatalf("the log still holds %d records: no checkpoint made the changes durable", len(recs))
	}
	if err := create("c.md"); err != nil {
		t.Fatal(err)
	}
	if after := g.eventsAfter("sync failed"); !slices.Contains(after, "sync") {
		t.Errorf("after the checkpoint, a change did not flush the log: %q", after)
	}
	recs := scanWAL(readFile(walName)).records
	if len(recs) != 1 || recs[0].V[0].Path != "/memories/c.md" {
		t.Errorf("the log holds %v, want c.md's record", recs)
	}
	for _, name := range []string{"a.md", "b.md", "c.md"} {
		if got := string(readFile(name)); got != name {
			t.Errorf("%s holds %q", name, got)
		}
	}
}

// crashDisk returns a copy of disk (a copy of a store's directory taken at a checkpoint) with
// live's write-ahead log marked as written in an earlier boot: what a machine crash leaves
// when it keeps the flushed log and nothing else written since the checkpoint.
func crashDisk(t *testing.T, disk, live string) {
	t.Helper()
	wal, err := os.ReadFile(filepath.Join(live, walName))
	if errors.Is(err, fs.ErrNotExist) {
		return // nothing was ever changed
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(wal) > 0 && wal[0] != 0 { // else no record since the last checkpoint
		wal = asOtherBoot(t, wal)
	}
	os.MkdirAll(filepath.Join(disk, historyDir), 0o700) // made, flushed, after the checkpoint
	if err := os.WriteFile(filepath.Join(disk, walName), wal, 0o600); err != nil {
		t.Fatal(err)
	}
}

// asOtherBoot returns the log wal with its header naming an earlier boot (as after a crash
// of the machine).
func asOtherBoot(t *testing.T, wal []byte) []byte {
	t.Helper()
	boot := []byte(`"boot":"` + bootID() + `"`)
	if !bytes.Contains(wal, boot) {
		t.Fatalf("the log does not name this boot: %.200q", wal)
	}
	return bytes.Replace(wal, boot, []byte(`"boot":"an earlier boot"`), 1)
}

// exportImports fails the test unless s exports and the stream imports into a new store:
// what recovery recorded is a history like any other.
func exportImports(t *testing.T, s *vfs.Store) {
	t.Helper()
	var out bytes.Buffer
	if err := s.Export(context.Background(), &out, true); err != nil {
		t.Fatalf("export: %v", err)
	}
	if _, err := NewMemoryStore().Import(context.Background(), &out, vfs.ImportLimits{}); err != nil {
		t.Errorf("the recovered store's export does not import: %v", err)
	}
}

// checkpointNow runs a checkpoint of s's write-ahead log.
func checkpointNow(t *testing.T, s *vfs.Store) {
	t.Helper()
	if err := s.Storage().(*AferoStorage).checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// The log is written in advance: records overwrite zeros, so appending one does not change
// the file's size, and the records end where the zeros start.
func TestWALWrittenInAdvance(t *testing.T) {
	needWAL(t)
	dir := t.TempDir()
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sizes []int64
	for i := range 3 {
		if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve(fmt.Sprintf("/memories/%d.md", i)), []byte("x"))
		}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, walName))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, int64(len(b)))
		records := bytes.TrimRight(b, "\x00")
		if n := bytes.Count(records, []byte("\n")); n != i+2 || records[len(records)-1] != '\n' || bytes.IndexByte(records, 0) >= 0 {
			t.Fatalf("after %d changes the log holds %d lines before its zeros, want a header and %d records", i+1, n, i+1)
		}
	}
	if sizes[0] != walChunk || sizes[1] != sizes[0] || sizes[2] != sizes[0] {
		t.Errorf("log sizes after each change: %v, want %d each (written in advance)", sizes, walChunk)
	}
	// A large content grows the log by whole chunks; the checkpoint cuts it back to one.
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/big.md"), big)
	}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, walName)); fi.Size() <= walShrink || fi.Size()%walChunk != 0 {
		t.Errorf("log of %d bytes after a 5 MiB record, want whole chunks past %d", fi.Size(), walShrink)
	}
	checkpointNow(t, s)
	if b, _ := os.ReadFile(filepath.Join(dir, walName)); len(b) != walChunk || len(bytes.TrimRight(b, "\x00")) != 0 {
		t.Errorf("after the checkpoint the log is %d bytes (%d before its zeros), want %d of zeros", len(b), len(bytes.TrimRight(b, "\x00")), walChunk)
	}
}

// Two stores on one directory (as two processes) append to one log: each finds where the
// other's records end, also after the other emptied the log at a checkpoint, and after a
// record a killed process left half-written. A crash of the machine then loses nothing any
// of them acknowledged.
func TestWALSharedBetweenStores(t *testing.T) {
	needWAL(t)
	live := t.TempDir()
	open := func() *vfs.Store {
		s, err := OpenOSStore(live)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	ctx := context.Background()
	create := func(s *vfs.Store, name string) {
		t.Helper()
		if err := s.Update(ctx, func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve("/memories/"+name), []byte(name+" content"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	create(a, "a1.md")
	create(b, "b1.md")
	create(a, "a2.md")
	checkpointNow(t, b)
	disk := copyTree(t, live)
	create(a, "a3.md") // a must see that b emptied the log
	create(b, "b2.md")
	// A record a killed process left half-written, at the end of the records.
	f, err := os.OpenFile(filepath.Join(live, walName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(f)
	end := int64(len(bytes.TrimRight(data, "\x00")))
	f.WriteAt([]byte(`{"g":999,"v":[{"seq":999,"pa`), end)
	f.Close()
	create(a, "a4.md")
	create(b, "b3.md")
	want := treeOf(t, live)
	crashDisk(t, disk, live)
	a.Close()
	b.Close()

	r, err := OpenOSStore(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := treeOf(t, disk); !maps.Equal(got, want) {
		t.Errorf("files after recovery:\n got %v\nwant %v", got, want)
	}
}

// A store that only read since another changed the directory still sees that change when
// it next writes: the read used to take the news of it, so that the write appended its
// record over the other's in the log (a crash of the machine then lost the other's change)
// and numbered its version as the other's.
func TestWALSharedAfterARead(t *testing.T) {
	needWAL(t)
	live := t.TempDir()
	a, b := openOSStore(t, live), openOSStore(t, live)
	ctx := context.Background()
	create := func(s *vfs.Store, name string) {
		t.Helper()
		if err := s.Update(ctx, func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve("/memories/"+name), []byte(name+" content"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *vfs.Store) {
		t.Helper()
		if err := s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.List(vfs.MustResolve(vfs.Root)); return err }); err != nil {
			t.Fatal(err)
		}
	}
	create(a, "a1.md")
	create(b, "b1.md")
	checkpointNow(t, a)
	disk := copyTree(t, live)
	create(a, "a2.md")
	read(b)
	create(b, "b2.md")
	read(a)
	create(a, "a3.md")
	want := treeOf(t, live)
	var seqs []uint64
	if err := b.View(ctx, func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		for _, v := range vs {
			seqs = append(seqs, v.Seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("the versions' numbers: %v, want 1 to 5", seqs)
	}
	exportImports(t, b)
	crashDisk(t, disk, live)

	r := openOSStore(t, disk)
	if got := treeOf(t, disk); !maps.Equal(got, want) {
		t.Errorf("files after recovery:\n got %v\nwant %v", got, want)
	}
	exportImports(t, r)
}

// BenchmarkLogFlush is why the log is written in advance: a 256-byte record flushed
// (fdatasync) after being appended to a growing file, against one written over bytes
// written and flushed in advance, each round after a file is written and renamed as a
// change does. Run it with TMPDIR on the filesystem to measure (on ext4 with a journal the
// append's flush also commits the journal).
func BenchmarkLogFlush(b *testing.B) {
	rec := append(bytes.Repeat([]byte("x"), 255), '\n')
	for _, way := range []string{"append", "overwrite"} {
		b.Run(way, func(b *testing.B) {
			dir := b.TempDir()
			f := benchLog(b, dir, way == "overwrite")
			var off int64
			for i := 0; b.Loop(); i++ {
				tmp := filepath.Join(dir, "tmp")
				os.WriteFile(tmp, rec, 0o600)
				os.Rename(tmp, filepath.Join(dir, fmt.Sprint(i%50)))
				if _, err := f.WriteAt(rec, off); err != nil {
					b.Fatal(err)
				}
				if off += int64(len(rec)); way == "overwrite" && off == benchLogSize {
					off = 0
				}
				if err := datasync(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchLogSize is the size of a log written in advance in the flush benchmarks, which go
// back to its start at its end.
const benchLogSize = 16 << 20

// benchLog opens a log in dir for the flush benchmarks, closed when the benchmark ends;
// with zeros it is written in advance (benchLogSize of zeros, flushed).
func benchLog(b *testing.B, dir string, zeros bool) *os.File {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "wal"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if zeros {
		if err := writeZeros(f, 0, benchLogSize); err != nil {
			b.Fatal(err)
		}
		datasync(f)
	}
	return f
}

// A read that may have seen a change not yet flushed answers only after the flush; a
// store that sees another's change flushes the log once itself before it answers.
func TestWALReadsWaitForTheFlush(t *testing.T) {
	needWAL(t)
	dir := t.TempDir()
	g, s := gatedStore(t, dir)
	g2, s2 := gatedStore(t, dir)
	ctx := context.Background()
	read := func(s *vfs.Store) error {
		return s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.ReadFile(vfs.MustResolve("/memories/first.md")); return err })
	}
	if err := s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/first.md"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	if err := read(s2); err != nil { // s2 knows the store as it is now
		t.Fatal(err)
	}
	g.armed.Store(true)
	done := make(chan error, 2)
	go func() {
		done <- s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a")) })
	}()
	g.held(t)
	go func() { done <- read(s) }()
	unanswered(t, done, "a call ended while the change's flush was held")
	g.release()
	answered(t, done, 2)

	g2.syncs.Store(0)
	if err := read(s2); err != nil {
		t.Fatal(err)
	}
	if n := g2.syncs.Load(); n != 1 {
		t.Errorf("a read after another store's change flushed the log %d times, want once", n)
	}
	if err := read(s2); err != nil {
		t.Fatal(err)
	}
	if n := g2.syncs.Load(); n != 1 {
		t.Errorf("a read with nothing new flushed the log (%d flushes in all)", n)
	}
}

// syncRecorder is an OSFs that records which files and directories were flushed.
// newSyncRecorder is an OS filesystem in a new directory that records what is flushed.
func newSyncRecorder(t *testing.T) *syncRecorder {
	t.Helper()
	osfs, err := NewOSFs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &syncRecorder{OSFs: osfs, synced: map[string]bool{}, fail: map[string]bool{}, dropped: map[string]bool{}, open: map[string]int{}}
}

type syncRecorder struct {
	*OSFs
	mu     sync.Mutex
	synced map[string]bool
	// fail names files whose next flush fails, the disk taking none of it. Their writes
	// since are then dropped, and a later flush reports no error (Linux reports a failed
	// writeback once): dropped until the file is written anew.
	fail, dropped map[string]bool
	// open counts the descriptors open by name: as on Windows, a file open is not replaced.
	open map[string]int
}

type recordedFile struct {
	afero.File
	r    *syncRecorder
	name string
}

func (f recordedFile) Sync() error {
	r := f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.fail[f.name]:
		delete(r.fail, f.name)
		r.dropped[f.name] = true
		return &fs.PathError{Op: "sync", Path: f.name, Err: syscall.EIO}
	case r.dropped[f.name]:
		return nil
	}
	r.synced[f.name] = true
	return f.File.Sync()
}

func (f recordedFile) Close() error {
	f.r.mu.Lock()
	f.r.open[f.name]--
	f.r.mu.Unlock()
	return f.File.Close()
}

func (r *syncRecorder) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := r.OSFs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.open[name]++
	r.mu.Unlock()
	return recordedFile{f, r, name}, nil
}

// WriteFileAtomic records the file and its directory as flushed.
func (r *syncRecorder) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	r.mu.Lock()
	open := r.open[name]
	r.mu.Unlock()
	if open > 0 {
		return &fs.PathError{Op: "rename", Path: name, Err: fs.ErrPermission}
	}
	err := r.OSFs.WriteFileAtomic(name, data, noReplace)
	if err == nil {
		r.mu.Lock()
		r.synced[name], r.synced[path.Dir(name)+"/"] = true, true
		delete(r.dropped, name)
		r.mu.Unlock()
	}
	return err
}

// WriteFileUnsynced records the file as not flushed (again).
func (r *syncRecorder) WriteFileUnsynced(name string, data []byte, noReplace bool) error {
	r.mu.Lock()
	delete(r.synced, name)
	delete(r.dropped, name)
	r.mu.Unlock()
	return r.OSFs.WriteFileUnsynced(name, data, noReplace)
}

func (r *syncRecorder) SyncDir(name string) error {
	r.mu.Lock()
	r.synced[name+"/"] = true
	r.mu.Unlock()
	return r.OSFs.SyncDir(name)
}

// A file whose flush failed at a checkpoint is written again by the next, not flushed
// again: the kernel may have dropped what it failed to write and report no error the
// second time, and the emptied log could then no longer redo the change after a crash.
// Should the kernel have evicted those pages meanwhile, the file reads as the disk holds
// it (zeros), and the content comes from the records instead.
func TestCheckpointWritesAgainWhatAFlushFailed(t *testing.T) {
	needWAL(t)
	for _, evicted := range []bool{false, true} {
		t.Run(fmt.Sprintf("evicted=%v", evicted), func(t *testing.T) {
			rec := newSyncRecorder(t)
			s := vfs.NewStore(NewAferoStorage(rec))
			defer s.Close()
			const content = "the content of a.md"
			write := func(create bool, data string) {
				t.Helper()
				p := vfs.MustResolve("/memories/a.md")
				if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
					if create {
						return tx.CreateFile(p, []byte(data))
					}
					return tx.WriteFile(p, []byte(data))
				}); err != nil {
					t.Fatal(err)
				}
			}
			write(true, content)
			rec.mu.Lock()
			rec.fail["a.md"] = true
			rec.mu.Unlock()
			st := s.Storage().(*AferoStorage)
			if err := st.checkpoint(); vfs.FailureOf(err) != vfs.FailIO {
				t.Fatalf("a checkpoint whose flush of a.md fails: %v", err)
			}
			if evicted {
				os.WriteFile(filepath.Join(rec.dir, "a.md"), make([]byte, len(content)), 0o600)
			}
			if err := st.checkpoint(); err != nil {
				t.Fatal(err)
			}
			if data, err := os.ReadFile(filepath.Join(rec.dir, walName)); err != nil || len(bytes.TrimRight(data, "\x00")) != 0 {
				t.Fatalf("the log after the second checkpoint holds %q (%v)", bytes.TrimRight(data, "\x00"), err)
			}
			rec.mu.Lock()
			if !rec.synced["a.md"] {
				t.Error("the log was emptied with a.md not on the disk: its flush failed, and it was only flushed again")
			}
			rec.mu.Unlock()
			if data, err := afero.ReadFile(rec.OSFs, "a.md"); string(data) != content {
				t.Errorf("a.md holds %q (%v)", data, err)
			}
			// Once a checkpoint succeeded, the next flushes the files as usual.
			write(false, "a2")
			before, _ := os.Stat(filepath.Join(rec.dir, "a.md"))
			if err := st.checkpoint(); err != nil {
				t.Fatal(err)
			}
			if after, _ := os.Stat(filepath.Join(rec.dir, "a.md")); !os.SameFile(before, after) {
				t.Error("a checkpoint after a successful one wrote a.md again")
			}
		})
	}
}

// An import is durable when it returns, though no record of the write-ahead log names what
// it wrote: its files, the directories it made (each in its parent), the history and its
// contents are flushed by the import itself.
func TestImportIsDurable(t *testing.T) {
	needWAL(t)
	rec := newSyncRecorder(t)
	s := vfs.NewStore(NewAferoStorage(rec))
	defer s.Close()
	ctx := context.Background()
	src := NewMemoryStore()
	for _, fn := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a")) },
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/x/y/z.md"), []byte("z")) },
		func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("a2")) },
	} {
		if err := src.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	var stream bytes.Buffer
	if err := src.Export(ctx, &stream, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, &stream, vfs.ImportLimits{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.md", "x/y/z.md", "./", "x/", "x/y/", historyLogName, historyObjects + "/",
		objectName(vfs.DigestOf([]byte("a"))), objectName(vfs.DigestOf([]byte("a2"))), objectName(vfs.DigestOf([]byte("z")))}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range want {
		if !rec.synced[name] {
			t.Errorf("the import did not flush %s; it flushed %v", name, slices.Sorted(maps.Keys(rec.synced)))
		}
	}
}

// Without the write-ahead log (history off here; the memory and overlay backends too), a
// change that makes directories flushes each in its parent before it is answered: the
// file's own flush covers only the deepest.
func TestNewDirectoriesAreDurable(t *testing.T) {
	rec := newSyncRecorder(t)
	s := vfs.NewStore(NewAferoStorage(rec, vfs.WithHistory(vfs.HistoryConfig{Off: true})))
	defer s.Close()
	ctx := context.Background()
	for _, fn := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/x/y/z.md"), []byte("z")) },
		func(tx *vfs.Tx) error {
			return tx.Rename(vfs.MustResolve("/memories/x/y/z.md"), vfs.MustResolve("/memories/p/q/z.md"))
		},
	} {
		if err := s.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range []string{"x/y/z.md", "./", "x/", "x/y/", "p/", "p/q/"} {
		if !rec.synced[name] {
			t.Errorf("%s was not flushed; these were: %v", name, slices.Sorted(maps.Keys(rec.synced)))
		}
	}
}

// A change keeps in its record at most walCarryMax bytes of the contents it keeps (a
// directory of files made by hand, deleted); the others are flushed on their own, so that
// neither the record nor the process's memory grows with the change.
func TestLargeChangeFlushesWhatItsRecordCannotCarry(t *testing.T) {
	needWAL(t)
	rec := newSyncRecorder(t)
	const n, size = 12, 1 << 20
	var objects []string
	for i := range n {
		data := bytes.Repeat([]byte{byte('a' + i)}, size)
		os.MkdirAll(filepath.Join(rec.dir, "d"), 0o700)
		os.WriteFile(filepath.Join(rec.dir, "d", fmt.Sprint(i)), data, 0o600)
		objects = append(objects, objectName(vfs.DigestOf(data)))
	}
	s := vfs.NewStore(NewAferoStorage(rec))
	defer s.Close()
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/d")) }); err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(filepath.Join(rec.dir, walName))
	if err != nil {
		t.Fatal(err)
	}
	carried := 0
	for _, r := range scanWAL(wal).records {
		carried += len(r.C)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	flushed := 0
	for _, o := range objects {
		if rec.synced[o] {
			flushed++
		}
	}
	if carried > walCarryMax/size || carried+flushed != n {
		t.Errorf("of %d contents of %d bytes, the record carries %d and %d were flushed on their own", n, size, carried, flushed)
	}
}

// A checkpoint empties the log only after flushing everything its records cover: each file
// changed, moved or removed, every directory from the file's up, the kept contents and the
// Recovery puts a file back where the disk still holds what its removal was to clear: a
// directory left empty (its files' removal reached the disk, its own did not), or a file
// of an earlier change in the way of the file's directory. Such files used to stay lost.
// A file made by hand in the way is left as it is, and the store opens.
func TestWALRecoveryClearsTheWay(t *testing.T) {
	needWAL(t)
	again := []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/e")) },
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e/f/c.md"), []byte("c again")) },
	}
	for _, tc := range []struct {
		name  string
		steps []func(tx *vfs.Tx) error
		disk  func(disk string) // what of the changes reached the disk, or happened since
		want  map[string]string // nil: the files as they were
	}{
		{"empty directory", []func(tx *vfs.Tx) error{
			func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/e")) },
			func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e"), []byte("file e")) },
		}, func(disk string) { os.Remove(filepath.Join(disk, "e", "f", "c.md")) }, nil},
		{"a file in the way", []func(tx *vfs.Tx) error{
			func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/e")) },
			func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e"), []byte("file e")) },
			func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/e")) },
			func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e/f/c.md"), []byte("c again")) },
		}, func(disk string) {
			os.RemoveAll(filepath.Join(disk, "e"))
			os.WriteFile(filepath.Join(disk, "e"), []byte("file e"), 0o600)
		}, nil},
		{"a file made by hand in the way", again, func(disk string) {
			os.RemoveAll(filepath.Join(disk, "e"))
			os.WriteFile(filepath.Join(disk, "e"), []byte("by hand"), 0o600)
		}, map[string]string{"e": "by hand"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := t.TempDir()
			s := openOSStore(t, live)
			ctx := context.Background()
			if err := s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/e/f/c.md"), []byte("c")) }); err != nil {
				t.Fatal(err)
			}
			checkpointNow(t, s)
			disk := copyTree(t, live)
			for _, step := range tc.steps {
				if err := s.Update(ctx, step); err != nil {
					t.Fatal(err)
				}
			}
			want := treeOf(t, live)
			crashDisk(t, disk, live)
			tc.disk(disk)
			r := openOSStore(t, disk)
			if tc.want != nil {
				want = tc.want
			}
			if got := treeOf(t, disk); !maps.Equal(got, want) {
				t.Errorf("files after recovery:\n got %v\nwant %v", got, want)
			}
			exportImports(t, r)
		})
	}
}

// A path the log names that runs through a file now (a file took its directory's name, or a
// change under a file failed) is passed over by the checkpoint, as a removed file is: the
// checkpoint used to fail on it, for as long as the record stayed, and the recovery after a
// crash of the machine too, so that the store could not be opened again.
func TestCheckpointPassesOverPathsThroughAFile(t *testing.T) {
	needWAL(t)
	live := t.TempDir()
	s := openOSStore(t, live)
	ctx := context.Background()
	checkpointNow(t, s)
	disk := copyTree(t, live)
	for _, fn := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/d/a.md"), []byte("a")) },
		func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/d")) },
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/d"), []byte("d")) },
	} {
		if err := s.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/d/b.md"), []byte("b")) }); err == nil {
		t.Fatal("a file was created below a file")
	}
	want := treeOf(t, live)
	crashDisk(t, disk, live)
	checkpointNow(t, s)
	r, err := OpenOSStore(disk)
	if err != nil {
		t.Fatalf("after a crash of the machine: %v", err)
	}
	defer r.Close()
	if got := treeOf(t, disk); !maps.Equal(got, want) {
		t.Errorf("files after recovery:\n got %v\nwant %v", got, want)
	}
}

// history's log (the files themselves were written without a flush).
func TestCheckpointFlushesWhatTheLogNames(t *testing.T) {
	needWAL(t)
	rec := newSyncRecorder(t)
	st := NewAferoStorage(rec)
	s := vfs.NewStore(st)
	defer s.Close()
	ctx := context.Background()
	for _, fn := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a")) },
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/x/y/z.md"), []byte("z")) },
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/dir/b.md"), []byte("b")) },
		func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/gone/c.md"), []byte("c")) },
		func(tx *vfs.Tx) error { return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte("a2")) },
		func(tx *vfs.Tx) error {
			return tx.Rename(vfs.MustResolve("/memories/dir"), vfs.MustResolve("/memories/moved"))
		},
		func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/gone")) },
	} {
		if err := s.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	clear(rec.synced)
	rec.mu.Unlock()
	checkpointNow(t, s)
	want := []string{"a.md", "x/y/z.md", "moved/b.md", "./", "x/", "x/y/", "moved/", historyLogName,
		objectName(vfs.DigestOf([]byte("a"))), objectName(vfs.DigestOf([]byte("c"))), historyObjects + "/"}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range want {
		if !rec.synced[name] {
			t.Errorf("the checkpoint did not flush %s; it flushed %v", name, slices.Sorted(maps.Keys(rec.synced)))
		}
	}
	if data, err := os.ReadFile(filepath.Join(rec.dir, walName)); err != nil || len(bytes.TrimRight(data, "\x00")) != 0 {
		t.Errorf("the log after the checkpoint holds %q (%v)", bytes.TrimRight(data, "\x00"), err)
	}
}

// Recovery numbers what it records after every number the history used, pruned ones
// included: here the newest versions (a big file's, deleted) were pruned before the crash,
// and a file made by hand is found by the recovery of a change that failed: it is recorded
// as the next number, not as one used before.
func TestWALRecoveryNumbersAfterThePruned(t *testing.T) {
	needWAL(t)
	live := t.TempDir()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opt := vfs.WithHistory(vfs.HistoryConfig{MaxBytes: 1 << 10, Now: func() time.Time { clock = clock.Add(time.Hour); return clock }})
	s := openOSStore(t, live, opt)
	big := vfs.MustResolve("/memories/big.md")
	for _, change := range []func(tx *vfs.Tx) error{
		func(tx *vfs.Tx) error { return tx.CreateFile(big, bytes.Repeat([]byte("x"), 4<<10)) },
		func(tx *vfs.Tx) error { return tx.RemoveAll(big) },
	} {
		if err := s.Update(context.Background(), change); err != nil {
			t.Fatal(err)
		}
	}
	if vs := versionsOf(t, s); len(vs) != 0 {
		t.Fatalf("versions left after pruning: %s", jsonOf(vs))
	}
	os.WriteFile(filepath.Join(live, "hand.md"), []byte("by hand"), 0o600)
	checkpointNow(t, s)
	disk := copyTree(t, live)
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/hand.md/below.md"), []byte("x"))
	}); err == nil {
		t.Fatal("a create below a file succeeded")
	}
	crashDisk(t, disk, live)
	r := openOSStore(t, disk, opt)
	vs := versionsOf(t, r)
	if len(vs) != 1 || vs[0].Command != "recover" || vs[0].Seq != 3 {
		t.Errorf("versions after recovery: %s, want the file found as version 3", jsonOf(vs))
	}
}

// outOfRoom is the OS filesystem with no room for writes to the files refuse names, nor,
// where refuseMeta is set, for the flushes of the files it names, and for moves to and new
// directories at the names it names (a directory may have to grow for them).
type outOfRoom struct {
	*OSFs
	refuse, refuseMeta func(name string) bool
	wroteThenFailed    func(name string) bool // a write at an offset (WriteAt) that the disk made, then reported an I/O error for
}

func (f outOfRoom) checkMeta(op, name string) error {
	if f.refuseMeta != nil && f.refuseMeta(name) {
		return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

func (f outOfRoom) Mkdir(name string, perm os.FileMode) error {
	if err := f.checkMeta("mkdir", name); err != nil {
		return err
	}
	return f.OSFs.Mkdir(name, perm)
}

func (f outOfRoom) MkdirAll(name string, perm os.FileMode) error {
	if err := f.checkMeta("mkdir", name); err != nil {
		return err
	}
	return f.OSFs.MkdirAll(name, perm)
}

func (f outOfRoom) Rename(oldname, newname string) error {
	if err := f.checkMeta("rename", newname); err != nil {
		return err
	}
	return f.OSFs.Rename(oldname, newname)
}

func (f outOfRoom) RenameNoReplace(oldname, newname string) error {
	if err := f.checkMeta("rename", newname); err != nil {
		return err
	}
	return f.OSFs.RenameNoReplace(oldname, newname)
}

func (f outOfRoom) check(name string) error {
	if f.refuse(name) {
		return &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

func (f outOfRoom) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.OSFs.OpenFile(name, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return file, err
	}
	return fileOutOfRoom{file, f, name}, nil
}

func (f outOfRoom) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	if err := f.check(name); err != nil {
		return err
	}
	return f.OSFs.WriteFileAtomic(name, data, noReplace)
}

func (f outOfRoom) WriteFileUnsynced(name string, data []byte, noReplace bool) error {
	if err := f.check(name); err != nil {
		return err
	}
	return f.OSFs.WriteFileUnsynced(name, data, noReplace)
}

type fileOutOfRoom struct {
	afero.File
	fs   outOfRoom
	name string
}

func (f fileOutOfRoom) Write(b []byte) (int, error) {
	if err := f.fs.check(f.name); err != nil {
		return 0, err
	}
	return f.File.Write(b)
}

func (f fileOutOfRoom) Sync() error {
	if err := f.fs.checkMeta("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f fileOutOfRoom) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fs.check(f.name); err != nil {
		return 0, err
	}
	if f.fs.wroteThenFailed != nil && f.fs.wroteThenFailed(f.name) {
		n, _ := f.File.WriteAt(b, off)
		return n, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EIO}
	}
	return f.File.WriteAt(b, off)
}

// A change refused for want of room is never brought back, by the next change or by a
// crash of the machine, whether the room ran out for its file, for the write-ahead log's
// line that says it failed or that line's flush (the next change says it then), or for the
// history's log after the write-ahead log took its record (which then goes too). Refused
// for its file, it leaves no content in the history either. So is a change whose record
// the disk wrote and then reported an I/O error for.
func TestWALRefusedChangesLeaveNothing(t *testing.T) {
	needWAL(t)
	for _, c := range []struct{ name, full, then string }{
		{"file", "refused.md", ""},
		{"outcome", "refused.md", walName},
		{"unflushed outcome", "refused.md", "flush " + walName},
		{"log", historyLogName, ""},
		{"record written, then an I/O error", "written " + walName, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			osfs, err := NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var full []string // the files with no room ("flush NAME": for NAME's flushes)
			refuse := func(name string) bool {
				mu.Lock()
				defer mu.Unlock()
				if !slices.Contains(full, name) {
					return false
				}
				if c.then != "" && name == c.full {
					full = append(full, c.then)
				}
				return true
			}
			refuseMeta := func(name string) bool { return refuse("flush " + name) }
			setFull := func(names ...string) { mu.Lock(); full = names; mu.Unlock() }
			wroteThenFailed := func(name string) bool { return refuse("written " + name) }
			s := vfs.NewStore(NewAferoStorage(outOfRoom{osfs, refuse, refuseMeta, wroteThenFailed}))
			ctx := context.Background()
			create := func(name string) error {
				return s.Update(ctx, func(tx *vfs.Tx) error {
					return tx.CreateFile(vfs.MustResolve("/memories/"+name), []byte("the content of "+name))
				})
			}
			if err := create("kept.md"); err != nil {
				t.Fatal(err)
			}
			setFull(c.full)
			if err := create("refused.md"); vfs.FailureOf(err) != vfs.FailNoSpace && vfs.FailureOf(err) != vfs.FailIO {
				t.Fatalf("the create with no room for %s: %v", c.full, err)
			}
			setFull()
			if c.name == "file" {
				objects, _ := os.ReadDir(filepath.Join(dir, historyObjects))
				if want := vfs.DigestOf([]byte("the content of kept.md")).String(); len(objects) != 1 || objects[0].Name() != want {
					t.Errorf("the history's contents after the refusal: %v, want only %s", objects, want)
				}
			}
			want := map[string]string{"kept.md": "the content of kept.md"}
			check := func(when, dir string, s *vfs.Store) {
				t.Helper()
				if got := treeOf(t, dir); !maps.Equal(got, want) {
					t.Errorf("%s the files are %v, want %v", when, got, want)
				}
				for _, v := range versionsOf(t, s) {
					if v.Touches("/memories/refused.md") {
						t.Errorf("%s the history has the refused change: %+v", when, v)
					}
				}
			}
			// As if the machine had crashed now: the files as they are, the log's records
			// of another boot.
			crash := func(when string) {
				t.Helper()
				crashed := copyTree(t, dir)
				if wal, _ := os.ReadFile(filepath.Join(dir, walName)); len(wal) > 0 && wal[0] != 0 {
					os.WriteFile(filepath.Join(crashed, walName), asOtherBoot(t, wal), 0o600)
				}
				r, err := OpenOSStore(crashed)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				check(when, crashed, r)
			}
			crash("after a crash at once")
			if err := create("after.md"); err != nil {
				t.Fatal(err)
			}
			want["after.md"] = "the content of after.md"
			check("after the next change", dir, s)
			crash("after a crash after the next change")
		})
	}
}
