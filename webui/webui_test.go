package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
	"github.com/memory-mcp/memory-mcp/webui"
)

// page is a web page over a memory with one file, and a browser's session on it.
type page struct {
	t      *testing.T
	srv    *httptest.Server
	ui     *webui.Handler
	h      *handlers.Memory
	cookie *http.Cookie
	csrf   string
}

const (
	tenantToken  = "mmcp_tenant-token"
	malloryToken = "mmcp_mallory-token" // a second tenant's, read-only
)

func newPage(t *testing.T, opts ...handlers.Option) *page {
	return newPageAt(t, time.Now, opts...)
}

func newPageAt(t *testing.T, now func() time.Time, opts ...handlers.Option) *page {
	t.Helper()
	store := files.NewMemoryStore()
	seed := handlers.New(store, handlers.Limits{})
	if res := seed.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "first\n"}); res.IsError {
		t.Fatal(res.Text)
	}
	h := handlers.New(store, handlers.Limits{MaxFileBytes: 1000}, opts...)
	mallory := handlers.New(files.NewMemoryStore(vfs.ReadOnly()), handlers.Limits{})
	p := &page{t: t, h: h}
	p.ui = webui.New(webui.Config{
		Memory: func(name string) *handlers.Memory {
			return map[string]*handlers.Memory{"alice": h, "mallory": mallory}[name]
		},
		Login: func(token string) (string, bool) {
			name, ok := map[string]string{tenantToken: "alice", malloryToken: "mallory"}[token]
			return name, ok
		},
		Now: now,
	})
	mux := http.NewServeMux()
	mux.Handle(webui.Prefix, p.ui)
	mux.Handle("/ui", p.ui)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// login follows a login link and keeps the session cookie and CSRF token.
func (p *page) login() {
	p.t.Helper()
	link := p.ui.LoginLink("alice", true)
	res := p.do(http.MethodGet, link, nil, nil)
	if res.StatusCode != http.StatusSeeOther {
		p.t.Fatalf("login link: %d", res.StatusCode)
	}
	for _, c := range res.Cookies() {
		if c.Name == "memory_mcp_ui" {
			p.cookie = c
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != webui.Prefix {
				p.t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/", c)
			}
		}
	}
	var s struct{ CSRF string }
	p.json(p.do(http.MethodGet, "/ui/api/session", nil, nil), http.StatusOK, &s)
	p.csrf = s.CSRF
	if p.csrf == "" {
		p.t.Fatal("no CSRF token")
	}
}

// do sends a request as the page would: the session cookie (when logged in), and for a POST
// a JSON body, the page's own Origin and the CSRF token; hdr overrides or removes (value
// "") any of these.
func (p *page) do(method, path string, body any, hdr map[string]string) *http.Response {
	p.t.Helper()
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = strings.NewReader(string(data))
	}
	req, _ := http.NewRequest(method, p.srv.URL+path, r)
	if p.cookie != nil {
		req.AddCookie(p.cookie)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", p.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("X-CSRF-Token", p.csrf)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { res.Body.Close() })
	if got := res.Header.Get("Content-Security-Policy"); got != webui.CSP {
		p.t.Errorf("%s %s: Content-Security-Policy %q, want %q", method, path, got, webui.CSP)
	}
	return res
}

func (p *page) json(res *http.Response, status int, v any) {
	p.t.Helper()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		p.t.Fatalf("%s: status %d, want %d: %s", res.Request.URL.Path, res.StatusCode, status, data)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			p.t.Fatalf("%s: %v: %s", res.Request.URL.Path, err, data)
		}
	}
}

