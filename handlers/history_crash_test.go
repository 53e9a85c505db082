package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// childHistory makes random changes of every kind until it is killed: creates, edits,
// renames and deletes of files and directories, among 3 directories of 3 files.
func childHistory() {
	h := childMemory()
	ctx := context.Background()
	fmt.Println("ready")
	dir := func() string { return fmt.Sprintf("/memories/d%d", rand.IntN(3)) }
	file := func() string { return fmt.Sprintf("%s/f%d.md", dir(), rand.IntN(3)) }
	for i := 0; ; i++ {
		var in map[string]any
		switch rand.IntN(6) {
		case 0, 1:
			in = map[string]any{"command": "create", "path": file(), "file_text": fmt.Sprintf("line %d\n", i)}
		case 2:
			in = map[string]any{"command": "insert", "path": file(), "insert_line": float64(0), "insert_text": fmt.Sprintf("insert %d", i)}
		case 3:
			in = map[string]any{"command": "rename", "old_path": file(), "new_path": file()}
		case 4:
			in = map[string]any{"command": "rename", "old_path": dir(), "new_path": dir()}
		case 5:
			if rand.IntN(3) == 0 {
				in = map[string]any{"command": "delete", "path": dir()}
			} else {
				in = map[string]any{"command": "delete", "path": file()}
			}
		}
		h.Exec(ctx, in) // refusals (exists, not found) are part of the mix
		fmt.Println("did")
	}
}

// A process killed with SIGKILL at a random moment while it changes the store (after 2 to
// 13 calls) leaves files and history that agree: every file has a version naming its
// content, every file the history says exists does, and every content a version names is
// kept. Checked by a reader before anything settles what the crash left, and again after
// the next change. 50 rounds.
func TestHistoryCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns and kills 50 processes")
	}
	dir := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(dir, 0o700)
	changes := 0
	for round := 0; round < 50; round++ {
		cmd, lines := startReady(t, "history", dir)
		killAfter(t, cmd, lines, 2+rand.IntN(12))

		s, err := files.OpenOSStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := checkAgreement(t, s, fmt.Sprintf("round %d, reader", round))
		h := handlers.New(s, handlers.DefaultLimits())
		if res := h.Exec(context.Background(), map[string]any{"command": "create", "path": fmt.Sprintf("/memories/after%d", round), "file_text": "x"}); res.IsError {
			t.Fatalf("round %d: %s", round, res.Text)
		}
		checkAgreement(t, s, fmt.Sprintf("round %d, after a change", round))
		s.Close()
		if t.Failed() {
			return
		}
		changes = n
	}
	t.Logf("versions after 50 kills: %d", changes)
}

// Two processes changing one store at once, both killed at random moments, leave files and
// history that agree, as one does, and the store exports and imports. 10 rounds.
func TestTwoProcessesHistoryConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns and kills 20 processes")
	}
	dir := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(dir, 0o700)
	for round := 0; round < 10; round++ {
		a, _ := startReady(t, "history", dir)
		b, _ := startReady(t, "history", dir)
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		a.Process.Signal(syscall.SIGKILL)
		time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
		b.Process.Signal(syscall.SIGKILL)
		a.Wait()
		b.Wait()

		s, err := files.OpenOSStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		when := fmt.Sprintf("round %d", round)
		checkAgreement(t, s, when)
		var tar bytes.Buffer
		if err := s.Export(context.Background(), &tar, true); err != nil {
			t.Fatalf("%s: export: %v", when, err)
		}
		if _, err := files.NewMemoryStore().Import(context.Background(), &tar, vfs.ImportLimits{}); err != nil {
			t.Errorf("%s: the export does not import: %v", when, err)
		}
		s.Close()
		if t.Failed() {
			return
		}
	}
}

