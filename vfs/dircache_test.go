//go:build linux

package vfs

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/spf13/afero"
)

// A change opens each directory it uses once (os.Root alone opens every parent on every
// call), and a directory renamed or removed in a transaction is not used again under its
// old name.
func TestOSDirectoriesOpenedOncePerChange(t *testing.T) {
	dir := t.TempDir()
	osfs, s := osStore(t, dir)
	ctx := context.Background()
	p := MustResolve("/memories/a/b/c.md")
	if err := s.Update(ctx, func(tx *Tx) error { return tx.CreateFile(p, []byte("one")) }); err != nil {
		t.Fatal(err)
	}
	var opened map[string]int
	for _, change := range []func(tx *Tx) error{
		func(tx *Tx) error { return tx.WriteFile(p, []byte("two")) },
		func(tx *Tx) error { return tx.CreateFile(MustResolve("/memories/a/b/d.md"), []byte("three")) },
	} {
		if err := s.Update(ctx, func(tx *Tx) error {
			if err := change(tx); err != nil {
				return err
			}
			osfs.dirs.mu.Lock()
			opened = maps.Clone(osfs.dirs.opened)
			osfs.dirs.mu.Unlock()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for d, n := range opened {
			if n > 1 {
				t.Errorf("directory %q opened %d times in one change", d, n)
			}
		}
		for _, d := range []string{"a/b", historyDir, historyObjects} {
			if opened[d] != 1 {
				t.Errorf("directory %q opened %d times in a change, want once (opened: %v)", d, opened[d], opened)
			}
		}
	}

	// Renamed, then used again by its old name in the same transaction: a new directory.
	if err := s.Update(ctx, func(tx *Tx) error {
		if err := tx.CreateFile(MustResolve("/memories/x/1.md"), []byte("1")); err != nil {
			return err
		}
		if err := tx.Rename(MustResolve("/memories/x"), MustResolve("/memories/y")); err != nil {
			return err
		}
		return tx.CreateFile(MustResolve("/memories/x/2.md"), []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string][]string{"x": {"2.md"}, "y": {"1.md"}} {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s holds %v, want %v", d, names, want)
		}
	}
	// Outside a transaction nothing stays open.
	osfs.dirs.mu.Lock()
	n := len(osfs.dirs.dirs)
	osfs.dirs.mu.Unlock()
	if n != 0 {
		t.Errorf("%d directories still open after the transactions", n)
	}
}

// Through the directory cache, a symbolic link is still followed only inside the storage,
// as a final element or as a directory on the way: one that leads outside is refused, one
// inside works.
func TestOSDirectoryCacheKeepsTheJail(t *testing.T) {
	dir := t.TempDir()
	hostDir := t.TempDir()
	outside := filepath.Join(hostDir, "secret")
	os.WriteFile(outside, []byte("host secret"), 0o600)
	os.WriteFile(filepath.Join(dir, "inside.md"), []byte("inside"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("inside.md", filepath.Join(dir, "in"))
	os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "real", "sub", "n.md"), []byte("nested"), 0o600)
	os.Symlink("real", filepath.Join(dir, "indir"))   // a directory link inside
	os.Symlink(hostDir, filepath.Join(dir, "outdir")) // one leading outside
	osfs := lockedOSFs(t, dir, true)
	for _, flag := range []int{os.O_RDONLY, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE} {
		if f, err := osfs.OpenFile("out", flag, 0o600); err == nil {
			f.Close()
			t.Errorf("opening a link that leads outside (flags %#x) succeeded", flag)
		}
	}
	if _, err := osfs.Stat("out"); err == nil {
		t.Error("Stat followed a link that leads outside")
	}
	if fi, _, err := osfs.LstatIfPossible("out"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Lstat of the link: %v, %v", fi, err)
	}
	f, err := osfs.OpenFile("in", os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("a link inside the storage: %v", err)
	}
	f.Close()
	for _, name := range []string{"outdir/secret", "outdir/new.md"} {
		if f, err := osfs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			f.Close()
			t.Errorf("opening %s, through a directory link that leads outside, succeeded", name)
		}
		if _, err := osfs.Stat(name); err == nil && name == "outdir/secret" {
			t.Errorf("Stat of %s went through a directory link that leads outside", name)
		}
	}
	if _, err := os.Stat(filepath.Join(hostDir, "new.md")); err == nil {
		t.Error("a file was created outside the storage")
	}
	for _, name := range []string{"indir/sub/n.md", "real/sub/n.md"} {
		b, err := afero.ReadFile(osfs, name)
		if err != nil || string(b) != "nested" {
			t.Errorf("reading %s: %q, %v", name, b, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "host secret" {
		t.Errorf("the file outside changed: %q", b)
	}
	osfs.dirs.mu.Lock()
	used := osfs.dirs.opened["."]
	osfs.dirs.mu.Unlock()
	if used != 1 {
		t.Errorf("the cache was not used (root opened %d times)", used)
	}
}

// A regular file opened through the cache is used by its descriptor alone (fdFile); it
// behaves as the *os.File it replaces: sizes after writes, end of file, no WriteAt on an
// appending file, the storage's name, errors once closed. A fifo is still refused, and a
// directory still lists.
func TestOSRegularFilesThroughTheCache(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "d", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	osfs := lockedOSFs(t, dir, true)

	f, err := osfs.OpenFile("d/a.md", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*fdFile); !ok {
		t.Fatalf("a regular file opened in a lock period is a %T, want *fdFile", f)
	}
	if f.Name() != "/d/a.md" {
		t.Errorf("Name() = %q, want the storage's name /d/a.md", f.Name())
	}
	size := func() int64 {
		t.Helper()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if s := size(); s != 0 {
		t.Errorf("size at the open %d, want 0", s)
	}
	if _, err := f.WriteString("hello, world"); err != nil {
		t.Fatal(err)
	}
	if s := size(); s != 12 {
		t.Errorf("size after a write %d, want 12", s)
	}
	if _, err := f.WriteAt([]byte("HELLO"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if s := size(); s != 5 {
		t.Errorf("size after a truncation %d, want 5", s)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(f); err != nil || string(b) != "HELLO" {
		t.Errorf("read back %q, %v; want HELLO", b, err)
	}
	if n, err := f.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Errorf("read at the end: %d, %v; want 0, EOF", n, err)
	}
	buf := make([]byte, 8)
	if n, err := f.ReadAt(buf, 2); n != 3 || err != io.EOF || string(buf[:n]) != "LLO" {
		t.Errorf("ReadAt past the end: %d %q, %v; want 3 LLO, EOF", n, buf[:n], err)
	}
	if _, err := f.Readdirnames(-1); err == nil {
		t.Error("Readdirnames of a regular file succeeded")
	}
	// A file kept open sees its name removed (the write-ahead log's flusher relies on it).
	if err := os.Remove(filepath.Join(dir, "d", "a.md")); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || !unlinked(fi) {
		t.Errorf("Stat after the file was removed: %v, %v; want no links left", fi, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "a.md"), []byte("HELLO"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a second Close gave %v, want os.ErrClosed", err)
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Stat after Close gave %v, want os.ErrClosed", err)
	}

	a, err := osfs.OpenFile("d/a.md", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt on a file opened to append succeeded")
	}
	a.Write([]byte("!"))
	a.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "d", "a.md")); string(b) != "HELLO!" {
		t.Errorf("after the append the file holds %q, want HELLO!", b)
	}

	if _, err := osfs.OpenFile("d/fifo", os.O_RDONLY, 0); !errors.Is(err, ErrNotRegular) {
		t.Errorf("opening a fifo gave %v, want ErrNotRegular", err)
	}
	d, err := osfs.Open("d")
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if slices.Sort(names); err != nil || !slices.Equal(names, []string{"a.md", "fifo"}) {
		t.Errorf("the directory lists %v, %v", names, err)
	}
}

// BenchmarkOSOpenRead opens, reads and closes a small file in a lock period, as a change
// does a dozen times (the directory cache's way).
func BenchmarkOSOpenRead(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.md"), make([]byte, 100), 0o600); err != nil {
		b.Fatal(err)
	}
	osfs := lockedOSFs(b, dir, false)
	for b.Loop() {
		f, err := osfs.Open("a.md")
		if err != nil {
			b.Fatal(err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != 100 {
			b.Fatal(fi, err)
		}
		if _, err := io.ReadAll(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// osStore opens dir as an OSFs and a Store on it, both closed when the test ends.
func osStore(tb testing.TB, dir string) (*OSFs, *Store) {
	tb.Helper()
	osfs, err := NewOSFs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	s := NewStore(NewAferoStorage(osfs))
	tb.Cleanup(func() { s.Close(); osfs.Close() })
	return osfs, s
}

// lockedOSFs opens dir as an OSFs and takes the storage lock (a lock period, in which the
// directory cache works), both undone when the test ends.
func lockedOSFs(tb testing.TB, dir string, exclusive bool) *OSFs {
	tb.Helper()
	osfs, err := NewOSFs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { osfs.Close() })
	if _, err := osfs.LockStorage(context.Background(), exclusive); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { osfs.UnlockStorage() })
	return osfs
}

// The root's descriptor is kept from one lock period to the next, as the os.Root keeps its
// own; the directories below it are opened again in each period, one element at a time.
func TestOSRootDescriptorKeptAcrossPeriods(t *testing.T) {
	dir := t.TempDir()
	osfs, s := osStore(t, dir)
	ctx := context.Background()
	p := MustResolve("/memories/a/b/c.md")
	var opened []map[string]int
	for i, text := range []string{"one", "two", "three"} {
		if err := s.Update(ctx, func(tx *Tx) error {
			var err error
			if i == 0 {
				err = tx.CreateFile(p, []byte(text))
			} else {
				err = tx.WriteFile(p, []byte(text))
			}
			osfs.dirs.mu.Lock()
			opened = append(opened, maps.Clone(osfs.dirs.opened))
			osfs.dirs.mu.Unlock()
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if opened[0]["."] != 1 {
		t.Errorf("first change opened the root %d times, want 1 (opened: %v)", opened[0]["."], opened[0])
	}
	for i, o := range opened[1:] {
		if o["."] != 0 {
			t.Errorf("change %d opened the root again (%d times); its descriptor should have been kept", i+2, o["."])
		}
		for _, d := range []string{"a", "a/b"} {
			if o[d] != 1 {
				t.Errorf("change %d opened %q %d times, want once (opened: %v)", i+2, d, o[d], o)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b", "c.md")); err != nil || string(b) != "three" {
		t.Errorf("the file holds %q (%v), want %q", b, err, "three")
	}
}
