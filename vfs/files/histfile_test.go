package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// A crash between announcing an operation and settling it leaves a group without its settle
// line, perhaps with a torn line after it: readers check it against the files, and the next
// change settles it, keeping exactly the versions the files show.
func TestHistoryUnsettledGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		happened bool // the files show the announced change
		torn     bool
	}{
		{"happened", true, false},
		{"did-not-happen", false, false},
		{"happened-torn", true, true},
		{"did-not-happen-torn", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := NewMemFs()
			ctx := context.Background()
			s1 := vfs.NewStore(NewAferoStorage(fsys))
			if err := s1.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a"), []byte("1")) }); err != nil {
				t.Fatal(err)
			}
			// What a crashed process left: the announced write of "2" to a (with its
			// content kept), and maybe the change itself.
			v := vfs.Version{Seq: 2, Kind: vfs.Modified, Path: "/memories/a", Size: 1, SHA256: vfs.DigestOf([]byte("2")), PrevSize: 1, Prev: vfs.DigestOf([]byte("1"))}
			line, _ := json.Marshal(logLine{G: 99, V: &v})
			extra := string(line) + "\n"
			if tc.torn {
				extra += `{"g":100,"v":{"seq":3,"ki`
			}
			f, err := fsys.OpenFile(historyLogName, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte(extra))
			f.Close()
			if err := fsys.WriteFileAtomic(objectName(v.SHA256), []byte("2"), true); err != nil {
				t.Fatal(err)
			}
			if tc.happened {
				if err := fsys.WriteFileAtomic("a", []byte("2"), false); err != nil {
					t.Fatal(err)
				}
			}
			want := 1
			if tc.happened {
				want = 2
			}
			// Another process reads, then changes.
			s2 := vfs.NewStore(NewAferoStorage(fsys))
			count := func() int {
				var n int
				s2.View(ctx, func(tx *vfs.Tx) error {
					vs, err := tx.Versions()
					n = len(vs)
					return err
				})
				return n
			}
			if n := count(); n != want {
				t.Errorf("a reader sees %d versions, want %d", n, want)
			}
			b, err := s2.Apply(ctx, "create", func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/b"), []byte("b")) })
			if err != nil {
				t.Fatal(err)
			}
			if b.Version != uint64(want+1) {
				t.Errorf("the next change is version %d, want %d", b.Version, want+1)
			}
			if n := count(); n != want+1 {
				t.Errorf("after the next change: %d versions, want %d", n, want+1)
			}
			data, _ := readAll(fsys, historyLogName)
			if strings.Contains(string(data), `"ki`+"\n") || !strings.HasSuffix(string(data), "\n") {
				t.Errorf("the torn line was not cut off:\n%s", data)
			}
			if !strings.Contains(string(data), `{"settle":99`) {
				t.Errorf("the open group was not settled:\n%s", data)
			}
		})
	}
}

// Between the hourly passes, pruning reads the versions every 1,000 changes only when it may
// drop something: versions past MaxAge go within 1,000 changes, and a history with nothing
// to prune is not read again for them.
func TestPruneEvery1000OnlyWhenDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := NewMemoryStore(vfs.WithHistory(vfs.HistoryConfig{MaxAge: 30 * time.Minute, Now: clock}))
	ctx := context.Background()
	write := func(name, text string) {
		p := vfs.MustResolve("/memories/" + name)
		if err := s.Update(ctx, func(tx *vfs.Tx) error {
			if _, err := tx.Stat(p); err == nil {
				return tx.WriteFile(p, []byte(text))
			}
			return tx.CreateFile(p, []byte(text))
		}); err != nil {
			t.Fatal(err)
		}
	}
	write("old.md", "1") // the first change's pass
	write("old.md", "2")
	h := s.Storage().(*AferoStorage).history
	for i := range vfs.PruneEvery {
		write("a.md", fmt.Sprint(i))
	}
	if h.appended < vfs.PruneEvery { // a pass starts the count again
		t.Errorf("a pass ran within %d changes with nothing old enough to prune", vfs.PruneEvery)
	}
	now = now.Add(40 * time.Minute) // older than MaxAge, within the hour
	for i := range vfs.PruneEvery {
		write("a.md", fmt.Sprint("x", i))
	}
	for _, v := range versionsOf(t, s) {
		if v.Path == "/memories/old.md" && v.Seq == 1 {
			t.Errorf("version 1 of old.md, 40 minutes old, is still there after %d changes", vfs.PruneEvery)
		}
	}
}

// A transaction's appends to the history log share one descriptor; after the log is written
// anew within the transaction (a redaction), the next change's version goes to the new log.
func TestHistoryAppendsAfterARewrite(t *testing.T) {
	for _, backend := range []string{"os", "memory"} {
		t.Run(backend, func(t *testing.T) { testHistoryAppendsAfterARewrite(t, backend) })
	}
}

