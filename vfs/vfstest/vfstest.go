package vfstest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// TestStorage runs the conformance suite on storages made by open, which must return an
// empty, writable storage each time (closed by the suite).
func TestStorage(t *testing.T, open func(t *testing.T) vfs.Storage) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { st.Close() })
			c.run(t, st)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, st vfs.Storage)
}{
	{"empty", testEmpty},
	{"create", testCreate},
	{"create-never-replaces", testCreateNeverReplaces},
	{"write", testWrite},
	{"rename", testRename},
	{"rename-never-replaces", testRenameNeverReplaces},
	{"remove", testRemove},
	{"remove-dir", testRemoveDir},
	{"tree", testTree},
	{"through-a-file", testThroughAFile},
	{"read-transaction", testReadTransaction},
	{"exclusive", testExclusive},
	{"readers-share", testReadersShare},
	{"cancelled", testCancelled},
	{"access", testAccess},
}

func p(s string) vfs.Path { return vfs.MustResolve(s) }

// write runs fn in a write transaction and commits it.
func write(t *testing.T, st vfs.Storage, fn func(ctx context.Context, tx vfs.Txn) error) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := fn(ctx, tx); err != nil {
		tx.Rollback()
		t.Fatalf("write: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// read runs fn in a read transaction.
func read(t *testing.T, st vfs.Storage, fn func(ctx context.Context, tx vfs.Txn)) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Begin(ctx, false)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Commit()
	fn(ctx, tx)
}

func create(t *testing.T, st vfs.Storage, files map[string]string) {
	t.Helper()
	write(t, st, func(ctx context.Context, tx vfs.Txn) error {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if err := tx.CreateFile(ctx, p(n), []byte(files[n])); err != nil {
				return err
			}
		}
		return nil
	})
}

func content(t *testing.T, st vfs.Storage, name string) (string, error) {
	t.Helper()
	var data []byte
	var err error
	read(t, st, func(ctx context.Context, tx vfs.Txn) { data, err = tx.ReadFile(ctx, p(name)) })
	return string(data), err
}

func usage(t *testing.T, st vfs.Storage) int64 {
	t.Helper()
	var n int64
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		var err error
		if n, err = tx.Usage(ctx); err != nil {
			t.Fatalf("usage: %v", err)
		}
	})
	return n
}

func names(entries []vfs.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return out
}

func testEmpty(t *testing.T, st vfs.Storage) {
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		e, err := tx.Stat(ctx, p("/memories"))
		if err != nil || e.Kind != vfs.KindDir {
			t.Errorf("root: %+v, %v; want a directory", e, err)
		}
		entries, err := tx.List(ctx, p("/memories"))
		if err != nil || len(entries) != 0 {
			t.Errorf("list of an empty store: %v, %v", names(entries), err)
		}
		if _, err := tx.Stat(ctx, p("/memories/none")); !vfs.IsNotExist(err) {
			t.Errorf("stat of a missing file: %v, want not-exist", err)
		}
		if _, err := tx.ReadFile(ctx, p("/memories/none")); !vfs.IsNotExist(err) {
			t.Errorf("read of a missing file: %v, want not-exist", err)
		}
	})
	if n := usage(t, st); n != 0 {
		t.Errorf("usage of an empty store = %d", n)
	}
}

func testCreate(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a/b/c.md": "hello", "/memories/.hidden": "xy", "/memories/B.txt": ""})
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		for name, want := range map[string]vfs.Entry{
			"/memories/a":        {Name: "a", Kind: vfs.KindDir},
			"/memories/a/b":      {Name: "b", Kind: vfs.KindDir},
			"/memories/a/b/c.md": {Name: "c.md", Kind: vfs.KindFile, Size: 5},
			"/memories/B.txt":    {Name: "B.txt", Kind: vfs.KindFile},
		} {
			if got, err := tx.Stat(ctx, p(name)); err != nil || got != want {
				t.Errorf("stat %s = %+v, %v; want %+v", name, got, err, want)
			}
		}
		entries, err := tx.List(ctx, p("/memories"))
		if got, want := names(entries), []string{".hidden", "B.txt", "a"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("list = %q, %v; want %q (byte order)", got, err, want)
		}
		if _, err := tx.ReadFile(ctx, p("/memories/a")); err == nil {
			t.Errorf("reading a directory succeeded")
		}
	})
	if got, err := content(t, st, "/memories/a/b/c.md"); err != nil || got != "hello" {
		t.Errorf("content = %q, %v", got, err)
	}
	if n := usage(t, st); n != 7 {
		t.Errorf("usage = %d, want 7 (hidden files count)", n)
	}
}

func testCreateNeverReplaces(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a.md": "old", "/memories/d/x": "x"})
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.CreateFile(ctx, p("/memories/a.md"), []byte("new")); !vfs.IsExist(err) {
		t.Errorf("create over a file: %v, want exists", err)
	}
	if err := tx.CreateFile(ctx, p("/memories/d"), []byte("new")); !vfs.IsExist(err) {
		t.Errorf("create over a directory: %v, want exists", err)
	}
	tx.Rollback()
	if got, _ := content(t, st, "/memories/a.md"); got != "old" {
		t.Errorf("content after a refused create = %q", got)
	}
	if n := usage(t, st); n != 4 {
		t.Errorf("usage = %d, want 4", n)
	}
}

