package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// The standard library keeps os.Root's escape error unexported; OSFs recognises it by its
// text. This test fails if a Go release changes that text.
func TestOSFsRecognisesRootEscape(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "store")
	osfs, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer osfs.Close()
	if err := os.Symlink("..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"up", "up/store"} {
		if _, err := osfs.Stat(name); !errors.Is(err, vfs.ErrEscape) {
			t.Errorf("Stat(%q) = %v, want ErrEscape", name, err)
		}
	}
	// ".." is clamped at the root before the kernel sees the name.
	if got := rel("../../x"); got != "x" {
		t.Errorf(`rel("../../x") = %q, want "x"`, got)
	}
	f, err := osfs.OpenFile("a.txt", os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Name() != "/a.txt" {
		t.Errorf("file name %q, want the jail-relative /a.txt", f.Name())
	}
}

func TestOSFsModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a/b/c.txt"), []byte("x")) })
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		rel  string
		mode os.FileMode
	}{{"", 0o700}, {"a", 0o700}, {"a/b", 0o700}, {"a/b/c.txt", 0o600}} {
		fi, err := os.Stat(filepath.Join(dir, tt.rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tt.mode {
			t.Errorf("%q has mode %v, want %v", tt.rel, fi.Mode().Perm(), tt.mode)
		}
	}
}

func TestMemFsBehavesLikeTheOS(t *testing.T) {
	m := NewMemFs()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.OpenFile("/missing/a.txt", os.O_CREATE|os.O_WRONLY, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("create in a missing directory: %v, want not exist", err)
	}
	if err := m.Mkdir("/missing/d", 0o700); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("mkdir in a missing directory: %v, want not exist", err)
	}
	must(m.MkdirAll("/d/e", 0o700))
	must(afero.WriteFile(m, "/d/e/f.txt", []byte("f"), 0o600))
	must(afero.WriteFile(m, "/file", []byte("x"), 0o600))
	if err := m.Remove("/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("remove of a non-empty directory: %v, want ENOTEMPTY", err)
	}
	if err := m.Rename("/file", "/d"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("rename over a directory: %v, want exists", err)
	}
	if err := m.Rename("/file", "/nowhere/file"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rename into a missing directory: %v, want not exist", err)
	}
	if err := m.RenameNoReplace("/d/e/f.txt", "/file"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("no-replace rename onto a file: %v, want exists", err)
	}
	if _, err := m.Create("/d"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("create over a directory: %v, want EISDIR", err)
	}
	if err := m.MkdirAll("/file/sub", 0o700); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("mkdir below a file: %v, want ENOTDIR", err)
	}
	if _, err := m.Stat("/file/sub"); !vfs.IsNotExist(err) {
		t.Errorf("stat below a file: %v, want not exist", err)
	}
	if _, err := m.Stat("d/e/f.txt"); err != nil {
		t.Errorf("relative and absolute names must be the same file: %v", err)
	}
	must(m.Rename("/d", "/d2"))
	if _, err := m.Stat("/d2/e/f.txt"); err != nil {
		t.Errorf("directory rename lost a child: %v", err)
	}
}

// afero.MemMapFs dies with "fatal error: sync: RUnlock of unlocked RWMutex" when a Rename
// and a Remove of one name race; MemFs must survive it (run with -race).
func TestMemFsConcurrentRenameRemove(t *testing.T) {
	m := NewMemFs()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				name := fmt.Sprintf("/f%d", i%4)
				switch (g + i) % 3 {
				case 0:
					afero.WriteFile(m, name, []byte("x"), 0o600)
				case 1:
					m.Rename(name, name+"-moved")
				default:
					m.Remove(name)
					m.Remove(name + "-moved")
				}
			}
		}()
	}
	wg.Wait()
	// What is left agrees with itself: the listing names exactly the files that can be
	// read, each whole, and nothing else.
	infos, err := afero.ReadDir(m, "/")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, fi := range infos {
		listed["/"+fi.Name()] = true
		if data, err := afero.ReadFile(m, "/"+fi.Name()); err != nil || string(data) != "x" {
			t.Errorf("%s is listed, but reads %q, %v", fi.Name(), data, err)
		}
	}
	for i := range 4 {
		for _, name := range []string{fmt.Sprintf("/f%d", i), fmt.Sprintf("/f%d-moved", i)} {
			if _, err := m.Stat(name); (err == nil) != listed[name] {
				t.Errorf("%s: listed %v, but Stat says %v", name, listed[name], err)
			}
		}
	}
	if len(infos) > 8 {
		t.Errorf("%d entries listed, more than the 8 names used", len(infos))
	}
}

