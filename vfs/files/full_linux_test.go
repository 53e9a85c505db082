package files_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// On a disk nearly full, every change that fits is made, though the write-ahead log cannot
// grow by its chunk of zeros in advance; a change that does not fit fails with the
// no-space message and leaves nothing behind; the space deletes free is used again; and
// every change acknowledged is there when the store is opened again.
func TestNearlyFullDisk(t *testing.T) {
	mnt := smallDisk(t)
	dir := filepath.Join(mnt, "m")
	ctx := context.Background()
	store, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { store.Close() }()
	h := handlers.New(store, handlers.DefaultLimits())
	want := map[string]string{} // the files acknowledged, and their contents
	must := func(res handlers.Result) {
		t.Helper()
		if res.IsError {
			t.Fatal(res.Text)
		}
	}
	for i := 0; ; i++ {
		p, text := fmt.Sprintf("/memories/f%d.md", i), strings.Repeat(fmt.Sprintf("%02d", i), 15_000)
		res := h.Create(ctx, handlers.CreateArgs{Path: p, FileText: text})
		if res.IsError {
			if msg := "Error: Could not create " + p + ": no space left on storage"; res.Text != msg {
				t.Fatalf("create %s on a full disk: %q, want %q", p, res.Text, msg)
			}
			break
		}
		want[p] = text
		if i == 100 {
			t.Fatal("1 MiB never filled")
		}
	}
	// A change takes about three times its content until a checkpoint: the file, the
	// history's copy and the log's record.
	if len(want) < 5 {
		t.Fatalf("only %d files of 30 KB were made on an empty 1 MiB disk", len(want))
	}
	// The log keeps room past its last line for the outcome of a change that fails after
	// its record: without one, a crash of the machine would have that change redone.
	if wal, err := os.ReadFile(filepath.Join(dir, ".memory-mcp-history", "wal")); err != nil || len(bytes.TrimRight(wal, "\x00")) == len(wal) {
		t.Errorf("the log has no room past its last line (%v)", err)
	}
	if objects, _ := os.ReadDir(filepath.Join(dir, ".memory-mcp-history", "objects")); len(objects) != len(want) {
		t.Errorf("%d contents in the history after the refused create, want the %d acknowledged", len(objects), len(want))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(want)+3 { // the lock, the gate and the history
		t.Errorf("%d entries in the store's directory after the refused create, want %d: %v", len(entries), len(want)+3, entries)
	}
	for _, p := range []string{"/memories/f0.md", "/memories/f1.md", "/memories/f2.md"} {
		must(h.Delete(ctx, handlers.DeleteArgs{Path: p}))
		delete(want, p)
	}
	must(h.Create(ctx, handlers.CreateArgs{Path: "/memories/after.md", FileText: "made in the space freed\n"}))
	want["/memories/after.md"] = "made in the space freed\n"
	changes := len(want) + 3 + 3 // every create, and the deletes
	store.Close()

	store, err = files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h = handlers.New(store, handlers.DefaultLimits())
	files, err := h.FileList(ctx)
	if err != nil || len(files) != len(want) {
		t.Fatalf("opened again: %d files, %v; want %d", len(files), err, len(want))
	}
	for p, text := range want {
		if got, _, err := h.Read(ctx, p); string(got) != text || err != nil {
			t.Errorf("opened again, %s holds %d bytes, %v; want the %d acknowledged", p, len(got), err, len(text))
		}
	}
	if vs, err := h.Log(ctx, handlers.LogQuery{}); len(vs) != changes || err != nil {
		t.Errorf("the history holds %d versions, %v; want %d", len(vs), err, changes)
	}
}

// smallDisk returns a new filesystem of 1 MiB (tmpfs), mounted until the test ends.
func smallDisk(t *testing.T) string {
	sudo := asRoot(t)
	mnt := t.TempDir()
	if _, err := run(append(sudo, "mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", mnt)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := run(append(sudo, "umount", mnt)...); err != nil {
			t.Error(err)
		}
	})
	return mnt
}

