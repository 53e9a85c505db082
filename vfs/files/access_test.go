package files

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/google/go-cmp/cmp"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// openTracked opens the OS store at dir, tracking access by clock.
func openTracked(t *testing.T, dir string, clock *fakeClock) *vfs.Store {
	t.Helper()
	s, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TrackAccess(clock.now); err != nil {
		t.Fatal(err)
	}
	return s
}

// Expiry with an injected clock: what is older than the limit goes (with the directories it
// empties), what was viewed recently stays, the record survives a restart, and a dry run
// deletes nothing.
func TestExpire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	const day = 24 * time.Hour
	open := func() *vfs.Store { return openTracked(t, dir, clock) }
	s := open()
	err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		for _, p := range []string{"/memories/old.md", "/memories/projects/a/old.md", "/memories/projects/keep.md", "/memories/viewed.md", "/memories/.hidden-old"} {
			if err := tx.CreateFile(vfs.MustResolve(p), []byte("x")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * day)
	s.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.WriteFile(vfs.MustResolve("/memories/projects/keep.md"), []byte("changed"))
	})
	clock.advance(3 * day)
	s.View(context.Background(), func(tx *vfs.Tx) error { _, err := tx.ReadFile(vfs.MustResolve("/memories/viewed.md")); return err })
	// A file placed by hand is unknown to the record: its grace period starts when a sweep sees it.
	os.WriteFile(filepath.Join(dir, "by-hand.md"), []byte("x"), 0o600)
	clock.advance(3 * day) // day 8: old files are 8 days old, keep.md 6, viewed.md 3

	want := []vfs.Expired{
		{Path: "/memories/.hidden-old", Size: 1},
		{Path: "/memories/old.md", Size: 1},
		{Path: "/memories/projects/a/old.md", Size: 1},
		{Path: "/memories/projects/a", Dir: true},
	}
	got, err := s.Expire(context.Background(), 7*day, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	for _, name := range []string{"old.md", "projects/a/old.md", ".hidden-old"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the dry run deleted %s", name)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open() // the record survives the restart: viewed.md keeps its recent time
	defer s.Close()
	got, err = s.Expire(context.Background(), 7*day, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expiry after a restart (-want +got):\n%s", diff)
	}
	for name, exists := range map[string]bool{"old.md": false, "projects/a": false, ".hidden-old": false, "projects/keep.md": true, "viewed.md": true, "by-hand.md": true, "projects": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != exists {
			t.Errorf("%s: exists=%v, want %v", name, err == nil, exists)
		}
	}

	clock.advance(8 * day) // now everything is old, the hand-placed file too
	got, err = s.Expire(context.Background(), 7*day, false)
	if err != nil {
		t.Fatal(err)
	}
	want = []vfs.Expired{
		{Path: "/memories/by-hand.md", Size: 1},
		{Path: "/memories/projects/keep.md", Size: 7},
		{Path: "/memories/viewed.md", Size: 1},
		{Path: "/memories/projects", Dir: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second sweep (-want +got):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !vfs.IsBookkeeping(e.Name()) {
			t.Errorf("left after expiring everything: %s", e.Name())
		}
	}
}

// The journal is appended to where it is now: after it was removed (folded into the
// snapshot by another process), and after the storage directory was moved away and a copy
// put in its place, the next change's event is in the journal at the storage's path.
func TestAccessJournalFollowsItsFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := openTracked(t, dir, clock)
	defer s.Close()
	change := func(p string) {
		t.Helper()
		if err := s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve(p), []byte(p)) }); err != nil {
			t.Fatal(err)
		}
	}
	journal := func(dir string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, accessJournalName))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(data)
	}
	change("/memories/a.md")
	if j := journal(dir); !strings.Contains(j, "\ta.md\n") {
		t.Fatalf("journal %q lacks the first change", j)
	}
	if err := os.Remove(filepath.Join(dir, accessJournalName)); err != nil {
		t.Fatal(err)
	}
	change("/memories/b.md")
	if j := journal(dir); !strings.Contains(j, "\tb.md\n") {
		t.Errorf("after the journal was removed, the journal is %q, want the change to b.md", j)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(dir+".old")); err != nil {
		t.Fatal(err)
	}
	change("/memories/c.md")
	if j := journal(dir); !strings.Contains(j, "\tc.md\n") {
		t.Errorf("after the storage directory was replaced by a copy, its journal is %q, want the change to c.md", j)
	}
	if j := journal(dir + ".old"); strings.Contains(j, "c.md") {
		t.Errorf("the change to c.md went to the journal of the directory moved away: %q", j)
	}
}