// memory returns the memory's files, to prove a refused request changed nothing.
func (p *page) memory() string {
	p.t.Helper()
	root, _, err := p.h.Files(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	var b strings.Builder
	var walk func(n handlers.FileNode)
	walk = func(n handlers.FileNode) {
		if !n.Dir {
			data, _, _ := p.h.Read(context.Background(), n.Path)
			b.WriteString(n.Path + "=" + string(data) + ";")
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	return b.String()
}

// Refused requests: no session, a wrong token, a change without the CSRF token or from
// another origin, an oversized or non-JSON body. Each gets its status, the CSP header, and
// changes nothing.
func TestRefusals(t *testing.T) {
	p := newPage(t)
	p.login()
	save := map[string]any{"path": "/memories/a.md", "text": "changed\n"}
	restore := map[string]any{"path": "/memories/a.md", "seq": 1}
	for _, tt := range []struct {
		name         string
		method, path string
		body         any
		hdr          map[string]string
		noCookie     bool
		status       int
	}{
		{"no session", "GET", "/ui/api/tree", nil, nil, true, 401},
		{"no session, a change", "POST", "/ui/api/save", save, nil, true, 401},
		{"a wrong session cookie", "GET", "/ui/api/file?path=/memories/a.md", nil, map[string]string{"Cookie": "memory_mcp_ui=forged"}, false, 401},
		{"a wrong login link", "GET", "/ui/login?token=forged", nil, nil, true, 401},
		{"a login link without token", "GET", "/ui/login", nil, nil, true, 401},
		{"a wrong bearer token", "POST", "/ui/api/login", map[string]string{"token": "mmcp_wrong"}, nil, true, 401},
		{"a login from another site", "POST", "/ui/api/login", map[string]string{"token": tenantToken}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, true, 403},
		{"save without the CSRF token", "POST", "/ui/api/save", save, map[string]string{"X-CSRF-Token": ""}, false, 403},
		{"save with a wrong CSRF token", "POST", "/ui/api/save", save, map[string]string{"X-CSRF-Token": "forged"}, false, 403},
		{"delete without the CSRF token", "POST", "/ui/api/delete", map[string]any{"path": "/memories/a.md"}, map[string]string{"X-CSRF-Token": ""}, false, 403},
		{"restore without the CSRF token", "POST", "/ui/api/restore", restore, map[string]string{"X-CSRF-Token": ""}, false, 403},
		{"logout without the CSRF token", "POST", "/ui/api/logout", map[string]any{}, map[string]string{"X-CSRF-Token": ""}, false, 403},
		{"a cross-site form post", "POST", "/ui/api/save", save, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "X-CSRF-Token": "", "Content-Type": "text/plain"}, false, 403},
		{"a foreign Origin with the token", "POST", "/ui/api/save", save, map[string]string{"Origin": "https://evil.example"}, false, 403},
		{"a foreign Origin on the same host name", "POST", "/ui/api/save", save, map[string]string{"Origin": "http://127.0.0.1:1"}, false, 403},
		{"Sec-Fetch-Site cross-site", "POST", "/ui/api/save", save, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": ""}, false, 403},
		{"Sec-Fetch-Site same-site", "POST", "/ui/api/delete", map[string]any{"path": "/memories/a.md"}, map[string]string{"Sec-Fetch-Site": "same-site"}, false, 403},
		{"not JSON", "POST", "/ui/api/save", save, map[string]string{"Content-Type": "text/plain"}, false, 415},
		{"a body over the cap", "POST", "/ui/api/save", map[string]any{"path": "/memories/a.md", "text": strings.Repeat("x", 9<<20)}, nil, false, 413},
		{"unknown fields", "POST", "/ui/api/save", map[string]any{"path": "/memories/a.md", "text": "x", "mode": "force"}, nil, false, 400},
		{"a change by GET", "GET", "/ui/api/save?path=/memories/a.md&text=x", nil, nil, false, 404},
		{"PUT", "PUT", "/ui/api/save", save, nil, false, 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := p.memory()
			cookie := p.cookie
			if tt.noCookie {
				p.cookie = nil
			}
			res := p.do(tt.method, tt.path, tt.body, tt.hdr)
			p.cookie = cookie
			io.Copy(io.Discard, res.Body)
			if res.StatusCode != tt.status {
				t.Errorf("status %d, want %d", res.StatusCode, tt.status)
			}
			if after := p.memory(); after != before {
				t.Errorf("the memory changed: %s -> %s", before, after)
			}
		})
	}
	// The session still works after all that.
	p.json(p.do("POST", "/ui/api/save", save, nil), 200, nil)
	if got := p.memory(); got != "/memories/a.md=changed\n;" {
		t.Errorf("memory after a proper save: %s", got)
	}
}

// Every response under /ui/ carries the CSP and the other security headers: the page, its
// assets, redirects, errors and the API.
func TestHeadersOnEveryResponse(t *testing.T) {
	p := newPage(t)
	for _, path := range []string{"/ui", "/ui/", "/ui/app.js", "/ui/style.css", "/ui/icon.svg", "/ui/missing.js", "/ui/api/tree", "/ui/api/nothing", "/ui/login?token=x"} {
		res := p.do("GET", path, nil, nil) // do checks the CSP
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
			if got := res.Header.Get(k); got != want && !(k == "Cache-Control" && res.StatusCode == 404) { // net/http drops it from a file server's 404
				t.Errorf("%s: %s %q, want %q", path, k, got, want)
			}
		}
	}
	p.login()
	for _, path := range []string{"/ui/api/session", "/ui/api/tree", "/ui/api/file?path=/memories/a.md", "/ui/api/file?path=/etc/passwd", "/ui/api/log", "/ui/api/search?q=first", "/ui/api/diff?path=/memories/a.md"} {
		p.do("GET", path, nil, nil)
	}
	// The page has no inline script or style for the CSP to allow.
	res := p.do("GET", "/ui/", nil, nil)
	html, _ := io.ReadAll(res.Body)
	for _, bad := range []string{"<script>", "style=", "onclick", "onload", "javascript:"} {
		if strings.Contains(string(html), bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
}

// A login link from memory-mcp ui works once; a tenant's token logs in through the form;
// a removed tenant's session ends.
func TestLoginAndSessions(t *testing.T) {
	p := newPage(t)
	link := p.ui.LoginLink("alice", true)
	if res := p.do("GET", link, nil, nil); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != webui.Prefix {
		t.Fatalf("first use: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res := p.do("GET", link, nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use: %d, want 401", res.StatusCode)
	}
	// A reusable link (the HTTP server's own, without tenants) works again.
	reusable := p.ui.LoginLink("alice", false)
	for range 2 {
		if res := p.do("GET", reusable, nil, nil); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("reusable link: %d", res.StatusCode)
		}
	}
	res := p.do("POST", "/ui/api/login", map[string]string{"token": tenantToken}, map[string]string{"X-CSRF-Token": ""})
	p.json(res, 200, nil)
	p.cookie = res.Cookies()[0]
	var s struct {
		Memory   string
		ReadOnly bool `json:"read_only"`
	}
	p.json(p.do("GET", "/ui/api/session", nil, nil), 200, &s)
	if s.Memory != "alice" || s.ReadOnly {
		t.Errorf("session %+v", s)
	}
	p.ui.EndSessions([]string{"alice"})
	p.json(p.do("GET", "/ui/api/tree", nil, nil), 401, nil)
}

// A read-only memory is shown, and every change is refused with 403.
func TestReadOnlyMemory(t *testing.T) {
	p := newPage(t, handlers.ReadOnly())
	p.login()
	var s struct {
		ReadOnly bool `json:"read_only"`
	}
	p.json(p.do("GET", "/ui/api/session", nil, nil), 200, &s)
	if !s.ReadOnly {
		t.Error("session does not say read-only")
	}
	var f struct{ Text string }
	p.json(p.do("GET", "/ui/api/file?path=/memories/a.md", nil, nil), 200, &f)
	if f.Text != "first\n" {
		t.Errorf("file %q", f.Text)
	}
	for _, c := range []struct {
		name string
		body any
	}{{"save", map[string]any{"path": "/memories/a.md", "text": "x"}}, {"delete", map[string]any{"path": "/memories/a.md"}}, {"restore", map[string]any{"path": "/memories/a.md", "seq": 1}}} {
		p.json(p.do("POST", "/ui/api/"+c.name, c.body, nil), 403, nil)
	}
	if got := p.memory(); got != "/memories/a.md=first\n;" {
		t.Errorf("memory: %s", got)
	}
}

// The API end to end: create, a conflicting save, restore, search, delete, and the live
// stream hearing of each change.
func TestAPI(t *testing.T) {
	p := newPage(t)
	p.login()
	events := p.stream()

	var saved struct {
		Changed bool
		Version uint64
	}
	p.json(p.do("POST", "/ui/api/save", map[string]any{"path": "/memories/d/new.md", "text": "hello <b>there</b>\n", "sha256": ""}, nil), 200, &saved)
	if !saved.Changed || saved.Version == 0 {
		t.Errorf("save: %+v", saved)
	}
	if b := events.next(t); b.Actor != vfs.ActorWeb || b.Command != "edit" || b.Changes[0].Path != "/memories/d/new.md" {
		t.Errorf("event %+v", b)
	}
	// A save based on a content that has changed since is refused.
	var f struct{ SHA256 string }
	p.json(p.do("GET", "/ui/api/file?path=/memories/a.md", nil, nil), 200, &f)
	p.json(p.do("POST", "/ui/api/save", map[string]any{"path": "/memories/a.md", "text": "mine\n", "sha256": f.SHA256}, nil), 200, nil)
	events.next(t)
	var refused struct{ Error string }
	p.json(p.do("POST", "/ui/api/save", map[string]any{"path": "/memories/a.md", "text": "stale\n", "sha256": f.SHA256}, nil), 409, &refused)
	if !strings.Contains(refused.Error, "changed by someone else") {
		t.Errorf("conflict: %q", refused.Error)
	}
	// The whole memory back to before the two saves.
	var restored handlers.Restored
	p.json(p.do("POST", "/ui/api/restore", map[string]any{"path": "/memories", "seq": 1}, nil), 200, &restored)
	if len(restored.Deleted) != 1 || len(restored.Modified) != 1 {
		t.Errorf("restore: %+v", restored)
	}
	if b := events.next(t); b.Command != "restore" || b.Actor != vfs.ActorWeb {
		t.Errorf("restore event %+v", b)
	}
	if got := p.memory(); got != "/memories/a.md=first\n;" {
		t.Errorf("memory after restore: %s", got)
	}
	// And forward again, to a time: the whole memory as it was after the two saves.
	var log struct{ Versions []vfs.Version }
	p.json(p.do("GET", "/ui/api/log?path=/memories/a.md&actor=web&n=1", nil, nil), 200, &log) // the restore
	p.json(p.do("GET", "/ui/api/log?path=/memories/a.md&actor=web&n=2", nil, nil), 200, &log) // and the save before it
	if len(log.Versions) != 2 || log.Versions[1].Command != "edit" {
		t.Fatalf("log: %+v", log.Versions)
	}
	var again handlers.Restored
	p.json(p.do("POST", "/ui/api/restore", map[string]any{"path": "/memories", "at": log.Versions[1].Time}, nil), 200, &again)
	if len(again.Created) != 1 || len(again.Modified) != 1 {
		t.Errorf("restore to a time: %+v", again)
	}
	events.next(t)
	if got := p.memory(); got != "/memories/a.md=mine\n;/memories/d/new.md=hello <b>there</b>\n;" {
		t.Errorf("memory after restore to a time: %s", got)
	}
	var found struct {
		Matches []handlers.Match
	}
	p.json(p.do("GET", "/ui/api/search?q=MINE", nil, nil), 200, &found)
	if len(found.Matches) != 1 || found.Matches[0].Line != 1 {
		t.Errorf("search: %+v", found)
	}
	p.json(p.do("POST", "/ui/api/delete", map[string]any{"path": "/memories/a.md"}, nil), 200, nil)
	if b := events.next(t); b.Changes[0].Kind != vfs.Deleted {
		t.Errorf("delete event %+v", b)
	}
	p.json(p.do("GET", "/ui/api/log?path=/memories/a.md", nil, nil), 200, &log)
	if len(log.Versions) != 5 || log.Versions[0].Actor != vfs.ActorWeb || log.Versions[0].Command != "delete" {
		t.Errorf("log: %+v", log.Versions)
	}
}

type stream struct {
	sc    *bufio.Scanner
	lines chan string
}

// stream opens the live activity stream and waits for its first event.
func (p *page) stream() *stream {
	p.t.Helper()
	res := p.do("GET", "/ui/api/events", nil, nil)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		p.t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &stream{sc: bufio.NewScanner(res.Body), lines: make(chan string)}
	go func() {
		defer close(s.lines)
		for s.sc.Scan() {
			s.lines <- s.sc.Text()
		}
	}()
	if first := s.line(p.t); first != "event: hello" {
		p.t.Fatalf("first event %q", first)
	}
	return s
}

// line returns the stream's next line; the test fails if none comes within 10 s.
func (s *stream) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatal("the stream ended")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return ""
}

func (s *stream) next(t *testing.T) vfs.Batch {
	t.Helper()
	event := ""
	for {
		line := s.line(t)
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && event == "change" {
			var b vfs.Batch
			if err := json.Unmarshal([]byte(data), &b); err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// memory-mcp ui answers only requests addressed to the local host (DNS rebinding).
func TestServeRefusesOtherHosts(t *testing.T) {
	p := newPage(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- webui.Serve(ctx, ln, p.ui) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	u := "http://" + ln.Addr().String() + "/ui/"
	for host, want := range map[string]int{"": 200, "evil.example": 403, "evil.example:80": 403, "localhost": 200} {
		req, _ := http.NewRequest("GET", u, nil)
		if host != "" {
			req.Host = host
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, res.StatusCode, want)
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("Host %q: no CSP", host)
		}
	}
}

// A session ends after 12 hours unused, and after 7 days however used; a session has at
// most 4 live streams.
func TestSessionBounds(t *testing.T) {
	now := time.Now()
	p := newPageAt(t, func() time.Time { return now })
	p.login()
	for range 4 {
		p.stream()
	}
	if res := p.do("GET", "/ui/api/events", nil, nil); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a fifth stream: %d", res.StatusCode)
	}
	now = now.Add(11 * time.Hour)
	p.json(p.do("GET", "/ui/api/tree", nil, nil), 200, nil)
	now = now.Add(13 * time.Hour)
	p.json(p.do("GET", "/ui/api/tree", nil, nil), 401, nil)

	p.login()
	for range 15 { // used every 11 hours, for 165 hours
		now = now.Add(11 * time.Hour)
		p.json(p.do("GET", "/ui/api/tree", nil, nil), 200, nil)
	}
	now = now.Add(4 * time.Hour)
	p.json(p.do("GET", "/ui/api/tree", nil, nil), 401, nil)
}

// tokenLogin logs the page in with a tenant's token, as the page's login form does, and
// returns the response's status.
func (p *page) tokenLogin(token string) int {
	p.t.Helper()
	res := p.do("POST", "/ui/api/login", map[string]string{"token": token}, map[string]string{"X-CSRF-Token": ""})
	io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return res.StatusCode
	}
	p.cookie = res.Cookies()[0]
	var s struct{ CSRF string }
	p.json(p.do(http.MethodGet, "/ui/api/session", nil, nil), http.StatusOK, &s)
	p.csrf = s.CSRF
	return res.StatusCode
}

// One tenant cannot take the page from another: its live streams, sessions and logins
// have a share of their own, and a flood of its logins ends none but its own sessions.
func TestTenantSharesOfThePage(t *testing.T) {
	now := time.Now()
	alice := newPageAt(t, func() time.Time { return now })
	if code := alice.tokenLogin(tenantToken); code != 200 {
		t.Fatalf("alice's login: %d", code)
	}
	alice.stream()

	// Mallory opens as many live streams as her sessions allow: a quarter of the page's.
	opened := 0
	for range 17 { // 68 streams asked for: more than the page has
		m := &page{t: t, srv: alice.srv, ui: alice.ui}
		if code := m.tokenLogin(malloryToken); code != 200 {
			t.Fatalf("mallory's login: %d", code)
		}
		for range 4 {
			res := m.do("GET", "/ui/api/events", nil, nil)
			switch res.StatusCode {
			case 200:
				opened++
			case http.StatusServiceUnavailable:
				if res.Header.Get("Retry-After") == "" {
					t.Error("a refused stream without Retry-After")
				}
			default:
				t.Fatalf("mallory's stream: %d", res.StatusCode)
			}
		}
	}
	if opened != 16 {
		t.Errorf("mallory opened %d live streams, want her share of 16", opened)
	}
	alice.stream() // alice still gets hers

	// A burst of logins is cut short per client address, then per tenant; alice's
	// session lives on.
	m := &page{t: t, srv: alice.srv, ui: alice.ui}
	codes := map[int]int{}
	for range 1000 {
		codes[m.tokenLogin(malloryToken)]++
	}
	if codes[http.StatusOK] > 20 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 1000 {
		t.Errorf("1000 logins at once: %v, want at most 20 through and the rest refused with 429", codes)
	}
	res := m.do("POST", "/ui/api/login", map[string]string{"token": malloryToken}, map[string]string{"X-CSRF-Token": ""})
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("a login past the bound: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	alice.json(alice.do("GET", "/ui/api/tree", nil, nil), 200, nil)

	// Logins spread out in time pass the rate, and then mallory's oldest sessions end,
	// never alice's.
	var first *page
	for range 300 {
		now = now.Add(3 * time.Second)
		m = &page{t: t, srv: alice.srv, ui: alice.ui}
		if code := m.tokenLogin(malloryToken); code != 200 {
			t.Fatalf("a login after its wait: %d", code)
		}
		if first == nil {
			first = m
		}
	}
	alice.json(alice.do("GET", "/ui/api/tree", nil, nil), 200, nil)
	m.json(m.do("GET", "/ui/api/tree", nil, nil), 200, nil)
	first.json(first.do("GET", "/ui/api/tree", nil, nil), 401, nil)
}

// Logging out ends that session at once: its live stream closes and its cookie is refused,
// while another session of the same memory goes on.
func TestLogout(t *testing.T) {
	p := newPage(t)
	other := &page{t: t, srv: p.srv, ui: p.ui, h: p.h}
	other.login()
	p.login()
	events := p.stream()
	p.json(p.do("POST", "/ui/api/logout", map[string]any{}, nil), 200, nil)
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-events.lines:
		case <-deadline:
			t.Fatal("the live stream is still open 10 s after logging out")
		}
	}
	p.json(p.do("GET", "/ui/api/tree", nil, nil), 401, nil)
	p.json(p.do("POST", "/ui/api/save", map[string]any{"path": "/memories/b.md", "text": "x", "sha256": ""}, nil), 401, nil)
	other.json(other.do("GET", "/ui/api/tree", nil, nil), 200, nil)
	if got := p.memory(); got != "/memories/a.md=first\n;" {
		t.Errorf("memory after logging out: %s", got)
	}
}

// A version that is not a number is refused with a message that asks for one.
func TestVersionArguments(t *testing.T) {
	p := newPage(t)
	p.login()
	for _, q := range []string{"show?path=/memories/a.md&seq=x", "show?path=/memories/a.md", "diff?path=/memories/a.md&a=1&b=-2"} {
		res := p.do("GET", "/ui/api/"+q, nil, nil)
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(data), "a version number is needed") {
			t.Errorf("%s: %d %s", q, res.StatusCode, data)
		}
	}
}