func testWrite(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a.md": "one"})
	write(t, st, func(ctx context.Context, tx vfs.Txn) error {
		return tx.WriteFile(ctx, p("/memories/a.md"), []byte("three"))
	})
	if got, err := content(t, st, "/memories/a.md"); err != nil || got != "three" {
		t.Errorf("content = %q, %v", got, err)
	}
	if n := usage(t, st); n != 5 {
		t.Errorf("usage = %d, want 5", n)
	}
}

func testRename(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a.md": "a", "/memories/d/x/y.md": "yy"})
	write(t, st, func(ctx context.Context, tx vfs.Txn) error {
		if err := tx.Rename(ctx, p("/memories/a.md"), p("/memories/new/parents/a.md")); err != nil {
			return err
		}
		return tx.Rename(ctx, p("/memories/d"), p("/memories/e"))
	})
	for name, want := range map[string]string{"/memories/new/parents/a.md": "a", "/memories/e/x/y.md": "yy"} {
		if got, err := content(t, st, name); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, gone := range []string{"/memories/a.md", "/memories/d", "/memories/d/x/y.md"} {
		if _, err := content(t, st, gone); !vfs.IsNotExist(err) {
			t.Errorf("%s after the rename: %v, want not-exist", gone, err)
		}
	}
	if n := usage(t, st); n != 3 {
		t.Errorf("usage = %d, want 3", n)
	}
}

func testRenameNeverReplaces(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a": "a", "/memories/b": "b", "/memories/d/x": "x"})
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"/memories/b", "/memories/d"} {
		if err := tx.Rename(ctx, p("/memories/a"), p(to)); !vfs.IsExist(err) {
			t.Errorf("rename onto %s: %v, want exists", to, err)
		}
	}
	tx.Rollback()
	for name, want := range map[string]string{"/memories/a": "a", "/memories/b": "b", "/memories/d/x": "x"} {
		if got, _ := content(t, st, name); got != want {
			t.Errorf("%s = %q after refused renames, want %q", name, got, want)
		}
	}
}

func testRemove(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/keep": "k", "/memories/d/a": "aa", "/memories/d/e/b": "bbb", "/memories/f": "ff"})
	write(t, st, func(ctx context.Context, tx vfs.Txn) error {
		if err := tx.RemoveAll(ctx, p("/memories/d")); err != nil {
			return err
		}
		return tx.RemoveAll(ctx, p("/memories/f"))
	})
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		entries, err := tx.List(ctx, p("/memories"))
		if got := names(entries); err != nil || !slices.Equal(got, []string{"keep"}) {
			t.Errorf("left = %q, %v", got, err)
		}
		if _, err := tx.Stat(ctx, p("/memories/d/e/b")); !vfs.IsNotExist(err) {
			t.Errorf("a file below a removed directory: %v", err)
		}
	})
	if n := usage(t, st); n != 1 {
		t.Errorf("usage = %d, want 1", n)
	}
}

func testRemoveDir(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/full/a": "a"})
	write(t, st, func(ctx context.Context, tx vfs.Txn) error {
		if err := tx.RemoveDir(ctx, p("/memories/full")); err == nil {
			t.Errorf("removing a directory that holds a file succeeded")
		}
		if err := tx.RemoveAll(ctx, p("/memories/full/a")); err != nil {
			return err
		}
		return tx.RemoveDir(ctx, p("/memories/full"))
	})
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		if _, err := tx.Stat(ctx, p("/memories/full")); !vfs.IsNotExist(err) {
			t.Errorf("the emptied directory is still there: %v", err)
		}
	})
}

func testTree(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{
		"/memories/a.md": "12345", "/memories/d/b.md": "12", "/memories/d/e/c.md": "1",
		"/memories/d/node_modules/x": "1234567", "/memories/z/.h": "123",
	})
	skip := func(name string) bool { return name == "node_modules" }
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		tree, err := tx.Tree(ctx, p("/memories"), 2, skip)
		if err != nil {
			t.Fatal(err)
		}
		want := vfs.Node{Name: "memories", Dir: true, Size: 11, Children: []vfs.Node{
			{Name: "a.md", Size: 5},
			{Name: "d", Dir: true, Size: 3, Children: []vfs.Node{{Name: "b.md", Size: 2}, {Name: "e", Dir: true, Size: 1}}},
			{Name: "z", Dir: true, Size: 3, Children: []vfs.Node{{Name: ".h", Size: 3}}},
		}}
		if !equalNodes(tree, want) {
			t.Errorf("tree =\n%+v\nwant\n%+v", tree, want)
		}
		sub, err := tx.Tree(ctx, p("/memories/d"), 1, skip)
		if err != nil || sub.Size != 3 || len(sub.Children) != 2 || sub.Children[1].Children != nil {
			t.Errorf("tree of d to depth 1 = %+v, %v", sub, err)
		}
		if _, err := tx.Tree(ctx, p("/memories/a.md"), 1, skip); err == nil {
			t.Errorf("the tree of a file succeeded")
		}
	})
}