// A journal line torn by a crash of the machine costs only that line: the views after it,
// appended by the next process, still count (glued to the torn line, they were lost, and
// expiry took a file the model had just viewed).
func TestAccessJournalAfterATornLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := openTracked(t, dir, clock)
	a := vfs.MustResolve("/memories/a.md")
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(a, []byte("a")) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, accessJournalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(accessTouch + "\t1767225600\tb") // the crash cut it short
	f.Close()
	clock.advance(48 * time.Hour)
	s = openTracked(t, dir, clock)
	defer s.Close()
	s.View(context.Background(), func(tx *vfs.Tx) error { _, err := tx.ReadFile(a); return err })
	clock.advance(time.Hour)
	expired, err := s.Expire(context.Background(), 24*time.Hour, true)
	if err != nil || len(expired) != 0 {
		t.Errorf("expiry a day after the crash, an hour after a view of a.md: %v, %v", expired, err)
	}
}

// A file made outside memory-mcp whose name no path may hold is never expired: its
// deletion could not be recorded (as the model's delete refuses it), nor imported again.
func TestExpireLeavesNamesNoPathCanHold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	const day = 24 * time.Hour
	os.MkdirAll(filepath.Join(dir, "d"), 0o700)
	for _, name := range []string{"ok.md", "a\nold.md", "d/t\tab.md"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	s := openTracked(t, dir, clock)
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Expire(ctx, 7*day, false); err != nil { // starts the grace periods
		t.Fatal(err)
	}
	clock.advance(8 * day)
	got, err := s.Expire(ctx, 7*day, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []vfs.Expired{{Path: "/memories/ok.md", Size: 1}}; !cmp.Equal(want, got) {
		t.Errorf("expired %+v, want %+v", got, want)
	}
	for _, name := range []string{"a\nold.md", "d/t\tab.md"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// The journal stays bounded: once it has grown past accessJournalMax, the next change folds
// it into the snapshot at once, and so does a view (through an exclusive transaction of its
// own). Either way the journal is gone and the snapshot holds each file's latest event.
func TestAccessJournalFoldedPastItsBound(t *testing.T) {
	for _, by := range []string{"change", "view"} {
		t.Run(by, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			s := openTracked(t, dir, clock)
			defer s.Close()
			ctx := context.Background()
			if err := s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("a")) }); err != nil {
				t.Fatal(err)
			}
			// An earlier era's views of a.md fill the journal past its bound.
			var filler strings.Builder
			for filler.Len() <= accessJournalMax {
				filler.WriteString("t\t1700000000\ta.md\n")
			}
			f, err := os.OpenFile(filepath.Join(dir, accessJournalName), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(filler.String())
			f.Close()

			clock.advance(time.Hour)
			if by == "change" {
				err = s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/b.md"), []byte("b")) })
			} else {
				err = s.View(ctx, func(tx *vfs.Tx) error { _, err := tx.ReadFile(vfs.MustResolve("/memories/a.md")); return err })
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, accessJournalName)); !os.IsNotExist(err) {
				t.Errorf("after a %s, the journal over its bound is still there (%v)", by, err)
			}
			data, err := os.ReadFile(filepath.Join(dir, accessName))
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]int64
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			last := clock.now().Unix()
			want := map[string]int64{"a.md": last - 3600}
			if by == "change" {
				want["b.md"] = last
			} else {
				want["a.md"] = last
			}
			if diff := cmp.Diff(want, rec); diff != "" {
				t.Errorf("snapshot after a %s (-want +got):\n%s", by, diff)
			}
		})
	}
}

// A file in a renamed directory keeps its record through an expiry pass: the pass used to
// forget the directory's own name (which a rename records like a file's), and with it every
// file below, so that the file started its grace period again and expired late.
func TestExpireAfterADirectoryRename(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := openTracked(t, dir, clock)
	defer s.Close()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/d/b.md"), []byte("b")) }); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	if err := s.Update(ctx, func(tx *vfs.Tx) error {
		return tx.Rename(vfs.MustResolve("/memories/d"), vfs.MustResolve("/memories/e"))
	}); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	if got, err := s.Expire(ctx, 3*time.Hour, false); err != nil || len(got) != 0 {
		t.Fatalf("first pass: %+v %v, want nothing expired", got, err)
	}
	clock.advance(3 * time.Hour) // the rename was 4 hours ago
	got, err := s.Expire(ctx, 3*time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []vfs.Expired{{Path: "/memories/e/b.md", Size: 1}, {Path: "/memories/e", Dir: true}}; !cmp.Equal(want, got) {
		t.Errorf("second pass expired %+v, want %+v", got, want)
	}
}