// A restore of the whole memory that a mount's storage fails (gone) says
// that the rest was restored and which mount was not, with the page's words for a storage
// failure; the main store is restored.
func TestRestoreOfTheWholeMemoryWithAMountLeft(t *testing.T) {
	fsys := &vfstest.DownFS{FS: files.NewMemFs()}
	p := newPage(t, handlers.WithMounts(handlers.Mount{Name: "me", Memory: handlers.New(vfs.NewStore(files.NewAferoStorage(fsys)), handlers.Limits{})}))
	p.login()
	fsys.Down.Store(true)
	var got struct{ Error string }
	p.json(p.do("POST", "/ui/api/restore", map[string]any{"path": "/memories", "at": "2000-01-01T00:00:00Z"}, nil), http.StatusInternalServerError, &got)
	if want := "the rest of the memory was restored, but /memories/me was not: the storage failed; the server's log says why"; got.Error != want {
		t.Errorf("got %q, want %q", got.Error, want)
	}
	if _, _, err := p.h.Read(context.Background(), "/memories/a.md"); err == nil {
		t.Error("the main store was not restored: /memories/a.md, made after the time, is still there")
	}
	// The activity shows the rest, as the tree does.
	var log struct{ Versions []vfs.Version }
	p.json(p.do("GET", "/ui/api/log", nil, nil), http.StatusOK, &log)
	if len(log.Versions) != 2 || log.Versions[0].Command != "restore" {
		t.Errorf("the activity with the mount down: %+v", log.Versions)
	}
}
