package vfs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openFDs returns this process's open descriptors, each with what it is open on.
func openFDs(tb testing.TB) map[string]string {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	fds := map[string]string{}
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds[e.Name()] = target
	}
	return fds
}

// newFDs lists the descriptors open now that were not open, on the same thing, in before.
// Descriptors that closed meanwhile do not count: a file another test left to the garbage
// collector may be closed by its finalizer at any time.
func newFDs(tb testing.TB, before map[string]string) []string {
	tb.Helper()
	var opened []string
	for fd, target := range openFDs(tb) {
		if was, ok := before[fd]; !ok || was != target {
			opened = append(opened, fd+" → "+target)
		}
	}
	return opened
}

// A creation takes the spare made after the one before: the new file has the content, the
// mode and the one name a temporary file renamed into place would have, nothing else shows
// in the directory, a name that exists is refused (fs.ErrExist) and keeps its content, and
// closing the filesystem frees the spare. Both ways of naming the spare, and both ways of
// writing (flushed or not), on the storage root and below it.
func TestSpareNamesNewFiles(t *testing.T) {
	for _, way := range []struct {
		name         string
		byDescriptor bool
		synced       bool
	}{
		{"descriptor", true, false},
		{"proc", false, false},
		{"descriptor/synced", true, true},
		{"proc/synced", false, true},
	} {
		t.Run(way.name, func(t *testing.T) {
			defer func(old bool) { linkByDescriptor = old }(linkByDescriptor)
			linkByDescriptor = way.byDescriptor
			dir := t.TempDir()
			fds := openFDs(t)
			f, err := NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			write := f.WriteFileUnsynced
			if way.synced {
				write = f.WriteFileAtomic
			}
			// change runs one change in a lock period, and waits for the spare it asked for.
			change := func(op func() error) error {
				t.Helper()
				if _, err := f.LockStorage(context.Background(), true); err != nil {
					t.Fatal(err)
				}
				err := op()
				if err := f.UnlockStorage(); err != nil {
					t.Fatal(err)
				}
				f.spare.made.Wait()
				return err
			}
			if err := change(func() error { return f.MkdirAll("d", 0o700) }); err != nil {
				t.Fatal(err)
			}
			names := []string{"first.md", "second.md", "d/third.md", "d/fourth.md"}
			for i, name := range names {
				if err := change(func() error { return write(name, []byte(name), true) }); err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
				f.spare.mu.Lock()
				named := f.spare.named
				f.spare.mu.Unlock()
				if named != i { // the first creation asks for the first spare
					t.Errorf("after %d creations %d spares named, want %d", i+1, named, i)
				}
			}
			for _, name := range names {
				p := filepath.Join(dir, name)
				got, err := os.ReadFile(p)
				if err != nil || string(got) != name {
					t.Errorf("%s holds %q (%v), want %q", name, got, err, name)
				}
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&^0o600 != 0 || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
					t.Errorf("%s: mode %v, %d names; want at most 0600 and one name", name, fi.Mode(), fi.Sys().(*syscall.Stat_t).Nlink)
				}
			}
			for _, d := range []string{dir, filepath.Join(dir, "d")} {
				ents, err := os.ReadDir(d)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), tmpPrefix) {
						t.Errorf("a temporary file was left: %s", e.Name())
					}
				}
			}

			// A name that exists: refused, its content kept.
			err = change(func() error { return write("d/third.md", []byte("other"), true) })
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("creating a name that exists: %v, want fs.ErrExist", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "d/third.md")); !bytes.Equal(got, []byte("d/third.md")) {
				t.Errorf("the refused creation changed the file: %q", got)
			}

			f.spare.mu.Lock()
			have := f.spare.have
			f.spare.mu.Unlock()
			if !have {
				t.Error("no spare ready after the last change")
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if opened := newFDs(t, fds); len(opened) > 0 {
				t.Errorf("descriptors open after Close that were not before NewOSFs: %v", opened)
			}
		})
	}
}

