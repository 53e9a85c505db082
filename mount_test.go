package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// mountDirs makes a main store's directory and a team directory with two files.
func mountDirs(t *testing.T) (mainDir, team string) {
	t.Helper()
	mainDir, team = filepath.Join(t.TempDir(), "main"), t.TempDir()
	if err := os.MkdirAll(filepath.Join(team, "guides"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"style.md": "tabs\n", "guides/go.md": "gofmt\n"} {
		if err := os.WriteFile(filepath.Join(team, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return mainDir, team
}

// A server with a main store on disk, a read-write memory mount with a file limit of its
// own and a read-only directory mount, through the official client over stdio and
// Streamable HTTP: every docs/behaviour.md §8 text exactly, and the read-only directory
// untouched after every changing command was tried on it.
func TestMountsEndToEnd(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			mainDir, team := mountDirs(t)
			before := hashTree(t, team)
			args := []string{"-root", mainDir, "-mount", "me=memory:", "-mount-ro", "team=" + team, "-max-file-bytes", "64", "-max-store-bytes", "100"}
			var cs *mcp.ClientSession
			if transport == "stdio" {
				cmd := exec.Command(binary, args...)
				cmd.Env = testEnv(t)
				cs = connect(t, &mcp.CommandTransport{Command: cmd}, "")
			} else {
				p := startHTTP(t, "http", args...)
				cs = connect(t, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1}, "")
			}
			instr := cs.InitializeResult().Instructions
			if !strings.Contains(instr, "- /memories/me\n") || !strings.Contains(instr, "- /memories/team (read-only") {
				t.Errorf("the instructions do not name the mounts:\n%s", instr)
			}
			big := strings.Repeat("x", 65)
			for i, c := range []struct {
				tool  string
				args  map[string]any
				want  string
				isErr bool
			}{
				{"memory_create", map[string]any{"path": "/memories/notes.md", "file_text": "main\n"}, "File created successfully at: /memories/notes.md", false},
				{"memory_create", map[string]any{"path": "/memories/me/prefs.md", "file_text": "short\n"}, "File created successfully at: /memories/me/prefs.md", false},
				{"memory_view", map[string]any{"path": "/memories"}, listingHeader + "22B\t/memories\n6B\t/memories/me/\n6B\t/memories/me/prefs.md\n5B\t/memories/notes.md\n11B\t/memories/team/\n6B\t/memories/team/guides/\n5B\t/memories/team/style.md", false},
				{"memory_view", map[string]any{"path": "/memories/team/guides/go.md"}, "Here's the content of /memories/team/guides/go.md with line numbers:\n     1\tgofmt\n     2\t", false},
				{"memory_create", map[string]any{"path": "/memories/me/big.md", "file_text": big}, "Error: /memories/me/big.md would be 65 bytes, over the limit of 64 bytes per memory file", true},
				{"memory_create", map[string]any{"path": "/memories/team/new.md", "file_text": "x"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_str_replace", map[string]any{"path": "/memories/team/style.md", "old_str": "tabs", "new_str": "spaces"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_insert", map[string]any{"path": "/memories/team/style.md", "insert_line": 0, "insert_text": "x\n"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_delete", map[string]any{"path": "/memories/team/style.md"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_delete", map[string]any{"path": "/memories/team"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_rename", map[string]any{"old_path": "/memories/team/guides", "new_path": "/memories/team/g"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_rename", map[string]any{"old_path": "/memories/team/style.md", "new_path": "/memories/style.md"}, "Error: The memory store at /memories/team is read-only", true},
				{"memory_delete", map[string]any{"path": "/memories/me"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
				{"memory_rename", map[string]any{"old_path": "/memories/me", "new_path": "/memories/mine"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
				{"memory_rename", map[string]any{"old_path": "/memories/notes.md", "new_path": "/memories/me"}, "Error: /memories/me is a mounted memory store and cannot be deleted or moved", true},
				{"memory_rename", map[string]any{"old_path": "/memories/notes.md", "new_path": "/memories/me/notes.md"}, "Error: Cannot move /memories/notes.md to /memories/me/notes.md: they are in different memory stores. Create it at /memories/me/notes.md and delete /memories/notes.md instead", true},
				// Limits per store: the mount's 100 bytes are its own, apart from the main store's.
				{"memory_create", map[string]any{"path": "/memories/me/a.md", "file_text": strings.Repeat("a", 60)}, "File created successfully at: /memories/me/a.md", false},
				{"memory_create", map[string]any{"path": "/memories/me/b.md", "file_text": strings.Repeat("b", 40)}, "Error: The memory store is full: this change would bring it to 106 bytes, over its limit of 100 bytes", true},
				{"memory_create", map[string]any{"path": "/memories/b.md", "file_text": strings.Repeat("b", 40)}, "File created successfully at: /memories/b.md", false},
				{"memory_delete", map[string]any{"path": "/memories/me/a.md"}, "Successfully deleted /memories/me/a.md", false},
				{"memory_rename", map[string]any{"old_path": "/memories/me/prefs.md", "new_path": "/memories/me/p.md"}, "Successfully renamed /memories/me/prefs.md to /memories/me/p.md", false},
				{"memory_delete", map[string]any{"path": "/memories/me/p.md"}, "Successfully deleted /memories/me/p.md", false},
			} {
				got, isErr := callText(t, cs, c.tool, c.args)
				if got != c.want || isErr != c.isErr {
					t.Errorf("call %d %s %v:\n got (isError %v) %q\nwant (isError %v) %q", i, c.tool, c.args, isErr, got, c.isErr, c.want)
				}
			}
			if after := hashTree(t, team); after != before {
				t.Error("the read-only mount's directory changed")
			}
			if _, err := os.Stat(filepath.Join(mainDir, "notes.md")); err != nil {
				t.Errorf("the main store's file is not on disk: %v", err)
			}
			// Provenance: log names the client the change came through.
			cs.Close()
			cmd := exec.Command(binary, "log", "-root", mainDir)
			cmd.Env = testEnv(t)
			out, err := cmd.CombinedOutput()
			if want := "created /memories/notes.md (5 bytes) [via e2e 1 (" + transport + ")]"; err != nil || !strings.Contains(string(out), want) {
				t.Errorf("log does not show %q (%v):\n%s", want, err, out)
			}
		})
	}
}

// A main store holding an entry where a mount goes: the server names it and exits.
func TestMountOverAnEntryRefused(t *testing.T) {
	mainDir, team := mountDirs(t)
	if err := os.MkdirAll(filepath.Join(mainDir, "team"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "-root", mainDir, "-mount-ro", "team="+team)
	cmd.Env = testEnv(t)
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "the main store already has /memories/team") {
		t.Errorf("exit %v, output:\n%s", err, out)
	}
	for _, bad := range [][]string{{"-mount", ".hidden=" + team}, {"-mount", "a=memory:", "-mount", "a=memory:"}, {"-mount", "pg=postgres:s"}, {"-mount", "x=memory:y"}} {
		cmd := exec.Command(binary, append([]string{"-root", mainDir}, bad...)...)
		cmd.Env = testEnv(t)
		if out, err := cmd.CombinedOutput(); exitCode(err) != 2 {
			t.Errorf("%v: exit %v, want 2 (a usage error):\n%s", bad, err, out)
		}
	}
}

// Two tenants with their own main stores and the same team store mounted read-only:
// neither changes it, and neither reaches the other's store through it, by hostile paths
// or by links planted in the team's directory.
func TestTenantsShareAReadOnlyMount(t *testing.T) {
	ts, file := setupTenants(t)
	_, team := mountDirs(t)
	os.Symlink(filepath.Join(ts.root, "alice"), filepath.Join(team, "abs-alice"))
	os.Symlink("../../store/alice/secret.md", filepath.Join(team, "rel-alice"))
	before := hashTree(t, team)
	aliceBefore := hashTree(t, filepath.Join(ts.root, "alice"))
	p := startHTTP(t, "http", "-root", ts.root, "-tenants", file, "-mount-ro", "team="+team)
	escape := func(p string) string { return "Error: Path " + p + " would escape /memories directory" }
	ro := "Error: The memory store at /memories/team is read-only"
	for _, who := range []string{"alice", "bob"} {
		token := map[string]string{"alice": ts.alice, "bob": ts.bob}[who]
		cs := tenantSession(t, "http", p.url, token, "")
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"memory_view", map[string]any{"path": "/memories/team/style.md"}, "Here's the content of /memories/team/style.md with line numbers:\n     1\ttabs\n     2\t"},
			{"memory_view", map[string]any{"path": "/memories/team/abs-alice/secret.md"}, escape("/memories/team/abs-alice/secret.md")},
			{"memory_view", map[string]any{"path": "/memories/team/rel-alice"}, escape("/memories/team/rel-alice")},
			{"memory_view", map[string]any{"path": "/memories/team/../../alice/secret.md"}, escape("/memories/team/../../alice/secret.md")},
			{"memory_view", map[string]any{"path": "/memories/team/%2e%2e/%2e%2e/alice/secret.md"}, escape("/memories/team/%2e%2e/%2e%2e/alice/secret.md")},
			{"memory_create", map[string]any{"path": "/memories/team/abs-alice/planted.md", "file_text": "x"}, ro},
			{"memory_str_replace", map[string]any{"path": "/memories/team/style.md", "old_str": "tabs", "new_str": "spaces"}, ro},
			{"memory_delete", map[string]any{"path": "/memories/team"}, ro},
			{"memory_rename", map[string]any{"old_path": "/memories/secret.md", "new_path": "/memories/team/secret.md"}, ro},
		} {
			if got, _ := callText(t, cs, c.tool, c.args); got != c.want {
				t.Errorf("%s %s %v:\n got %q\nwant %q", who, c.tool, c.args, got, c.want)
			}
		}
		// Their own main stores, side by side with the team's.
		got, _ := callText(t, cs, "memory_view", map[string]any{"path": "/memories"})
		if own := map[string]string{"alice": "15B\t/memories/secret.md", "bob": "16B\t/memories/secret.md"}[who]; !strings.Contains(got, own) || !strings.Contains(got, "\t/memories/team/style.md") {
			t.Errorf("%s's listing:\n%s", who, got)
		}
	}
	if hashTree(t, team) != before {
		t.Error("the team's directory changed")
	}
	if hashTree(t, filepath.Join(ts.root, "alice")) != aliceBefore {
		t.Error("alice's memory changed")
	}
}

// The same memory on two machines: two processes with main stores of their own and one
// PostgreSQL store mounted as /memories/me. A change through either is seen at once
// through the other and notified to its subscribers; with the database stopped, calls
// under the mount fail with the storage message while the main stores keep serving.
func TestPostgresSharedMount(t *testing.T) {
	db := vfstest.NewPostgresCluster(t)
	store := vfstest.UniqueName(t)
	args := func() []string {
		return []string{"-root", filepath.Join(t.TempDir(), "main"), "-dsn", db.DSN, "-mount", "me=postgres:" + store, "-call-timeout", "3s"}
	}
	a, b := startHTTP(t, "http", args()...), startHTTP(t, "http", args()...)
	ca := connect(t, &mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", MaxRetries: -1}, "")
	n := newNotes()
	cb, err := n.client().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	const uri = "memory:///memories/me/prefs.md"
	n.subscribe(t, cb, uri)
	if out, isErr := callText(t, ca, "memory_create", map[string]any{"path": "/memories/me/prefs.md", "file_text": "Prefers tabs.\n"}); isErr {
		t.Fatal(out)
	}
	if out, _ := callText(t, cb, "memory_view", map[string]any{"path": "/memories/me/prefs.md"}); out != "Here's the content of /memories/me/prefs.md with line numbers:\n     1\tPrefers tabs.\n     2\t" {
		t.Errorf("the other process sees %q", out)
	}
	n.waitListChanged(t, "a create in the shared mount through the other process")
	if out, isErr := callText(t, ca, "memory_str_replace", map[string]any{"path": "/memories/me/prefs.md", "old_str": "tabs", "new_str": "spaces"}); isErr {
		t.Fatal(out)
	}
	n.waitUpdated(t, uri, "a str_replace in the shared mount through the other process")
	res, err := cb.ListResources(t.Context(), nil)
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != uri {
		t.Errorf("resources of the other process: %+v, %v", res, err)
	}

	db.Stop(t, "fast")
	failed := regexp.MustCompile(`^Error: Could not (view|create) /memories/me/\S+: (storage unavailable|the storage did not answer in time, try again)$`)
	for _, cs := range []*mcp.ClientSession{ca, cb} {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"memory_view", map[string]any{"path": "/memories/me/prefs.md"}},
			{"memory_create", map[string]any{"path": "/memories/me/offline.md", "file_text": "x"}},
		} {
			start := time.Now()
			out, isErr := callText(t, cs, c.tool, c.args)
			if !isErr || !failed.MatchString(out) {
				t.Errorf("%s %v with the database down: %q", c.tool, c.args, out)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("%s took %v, past its 3 s deadline", c.tool, took)
			}
		}
		if out, isErr := callText(t, cs, "memory_create", map[string]any{"path": "/memories/local.md", "file_text": "kept here\n"}); isErr {
			t.Errorf("the main store with the database down: %q", out)
		}
		if out, isErr := callText(t, cs, "memory_view", map[string]any{"path": "/memories"}); isErr || !strings.Contains(out, "/memories/local.md") {
			t.Errorf("view /memories with the database down: %q", out)
		}
		if res, err := cs.ListResources(t.Context(), nil); err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "memory:///memories/local.md" {
			t.Errorf("resources with the database down: %+v, %v", res, err)
		}
	}
	db.Start(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, isErr := callText(t, cb, "memory_view", map[string]any{"path": "/memories/me/prefs.md"})
		if !isErr && strings.Contains(out, "Prefers spaces.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not serve again once the database was back: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd := exec.Command(binary, "log", "-root", filepath.Join(t.TempDir(), "other"), "-dsn", db.DSN, "-mount", "me=postgres:"+store, "/memories/me")
	cmd.Env = testEnv(t)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "modified /memories/me/prefs.md (16 bytes) [via e2e 1 (http)]") {
		t.Errorf("log of the shared mount (%v):\n%s", err, out)
	}
}

// A database that is down when the server starts, and holds only a mount, fails only the
// calls under the mount: the server starts and serves the rest, and serves the mount once
// the database is back (its schema and store made then).
func TestPostgresMountDownAtStart(t *testing.T) {
	db := vfstest.NewPostgresCluster(t)
	db.Stop(t, "fast")
	args := []string{"-root", filepath.Join(t.TempDir(), "main"), "-dsn", db.DSN, "-mount", "me=postgres:" + vfstest.UniqueName(t), "-call-timeout", "3s"}
	srv := startHTTP(t, "http", args...)
	n := newNotes()
	cs, err := n.client().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, isErr := callText(t, cs, "memory_create", map[string]any{"path": "/memories/local.md", "file_text": "kept here\n"}); isErr {
		t.Errorf("the main store with the database down: %q", out)
	}
	failed := regexp.MustCompile(`^Error: Could not view /memories/me: (storage unavailable|the storage did not answer in time, try again)$`)
	if out, isErr := callText(t, cs, "memory_view", map[string]any{"path": "/memories/me"}); !isErr || !failed.MatchString(out) {
		t.Errorf("the mount with the database down: %q", out)
	}
	// The whole memory's log prints the rest, and says which mount it lacks.
	cmd := exec.Command(binary, append(slices.Clone(args), "log")...)
	cmd.Env = testEnv(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stdout.String(), "created /memories/local.md") || !strings.HasPrefix(stderr.String(), "memory-mcp: log: left out /memories/me: ") {
		t.Errorf("log with the database down (%v):\n%s%s", err, stdout.String(), stderr.String())
	}
	db.Start(t)
	deadline := time.Now().Add(30 * time.Second) // bounds a failure only
	for {
		out, isErr := callText(t, cs, "memory_create", map[string]any{"path": "/memories/me/a.md", "file_text": "there\n"})
		if !isErr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not serve once the database was back: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, _ := callText(t, cs, "memory_view", map[string]any{"path": "/memories"}); !strings.Contains(out, "/memories/me/a.md") || !strings.Contains(out, "/memories/local.md") {
		t.Errorf("view /memories once the database is back: %q", out)
	}
	// Another server's change to the mount is announced, as for a mount found at start.
	const uri = "memory:///memories/me/a.md"
	n.subscribe(t, cs, uri)
	other := connect(t, &mcp.StreamableClientTransport{Endpoint: startHTTP(t, "http", args...).url + "/mcp", MaxRetries: -1}, "")
	if out, isErr := callText(t, other, "memory_str_replace", map[string]any{"path": "/memories/me/a.md", "old_str": "there", "new_str": "here"}); isErr {
		t.Fatal(out)
	}
	n.waitUpdated(t, uri, "a str_replace in the mount through another server")
}

// export and import take a mount by name; log, show and restore take a path under it.
func TestMountHistoryCommands(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = testEnv(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	a := []string{"-root", filepath.Join(dir, "a"), "-mount", "me=" + filepath.Join(dir, "me")}
	start := time.Now()
	run(append(a, "exec", `{"command":"create","path":"/memories/me/a.md","file_text":"one\n"}`)...)
	run(append(a, "exec", `{"command":"str_replace","path":"/memories/me/a.md","old_str":"one","new_str":"two"}`)...)
	if out := run(append(a, "show", "/memories/me/a.md@1")...); out != "one\n" {
		t.Errorf("show under the mount: %q", out)
	}
	if out := run(append(a, "restore", "/memories/me/a.md@1")...); !strings.Contains(out, "/memories/me/a.md") {
		t.Errorf("restore under the mount: %q", out)
	}
	run(append(a, "export", "-of", "me", filepath.Join(dir, "me.tar"))...)
	at := start.UTC().Format(time.RFC3339Nano)
	if out, want := run(append(a, "restore", "-at", at)...), "Nothing to restore: /memories is as it was at "+start.UTC().Format(time.RFC3339)+
		" already.\nRestored /memories/me as it was at "+start.UTC().Format(time.RFC3339)+", as version 4 (undo: memory-mcp restore /memories/me@3).\n  deleted /memories/me/a.md\n"; out != want {
		t.Errorf("restore of the whole memory to a time:\n%s\nwant\n%s", out, want)
	}
	run(append(a, "restore", "/memories/me@3")...) // undone
	b := []string{"-root", filepath.Join(dir, "b"), "-mount", "you=" + filepath.Join(dir, "you")}
	if out := run(append(b, "import", "-of", "you", filepath.Join(dir, "me.tar"))...); !strings.Contains(out, "Imported 1 file, 3 versions") {
		t.Errorf("import into a mount: %q", out)
	}
	if out := run(append(b, "log", "/memories/you/a.md")...); strings.Count(out, "/memories/you/a.md") != 3 {
		t.Errorf("log of the imported mount:\n%s", out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "you", "a.md")); err != nil || string(data) != "one\n" {
		t.Errorf("the imported file: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "a.md")); err == nil {
		t.Error("the import went to the main store")
	}
}

// The tenants file gives a tenant mounts of its own: a store of the storage shared with
// another tenant (read-only for one of them); a mount of another tenant's memory is
// refused at start.
func TestTenantsFileMounts(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	for _, d := range []string{"alice", "bob", "shared"} {
		os.MkdirAll(filepath.Join(root, d), 0o700)
	}
	os.WriteFile(filepath.Join(root, "shared", "plan.md"), []byte("plan\n"), 0o600)
	aliceTok, aliceSHA := server.NewToken()
	bobTok, bobSHA := server.NewToken()
	write := func(specs []server.TenantSpec) string {
		data, _ := json.Marshal(map[string]any{"tenants": specs})
		file := filepath.Join(t.TempDir(), "tenants.json")
		os.WriteFile(file, data, 0o600)
		return file
	}
	file := write([]server.TenantSpec{
		{Name: "alice", TokenSHA256: aliceSHA, Mounts: []server.TenantMount{{Name: "shared", Dir: "shared"}}},
		{Name: "bob", TokenSHA256: bobSHA, Mounts: []server.TenantMount{{Name: "team", Dir: "shared", ReadOnly: true}}},
	})
	p := startHTTP(t, "http", "-root", root, "-tenants", file)
	alice := tenantSession(t, "http", p.url, aliceTok, "")
	bob := tenantSession(t, "http", p.url, bobTok, "")
	if out, isErr := callText(t, alice, "memory_str_replace", map[string]any{"path": "/memories/shared/plan.md", "old_str": "plan", "new_str": "plan v2"}); isErr {
		t.Fatalf("alice's change in her read-write mount: %s", out)
	}
	if out, _ := callText(t, bob, "memory_view", map[string]any{"path": "/memories/team/plan.md"}); !strings.Contains(out, "plan v2") {
		t.Errorf("bob does not see alice's change in the shared store: %q", out)
	}
	if out, _ := callText(t, bob, "memory_create", map[string]any{"path": "/memories/team/x.md", "file_text": "x"}); out != "Error: The memory store at /memories/team is read-only" {
		t.Errorf("bob's change in his read-only mount: %q", out)
	}
	if instr := bob.InitializeResult().Instructions; !strings.Contains(instr, "- /memories/team (read-only") {
		t.Errorf("bob's instructions do not name his mount:\n%s", instr)
	}

	// A subcommand on a tenant's memory has the tenant's mounts, as the server gives them.
	if out := mustCLI(t, "-root", root, "-tenants", file, "-tenant", "bob", "exec", `{"command":"view","path":"/memories/team/plan.md"}`); !strings.Contains(out, "plan v2") {
		t.Errorf("exec as bob, under his mount: %q", out)
	}
	if code, out, _ := cli(t, "-root", root, "-tenants", file, "-tenant", "bob", "exec", `{"command":"create","path":"/memories/team/x.md","file_text":"x"}`); code != 1 || !strings.Contains(out, "/memories/team is read-only") {
		t.Errorf("exec as bob, a change under his read-only mount: exit %d, %q", code, out)
	}

	bad := write([]server.TenantSpec{
		{Name: "alice", TokenSHA256: aliceSHA},
		{Name: "bob", TokenSHA256: bobSHA, Mounts: []server.TenantMount{{Name: "peek", Dir: "alice", ReadOnly: true}}},
	})
	cmd := exec.Command(binary, "-transport", "http", "-addr", "127.0.0.1:0", "-root", root, "-tenants", bad)
	cmd.Env = testEnv(t)
	if out, err := cmd.CombinedOutput(); exitCode(err) != 2 || !strings.Contains(string(out), "is tenant alice's memory") {
		t.Errorf("a mount of another tenant's memory: exit %v\n%s", err, out)
	}
}
