package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"

	"golang.org/x/sys/unix"
)

// The flushing writer keeps the log open between flushes, and changes keep the two logs
// open (keptFile); when the history's directory is removed or moved away by hand and made
// again by the next change, or the whole storage directory is moved away and another
// (empty, or a copy) put in its place, the next changes write and flush the logs now in
// the storage directory, not the ones still held.
func TestWALFlushesTheLogMadeAgain(t *testing.T) {
	needWAL(t)
	replace := map[string]func(t *testing.T, dir string){
		"history-removed": func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, historyDir)); err != nil {
				t.Fatal(err)
			}
		},
		"history-moved": func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, historyDir), dir+".history-moved"); err != nil {
				t.Fatal(err)
			}
		},
		"root-moved-new-made": func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		},
		"root-moved-copy-put-back": func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(dir, os.DirFS(dir+".old")); err != nil {
				t.Fatal(err)
			}
		},
	}
	// The log first flushed outside a lock period, or inside one (the first record after a
	// checkpoint).
	for _, how := range []string{"history-removed", "history-moved", "root-moved-new-made", "root-moved-copy-put-back"} {
		for _, outside := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/opened-outside-the-lock=%v", how, outside), func(t *testing.T) {
				dir, w, create := openWALStore(t)
				// kept returns the inode and links of the log the flushing writer holds.
				kept := func() (ino uint64, links uint64) {
					t.Helper()
					w.mu.Lock()
					defer w.mu.Unlock()
					if w.file == nil {
						t.Fatal("the flushing writer keeps no descriptor of the log")
					}
					fi, err := w.file.Stat()
					if err != nil {
						t.Fatal(err)
					}
					switch st := fi.Sys().(type) {
					case *syscall.Stat_t:
						return uint64(st.Ino), uint64(st.Nlink)
					case *unix.Stat_t:
						return uint64(st.Ino), uint64(st.Nlink)
					}
					t.Fatalf("a status of type %T", fi.Sys())
					return 0, 0
				}
				create("/memories/a.md") // the first record: flushed under the lock
				if outside {
					w.close()
				}
				create("/memories/b.md") // flushed after the lock period
				kept()
				replace[how](t, dir)
				create("/memories/c.md")
				create("/memories/d.md")
				var st unix.Stat_t
				if err := unix.Stat(filepath.Join(dir, walName), &st); err != nil {
					t.Fatal(err)
				}
				if ino, links := kept(); ino != st.Ino || links == 0 {
					t.Errorf("the flushing writer holds inode %d (%d links), the log is inode %d", ino, links, st.Ino)
				}
				// The changes after the replacement wrote their records where recovery reads
				// them (from the start of the log at its name), and their versions to the
				// history's log at its name: not through descriptors of the files replaced.
				if got := walPaths(t, dir); !slices.Contains(got, "/memories/c.md") || !slices.Contains(got, "/memories/d.md") {
					t.Errorf("the log at its name holds records of %q; want c.md and d.md among them", got)
				}
				if log, err := os.ReadFile(filepath.Join(dir, historyLogName)); err != nil || !strings.Contains(string(log), "/memories/d.md") {
					t.Errorf("the history's log holds no version of d.md (%v): %s", err, log)
				}
			})
		}
	}
}

// openWALStore opens an os store in a new directory for the test, closed when it ends, and
// returns the directory, the store's write-ahead log and a function that creates a file.
func openWALStore(t *testing.T) (dir string, w *walState, create func(p string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "m")
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	create = func(p string) {
		t.Helper()
		if err := s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve(p), []byte(p)) }); err != nil {
			t.Fatal(err)
		}
	}
	return dir, s.Storage().(*AferoStorage).history.wal, create
}

// walPaths returns the paths of the versions in the records of the write-ahead log at its
// name in dir, read as recovery reads them.
func walPaths(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, walName))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range scanWAL(data).records {
		for _, v := range r.V {
			paths = append(paths, v.Path)
		}
	}
	return paths
}

// Changes write the two logs through descriptors kept from one change to the next (see
// keptFile); a history's log replaced by a rewrite in another process is opened again by
// its name, and the next change's version goes there.
func TestWALKeepsItsDescriptors(t *testing.T) {
	needWAL(t)
	dir, w, create := openWALStore(t)
	create("/memories/a.md")
	rec, log := w.rec.f, w.log.f
	if rec == nil || log == nil {
		t.Fatalf("after a change the descriptors kept are %v and %v", rec, log)
	}
	create("/memories/b.md")
	create("/memories/c.md")
	if w.rec.f != rec || w.log.f != log {
		t.Errorf("the next changes opened the logs again")
	}

	// Another process rewrites the history's log: a new file renamed over the old.
	logPath := filepath.Join(dir, historyLogName)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(logPath+".new", logPath); err != nil {
		t.Fatal(err)
	}
	create("/memories/d.md")
	if data, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(data), "/memories/d.md") {
		t.Errorf("the history's log at its name holds no version of d.md (%v)", err)
	}
	if w.rec.f != rec {
		t.Errorf("the write-ahead log, not replaced, was opened again")
	}
	if got := walPaths(t, dir); !slices.Contains(got, "/memories/d.md") {
		t.Errorf("the write-ahead log holds records of %q; want d.md among them", got)
	}
}

// No change, failed or not, leaves a descriptor open.
func TestOSStoreLeavesNoDescriptorsOpen(t *testing.T) {
	s, err := OpenOSStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	round := func(i int) {
		p := vfs.MustResolve(fmt.Sprintf("/memories/d%d/f.md", i%3))
		q := vfs.MustResolve(fmt.Sprintf("/memories/d%d/g.md", i%3))
		s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(p, []byte("one")) })
		s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(p, []byte("again")) }) // fails: it exists
		s.Update(ctx, func(tx *vfs.Tx) error { return tx.WriteFile(p, []byte("two")) })
		s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.ReadFile(p); return err })
		s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.ReadFile(q); return err }) // fails: absent
		s.Update(ctx, func(tx *vfs.Tx) error { return tx.Rename(p, q) })
		s.Update(ctx, func(tx *vfs.Tx) error { return tx.RemoveAll(q) })
	}
	open := func() int {
		t.Helper()
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(fds)
	}
	for i := range 10 { // the descriptors a store keeps (locks, the log's) are open by now
		round(i)
	}
	before := open()
	for i := range 200 {
		round(i)
	}
	if after := open(); after > before+2 {
		t.Errorf("%d descriptors open after 200 rounds of changes, %d before", after, before)
	}
}
