//go:build linux

package vfs

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A change opens each directory it uses once (os.Root alone opens every parent on every
// call), and a directory renamed or removed in a transaction is not used again under its
// old name.
func TestOSDirectoriesOpenedOncePerChange(t *testing.T) {
	dir := t.TempDir()
	osfs, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(NewAferoStorage(osfs))
	defer func() { s.Close(); osfs.Close() }()
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

// Through the directory cache, a final symbolic link is still followed only inside the
// storage: one that leads outside is refused, one inside works.
func TestOSDirectoryCacheKeepsTheJail(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("host secret"), 0o600)
	os.WriteFile(filepath.Join(dir, "inside.md"), []byte("inside"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("inside.md", filepath.Join(dir, "in"))
	osfs, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer osfs.Close()
	if _, err := osfs.LockStorage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	defer osfs.UnlockStorage()
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
