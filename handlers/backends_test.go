package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// backend builds one kind of store, seeded with files (storage name → content; a name
// ending in "/" is a directory). For the overlays the seed goes into the lower layer, so
// that every command is exercised on entries that exist only there.
type backend struct {
	name string
	open func(t testing.TB, seed map[string][]byte, wrap func(files.FS) files.FS) *fixture
}

// fixture is an opened backend: the store, the filesystem under it (without the test's
// wrapper), and the host directories whose paths must never show in any output.
type fixture struct {
	store    *vfs.Store
	fs       files.FS // nil for the database backend
	hostDirs []string
	lowerDir string // the overlays' lower layer, which must never change
}

// tree returns every entry the store holds, as dumpTree does.
func (fx *fixture) tree(t testing.TB) map[string][]byte {
	t.Helper()
	if fx.fs != nil {
		return dumpTree(t, fx.fs)
	}
	tree := map[string][]byte{}
	err := fx.store.View(context.Background(), func(tx *vfs.Tx) error {
		var walk func(dir vfs.Path) error
		walk = func(dir vfs.Path) error {
			entries, err := tx.List(dir)
			if err != nil {
				return err
			}
			for _, e := range entries {
				p := dir.Join(e.Name)
				if e.IsDir() {
					tree[p.Name()+"/"] = nil
					if err := walk(p); err != nil {
						return err
					}
					continue
				}
				if tree[p.Name()], err = tx.ReadFile(p); err != nil {
					return err
				}
			}
			return nil
		}
		return walk(vfs.MustResolve(vfs.Root))
	})
	if err != nil {
		t.Fatal(err)
	}
	return impliedDirs(tree)
}

// postgresBackend is a store in the test PostgreSQL cluster, seeded through the storage (an
// empty directory by creating a file in it and deleting that). It is not among backends():
// those are the afero filesystems, which the fault and concurrency tests reach into.
var postgresBackend = backend{"postgres", func(t testing.TB, seed map[string][]byte, _ func(files.FS) files.FS) *fixture {
	st := vfstest.PostgresStorage(t)
	ctx := context.Background()
	tx, err := st.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sortedNames(seed) {
		p := vfs.MustResolve(vfs.Root + "/" + strings.TrimSuffix(name, "/"))
		if !strings.HasSuffix(name, "/") {
			err = tx.CreateFile(ctx, p, seed[name])
		} else if _, statErr := tx.Stat(ctx, p); vfs.IsNotExist(statErr) {
			placeholder := p.Join("placeholder")
			if err = tx.CreateFile(ctx, placeholder, nil); err == nil {
				err = tx.RemoveAll(ctx, placeholder)
			}
		}
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return &fixture{store: vfs.NewStore(st)}
}}

func backends() []backend {
	return []backend{
		{"os", func(t testing.TB, seed map[string][]byte, wrap func(files.FS) files.FS) *fixture {
			dir := filepath.Join(t.TempDir(), "store")
			writeHostTree(t, dir, seed)
			osfs, err := files.NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { osfs.Close() })
			return &fixture{store: vfs.NewStore(files.NewAferoStorage(wrap(osfs))), fs: osfs, hostDirs: []string{dir}}
		}},
		{"memory", func(t testing.TB, seed map[string][]byte, wrap func(files.FS) files.FS) *fixture {
			m := files.NewMemFs()
			writeAferoTree(t, m, seed)
			return &fixture{store: vfs.NewStore(files.NewAferoStorage(wrap(m))), fs: m}
		}},
		{"overlay", func(t testing.TB, seed map[string][]byte, wrap func(files.FS) files.FS) *fixture {
			lowerDir := filepath.Join(t.TempDir(), "lower")
			upperDir := filepath.Join(t.TempDir(), "upper")
			writeHostTree(t, lowerDir, seed)
			lower, err := files.NewReadOnlyOSFs(lowerDir)
			if err != nil {
				t.Fatal(err)
			}
			upper, err := files.NewOSFs(upperDir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lower.Close(); upper.Close() })
			ov, err := files.NewOverlayFs(lower, upper)
			if err != nil {
				t.Fatal(err)
			}
			return &fixture{store: vfs.NewStore(files.NewAferoStorage(wrap(ov))), fs: ov, hostDirs: []string{lowerDir, upperDir}, lowerDir: lowerDir}
		}},
		{"overlay-mem", func(t testing.TB, seed map[string][]byte, wrap func(files.FS) files.FS) *fixture {
			lowerDir := filepath.Join(t.TempDir(), "lower")
			writeHostTree(t, lowerDir, seed)
			lower, err := files.NewReadOnlyOSFs(lowerDir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lower.Close() })
			ov, err := files.NewOverlayFs(lower, files.NewMemFs())
			if err != nil {
				t.Fatal(err)
			}
			return &fixture{store: vfs.NewStore(files.NewAferoStorage(wrap(ov))), fs: ov, hostDirs: []string{lowerDir}, lowerDir: lowerDir}
		}},
	}
}

func noWrap(fsys files.FS) files.FS { return fsys }

