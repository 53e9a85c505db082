package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/server"
)

func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /healthz and /readyz answer without a token and say nothing but ok/ready; /readyz turns
// 503 while a tenant's storage is missing and ready again when it is back.
func TestHealthAndReadiness(t *testing.T) {
	token, sha := server.NewToken()
	root := t.TempDir()
	tenants := filepath.Join(t.TempDir(), "tenants.json")
	os.WriteFile(tenants, []byte(`{"tenants":[{"name":"a","token_sha256":"`+sha+`"}]}`), 0o600)
	p := startHTTP(t, "http", "-root", root, "-tenants", tenants)
	_ = token
	if code, body := get(t, p.url+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, p.url+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	os.RemoveAll(filepath.Join(root, "a"))
	if code, body := get(t, p.url+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready\n" {
		t.Errorf("/readyz without storage: %d %q", code, body)
	}
	os.MkdirAll(filepath.Join(root, "a"), 0o700)
	if code, _ := get(t, p.url+"/readyz"); code != 200 {
		t.Errorf("/readyz with the storage back: %d", code)
	}
	if code, _ := get(t, p.url+"/mcp"); code != http.StatusUnauthorized {
		t.Errorf("everything else still needs a token: %d", code)
	}
}

// SIGHUP reloads the tenants file: a new tenant is admitted, a removed one refused and a
// rotated token takes effect, without a restart; a broken file changes nothing. Rejected
// authentications are logged, without the token.
func TestReloadTenants(t *testing.T) {
	alice, aliceSHA := server.NewToken()
	bob, bobSHA := server.NewToken()
	carol, carolSHA := server.NewToken()
	file := filepath.Join(t.TempDir(), "tenants.json")
	write := func(body string) { os.WriteFile(file, []byte(body), 0o600) }
	write(`{"tenants":[{"name":"alice","token_sha256":"` + aliceSHA + `"},{"name":"bob","token_sha256":"` + bobSHA + `"}]}`)
	p := startHTTP(t, "http", "-tenants", file)

	works := func(token string) bool {
		req, _ := http.NewRequest(http.MethodPost, p.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	bobSession := tenantSession(t, "http", p.url, bob, "")
	if !works(alice) || !works(bob) || works(carol) {
		t.Fatal("before the reload: alice and bob in, carol out")
	}
	reload := func(wantLine string) {
		t.Helper()
		before := strings.Count(p.stderr.String(), wantLine)
		p.cmd.Process.Signal(syscall.SIGHUP)
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(p.stderr.String(), wantLine) == before {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", wantLine, p.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// bob removed, carol added, alice's token rotated to a new one.
	alice2, alice2SHA := server.NewToken()
	write(`{"tenants":[{"name":"alice","token_sha256":"` + alice2SHA + `"},{"name":"carol","token_sha256":"` + carolSHA + `"}]}`)
	reload("tenants file reloaded")
	if !works(carol) || !works(alice2) {
		t.Error("after the reload: carol and alice's new token must be admitted")
	}
	if works(bob) || works(alice) {
		t.Error("after the reload: bob and alice's old token must be refused")
	}
	if _, err := bobSession.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_view", Arguments: map[string]any{"path": "/memories"}}); err == nil {
		t.Error("bob's open session still works")
	}
	write(`{"tenants":[`) // broken: nothing changes
	reload("tenants file not reloaded")
	if !works(carol) {
		t.Error("a broken file must leave the tenants as they were")
	}
	log := p.stderr.String()
	if !strings.Contains(log, `"message":"authentication failed"`) {
		t.Error("refused authentications are not logged")
	}
	for _, tok := range []string{alice, bob} {
		if strings.Contains(log, tok) {
			t.Error("a token appears in the log")
		}
	}
}

// Behind a reverse proxy on the same host that keeps its own Host header, the server
// answers once that host is listed in -allowed-hosts (403 before).
func TestProxyHost(t *testing.T) {
	p := startHTTP(t, "http")
	if code, _ := get(t, p.url+"/mcp", "Host", "memory.internal.example"); code != http.StatusForbidden {
		t.Errorf("an unlisted Host on loopback: %d", code)
	}
	p = startHTTP(t, "http", "-allowed-hosts", "memory.internal.example")
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: hostRewrite{"memory.internal.example"}}}, "2025-11-25")
	if text, isErr := callText(t, cs, "memory_view", map[string]any{"path": "/memories"}); isErr {
		t.Errorf("a call through the listed Host: %s", text)
	}
}

type hostRewrite struct{ host string }

func (h hostRewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}