// viewOnFullDisk makes two notes on a small disk, folds the access record, fills the disk,
// and has viewed.md viewed 20 days later: a view the disk has no room to record. free gives
// the room back. The caller closes the store.
func viewOnFullDisk(t *testing.T) (dir string, store *vfs.Store, clock *time.Time, free func()) {
	mnt := smallDisk(t)
	dir = filepath.Join(mnt, "m")
	ctx := context.Background()
	clock = new(time.Time)
	*clock = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store = openTrackedOS(t, dir, func() time.Time { return *clock })
	h := handlers.New(store, handlers.DefaultLimits())
	for _, p := range []string{"/memories/viewed.md", "/memories/other.md"} {
		if res := h.Create(ctx, handlers.CreateArgs{Path: p, FileText: "note\n"}); res.IsError {
			t.Fatal(res.Text)
		}
	}
	if _, err := store.Expire(ctx, fullDiskAge, false); err != nil { // the record is folded: no journal
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 64<<10))
	}
	f.Close()
	*clock = clock.Add(20 * 24 * time.Hour)
	if res := h.View(ctx, handlers.ViewArgs{Path: "/memories/viewed.md"}); res.IsError {
		t.Fatal(res.Text)
	}
	if fi, err := os.Stat(filepath.Join(dir, vfs.BookkeepingPrefix+"-access.log")); err == nil && fi.Size() > 0 {
		t.Fatal("the view was recorded on a full disk: the test needs it not to be")
	}
	return dir, store, clock, func() { os.Remove(filler) }
}

// fullDiskAge is the expiry limit of the full-disk tests.
const fullDiskAge = 30 * 24 * time.Hour

// A view made while the disk is full cannot be recorded; expiry then counts every file as
// viewed when that happened, rather than delete a file the model was using.
func TestFullDiskViewsKeepFiles(t *testing.T) {
	dir, store, clock, free := viewOnFullDisk(t)
	defer store.Close()
	ctx := context.Background()
	free()
	*clock = clock.Add(20 * 24 * time.Hour) // 40 days after the creates, 20 after the view
	if gone, err := store.Expire(ctx, fullDiskAge, false); len(gone) != 0 || err != nil {
		t.Fatalf("expired %v, %v: the view 20 days ago could not be recorded, so nothing is unused for 30 days", gone, err)
	}
	// The time of the view that was lost is in the record now, for another process too.
	other := openTrackedOS(t, dir, func() time.Time { return *clock })
	defer other.Close()
	*clock = clock.Add(9 * 24 * time.Hour)
	if gone, err := other.Expire(ctx, fullDiskAge, false); len(gone) != 0 || err != nil {
		t.Fatalf("another process, 29 days after the view: expired %v, %v; want nothing", gone, err)
	}
	*clock = clock.Add(2 * 24 * time.Hour)
	if gone, err := other.Expire(ctx, fullDiskAge, false); len(gone) != 2 || err != nil {
		t.Errorf("31 days after the view: expired %v, %v; want both files", gone, err)
	}
}

// The same when the process that could not record the view has ended before the disk has
// room again: the fact is kept in the storage lock, which needs no room, and another
// process's sweep counts it.
func TestFullDiskViewsKeepFilesAfterTheProcessEnds(t *testing.T) {
	dir, store, clock, free := viewOnFullDisk(t)
	store.Close() // the process ends
	free()
	ctx := context.Background()
	*clock = clock.Add(20 * 24 * time.Hour) // 40 days after the creates, 20 after the view
	other := openTrackedOS(t, dir, func() time.Time { return *clock })
	defer other.Close()
	if gone, err := other.Expire(ctx, fullDiskAge, false); len(gone) != 0 || err != nil {
		t.Fatalf("another process, 20 days after a view the disk had no room to record: expired %v, %v; want nothing", gone, err)
	}
	*clock = clock.Add(11 * 24 * time.Hour)
	if gone, err := other.Expire(ctx, fullDiskAge, false); len(gone) != 2 || err != nil {
		t.Errorf("31 days after the view: expired %v, %v; want both files", gone, err)
	}
}
