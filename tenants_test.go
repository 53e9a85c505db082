package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/server"
)

// bearer adds a tenant's token to every request of a client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

type tenantSetup struct {
	root                        string
	alice, bob, carol, outsider string // tokens; outsider is in no tenants file
}

func setupTenants(t *testing.T) (tenantSetup, string) {
	t.Helper()
	ts := tenantSetup{root: filepath.Join(t.TempDir(), "store")}
	var specs []server.TenantSpec
	for _, tok := range []struct {
		name     string
		dst      *string
		readOnly bool
	}{{"alice", &ts.alice, false}, {"bob", &ts.bob, false}, {"carol", &ts.carol, true}} {
		token, sha := server.NewToken()
		*tok.dst = token
		specs = append(specs, server.TenantSpec{Name: tok.name, TokenSHA256: sha, ReadOnly: tok.readOnly})
	}
	ts.outsider, _ = server.NewToken()
	data, _ := json.Marshal(map[string]any{"tenants": specs})
	file := filepath.Join(t.TempDir(), "tenants.json")
	os.WriteFile(file, data, 0o600)

	for dir, secret := range map[string]string{"alice": "alice's secret\n", "bob": "bob's own notes\n", "carol": "carol's notes\n"} {
		os.MkdirAll(filepath.Join(ts.root, dir), 0o700)
		os.WriteFile(filepath.Join(ts.root, dir, "secret.md"), []byte(secret), 0o600)
	}
	// Links planted in bob's storage that lead into alice's memory.
	os.Symlink("../alice", filepath.Join(ts.root, "bob", "to-alice"))
	os.Symlink(filepath.Join(ts.root, "alice", "secret.md"), filepath.Join(ts.root, "bob", "abs-alice"))
	return ts, file
}

func hashTree(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(d.Name(), ".memory-mcp") {
			if d.IsDir() {
				return filepath.SkipDir // the history
			}
			return nil
		}
		h.Write([]byte(rel + "\x00"))
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			h.Write(data)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

func tenantSession(t *testing.T, transport, url, token, version string) *mcp.ClientSession {
	t.Helper()
	client := &http.Client{Transport: bearer{token}}
	if transport == "sse" {
		return connect(t, &mcp.SSEClientTransport{Endpoint: url + "/sse", HTTPClient: client}, version)
	}
	return connect(t, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: client, MaxRetries: -1}, version)
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// Two tenants on one HTTP server: neither reaches the other's memory, whatever it sends.
func TestTenantsAreIsolated(t *testing.T) {
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			ts, file := setupTenants(t)
			p := startHTTP(t, transport, "-root", ts.root, "-tenants", file)
			aliceBefore := hashTree(t, filepath.Join(ts.root, "alice"))

			bob := tenantSession(t, transport, p.url, ts.bob, "")
			escape := func(p string) string { return "Error: Path " + p + " would escape /memories directory" }
			for _, c := range []struct {
				tool string
				args map[string]any
				want string
			}{
				{"memory_view", map[string]any{"path": "/memories/../alice/secret.md"}, escape("/memories/../alice/secret.md")},
				{"memory_view", map[string]any{"path": "/memories/%2e%2e/alice/secret.md"}, escape("/memories/%2e%2e/alice/secret.md")},
				{"memory_view", map[string]any{"path": "/memories/to-alice/secret.md"}, escape("/memories/to-alice/secret.md")},
				{"memory_view", map[string]any{"path": "/memories/abs-alice"}, escape("/memories/abs-alice")},
				{"memory_create", map[string]any{"path": "/memories/to-alice/planted.md", "file_text": "x"}, escape("/memories/to-alice/planted.md")},
				{"memory_str_replace", map[string]any{"path": "/memories/abs-alice", "old_str": "alice", "new_str": "bob"}, escape("/memories/abs-alice")},
				{"memory_insert", map[string]any{"path": "/memories/to-alice/secret.md", "insert_line": 0, "insert_text": "x"}, escape("/memories/to-alice/secret.md")},
				{"memory_delete", map[string]any{"path": "/memories/to-alice/secret.md"}, escape("/memories/to-alice/secret.md")},
				{"memory_rename", map[string]any{"old_path": "/memories/to-alice/secret.md", "new_path": "/memories/stolen.md"}, escape("/memories/to-alice/secret.md")},
				{"memory_rename", map[string]any{"old_path": "/memories/secret.md", "new_path": "/memories/to-alice/given.md"}, escape("/memories/to-alice/given.md")},
				{"memory_view", map[string]any{"path": "/memories"}, listingHeader + "16B\t/memories\n16B\t/memories/secret.md"},
			} {
				if got, _ := callText(t, bob, c.tool, c.args); got != c.want {
					t.Errorf("bob %s %v:\n got %q\nwant %q", c.tool, c.args, got, c.want)
				}
			}
			alice := tenantSession(t, transport, p.url, ts.alice, "")
			if got, _ := callText(t, alice, "memory_view", map[string]any{"path": "/memories/secret.md"}); got != "Here's the content of /memories/secret.md with line numbers:\n     1\talice's secret\n     2\t" {
				t.Errorf("alice sees %q", got)
			}
			if got := hashTree(t, filepath.Join(ts.root, "alice")); got != aliceBefore {
				t.Error("alice's memory changed")
			}
			if !strings.Contains(p.stderr.String(), `"tenant":"bob"`) {
				t.Errorf("bob's calls are not logged with his name:\n%s", p.stderr.String())
			}
		})
	}
}

