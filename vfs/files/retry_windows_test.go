package files

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// A file that another program holds open without sharing deletion (as an antivirus or the
// search indexer does for a moment) is replaced once it lets go, rather than failing the change.
func TestReplaceWaitsForAFileHeldOpen(t *testing.T) {
	dir := t.TempDir()
	fsys, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	name, _ := windows.UTF16PtrFromString(filepath.Join(dir, "a.md"))
	h, err := windows.CreateFile(name, windows.GENERIC_READ, windows.FILE_SHARE_READ, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	heldSleep = func(time.Duration) {
		if waits++; waits == 1 {
			windows.CloseHandle(h) // the other program lets go while the change waits
		}
	}
	defer func() { heldSleep = time.Sleep }()
	if err := fsys.WriteFileAtomic("a.md", []byte("new"), false); err != nil {
		t.Fatalf("replace a file held open for a moment: %v", err)
	}
	if waits != 1 {
		t.Fatalf("the change waited %d times, want once: the first try should fail while the file is held", waits)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.md")); string(data) != "new" {
		t.Fatalf("a.md holds %q", data)
	}
}
