package files

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// usageOf returns the store's usage as a write transaction sees it (as create does).
func usageOf(t *testing.T, s *vfs.Store) int64 {
	t.Helper()
	var n int64
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		var err error
		n, err = tx.Usage()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func create(t *testing.T, s *vfs.Store, name, text string) {
	t.Helper()
	p := vfs.MustResolve(vfs.Root + "/" + name)
	if err := s.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(p, []byte(text)) }); err != nil {
		t.Fatal(err)
	}
}

// Two processes on one directory share the store's usage through the storage lock: after
// one changes the store, the other takes the usage it left there rather than walking the
// store again, and walks only when a change did not finish.
func TestUsageSharedBetweenProcesses(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenOSStore(dir) // its own descriptors and locks: another process, as far as flock goes
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	create(t, a, "one.md", "12345")
	if got := usageOf(t, b); got != 5 {
		t.Fatalf("b's usage after a's create = %d, want 5", got)
	}
	create(t, b, "two.md", "123")
	if got := usageOf(t, a); got != 8 {
		t.Fatalf("a's usage after b's create = %d, want 8", got)
	}

	// A file put in place behind both (no memory-mcp process saw it) is not counted by the
	// shared usage: b takes a's figure without walking.
	if err := os.WriteFile(filepath.Join(dir, "behind.md"), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	create(t, a, "three.md", "1")
	if got := usageOf(t, b); got != 9 {
		t.Fatalf("b's usage = %d, want a's shared 9 (a walk would give 109)", got)
	}

	// A change that died half-way (generation bumped, usage never written) leaves the
	// usage unknown: the other process walks and finds everything.
	st := a.Storage().(*AferoStorage)
	c, err := st.fs.LockStorage(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	st.fs.SetGeneration(c.Generation + 1)
	st.fs.UnlockStorage()
	if got := usageOf(t, b); got != 109 {
		t.Fatalf("b's usage after an unfinished change = %d, want a walk's 109", got)
	}

	// A process that starts walks once, which also counts what was edited by hand.
	create(t, b, "four.md", "1234")
	os.Remove(filepath.Join(dir, "behind.md"))
	c2, err := OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := usageOf(t, c2); got != 13 {
		t.Fatalf("a new process's usage = %d, want a walk's 13", got)
	}
}
