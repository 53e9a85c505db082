package vfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The flushing writer keeps the log open between flushes; when the history's directory is
// removed by hand and made again by the next change, it flushes the new log, not the
// removed one it still holds.
func TestWALFlushesTheLogMadeAgain(t *testing.T) {
	needWAL(t)
	// The descriptor is an *os.File when the log was first flushed outside a lock period,
	// an fdFile when inside one (the first record after a checkpoint).
	for _, outside := range []bool{false, true} {
		t.Run(fmt.Sprintf("opened-outside-the-lock=%v", outside), func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenOSStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			w := s.st.(*AferoStorage).history.wal
			ctx := context.Background()
			create := func(p string) {
				t.Helper()
				if err := s.Update(ctx, func(tx *Tx) error { return tx.CreateFile(MustResolve(p), []byte("x")) }); err != nil {
					t.Fatal(err)
				}
			}
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
			if err := os.RemoveAll(filepath.Join(dir, historyDir)); err != nil {
				t.Fatal(err)
			}
			create("/memories/c.md")
			create("/memories/d.md")
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(dir, walName), &st); err != nil {
				t.Fatal(err)
			}
			if ino, links := kept(); ino != st.Ino || links == 0 {
				t.Errorf("the flushing writer holds inode %d (%d links), the log is inode %d", ino, links, st.Ino)
			}
		})
	}
}

// No change, failed or not, leaves a descriptor open: the files opened through the
// directory cache are bare descriptors (fdFile), which no finalizer would ever close.
func TestOSStoreLeavesNoDescriptorsOpen(t *testing.T) {
	s, err := OpenOSStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	round := func(i int) {
		p := MustResolve(fmt.Sprintf("/memories/d%d/f.md", i%3))
		q := MustResolve(fmt.Sprintf("/memories/d%d/g.md", i%3))
		s.Update(ctx, func(tx *Tx) error { return tx.CreateFile(p, []byte("one")) })
		s.Update(ctx, func(tx *Tx) error { return tx.CreateFile(p, []byte("again")) }) // fails: it exists
		s.Update(ctx, func(tx *Tx) error { return tx.WriteFile(p, []byte("two")) })
		s.View(ctx, func(tx *Tx) error { _, err := tx.ReadFile(p); return err })
		s.View(ctx, func(tx *Tx) error { _, err := tx.ReadFile(q); return err }) // fails: absent
		s.Update(ctx, func(tx *Tx) error { return tx.Rename(p, q) })
		s.Update(ctx, func(tx *Tx) error { return tx.RemoveAll(q) })
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
