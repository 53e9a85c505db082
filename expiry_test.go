package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/server"
)

// snapshotAll hashes every entry under dir, bookkeeping files included, with modes and
// contents: a store that writes nothing leaves it identical.
func snapshotAll(t *testing.T, dir string) (string, []string) {
	t.Helper()
	h := sha256.New()
	var names []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, rel)
		info, _ := d.Info()
		h.Write([]byte(rel + "\x00" + info.Mode().String() + "\x00"))
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			h.Write(data)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), names
}

func runExec(t *testing.T, root string, input map[string]any) string {
	t.Helper()
	raw, _ := json.Marshal(input)
	cmd := exec.Command(binary, "-root", root, "exec", string(raw))
	cmd.Env = testEnv(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exec %s: %v %s", raw, err, out)
	}
	return string(out)
}

// A read-only store is never swept and never written, not even bookkeeping: its files, and
// an access record that says they are long unused, stay exactly as they were, with the
// -read-only flag and for a read-only tenant. The stdio server's first sweep runs before it
// exits; a tenant's store is swept from the next sweep after it opens, a minute later at
// the soonest, which server.TestRunExpiryLeavesReadOnlyStores stands for.
func TestExpiryLeavesReadOnlyStoresAlone(t *testing.T) {
	seed := func(dir string) {
		os.MkdirAll(filepath.Join(dir, "sub"), 0o700)
		os.WriteFile(filepath.Join(dir, "a.md"), []byte("a"), 0o600)
		os.WriteFile(filepath.Join(dir, "sub", "b.md"), []byte("b"), 0o600)
		os.WriteFile(filepath.Join(dir, ".memory-mcp-access"), []byte(`{"a.md":1,"sub/b.md":1}`), 0o600)
	}

	dir := t.TempDir()
	seed(dir)
	before, names := snapshotAll(t, dir)
	cmd := exec.Command(binary, "-root", dir, "-read-only", "-expire-after", "1s")
	cmd.Env = testEnv(t)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	for _, p := range []string{"/memories", "/memories/a.md", "/memories/sub/b.md"} {
		if text, isErr := callText(t, cs, "memory_view", map[string]any{"path": p}); isErr {
			t.Errorf("view %s: %s", p, text)
		}
	}
	cs.Close()
	if after, now := snapshotAll(t, dir); after != before {
		t.Errorf("-read-only: the store changed:\nbefore %v\nafter  %v", names, now)
	}

	root := t.TempDir()
	token, sha := server.NewToken()
	tenantsFile := filepath.Join(t.TempDir(), "tenants.json")
	os.WriteFile(tenantsFile, []byte(`{"tenants":[{"name":"reader","token_sha256":"`+sha+`","read_only":true}]}`), 0o600)
	tdir := filepath.Join(root, "reader")
	seed(tdir)
	before, names = snapshotAll(t, tdir)
	p := startHTTP(t, "http", "-root", root, "-tenants", tenantsFile, "-expire-after", "1s")
	rs := tenantSession(t, "http", p.url, token, "")
	if text, isErr := callText(t, rs, "memory_view", map[string]any{"path": "/memories/a.md"}); isErr {
		t.Errorf("tenant view: %s", text)
	}
	rs.Close()
	if after, now := snapshotAll(t, tdir); after != before {
		t.Errorf("read-only tenant: the store changed:\nbefore %v\nafter  %v", names, now)
	}
}

// Expiry counts what every memory-mcp process on the storage did: views and renames made by
// memory-mcp exec keep files alive for the server that sweeps later (another process,
// started after them); a file nobody used goes. The record is aged by rewriting its times
// an hour back, rather than by waiting: the sweep's margin is half an hour either way.
func TestExpiryCountsExecViewsAndRenames(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	for _, name := range []string{"unused.md", "viewed.md", "moved.md"} {
		runExec(t, root, map[string]any{"command": "create", "path": "/memories/" + name, "file_text": name})
	}
	ageAccessRecord(t, root, time.Hour)
	runExec(t, root, map[string]any{"command": "view", "path": "/memories/viewed.md"})
	runExec(t, root, map[string]any{"command": "rename", "old_path": "/memories/moved.md", "new_path": "/memories/archive/renamed.md"})

	cmd := exec.Command(binary, "-root", root, "-expire-after", "30m")
	cmd.Env = testEnv(t)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	defer cs.Close()
	// The first sweep runs as the server starts: wait for it to take the unused file.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(filepath.Join(root, "unused.md"))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the unused file was not expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	text, _ := callText(t, cs, "memory_view", map[string]any{"path": "/memories"})
	for _, want := range []string{"/memories/viewed.md", "/memories/archive/renamed.md"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s was expired although exec used it after the others:\n%s", want, text)
		}
	}
	if strings.Contains(text, "unused.md") {
		t.Errorf("unused.md is still listed:\n%s", text)
	}
}

// ageAccessRecord moves every time in the store's access journal back by d, as if its
// events had happened that long ago. (The journal is lines of a kind, a time in Unix
// seconds and names, separated by tabs; no snapshot exists before a sweep.)
func ageAccessRecord(t *testing.T, root string, d time.Duration) {
	t.Helper()
	name := filepath.Join(root, ".memory-mcp-access.log")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".memory-mcp-access")); err == nil {
		t.Fatal("the access record has a snapshot: the journal alone does not say every time")
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) < 3 {
			continue
		}
		sec, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		f[1] = strconv.FormatInt(sec-int64(d/time.Second), 10)
		lines[i] = strings.Join(f, "\t")
	}
	if err := os.WriteFile(name, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}