func equalNodes(a, b vfs.Node) bool {
	if a.Name != b.Name || a.Dir != b.Dir || a.Size != b.Size || len(a.Children) != len(b.Children) {
		return false
	}
	for i := range a.Children {
		if !equalNodes(a.Children[i], b.Children[i]) {
			return false
		}
	}
	return true
}

func testThroughAFile(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/f": "f"})
	read(t, st, func(ctx context.Context, tx vfs.Txn) {
		if _, err := tx.Stat(ctx, p("/memories/f/x")); !vfs.IsNotExist(err) {
			t.Errorf("a path through a file: %v, want not-exist", err)
		}
	})
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.CreateFile(ctx, p("/memories/f/x"), []byte("x")); err == nil {
		t.Errorf("creating below a file succeeded")
	}
}

func testReadTransaction(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a": "a"})
	ctx := context.Background()
	tx, err := st.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.CreateFile(ctx, p("/memories/b"), []byte("b")); err == nil {
		t.Errorf("a read transaction created a file")
	}
	if err := tx.WriteFile(ctx, p("/memories/a"), []byte("x")); err == nil {
		t.Errorf("a read transaction wrote a file")
	}
	if err := tx.RemoveAll(ctx, p("/memories/a")); err == nil {
		t.Errorf("a read transaction removed a file")
	}
	tx.Rollback()
	if got, _ := content(t, st, "/memories/a"); got != "a" {
		t.Errorf("content = %q", got)
	}
}

// A write transaction excludes every other transaction until it ends; a waiting Begin ends
// with its context.
func testExclusive(t *testing.T, st vfs.Storage) {
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []bool{true, false} {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		other, err := st.Begin(short, w)
		cancel()
		if err == nil {
			other.Rollback()
			t.Errorf("Begin(write=%v) ran beside a write transaction", w)
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Begin(write=%v) waiting: %v, want the context's deadline", w, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	after, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatalf("Begin after the commit: %v", err)
	}
	after.Rollback()
}

func testReadersShare(t *testing.T, st vfs.Storage) {
	ctx := context.Background()
	a, err := st.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Commit()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := st.Begin(short, false)
	if err != nil {
		t.Fatalf("a second reader waited for the first: %v", err)
	}
	b.Commit()
}

func testCancelled(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/a": "a"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tx, err := st.Begin(ctx, true); err == nil {
		tx.Rollback()
		t.Errorf("Begin with a done context succeeded")
	}
	tx, err := st.Begin(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ReadFile(ctx, p("/memories/a")); err == nil {
		t.Errorf("read with a done context succeeded")
	}
	if err := tx.CreateFile(ctx, p("/memories/b"), nil); err == nil {
		t.Errorf("create with a done context succeeded")
	}
	if _, err := tx.Tree(ctx, p("/memories"), 2, func(string) bool { return false }); err == nil {
		t.Errorf("tree with a done context succeeded")
	}
}

func testAccess(t *testing.T, st vfs.Storage) {
	create(t, st, map[string]string{"/memories/old": "o"})
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.LastAccess(ctx); !errors.Is(err, vfs.ErrNotTracked) {
		t.Errorf("LastAccess without tracking: %v, want ErrNotTracked", err)
	}
	tx.Rollback()

	now := time.Unix(1_000_000, 0)
	if err := st.TrackAccess(func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	var rec map[string]int64
	write(t, st, func(ctx context.Context, tx vfs.Txn) (err error) { rec, err = tx.LastAccess(ctx); return err })
	if rec["old"] != now.Unix() {
		t.Errorf("an untracked file starts now: %v", rec)
	}
	now = now.Add(time.Hour)
	create(t, st, map[string]string{"/memories/new": "n"})
	write(t, st, func(ctx context.Context, tx vfs.Txn) (err error) { rec, err = tx.LastAccess(ctx); return err })
	if rec["new"] != now.Unix() || rec["old"] != now.Add(-time.Hour).Unix() {
		t.Errorf("record = %v", rec)
	}
	write(t, st, func(ctx context.Context, tx vfs.Txn) error {
		return tx.Rename(ctx, p("/memories/old"), p("/memories/moved"))
	})
	write(t, st, func(ctx context.Context, tx vfs.Txn) (err error) { rec, err = tx.LastAccess(ctx); return err })
	if _, ok := rec["old"]; ok || rec["moved"] != now.Unix() {
		t.Errorf("after a rename the record = %v", rec)
	}
}

// DownFS is a filesystem whose storage is gone while Down is set, as a disk that is not
// mounted, the same on every system: for tests of a store that fails and comes back.
type DownFS struct {
	files.FS
	Down atomic.Bool
}

func (f *DownFS) LockStorage(ctx context.Context, exclusive bool) (files.Counters, error) {
	if f.Down.Load() {
		return files.Counters{}, vfs.ErrStorageGone
	}
	return f.FS.LockStorage(ctx, exclusive)
}