// A missing, wrong or other tenant's token gets 401 with WWW-Authenticate and changes
// nothing on disk, also when it names another tenant's session.
func TestTenantsUnauthorized(t *testing.T) {
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			ts, file := setupTenants(t)
			p := startHTTP(t, transport, "-root", ts.root, "-tenants", file)
			before := hashTree(t, ts.root)

			// Alice opens a session the legacy way, so that it has an id to hijack.
			var sessionURL, sessionHeader string
			if transport == "sse" {
				req, _ := http.NewRequest(http.MethodGet, p.url+"/sse", nil)
				req.Header.Set("Authorization", "Bearer "+ts.alice)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				rd := bufio.NewReader(resp.Body)
				for sessionURL == "" {
					line, err := rd.ReadString('\n')
					if err != nil {
						t.Fatalf("no endpoint event: %v", err)
					}
					if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
						sessionURL = p.url + rest
					}
				}
			} else {
				alice := tenantSession(t, transport, p.url, ts.alice, "2025-11-25")
				callText(t, alice, "memory_view", map[string]any{"path": "/memories"})
				sessionURL, sessionHeader = p.url+"/mcp", alice.ID()
				if sessionHeader == "" {
					t.Fatal("the legacy session has no id")
				}
			}
			create := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/pwned.md","file_text":"x"}}}`
			for _, c := range []struct {
				name, token, url, session string
			}{
				{"no token", "", p.url + "/mcp", ""},
				{"wrong token", ts.outsider, p.url + "/mcp", ""},
				{"malformed header", "Basic YWxpY2U6cHc=", p.url + "/mcp", ""},
				{"no token on the session", "", sessionURL, sessionHeader},
				{"another tenant's token on the session", ts.bob, sessionURL, sessionHeader},
			} {
				req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(create))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if c.session != "" {
					req.Header.Set("Mcp-Session-Id", c.session)
				}
				switch {
				case strings.HasPrefix(c.token, "Basic "):
					req.Header.Set("Authorization", c.token)
				case c.token != "":
					req.Header.Set("Authorization", "Bearer "+c.token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s: status %d, WWW-Authenticate %q, body %q", c.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
				}
			}
			resp, err := http.Get(p.url + "/" + map[string]string{"http": "mcp", "sse": "sse"}[transport])
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET without a token: status %d", resp.StatusCode)
			}
			if after := hashTree(t, ts.root); after != before {
				t.Error("an unauthorized request changed the storage")
			}
			// Control: alice's own token on her session is let through.
			req, _ := http.NewRequest(http.MethodPost, sessionURL, strings.NewReader(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+ts.alice)
			if sessionHeader != "" {
				req.Header.Set("Mcp-Session-Id", sessionHeader)
			}
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode >= 300 {
				t.Errorf("alice on her own session: %v %v", err, resp.Status)
			} else {
				resp.Body.Close()
			}
			if strings.Contains(p.stderr.String(), ts.bob) || strings.Contains(p.stderr.String(), ts.alice) {
				t.Error("a token appears in the log")
			}
		})
	}
}