// spareChanges makes the files names in f, one change each, and waits for the spares.
func spareChanges(t *testing.T, f *OSFs, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := f.LockStorage(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		err := f.WriteFileUnsynced(name, []byte(name), true)
		if uerr := f.UnlockStorage(); uerr != nil {
			t.Fatal(uerr)
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		f.spare.made.Wait()
	}
}

// Where the storage has a history directory, the spares are made in a directory of their
// own below it (made once, under a random name renamed into place, so nothing else is left
// there), and still named where the creations are; without one, in the storage root, and
// nothing is made. A symbolic link in the directory's place is not followed: the spares are
// then made in the root.
func TestSpareMadeInItsDirectory(t *testing.T) {
	for _, c := range []struct {
		name    string
		history bool
		link    bool
		want    bool // made in spareDir
	}{
		{"history", true, false, true},
		{"no-history", false, false, false},
		{"link", true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			outside := t.TempDir()
			if c.history {
				if err := os.Mkdir(filepath.Join(dir, historyDir), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if c.link {
				if err := os.Symlink(outside, filepath.Join(dir, spareDir)); err != nil {
					t.Fatal(err)
				}
			}
			f, err := NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			names := []string{"a.md", "b.md", "c.md"}
			spareChanges(t, f, names...)
			f.spare.mu.Lock()
			in, named := f.spare.inSpareDir, f.spare.named
			f.spare.mu.Unlock()
			if named != len(names)-1 {
				t.Errorf("%d spares named, want %d", named, len(names)-1)
			}
			if got := in == len(names); got != c.want {
				t.Errorf("%d of %d spares made in %s, want all: %v", in, len(names), spareDir, c.want)
			}
			for _, name := range names {
				if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != name {
					t.Errorf("%s holds %q (%v)", name, got, err)
				}
			}
			fi, err := os.Lstat(filepath.Join(dir, spareDir))
			switch {
			case c.want && (err != nil || !fi.IsDir()):
				t.Errorf("%s: %v, want a directory", spareDir, err)
			case !c.history && err == nil:
				t.Errorf("%s made without a history directory", spareDir)
			}
			if c.history {
				ents, err := os.ReadDir(filepath.Join(dir, historyDir))
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					if e.Name() != filepath.Base(spareDir) {
						t.Errorf("left in the history's directory: %s", e.Name())
					}
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("%d entries made through the link", len(ents))
			}
		})
	}
}

// A spare made quickly (under spareSyncMax) makes the next one on the change's own
// goroutine, ready as the storage lock is released; one made slowly sends the next to a
// goroutine of its own.
func TestSpareMadeOnTheChangeWhenQuick(t *testing.T) {
	defer func(old time.Duration) { spareSyncMax = old }(spareSyncMax)
	for _, c := range []struct {
		name     string
		max      time.Duration
		onChange int
	}{
		{"quick", time.Hour, 3}, // all but the first, which no spare before it timed
		{"slow", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			spareSyncMax = c.max
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, historyDir), 0o700); err != nil {
				t.Fatal(err)
			}
			f, err := NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			spareChanges(t, f, "a.md", "b.md", "c.md", "d.md")
			f.spare.mu.Lock()
			onChange := f.spare.onChange
			f.spare.mu.Unlock()
			if onChange != c.onChange {
				t.Errorf("%d spares made on the change, want %d", onChange, c.onChange)
			}
			if c.onChange > 0 {
				// Ready the moment the lock is released, without waiting for anything.
				if _, err := f.LockStorage(context.Background(), true); err != nil {
					t.Fatal(err)
				}
				if err := f.WriteFileUnsynced("e.md", []byte("e"), true); err != nil {
					t.Fatal(err)
				}
				if err := f.UnlockStorage(); err != nil {
					t.Fatal(err)
				}
				f.spare.mu.Lock()
				have := f.spare.have
				f.spare.mu.Unlock()
				if !have {
					t.Error("no spare ready as the lock was released")
				}
			}
		})
	}
}

// A storage directory put in the place of the one opened gets a spare directory of its own
// (the making is tried again after the reopening).
func TestSpareDirectoryAfterTheRootIsReplaced(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	for _, d := range []string{dir, filepath.Join(dir, historyDir)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spareChanges(t, f, "a.md", "b.md")
	if err := os.Rename(dir, filepath.Join(parent, "old")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, historyDir)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	spareChanges(t, f, "c.md", "d.md")
	if f.Reopened() != 1 {
		t.Fatalf("reopened %d times, want 1", f.Reopened())
	}
	if fi, err := os.Stat(filepath.Join(dir, spareDir)); err != nil || !fi.IsDir() {
		t.Errorf("no %s in the new storage directory: %v", spareDir, err)
	}
	f.spare.mu.Lock()
	in := f.spare.inSpareDir
	f.spare.mu.Unlock()
	if in != 4 {
		t.Errorf("%d of 4 spares made in %s", in, spareDir)
	}
	for _, name := range []string{"c.md", "d.md"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != name {
			t.Errorf("%s holds %q (%v)", name, got, err)
		}
	}
}