func sortedNames(seed map[string][]byte) []string {
	names := make([]string, 0, len(seed))
	for n := range seed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func writeHostTree(t testing.TB, dir string, seed map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range sortedNames(seed) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, seed[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func writeAferoTree(t testing.TB, fsys afero.Fs, seed map[string][]byte) {
	t.Helper()
	for _, name := range sortedNames(seed) {
		if strings.HasSuffix(name, "/") {
			if err := fsys.MkdirAll("/"+name, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := fsys.MkdirAll("/"+filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fsys, "/"+name, seed[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// dumpTree returns every entry the store holds, as the model could reach it (hidden files
// included, bookkeeping not): storage name → content, directories with a trailing "/".
func dumpTree(t testing.TB, fsys afero.Fs) map[string][]byte {
	t.Helper()
	tree := map[string][]byte{}
	var walk func(dir string)
	walk = func(dir string) {
		d, err := fsys.Open("/" + dir)
		if err != nil {
			t.Fatalf("open %q: %v", dir, err)
		}
		infos, err := d.Readdir(-1)
		d.Close()
		if err != nil {
			t.Fatalf("readdir %q: %v", dir, err)
		}
		for _, fi := range infos {
			if vfs.IsBookkeeping(fi.Name()) {
				continue
			}
			name := strings.TrimPrefix(dir+"/"+fi.Name(), "/")
			if fi.IsDir() {
				tree[name+"/"] = nil
				walk(name)
				continue
			}
			data, err := afero.ReadFile(fsys, "/"+name)
			if err != nil {
				t.Fatalf("read %q: %v", name, err)
			}
			tree[name] = data
		}
	}
	walk("")
	return impliedDirs(tree)
}

// impliedDirs leaves out of a tree the directories that hold something: their entries imply
// them.
func impliedDirs(tree map[string][]byte) map[string][]byte {
	for name := range tree {
		if strings.HasSuffix(name, "/") {
			for other := range tree {
				if other != name && strings.HasPrefix(other, name) {
					delete(tree, name)
					break
				}
			}
		}
	}
	return tree
}

// hashDir fingerprints a host directory: every path, mode, size and content.
func hashDir(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel + "\x00" + fi.Mode().String() + "\x00" + fi.ModTime().UTC().Format(time.RFC3339Nano) + "\x00"))
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// faultFs makes one kind of operation fail with a given error, or panic, to drive the
// storage-failure paths of docs/behaviour.md §4. It embeds the filesystem it wraps, so every
// method of the files.FS contract it does not override is the wrapped filesystem's own: the
// store runs the same code as in production, only the faulty operation differs.
type faultFs struct {
	files.FS
	op  string // "read", "write", "rename", "remove", "mkdir", "stat"
	err error  // nil: panic instead
}

var errnos = map[string]error{
	"EACCES": syscall.EACCES, "ENOSPC": syscall.ENOSPC, "EROFS": syscall.EROFS,
	"EIO": syscall.EIO, "EINVAL": syscall.EINVAL, "EDQUOT": syscall.EDQUOT, "EPERM": syscall.EPERM,
}

func (f *faultFs) fail(op, name string) error {
	if op != f.op {
		return nil
	}
	if f.err == nil {
		panic("injected panic in " + op + " of " + name)
	}
	return &fs.PathError{Op: op, Path: "/host/secret/storage/" + name, Err: f.err}
}

func (f *faultFs) Open(name string) (afero.File, error) {
	if err := f.fail("read", name); err != nil {
		return nil, err
	}
	return f.FS.Open(name)
}

func (f *faultFs) OpenDir(name string) (files.DirHandle, error) {
	if err := f.fail("read", name); err != nil {
		return nil, err
	}
	return f.FS.OpenDir(name)
}

func (f *faultFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	op := "read"
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) != 0 {
		op = "write"
	}
	if err := f.fail(op, name); err != nil {
		return nil, err
	}
	return f.FS.OpenFile(name, flag, perm)
}

// WriteFileAtomic fails with a write fault, and with a rename fault too: an atomic write
// renames its temporary file into place.
func (f *faultFs) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	if err := f.fail("write", name); err != nil {
		return err
	}
	if err := f.fail("rename", name); err != nil {
		return err
	}
	return f.FS.WriteFileAtomic(name, data, noReplace)
}

func (f *faultFs) Stat(name string) (os.FileInfo, error) {
	if err := f.fail("stat", name); err != nil {
		return nil, err
	}
	return f.FS.Stat(name)
}

func (f *faultFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if err := f.fail("stat", name); err != nil {
		return nil, false, err
	}
	return f.FS.LstatIfPossible(name)
}

func (f *faultFs) Rename(o, n string) error {
	if err := f.fail("rename", o); err != nil {
		return err
	}
	return f.FS.Rename(o, n)
}

func (f *faultFs) RenameNoReplace(o, n string) error {
	if err := f.fail("rename", o); err != nil {
		return err
	}
	return f.FS.RenameNoReplace(o, n)
}

func (f *faultFs) RemoveAll(name string) error {
	if err := f.fail("remove", name); err != nil {
		return err
	}
	return f.FS.RemoveAll(name)
}

func (f *faultFs) MkdirAll(name string, perm os.FileMode) error {
	if err := f.fail("mkdir", name); err != nil {
		return err
	}
	return f.FS.MkdirAll(name, perm)
}