func overlayFixture(t *testing.T) (lowerDir, upperDir string, open func() *OverlayFs) {
	lowerDir = filepath.Join(t.TempDir(), "lower")
	upperDir = filepath.Join(t.TempDir(), "upper")
	for name, data := range map[string]string{"a.txt": "lower a", "dir/b.txt": "lower b", "dir/sub/c.txt": "lower c", "both.txt": "lower both"} {
		p := filepath.Join(lowerDir, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte(data), 0o600)
	}
	os.MkdirAll(upperDir, 0o700)
	os.WriteFile(filepath.Join(upperDir, "both.txt"), []byte("upper both"), 0o600)
	open = func() *OverlayFs {
		lower, err := NewReadOnlyOSFs(lowerDir)
		if err != nil {
			t.Fatal(err)
		}
		upper, err := NewOSFs(upperDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lower.Close(); upper.Close() })
		o, err := NewOverlayFs(lower, upper)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	return lowerDir, upperDir, open
}

func TestOverlayDeletesAndRenamesStay(t *testing.T) {
	_, _, open := overlayFixture(t)
	o := open()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(o.Remove("a.txt"))
	must(o.RemoveAll("both.txt")) // in both layers: the lower one must not come back
	must(o.Rename("dir", "moved"))
	must(o.Mkdir("dir", 0o700)) // a new directory of the old name shows none of the old entries

	check := func(o *OverlayFs) {
		t.Helper()
		for _, gone := range []string{"a.txt", "both.txt", "dir/b.txt", "dir/sub"} {
			if _, err := o.Stat(gone); !vfs.IsNotExist(err) {
				t.Errorf("%s is back: %v", gone, err)
			}
		}
		for name, want := range map[string]string{"moved/b.txt": "lower b", "moved/sub/c.txt": "lower c"} {
			data, err := afero.ReadFile(o, name)
			if err != nil || string(data) != want {
				t.Errorf("%s = %q, %v; want %q", name, data, err, want)
			}
		}
		d, err := o.Open("dir")
		if err != nil {
			t.Fatal(err)
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		if len(names) != 0 {
			t.Errorf("the recreated dir lists %v, want nothing", names)
		}
	}
	check(o)
	check(open()) // the whiteouts survive a restart
}

// Two stores on one directory, as two server processes would be: each sees the other's
// changes, and the usage total follows them.
func TestStoreNoticesOtherWriters(t *testing.T) {
	lowerDir, upperDir, _ := overlayFixture(t)
	a, err := OpenOverlayStore(lowerDir, upperDir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenOverlayStore(lowerDir, upperDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	usage := func(s *vfs.Store) (n int64) {
		t.Helper()
		if err := s.Update(context.Background(), func(tx *vfs.Tx) (err error) { n, err = tx.Usage(); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := usage(a)
	usage(b)
	if err := b.Update(context.Background(), func(tx *vfs.Tx) error { return tx.RemoveAll(vfs.MustResolve("/memories/a.txt")) }); err != nil {
		t.Fatal(err)
	}
	if got, want := usage(a), before-int64(len("lower a")); got != want {
		t.Errorf("usage seen by the other store = %d, want %d", got, want)
	}
	err = a.View(context.Background(), func(tx *vfs.Tx) error {
		_, err := tx.Stat(vfs.MustResolve("/memories/a.txt"))
		return err
	})
	if !vfs.IsNotExist(err) {
		t.Errorf("the other store still sees a deleted lower file: %v", err)
	}
}

// Reads of one process run in parallel on the OS backend: a View can start while another
// is still open (both hold the storage's shared lock through one descriptor).
func TestViewsRunInParallel(t *testing.T) {
	s, err := OpenOSStore(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(context.Background(), func(*vfs.Tx) error {
		done := make(chan error, 1)
		go func() { done <- s.View(context.Background(), func(*vfs.Tx) error { return nil }) }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			return errors.New("a second View waited for the first to end")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// After both, a change still gets the exclusive lock.
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a"), nil) }); err != nil {
		t.Fatal(err)
	}
}

// A writer waiting for the storage lock gets it before the reads that come after it, even
// while another process's reads overlap without a gap (its shared flock then never drops):
// the writer holds the gate while it waits, and every new taker must pass the gate.
func TestWriterGoesBeforeLaterReaders(t *testing.T) {
	dir := t.TempDir()
	open := func() *OSFs {
		f, err := NewOSFs(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	readers, writer, probe := open(), open(), open() // each as its own process
	ctx := context.Background()
	if _, err := readers.LockStorage(ctx, false); err != nil { // a read in progress
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	took := func(who string) {
		mu.Lock()
		order = append(order, who)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := writer.LockStorage(ctx, true); err != nil {
			t.Error(err)
			return
		}
		took("writer")
		writer.UnlockStorage()
	})
	// The writer waits for the lock once it holds the gate.
	for deadline := time.Now().Add(10 * time.Second); tryFlock(probe.gate, true) == nil; time.Sleep(time.Millisecond) {
		funlock(probe.gate)
		if time.Now().After(deadline) {
			readers.UnlockStorage()
			wg.Wait()
			t.Fatal("the waiting writer does not hold the gate")
		}
	}
	wg.Go(func() { // a later read of the readers' process
		if _, err := readers.LockStorage(ctx, false); err != nil {
			t.Error(err)
			return
		}
		took("later reader")
		readers.UnlockStorage()
	})
	readers.UnlockStorage() // the read in progress ends
	wg.Wait()
	if !slices.Equal(order, []string{"writer", "later reader"}) {
		t.Errorf("took the lock in the order %v, want the writer first", order)
	}
}

// Every change of a file's content is atomic for every reader, whoever it is (docs/
// behaviour.md §6): the new content is a complete file renamed over the old one, never
// written over it. A reader that had the file open keeps reading the old content whole; a
// second name of the file, and the target of a link, keep the old content.
func TestChangesReplaceTheFile(t *testing.T) {
	for _, flushEach := range []bool{false, true} {
		for _, c := range []struct {
			name, before, after, other string // other: "", "hard" or "symbolic" (f.md → t.md)
			read                       bool   // the change reads the file first
		}{
			{"same length", "alpha\n", "ALPHA\n", "", false},
			{"longer, read first", "alpha\n", "alpha\nbeta\n", "", true},
			{"shorter", "alpha\nbeta\n", "alpha\n", "", true},
			{"large", strings.Repeat("0123456789abcdef", 1000), strings.Repeat("0123456789abcdeF", 1000), "", true},
			{"a second name", "alpha\n", "ALPHA\n", "hard", true},
			{"a symbolic link", "alpha\n", "ALPHA\n", "symbolic", false},
		} {
			t.Run(fmt.Sprintf("%s/flush-each-change=%v", c.name, flushEach), func(t *testing.T) {
				dir := t.TempDir()
				f, other := filepath.Join(dir, "f.md"), filepath.Join(dir, "t.md")
				switch c.other {
				case "":
					os.WriteFile(f, []byte(c.before), 0o600)
				case "hard":
					os.WriteFile(f, []byte(c.before), 0o600)
					os.Link(f, other)
				case "symbolic":
					os.WriteFile(other, []byte(c.before), 0o600)
					os.Symlink("t.md", f)
				}
				var opts []vfs.Option
				if flushEach {
					opts = append(opts, vfs.FlushEachChange())
				}
				s, err := OpenOSStore(dir, opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				reader, err := os.Open(f) // another program, reading as the change is made
				if err != nil {
					t.Fatal(err)
				}
				defer reader.Close()
				before, _ := os.Lstat(f)
				p := vfs.MustResolve("/memories/f.md")
				err = s.Update(context.Background(), func(tx *vfs.Tx) error {
					if c.read {
						if _, err := tx.ReadFile(p); err != nil {
							return err
						}
					}
					return tx.WriteFile(p, []byte(c.after))
				})
				if err != nil {
					t.Fatal(err)
				}
				after, _ := os.Lstat(f)
				if os.SameFile(before, after) || !after.Mode().IsRegular() {
					t.Errorf("f.md was written over, not replaced by a new file")
				}
				if b, _ := io.ReadAll(reader); string(b) != c.before {
					t.Errorf("a reader that had the file open read %d bytes, not the old content", len(b))
				}
				if b, _ := os.ReadFile(f); string(b) != c.after {
					t.Errorf("f.md holds %q, not what was written", b)
				}
				if c.other != "" {
					if b, _ := os.ReadFile(other); string(b) != c.before {
						t.Errorf("t.md changed through f.md")
					}
				}
			})
		}
	}
}

// A directory of the lower layer that a change copies up to the upper one (to write in it,
// or to move it) is flushed in its parent there, as a directory made is: a file written in
// it flushes only its own.
func TestOverlayCopyUpIsDurable(t *testing.T) {
	lowerDir := t.TempDir()
	os.MkdirAll(filepath.Join(lowerDir, "d", "e"), 0o700)
	os.WriteFile(filepath.Join(lowerDir, "d", "e", "old.md"), []byte("old"), 0o600)
	lower, err := NewReadOnlyOSFs(lowerDir)
	if err != nil {
		t.Fatal(err)
	}
	rec := newSyncRecorder(t) // the upper layer
	ov, err := NewOverlayFs(lower, rec)
	if err != nil {
		t.Fatal(err)
	}
	s := vfs.NewStore(NewAferoStorage(ov, vfs.WithHistory(vfs.HistoryConfig{Off: true})))
	defer s.Close()
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/d/e/x.md"), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	// A directory of the lower layer moved: copied up whole.
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.Rename(vfs.MustResolve("/memories/d"), vfs.MustResolve("/memories/m"))
	}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range []string{"//", "/d/", "/d/e/", "/m/", "/m/e/"} { // in the upper layer
		if !rec.synced[name] {
			t.Errorf("%s was not flushed; these were: %v", name, slices.Sorted(maps.Keys(rec.synced)))
		}
	}
}
