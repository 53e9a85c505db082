package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// TestMain lets the test binary act as a second server process: with MEMORY_MCP_TEST_CHILD
// set, it runs that child's job instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("MEMORY_MCP_TEST_CHILD") {
	case "":
		code := m.Run()
		vfstest.StopPostgres()
		os.Exit(code)
	case "edit":
		childEdit()
	case "rewrite":
		childRewrite()
	case "history":
		childHistory()
	case "acked":
		childAcked()
	case "create":
		res := childMemory().Exec(context.Background(), map[string]any{"command": "create", "path": os.Getenv("MEMORY_MCP_TEST_PATH"), "file_text": "from another process"})
		if res.IsError {
			fmt.Fprintln(os.Stderr, res.Text)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown child job")
		os.Exit(2)
	}
	os.Exit(0)
}

func childMemory() *handlers.Memory {
	s, err := files.OpenOSStore(os.Getenv("MEMORY_MCP_TEST_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return handlers.New(s, handlers.DefaultLimits())
}

// childEdit inserts lines "ID-i" into shared.txt, one read-modify-write per line.
func childEdit() {
	h := childMemory()
	id := os.Getenv("MEMORY_MCP_TEST_ID")
	n, _ := strconv.Atoi(os.Getenv("MEMORY_MCP_TEST_N"))
	for i := 0; i < n; i++ {
		res := h.Exec(context.Background(), map[string]any{"command": "insert", "path": "/memories/shared.txt", "insert_line": float64(0), "insert_text": fmt.Sprintf("%s-%d", id, i)})
		if res.IsError {
			fmt.Fprintln(os.Stderr, res.Text)
			os.Exit(1)
		}
	}
}

const rewriteFiles = 3

// rewriteContent is a content of size bytes or a little less. Its versions differ in every
// byte, or with one, in one byte in the middle.
func rewriteContent(name string, version byte, size int, one bool) string {
	if one {
		s := strings.Repeat(name+"-", size/(len(name)+1))
		return s[:len(s)/2] + string(version) + s[len(s)/2+1:]
	}
	return strings.Repeat(name+string(version), size/(len(name)+1))
}

// rewriteShape is the size of the contents childRewrite writes, and whether their versions
// differ in one byte.
func rewriteShape() (int, bool) {
	n, _ := strconv.Atoi(os.Getenv("MEMORY_MCP_TEST_SIZE"))
	return n, os.Getenv("MEMORY_MCP_TEST_ONE") != ""
}

// childRewrite flips files between two full contents for ever, until it is killed.
func childRewrite() {
	h := childMemory()
	fmt.Println("ready")
	for i := 0; ; i++ {
		name := fmt.Sprintf("f%d", i%rewriteFiles)
		p := "/memories/" + name + ".txt"
		from, to := byte('A'), byte('B')
		size, one := rewriteShape()
		if res := h.Exec(context.Background(), map[string]any{"command": "view", "path": p, "view_range": []any{float64(1), float64(1)}}); strings.Contains(res.Text, rewriteContent(name, 'B', size, one)) {
			from, to = to, from
		}
		h.Exec(context.Background(), map[string]any{"command": "str_replace", "path": p, "old_str": rewriteContent(name, from, size, one), "new_str": rewriteContent(name, to, size, one)})
		fmt.Println("did")
	}
}

func child(t *testing.T, job, dir string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "MEMORY_MCP_TEST_CHILD="+job, "MEMORY_MCP_TEST_DIR="+dir)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startReady starts a child that runs job until it is killed, once it says it is ready;
// the scanner reads the lines it writes after that.
func startReady(t *testing.T, job, dir string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := child(t, job, dir, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("child did not start: %q %v", lines.Text(), lines.Err())
	}
	return cmd, lines
}

// killAfter lets the child go on until it has said n lines after "ready" (a line for each
// call it finished), then kills it with SIGKILL while it makes the next ones, and returns
// every line it said. The amount of work before the kill is the same on any machine.
func killAfter(t *testing.T, cmd *exec.Cmd, lines *bufio.Scanner, n int) []string {
	t.Helper()
	said := make(chan string)
	go func() {
		defer close(said)
		for lines.Scan() {
			said <- lines.Text()
		}
	}()
	var out []string
	hang := time.After(time.Minute)
	for len(out) < n {
		select {
		case l, ok := <-said:
			if !ok {
				t.Fatalf("the child ended after %d lines: %q", len(out), out)
			}
			out = append(out, l)
		case <-hang:
			cmd.Process.Kill()
			t.Fatalf("the child said %d lines in a minute, want %d", len(out), n)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for l := range said {
		out = append(out, l)
	}
	cmd.Wait()
	return out
}

// Two processes on one OS store, each making 200 read-modify-write edits of one file:
// the storage lock keeps every edit (docs/behaviour.md §6).
func TestTwoProcessesEditOneFile(t *testing.T) {
	const n = 200
	dir := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("end"), 0o600)
	var wg sync.WaitGroup
	for _, id := range []string{"p1", "p2"} {
		cmd := child(t, "edit", dir, "MEMORY_MCP_TEST_ID="+id, "MEMORY_MCP_TEST_N="+strconv.Itoa(n))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Run(); err != nil {
				t.Errorf("child %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
	data, err := os.ReadFile(filepath.Join(dir, "shared.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) != 2*n+1 {
		t.Errorf("shared.txt has %d lines, want %d: edits were lost", len(lines), 2*n+1)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	for _, id := range []string{"p1", "p2"} {
		for i := 0; i < n; i++ {
			if !seen[fmt.Sprintf("%s-%d", id, i)] {
				t.Errorf("edit %s-%d was lost", id, i)
			}
		}
	}
}

// A process killed with SIGKILL while it rewrites files leaves every file with exactly its
// old or its new content, and no temporary file shows in view (docs/behaviour.md §6):
// files of 256 KiB whose every byte changes, files of a page, and files of 256 KiB whose
// one byte changes (a change that a write in place would tear). Repeated 50 times each.
func TestCrashWhileRewriting(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns and kills 150 processes")
	}
	for _, c := range []struct {
		name        string
		size        int
		one         bool
		total, each string // as view shows them
	}{
		{"256K", 256 << 10, false, "768.0K", "256.0K"},
		{"page", 4096, false, "12.0K", "4.0K"},
		{"256K-one-byte", 256 << 10, true, "768.0K", "256.0K"},
	} {
		t.Run(c.name, func(t *testing.T) { crashWhileRewriting(t, c.size, c.one, c.total, c.each) })
	}
}

func crashWhileRewriting(t *testing.T, size int, one bool, total, each string) {
	dir := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(dir, 0o700)
	for i := 0; i < rewriteFiles; i++ {
		name := fmt.Sprintf("f%d", i)
		os.WriteFile(filepath.Join(dir, name+".txt"), []byte(rewriteContent(name, 'A', size, one)), 0o600)
	}
	wantListing := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n" + total + "\t/memories\n" + each + "\t/memories/f0.txt\n" + each + "\t/memories/f1.txt\n" + each + "\t/memories/f2.txt"
	leftovers, flipped := 0, 0
	for round := 0; round < 50; round++ {
		env := []string{"MEMORY_MCP_TEST_SIZE=" + strconv.Itoa(size)}
		if one {
			env = append(env, "MEMORY_MCP_TEST_ONE=1")
		}
		cmd, lines := startReady(t, "rewrite", dir, env...)
		killAfter(t, cmd, lines, rand.IntN(4))

		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".memory-mcp-tmp-") {
				leftovers++
			}
		}
		for i := 0; i < rewriteFiles; i++ {
			name := fmt.Sprintf("f%d", i)
			data, err := os.ReadFile(filepath.Join(dir, name+".txt"))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if string(data) == rewriteContent(name, 'B', size, one) {
				flipped++
			}
			if s := string(data); s != rewriteContent(name, 'A', size, one) && s != rewriteContent(name, 'B', size, one) {
				t.Fatalf("round %d: %s holds neither its old nor its new content (%d bytes)", round, name, len(data))
			}
		}
		s, err := files.OpenOSStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		res := handlers.New(s, handlers.DefaultLimits()).Exec(context.Background(), map[string]any{"command": "view", "path": "/memories"})
		s.Close()
		if res.Text != wantListing {
			t.Fatalf("round %d: listing after the crash:\n%s", round, res.Text)
		}
	}
	t.Logf("temporary files left by the kills: %d (each round kills mid-write at a random moment)", leftovers)
	if flipped == 0 {
		t.Errorf("no round found a file rewritten: the rewriting child changed nothing")
	}

	// The next change sweeps what the crashes left behind.
	s, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := handlers.New(s, handlers.DefaultLimits())
	if res := h.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/after.txt", "file_text": "x"}); res.IsError {
		t.Fatal(res.Text)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".memory-mcp-tmp-") {
			t.Errorf("temporary file %s was not swept", e.Name())
		}
	}
}
