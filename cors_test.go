package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A web page of a listed origin calls the server from a real browser: its preflight is
// answered without a token, it reads the session id and its call's answer, and it can read
// a 401 for a wrong token. A page of an origin not listed gets nothing.
func TestBrowserPageOfAnAllowedOrigin(t *testing.T) {
	node, chromium := browser(t)
	ts, tenants := setupTenants(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>an agent's page</title>"))
	}))
	defer page.Close()
	listed := page.URL
	unlisted := strings.Replace(page.URL, "127.0.0.1", "localhost", 1)

	// On every interface, where only listed origins may call.
	p := startHTTP(t, "http", "-addr", "0.0.0.0:0", "-tenants", tenants, "-root", ts.root, "-allowed-origins", listed)
	u, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	mcpURL := "http://" + net.JoinHostPort("127.0.0.1", u.Port()) + "/mcp"

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "cors", "page.cjs"), listed, unlisted, mcpURL, ts.alice)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("page.cjs: %v\n%s", err, p.stderr.String())
	}
	type outcome struct {
		Init, Call, WrongToken int
		Session, Text, Error   string
	}
	var got struct{ Listed, Unlisted outcome }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("page.cjs printed %q: %v", out, err)
	}
	want := outcome{Init: 200, Call: 200, WrongToken: 401, Text: "File created successfully at: /memories/from-a-page.md"}
	if l := got.Listed; l.Session == "" || l.Error != "" || l.Init != want.Init || l.Call != want.Call || l.WrongToken != want.WrongToken || l.Text != want.Text {
		t.Errorf("a page of the listed origin: %+v, want %+v and a session id", l, want)
	}
	if data, err := os.ReadFile(filepath.Join(ts.root, "alice", "from-a-page.md")); err != nil || string(data) != "hello\n" {
		t.Errorf("the page's create: %q, %v", data, err)
	}
	if u := got.Unlisted; u.Error == "" || u.Init != 0 {
		t.Errorf("a page of an origin not listed: %+v, want fetch to fail", u)
	}
}