// A read-only tenant lists only view, and every change is refused with the exact message.
func TestReadOnlyTenant(t *testing.T) {
	ts, file := setupTenants(t)
	p := startHTTP(t, "http", "-root", ts.root, "-tenants", file)
	before := hashTree(t, ts.root)
	for _, version := range []string{"", "2025-11-25"} {
		carol := tenantSession(t, "http", p.url, ts.carol, version)
		tools, err := carol.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tools.Tools) != 1 || tools.Tools[0].Name != "memory_view" {
			t.Errorf("read-only tenant lists %d tools, want only memory_view", len(tools.Tools))
		}
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"memory_create", map[string]any{"path": "/memories/a.md", "file_text": "x"}},
			{"memory_str_replace", map[string]any{"path": "/memories/secret.md", "old_str": "carol", "new_str": "x"}},
			{"memory_insert", map[string]any{"path": "/memories/secret.md", "insert_line": 0, "insert_text": "x"}},
			{"memory_delete", map[string]any{"path": "/memories/secret.md"}},
			{"memory_rename", map[string]any{"old_path": "/memories/secret.md", "new_path": "/memories/b.md"}},
		} {
			if got, isErr := callText(t, carol, c.tool, c.args); got != "Error: The memory store is read-only" || !isErr {
				t.Errorf("%s: %q", c.tool, got)
			}
		}
		if got, _ := callText(t, carol, "memory_view", map[string]any{"path": "/memories/secret.md"}); !strings.Contains(got, "carol's notes") {
			t.Errorf("view: %q", got)
		}
	}
	if hashTree(t, ts.root) != before {
		t.Error("the read-only tenant changed the storage")
	}
	// The other tenants still see all six tools.
	bob := tenantSession(t, "http", p.url, ts.bob, "")
	if tools, _ := bob.ListTools(context.Background(), nil); len(tools.Tools) != 6 {
		t.Errorf("bob lists %d tools", len(tools.Tools))
	}
	if !strings.Contains(p.stderr.String(), `"message":"audit"`) || !strings.Contains(p.stderr.String(), `"tenant":"carol"`) {
		t.Errorf("refused changes are not audit lines with the tenant:\n%s", p.stderr.String())
	}
}

// Serving beyond loopback without tenants is refused with one line; the token subcommand
// prints a token and the entry that admits it.
func TestStartupRefusalAndToken(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-transport", "http", "-addr", "0.0.0.0:8080"}, func(string) string { return "" }, nil, &stdout, &stderr)
	want := "memory-mcp: refusing to serve http on 0.0.0.0:8080 without authentication: give -tenants FILE (memory-mcp token makes the entries), or -insecure-no-auth if something in front of it authenticates (see memory-mcp -help)\n"
	if code != 2 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	for _, addr := range []string{":8080", "example.com:80", "[::]:8080"} {
		stderr.Reset()
		if code := run(context.Background(), []string{"-transport", "sse", "-addr", addr}, func(string) string { return "" }, nil, &stdout, &stderr); code != 2 {
			t.Errorf("%s: exit %d, want the refusal", addr, code)
		}
	}

	stdout.Reset()
	if code := run(context.Background(), []string{"token", "dana"}, func(string) string { return "" }, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("token: exit %d", code)
	}
	lines := strings.Split(stdout.String(), "\n")
	token := strings.TrimPrefix(lines[0], "token: ")
	specs, err := server.ParseTenants([]byte(`{"tenants":[` + strings.TrimPrefix(lines[1], "tenants file entry: ") + `]}`))
	if err != nil {
		t.Fatalf("the printed entry is not a valid tenants file entry: %v\n%s", err, stdout.String())
	}
	sum := sha256.Sum256([]byte(token))
	if specs[0].Name != "dana" || specs[0].TokenSHA256 != hex.EncodeToString(sum[:]) || len(token) < 40 {
		t.Errorf("token %q does not match entry %+v", token, specs[0])
	}
}

// A tenants file that would give one tenant the whole storage (dir ".") stops the server
// at start-up, naming the tenant.
func TestTenantOwningTheStorageRefused(t *testing.T) {
	_, sha := server.NewToken()
	_, sha2 := server.NewToken()
	file := filepath.Join(t.TempDir(), "tenants.json")
	os.WriteFile(file, []byte(`{"tenants":[{"name":"alice","token_sha256":"`+sha+`"},{"name":"mallory","token_sha256":"`+sha2+`","dir":"./."}]}`), 0o600)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-transport", "http", "-addr", "127.0.0.1:0", "-root", t.TempDir(), "-tenants", file}, func(string) string { return "" }, nil, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `tenant mallory: dir "." must be a directory inside the storage`) {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