func testHistoryAppendsAfterARewrite(t *testing.T, backend string) {
	s := NewMemoryStore()
	if backend == "os" {
		var err error
		if s, err = OpenOSStore(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	defer s.Close()
	err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		if err := tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("secret")); err != nil {
			return err
		}
		if _, err := tx.Redact(vfs.DigestOf([]byte("secret"))); err != nil {
			return err
		}
		return tx.CreateFile(vfs.MustResolve("/memories/b.md"), []byte("b"))
	})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, v := range versionsOf(t, s) {
		paths = append(paths, v.Path)
	}
	if got := strings.Join(paths, " "); got != "/memories/a.md /memories/b.md" {
		t.Errorf("versions of %s, want of /memories/a.md and /memories/b.md", got)
	}
}

// killFS stops the process, as a kill would, at one step of a redaction: the log's rewrite
// or the content's removal (a panic that the test recovers, leaving the files as they are).
type killFS struct {
	FS
	at string // "log" or "object"
}

func (k *killFS) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	if k.at == "log" && name == historyLogName {
		panic("killed")
	}
	return k.FS.WriteFileAtomic(name, data, noReplace)
}

func (k *killFS) Remove(name string) error {
	if k.at == "object" && strings.HasPrefix(name, historyObjects+"/") {
		panic("killed")
	}
	return k.FS.Remove(name)
}

// A redaction killed at any step never leaves the log saying "redacted" while the content
// is still on disk: the content goes first.
func TestRedactKilledMidway(t *testing.T) {
	const secret = "the launch code is 0000\n"
	for _, at := range []string{"log", "object"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			osfs, err := NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			k := &killFS{FS: osfs}
			s := vfs.NewStore(NewAferoStorage(k))
			ctx := context.Background()
			for _, content := range []string{secret, "nothing now\n"} {
				_, err := s.Apply(ctx, "edit", func(tx *vfs.Tx) error {
					if _, err := tx.Stat(vfs.MustResolve("/memories/a.md")); err == nil {
						return tx.WriteFile(vfs.MustResolve("/memories/a.md"), []byte(content))
					}
					return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte(content))
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			k.at = at
			func() {
				defer func() { recover() }()
				s.Apply(ctx, "redact", func(tx *vfs.Tx) error {
					_, err := tx.Redact(vfs.DigestOf([]byte(secret)))
					return err
				})
			}()
			osfs.Close()

			s2, err := OpenOSStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			var redacted bool
			s2.View(ctx, func(tx *vfs.Tx) error {
				vs, err := tx.Versions()
				for _, v := range vs {
					redacted = redacted || v.Redacted != nil
				}
				return err
			})
			onDisk := false
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					data, _ := os.ReadFile(p)
					onDisk = onDisk || strings.Contains(string(data), "launch code")
				}
				return nil
			})
			if redacted && onDisk {
				t.Error("the log says redacted, and the content is still on disk")
			}
			// Run again, the redaction completes.
			if _, err := s2.Apply(ctx, "redact", func(tx *vfs.Tx) error { _, err := tx.Redact(vfs.DigestOf([]byte(secret))); return err }); err != nil && !errors.Is(err, vfs.ErrNoContent) {
				t.Fatalf("redact again: %v", err)
			}
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if data, _ := os.ReadFile(p); strings.Contains(string(data), "launch code") {
						t.Errorf("after the second redact, %s holds the content", p)
					}
				}
				return nil
			})
		})
	}
}

// killWrites stops the process, as a kill would, at the n-th write of a memory file.
type killWrites struct {
	FS
	n int
}

func (k *killWrites) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	if !strings.HasPrefix(name, vfs.BookkeepingPrefix) {
		if k.n--; k.n == 0 {
			panic("killed")
		}
	}
	return k.FS.WriteFileAtomic(name, data, noReplace)
}

// A change of several files (a restore, say) killed midway is reported: the next open
// keeps the versions of the files it changed and marks them interrupted, so the log says
// that the rest did not happen.
func TestChangeKilledMidwayIsReported(t *testing.T) {
	dir := t.TempDir()
	osfs, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := vfs.NewStore(NewAferoStorage(&killWrites{FS: osfs, n: 2}))
	func() {
		defer func() { recover() }()
		s.Apply(context.Background(), "restore", func(tx *vfs.Tx) error {
			for _, p := range []string{"/memories/a.md", "/memories/b.md", "/memories/c.md"} {
				if err := tx.CreateFile(vfs.MustResolve(p), []byte(p)); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	osfs.Close()
	s2, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var vs []vfs.Version
	if _, err := s2.Apply(context.Background(), "create", func(tx *vfs.Tx) error {
		if vs, err = tx.Versions(); err != nil {
			return err
		}
		return tx.CreateFile(vfs.MustResolve("/memories/d.md"), nil)
	}); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Path != "/memories/a.md" || !vs[0].Interrupted {
		t.Fatalf("after the kill: %+v, want a.md's version, marked interrupted", vs)
	}
	s2.View(context.Background(), func(tx *vfs.Tx) error {
		vs, _ = tx.Versions()
		return nil
	})
	if len(vs) != 2 || !vs[0].Interrupted || vs[1].Interrupted {
		t.Errorf("read again: %+v, want a.md's interrupted version, then d.md's", vs)
	}
}
