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
)

// openFDs counts this process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
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
			if n := openFDs(t); n != fds {
				t.Errorf("%d descriptors open after Close, %d before NewOSFs", n, fds)
			}
		})
	}
}