// checkAgreement compares the files with the state the versions describe, and checks that
// each version of a path starts where the one before it left it; it returns the number of
// versions.
func checkAgreement(t *testing.T, s *vfs.Store, when string) int {
	t.Helper()
	var n int
	err := s.View(context.Background(), func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		if err != nil {
			return err
		}
		n = len(vs)
		state := map[string]vfs.Digest{}
		for _, v := range vs {
			before, existed := state[v.Path]
			switch {
			case v.Kind == vfs.Created && existed:
				t.Errorf("%s: version %d creates %s, which exists", when, v.Seq, v.Path)
			case v.Kind != vfs.Created && (!existed || before != v.Prev):
				t.Errorf("%s: version %d (%v) of %s starts from %s; the version before left %s (exists: %v)", when, v.Seq, v.Kind, v.Path, v.Prev, before, existed)
			}
			switch v.Kind {
			case vfs.Created, vfs.Modified:
				state[v.Path] = v.SHA256
			case vfs.Deleted:
				delete(state, v.Path)
			case vfs.Moved:
				delete(state, v.Path)
				state[v.NewPath] = v.SHA256
			}
			for _, d := range []vfs.Digest{v.SHA256, v.Prev} {
				if d.IsZero() {
					continue
				}
				if _, err := tx.Content(d); err != nil {
					t.Errorf("%s: version %d of %s names content %s: %v", when, v.Seq, v.Path, d, err)
				}
			}
		}
		files := map[string]vfs.Digest{}
		root, err := tx.Tree(vfs.MustResolve(vfs.Root), 100, func(string) bool { return false })
		if err != nil {
			return err
		}
		var walk func(dir vfs.Path, nodes []vfs.Node) error
		walk = func(dir vfs.Path, nodes []vfs.Node) error {
			for _, node := range nodes {
				p := dir.Join(node.Name)
				if node.Dir {
					if err := walk(p, node.Children); err != nil {
						return err
					}
					continue
				}
				data, err := tx.ReadFile(p)
				if err != nil {
					return err
				}
				files[p.String()] = vfs.DigestOf(data)
			}
			return nil
		}
		if err := walk(vfs.MustResolve(vfs.Root), root.Children); err != nil {
			return err
		}
		for p, d := range files {
			if hd, ok := state[p]; !ok {
				t.Errorf("%s: %s is there without a version", when, p)
			} else if hd != d {
				t.Errorf("%s: %s holds %s, its last version says %s", when, p, d, hd)
			}
		}
		for p := range state {
			if _, ok := files[p]; !ok {
				t.Errorf("%s: the history says %s exists, but it does not", when, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return n
}

// childAcked creates files from 4 goroutines at once until it is killed, and prints
// "ack PATH" for each create once it has been answered.
func childAcked() {
	h := childMemory()
	round := os.Getenv("MEMORY_MCP_TEST_ID")
	fmt.Println("ready")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := fmt.Sprintf("/memories/r%s/g%d/%d.md", round, g, i)
				res := h.Exec(context.Background(), map[string]any{"command": "create", "path": p, "file_text": "content of " + p})
				if res.IsError {
					fmt.Fprintln(os.Stderr, res.Text)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Println("ack " + p)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// A process killed with SIGKILL while 4 of its goroutines create files (after it has
// acknowledged 4 to 12 of them) loses none of the changes it answered: after each of 50
// kills, every acknowledged file is there with its content, and the files and the history
// agree.
func TestCrashKeepsAcknowledgedChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns and kills 50 processes")
	}
	dir := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(dir, 0o700)
	acked := 0
	for round := 0; round < 50; round++ {
		cmd, lines := startReady(t, "acked", dir, fmt.Sprintf("MEMORY_MCP_TEST_ID=%d", round))
		var paths []string
		for _, l := range killAfter(t, cmd, lines, 4+rand.IntN(9)) {
			if p, ok := strings.CutPrefix(l, "ack "); ok {
				paths = append(paths, p)
			}
		}

		s, err := files.OpenOSStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		h := handlers.New(s, handlers.DefaultLimits())
		for _, p := range paths {
			res := h.Exec(context.Background(), map[string]any{"command": "view", "path": p})
			if res.IsError || !strings.Contains(res.Text, "content of "+p) {
				t.Errorf("round %d: acknowledged %s: %s", round, p, res.Text)
			}
		}
		checkAgreement(t, s, fmt.Sprintf("round %d", round))
		s.Close()
		if t.Failed() {
			return
		}
		acked += len(paths)
	}
	t.Logf("acknowledged creates over 50 kills: %d", acked)
}
