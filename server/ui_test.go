package server

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/webui"
)

// The web page under /ui/ on the HTTP transports: off unless asked for, behind the Host
// check, tenants log in with their bearer token, and a tenant's sessions end when its token
// is rotated or it is removed.
func TestWebPageOnHTTP(t *testing.T) {
	url, _ := testGate(t, HTTPOptions{}, map[string]string{"alice": "tok-alice"}, "")
	if res := get(t, url+"/ui/", nil); res.StatusCode == http.StatusOK {
		t.Errorf("the page is served without HTTPOptions.UI")
	}

	url, s := testGate(t, HTTPOptions{UI: true}, map[string]string{"alice": "tok-alice", "bob": "tok-bob"}, "")
	if res := get(t, url+"/ui/", nil); res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != webui.CSP {
		t.Fatalf("/ui/: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	if res := get(t, url+"/ui/", map[string]string{"Host": "rebound.example"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("another Host: %d", res.StatusCode)
	}
	// The MCP endpoint's bearer token is not a session on the page.
	if res := get(t, url+"/ui/api/tree", map[string]string{"Authorization": "Bearer tok-alice"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a bearer header on the page's API: %d", res.StatusCode)
	}
	login := func(token string) *http.Cookie {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"/ui/api/login", strings.NewReader(`{"token":"`+token+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", url)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("login: %d", res.StatusCode)
		}
		return res.Cookies()[0]
	}
	tree := func(c *http.Cookie) int {
		return get(t, url+"/ui/api/tree", map[string]string{"Cookie": c.Name + "=" + c.Value}).StatusCode
	}
	alice, bob := login("tok-alice"), login("tok-bob")
	if tree(alice) != 200 || tree(bob) != 200 {
		t.Fatal("sessions do not work")
	}
	tenants := *s.tenants.Load()
	var next []Tenant
	for _, tn := range tenants {
		if tn.Name == "alice" {
			next = append(next, NewTenant(TenantSpec{Name: "alice", TokenSHA256: sha("tok-alice-2")}, tn.Memory))
		}
	}
	s.SetTenants(next) // alice's token rotated, bob removed
	if got := tree(alice); got != http.StatusUnauthorized {
		t.Errorf("alice's session after her token was rotated: %d", got)
	}
	if got := tree(bob); got != http.StatusUnauthorized {
		t.Errorf("bob's session after he was removed: %d", got)
	}
	if tree(login("tok-alice-2")) != 200 {
		t.Error("alice's new token does not log in")
	}
}

// Without tenants, the page of the server's own memory opens with the login link the
// server logs.
func TestWebPageWithoutTenants(t *testing.T) {
	h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	logged := &lockedBuffer{}
	s := New(h, Config{Version: "test", Logger: zerolog.New(logged)})
	url := serve(t, s, HTTPOptions{UI: true}, "")
	var line string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(line, "/ui/login?token="); time.Sleep(10 * time.Millisecond) {
		if line = logged.String(); time.Now().After(deadline) {
			t.Fatalf("no login link logged:\n%s", line)
		}
	}
	link := line[strings.Index(line, "/ui/login?token="):]
	link = link[:strings.IndexByte(link, '"')]
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 2 { // it works while the server runs
		res, err := client.Get(url + link)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
			t.Fatalf("login link: %d", res.StatusCode)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}
