package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// testGate serves a memory-backed server over HTTP on addr (127.0.0.1:0 unless given) and
// returns its base URL, with the port, and the server.
func testGate(t testing.TB, opts HTTPOptions, tokens map[string]string, addr string) (string, *Server) {
	t.Helper()
	h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	var tenants []Tenant
	for name, token := range tokens {
		spec := TenantSpec{Name: name, TokenSHA256: sha(token)}
		tenants = append(tenants, NewTenant(spec, handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())))
	}
	s := New(h, Config{Version: "test", Logger: zerolog.Nop(), Tenants: tenants})
	return serve(t, s, opts, addr), s
}

// serve serves s over HTTP on addr (127.0.0.1:0 unless given) until the test ends, and
// returns its base URL.
func serve(t testing.TB, s *Server, opts HTTPOptions, addr string) string {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Transport == "" {
		opts.Transport = "http"
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = 4 << 20
	}
	opts.Listener = ln
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.ServeHTTP(ctx, opts); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://127.0.0.1:" + port
}

func sha(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// sessionCount is the number of sessions registered with mcp-go.
func (s *Server) sessionCount() int {
	n := 0
	s.sessions.Range(func(any, any) bool { n++; return true })
	return n
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// post sends one JSON-RPC message; session and token may be "".
func post(t testing.TB, url, session, token, body string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// call sends one JSON-RPC message in session, with the headers given as name, value, and
// returns the response and its body.
func call(t testing.TB, url, session, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, data
}

func listTools(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)
}

// rawConn opens a TCP connection and writes s, then leaves it as it is.
func rawConn(t *testing.T, url, s string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if s != "" {
		if _, err := io.WriteString(c, s); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// closedWithin reads from c until the server closes it (an end of stream, or a reset when
// it closes with our unread bytes in its buffer); it returns what was read and whether that
// happened within d.
func closedWithin(c net.Conn, d time.Duration) (string, bool) {
	c.SetReadDeadline(time.Now().Add(d))
	data, err := io.ReadAll(c)
	var ne net.Error
	return string(data), err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// Without a valid token a request is refused before its body is read: a client that sends
// headers and a little of a large chunked body, then stalls, gets 401 at once and its
// connection closed.
func TestAuthBeforeBody(t *testing.T) {
	url, _ := testGate(t, HTTPOptions{}, map[string]string{"alice": "alice-token"}, "")
	for _, auth := range []string{"", "Authorization: Bearer wrong\r\n"} {
		c := rawConn(t, url, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+auth+
			"Transfer-Encoding: chunked\r\n\r\n1000\r\n"+strings.Repeat("x", 4096)+"\r\n")
		got, closed := closedWithin(c, 3*time.Second)
		if !strings.HasPrefix(got, "HTTP/1.1 401") || !closed {
			t.Errorf("auth %q: closed=%v, got %.60q", auth, closed, got)
		}
	}
}

// Connections that send nothing, half a body, or idle after a request are closed by the
// server's timeouts.
func TestTimeoutsCloseConnections(t *testing.T) {
	to := Timeouts{Header: 300 * time.Millisecond, Body: 300 * time.Millisecond, Write: time.Second, Idle: 300 * time.Millisecond}
	url, _ := testGate(t, HTTPOptions{Timeouts: to}, nil, "")

	if _, closed := closedWithin(rawConn(t, url, ""), 3*time.Second); !closed {
		t.Error("a connection that sends nothing was kept")
	}
	if _, closed := closedWithin(rawConn(t, url, "POST /mcp HTT"), 3*time.Second); !closed {
		t.Error("a connection with half a request line was kept")
	}
	got, closed := closedWithin(rawConn(t, url, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":"), 3*time.Second)
	if !closed || !strings.HasPrefix(got, "HTTP/1.1 408") {
		t.Errorf("a stalled body: closed=%v, got %.40q", closed, got)
	}
	c := rawConn(t, url, fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(initBody), initBody))
	got, closed = closedWithin(c, 3*time.Second)
	if !closed || !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Errorf("an idle keep-alive connection: closed=%v, got %.40q", closed, got)
	}
}

// flipChar returns s with the character at i changed (to another of the same alphabet).
func flipChar(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// Session ids: a forged or unknown one, a deleted one and an expired one get 404; the
// number of sessions is capped (the least recently used ends), and what mcp-go keeps for an
// ended session is released.
func TestSessions(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	url, s := testGate(t, HTTPOptions{Now: clock, Sessions: SessionLimits{Idle: time.Minute, Max: 5, MaxPerTenant: 5}}, nil, "")
	url += "/mcp"
	open := func() string {
		resp := post(t, url, "", "", initBody)
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || !strings.HasPrefix(id, sessionPrefix) {
			t.Fatalf("initialize: %d %q", resp.StatusCode, id)
		}
		return id
	}
	id := open()
	if resp := post(t, url, id, "", listTools(2)); resp.StatusCode != 200 {
		t.Fatalf("a live session: %d", resp.StatusCode)
	}
	forged := []string{
		sessionPrefix + strings.Repeat("A", 64),
		flipChar(id, len(id)-3), // not its last two: an id whose end was "AA" made that one real
		"mcp-session-8d7c3a57-7d11-4e0b-9a39-4c8a5bdfd3e1",
	}
	for _, f := range forged {
		if resp := post(t, url, f, "", listTools(3)); resp.StatusCode != http.StatusNotFound {
			t.Errorf("forged id %q: %d", f, resp.StatusCode)
		}
	}

	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", id)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if resp := post(t, url, id, "", listTools(4)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a deleted session: %d", resp.StatusCode)
	}

	idle := open()
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if resp := post(t, url, idle, "", listTools(5)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an expired session: %d", resp.StatusCode)
	}

	first := open()
	for range 20 {
		open()
	}
	if n := s.sessionCount(); n > 5 {
		t.Errorf("%d sessions registered, the cap is 5", n)
	}
	if resp := post(t, url, first, "", listTools(6)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an evicted session: %d", resp.StatusCode)
	}
}

// Beyond the bound on requests in flight the server answers 503 with Retry-After instead of
// holding more; room is back once they are done.
func TestInflightBound(t *testing.T) {
	url, _ := testGate(t, HTTPOptions{Limits: Limits{Requests: 2, PerTenant: 2, SmallRequests: 2, RequestBytes: 1 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 4}}, nil, "")
	stalled := make([]net.Conn, 2)
	stall := func(i int) {
		stalled[i] = rawConn(t, url, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	}
	stall(0)
	stall(1)
	// Until the server has read the stalled requests' headers, a request may still get in,
	// and a probe that overtakes one has it refused: a stalled request answered is sent
	// again. (The deadline only keeps a broken bound from hanging the test.)
	status := func(want int) *http.Response {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			resp := post(t, url+"/mcp", "", "", initBody)
			if resp.StatusCode == want || time.Now().After(deadline) {
				return resp
			}
			for i, c := range stalled {
				c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
				if n, _ := c.Read(make([]byte, 1)); n > 0 && want != http.StatusOK {
					c.Close()
					stall(i)
				}
			}
		}
	}
	if resp := status(http.StatusServiceUnavailable); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("beyond the bound: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range stalled {
		c.Close()
	}
	if resp := status(http.StatusOK); resp.StatusCode != http.StatusOK {
		t.Errorf("after the others ended: %d", resp.StatusCode)
	}
}

// A legacy SSE client that posts requests but never reads its stream gets 503 once its
// pending responses reach the bound, and is disconnected when the server's writes stall;
// its session is then gone.
func TestSSEClientThatDoesNotRead(t *testing.T) {
	to := DefaultTimeouts()
	to.Write = 300 * time.Millisecond
	url, s := testGate(t, HTTPOptions{Transport: "sse", Timeouts: to, Limits: Limits{Requests: 64, PerTenant: 64, SmallRequests: 64, RequestBytes: 32 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 8}}, nil, "")
	big := strings.Repeat("a line of a memory file that is read back again and again\n", 400)
	s.h.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/big.md", "file_text": big})

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(smallReceiveBuffer)
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
	endpoint := sseEndpoint(t, bufio.NewReader(c))
	// From here on the client reads nothing. The server takes requests while the socket
	// buffers absorb the responses and the pending ones stay below the bound (beyond it:
	// 503); once its writes stall, it drops the connection and the session with it.
	view := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories/big.md"}}}`
	deadline := time.Now().Add(20 * time.Second)
	accepted, busy := 0, 0
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the non-reading client was not disconnected (%d requests accepted, %d refused)", accepted, busy)
		}
		resp := post(t, url+endpoint, "", "", fmt.Sprintf(view, accepted))
		switch resp.StatusCode {
		case http.StatusAccepted:
			accepted++
			continue
		case http.StatusServiceUnavailable:
			busy++
			time.Sleep(10 * time.Millisecond)
			continue
		case http.StatusBadRequest: // mcp-go: no such session
		default:
			t.Fatalf("unexpected status %d", resp.StatusCode)
		}
		break
	}
	t.Logf("disconnected after %d accepted requests (%d refused as busy)", accepted, busy)
}

// Origins: on a listener on every interface, a request carrying a foreign Origin is refused
// (no wildcard CORS), a listed one is served; on a loopback listener a local page is served.
func TestOriginOnEveryListener(t *testing.T) {
	for _, transport := range []string{"http", "sse"} {
		url, _ := testGate(t, HTTPOptions{Transport: transport, AllowedOrigins: []string{"https://app.example.com"}}, nil, "0.0.0.0:0")
		path := "/mcp"
		if transport == "sse" {
			path = "/sse"
		}
		get := func(origin string) *http.Response {
			req, _ := http.NewRequest(http.MethodGet, url+path, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Origin", origin)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		for _, origin := range []string{"https://evil.example", "http://localhost:3000", "null"} {
			if resp := get(origin); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s, 0.0.0.0, Origin %s: %d", transport, origin, resp.StatusCode)
			}
		}
		if resp := post(t, url+"/mcp", "", "", initBody, "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: POST from a foreign origin: %d", transport, resp.StatusCode)
		}
		// A page of the allowed origin may read the answers (mcp-go's SSE transport would
		// say "*"), and its preflight is answered.
		if transport == "sse" {
			resp := get("https://app.example.com")
			if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
				t.Errorf("sse, allowed origin: %d, ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
			}
		} else if resp := post(t, url+"/mcp", "", "", initBody, "Origin", "https://app.example.com"); resp.StatusCode != 200 ||
			resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
			t.Errorf("http, allowed origin: %d, %v", resp.StatusCode, resp.Header)
		}
		for origin, want := range map[string]int{"https://app.example.com": http.StatusNoContent, "https://evil.example": http.StatusForbidden} {
			req, _ := http.NewRequest(http.MethodOptions, url+path, nil)
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,mcp-session-id,mcp-protocol-version")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			allowed := resp.Header.Get("Access-Control-Allow-Origin") == origin && strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization")
			if resp.StatusCode != want || allowed != (want == http.StatusNoContent) {
				t.Errorf("%s: preflight from %s: %d %v", transport, origin, resp.StatusCode, resp.Header)
			}
		}
	}
	url, _ := testGate(t, HTTPOptions{}, nil, "")
	if resp := post(t, url+"/mcp", "", "", initBody, "Origin", "http://localhost:5173"); resp.StatusCode != 200 ||
		resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("loopback listener, local page: %d, ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp := post(t, url+"/mcp", "", "", initBody, "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("loopback listener, foreign page: %d", resp.StatusCode)
	}
}

// A number beyond the range of a float64 (which the JSON decoder refuses outright) in a
// tool's arguments is a tool error naming the argument, not a protocol error with Go's text.
func TestHugeNumbersAreToolErrors(t *testing.T) {
	url, _ := testGate(t, HTTPOptions{}, nil, "")
	session := post(t, url+"/mcp", "", "", initBody).Header.Get("Mcp-Session-Id")
	for _, tt := range []struct{ args, want string }{
		{`"name":"memory_view","arguments":{"path":"/memories","view_range":[1e400,2]}`, "Error: Invalid `view_range`. It should be a list of two integers."},
		{`"name":"memory_insert","arguments":{"path":"/memories/a.md","insert_line":-1e999,"insert_text":"x"}`, "Error: Parameter `insert_line` must be an integer"},
	} {
		_, data := call(t, url+"/mcp", session, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{`+tt.args+`}}`)
		want := fmt.Sprintf(`{"type":"text","text":%q}],"isError":true`, tt.want)
		if !strings.Contains(string(data), want) {
			t.Errorf("%s:\n got %s\nwant a result with %s", tt.args, data, want)
		}
	}
}

func TestQuoteHugeNumbers(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":[1e400,2],"s":"1e400 \" 1e999","n":-1E+309}`: `{"a":["1e400",2],"s":"1e400 \" 1e999","n":"-1E+309"}`,
		`{"a":1.5e308,"b":123456789012345678901234567890}`: `{"a":1.5e308,"b":123456789012345678901234567890}`,
		`{"s":"a\\","n":1e400}`:                            `{"s":"a\\","n":"1e400"}`,
		`{"s":"a\\\"1e400","n":2}`:                         `{"s":"a\\\"1e400","n":2}`,
	} {
		got, _ := quoteHugeNumbers([]byte(in))
		if string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}

// Whatever the body, quoting its huge numbers keeps a JSON text valid, changes nothing
// else, and leaves no number a float64 cannot hold.
func FuzzQuoteHugeNumbers(f *testing.F) {
	for _, s := range []string{`{"a":[1e400,2],"s":"1e400 \" 1e999","n":-1E+309}`, `{"s":"a\\","n":1e400}`,
		`{"s":"a\\\"1e400","n":2}`, `[-0.0e-99999,1e308,"\\\\"]`, `{"n":1e400`, `"unterminated 1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, changed := quoteHugeNumbers(in)
		if !changed {
			var v any
			if !bytes.Equal(out, in) {
				t.Fatalf("%q: unchanged, but returned %q", in, out)
			} else if err := json.Unmarshal(in, &v); json.Valid(in) && err != nil {
				t.Fatalf("%q: unchanged, but does not decode: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			return
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%q became %q, which does not decode: %v", in, out, err)
		}
		var orig any
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		if err := dec.Decode(&orig); err != nil {
			t.Fatal(err)
		}
		if want := quotedNumbers(orig); !reflect.DeepEqual(v, want) {
			t.Fatalf("%q became %q: %v, want %v", in, out, v, want)
		}
	})
}

// quotedNumbers is v (decoded with UseNumber) with each number a float64 cannot hold as
// its text, and the others as float64.
func quotedNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return string(v)
		}
		return f
	case []any:
		for i := range v {
			v[i] = quotedNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = quotedNumbers(v[k])
		}
	}
	return v
}

// A legacy SSE client's responses (to the server's keep-alive pings, every 10 s) and its
// notifications are owed no response, so they take none of the session's pending slots:
// after many of them, a call is still answered at once.
func TestSSEResponsesTakeNoSlot(t *testing.T) {
	lim := Limits{Requests: 64, PerTenant: 64, SmallRequests: 64, RequestBytes: 1 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 2, QueuePerTenant: 1, Wait: time.Second}
	url, _ := testGate(t, HTTPOptions{Transport: "sse", Limits: lim}, nil, "")
	_, events, endpoint := openSSE(t, url)
	for i := range 5 {
		for _, body := range []string{
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i),
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		} {
			if resp := post(t, url+endpoint, "", "", body); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("%s: status %d", body, resp.StatusCode)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":"call","method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a call after the responses: %v (its slot never came)", err)
	}
	r.Body.Close()
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"id":"call"`) {
			break
		}
	}
}

// openSSE opens a legacy SSE session (its stream closed when the test ends) and reads its
// message endpoint.
func openSSE(t *testing.T, url string) (*http.Response, *bufio.Reader, string) {
	t.Helper()
	resp, err := http.Get(url + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an SSE session: status %d", resp.StatusCode)
	}
	events := bufio.NewReader(resp.Body)
	return resp, events, sseEndpoint(t, events)
}

// sseEndpoint reads a legacy SSE stream up to its first event, which names the session's
// message endpoint, and returns that.
func sseEndpoint(t testing.TB, events *bufio.Reader) string {
	t.Helper()
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if after, ok := strings.CutPrefix(line, "data: "); ok {
			return strings.TrimSpace(after)
		}
	}
}

// A subscriptions/listen stream opened on a legacy SSE session holds one of the tenant's
// event streams, and ends with its session: mcp-go serves the session's calls on contexts
// that outlive it, so such streams used to run on, unbounded, after their client was gone.
func TestSSEListenStreamsEndWithTheirSession(t *testing.T) {
	lim := Limits{Requests: 64, PerTenant: 64, SmallRequests: 64, RequestBytes: 1 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 8, QueuePerTenant: 1, Wait: time.Second}
	url, s := testGate(t, HTTPOptions{Transport: "sse", Limits: lim}, nil, "")
	listen := `{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourcesListChanged":true}}}`
	for session := range 2 {
		resp, err := http.Get(url + "/sse")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("session %d: status %d (the streams of the one before were not given back)", session, resp.StatusCode)
		}
		events := bufio.NewReader(resp.Body)
		endpoint := sseEndpoint(t, events)
		post(t, url+endpoint, "", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		for id := 1; id <= lim.StreamsPerTenant; id++ {
			want := http.StatusAccepted
			if id == lim.StreamsPerTenant { // the session's own event stream is one
				want = http.StatusServiceUnavailable
			}
			if r := post(t, url+endpoint, "", "", fmt.Sprintf(listen, id)); r.StatusCode != want {
				t.Fatalf("session %d, listen %d: status %d, want %d", session, id, r.StatusCode, want)
			}
		}
		for acks := 0; acks < lim.StreamsPerTenant-1; {
			line, err := events.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, "notifications/subscriptions/acknowledged") {
				acks++
			}
		}
		resp.Body.Close()
		awaitNoWatches(t, s)
	}
}

// A subscriptions/listen request that mcp-go answers at once, or never, instead of starting
// a stream gives back the event stream it took: such requests used to hold it until their
// session ended, so that a few malformed ones left the tenant no stream at all.
func TestSSERefusedListensGiveTheirStreamBack(t *testing.T) {
	lim := Limits{Requests: 64, PerTenant: 64, SmallRequests: 64, RequestBytes: 1 << 20, Streams: 2, StreamsPerTenant: 2, Pending: 8, QueuePerTenant: 1, Wait: time.Second}
	url, s := testGate(t, HTTPOptions{Transport: "sse", Limits: lim}, nil, "")
	resp, events, endpoint := openSSE(t, url)
	// next returns the id of the next response on the stream, or the method of a notification.
	next := func() string {
		for {
			line, err := events.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &msg) == nil {
				return msg.Method + string(msg.ID)
			}
		}
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct{ body, answer string }{
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":[]}`, "1"},
		{`{"jsonrpc":"2.0","id":"two","method":"subscriptions/listen","params":{` + meta + `,"notifications":7}}`, `"two"`},
		{`{"jsonrpc":"1.0","id":3,"method":"subscriptions/listen","params":{` + meta + `}}`, "3"},
		{`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{}}`, "4"},
		{`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, "5"},
		{`{"jsonrpc":"2.0","method":"subscriptions/listen","params":{` + meta + `}}`, ""},
		{`{"jsonrpc":"2.0","id":null,"method":"subscriptions/listen","params":{` + meta + `}}`, ""},
		{`{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","result":{}}`, ""},
	} {
		if r := post(t, url+endpoint, "", "", tc.body); r.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: status %d (the stream of a listen before was not given back)", tc.body, r.StatusCode)
		}
		if tc.answer != "" {
			if got := next(); got != tc.answer {
				t.Fatalf("%s: answered %s", tc.body, got)
			}
		}
	}
	listen := `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{` + meta + `,"notifications":{"resourcesListChanged":true}}}`
	if r := post(t, url+endpoint, "", "", listen); r.StatusCode != http.StatusAccepted {
		t.Fatalf("a listen after the refused ones: status %d", r.StatusCode)
	}
	if got := next(); got != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the listen: %s", got)
	}
	if r := post(t, url+endpoint, "", "", listen); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second listen, over the tenant's streams: status %d", r.StatusCode)
	}
	resp.Body.Close()
	awaitNoWatches(t, s)
}

// A listen stream posted as its session ends gives its slot back at once.
func TestSSEListenAfterTheSessionEnded(t *testing.T) {
	st := &sseStream{pending: make(chan struct{}, 1), listens: map[*sseListen]bool{}}
	released := 0
	st.listen("1", func() { released++ })
	st.end()
	st.listen("1", func() { released++ })
	if released != 2 || len(st.listens) != 0 {
		t.Fatalf("%d slots given back, %d streams held; want 2 and 0", released, len(st.listens))
	}
}

// Whatever mix of calls, subscriptions/listen streams, cancellations and client answers an
// SSE client posts, every request taken is answered once on its stream, with its id, once
// the client has cancelled its streams; and when the session ends, nothing of it stays: no
// stream runs on, and its event streams are given back (the next session opens).
func FuzzSSESession(f *testing.F) {
	f.Add([]byte{1, 1, 2, 0, 3, 1, 4})
	f.Add(bytes.Repeat([]byte{1}, 6))
	f.Add([]byte{1, 7, 12, 1, 0, 5})
	lim := Limits{Requests: 64, PerTenant: 64, SmallRequests: 64, RequestBytes: 1 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 8, QueuePerTenant: 8, Wait: 5 * time.Second}
	url, s := testGate(f, HTTPOptions{Transport: "sse", Limits: lim}, nil, "")
	listen := `{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourcesListChanged":true}}}`
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 30 {
			return
		}
		var resp *http.Response
		// The session before gives its own event stream back just after it ends.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var err error
			if resp, err = http.Get(url + "/sse"); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusOK {
				break
			}
			resp.Body.Close()
			if time.Now().After(deadline) {
				t.Fatalf("a new session: status %d (one before held its event streams)", resp.StatusCode)
			}
		}
		defer resp.Body.Close()
		events := bufio.NewReader(resp.Body)
		endpoint := sseEndpoint(t, events)
		answers := make(chan string, 100)
		go func() {
			defer close(answers)
			for {
				line, err := events.ReadString('\n')
				if err != nil {
					return
				}
				var msg struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &msg) == nil && msg.Method == "" {
					answers <- string(msg.ID)
				}
			}
		}()
		owed := map[string]int{"0": 1}
		post(t, url+endpoint, "", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		var listens []int
		for i, op := range ops {
			id := i + 1
			var body string
			switch op % 5 {
			case 0:
				body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`, id)
			case 1:
				body = fmt.Sprintf(listen, id)
			case 2: // a stream's cancellation
				if len(listens) == 0 {
					continue
				}
				k := int(op/5) % len(listens)
				body = fmt.Sprintf(cancel, listens[k])
				listens = slices.Delete(listens, k, k+1)
			case 3:
				body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id)
			case 4:
				body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)
			}
			r := post(t, url+endpoint, "", "", body)
			switch {
			case r.StatusCode == http.StatusServiceUnavailable && op%5 == 1:
				continue // the tenant's event streams are taken
			case r.StatusCode != http.StatusAccepted:
				t.Fatalf("op %d %s: status %d", i, body, r.StatusCode)
			case op%5 == 1:
				listens = append(listens, id)
			}
			if op%5 != 2 && op%5 != 3 {
				owed[strconv.Itoa(id)]++
			}
		}
		for _, id := range listens {
			post(t, url+endpoint, "", "", fmt.Sprintf(cancel, id))
		}
		for len(owed) > 0 {
			select {
			case id, ok := <-answers:
				if !ok {
					t.Fatalf("the stream ended with %v unanswered", owed)
				}
				if owed[id]--; owed[id] < 0 {
					t.Fatalf("an answer not owed: id %s", id)
				}
				if owed[id] == 0 {
					delete(owed, id)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("unanswered: %v", owed)
			}
		}
		resp.Body.Close()
		awaitNoWatches(t, s)
	})
}

// A client's cancellation marks its streams with that id, and only those, however the id
// is spelled: mcp-go may handle it before the stream it ends has started, and the stream
// then ends once it has.
func TestSSEListenCancelled(t *testing.T) {
	st := &sseStream{pending: make(chan struct{}, 1), listens: map[*sseListen]bool{}}
	a, b, c := st.listen(idKey([]byte(`7`)), func() {}), st.listen(idKey([]byte(`"7"`)), func() {}), st.listen(idKey([]byte(`7`)), func() {})
	st.cancel(idKey([]byte(`7.0`)))
	for _, tc := range []struct {
		l    *sseListen
		want bool
	}{{a, true}, {b, false}, {c, true}} {
		select {
		case <-tc.l.over.Done():
			if !tc.want {
				t.Errorf("stream %s cancelled", tc.l.id)
			}
		default:
			if tc.want {
				t.Errorf("stream %s not cancelled", tc.l.id)
			}
		}
	}
}

// awaitNoWatches waits until the server follows no memory for any client: the session that
// just ended left no stream running.
func awaitNoWatches(t testing.TB, s *Server) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.notify.mu.Lock()
		open := len(s.notify.watches)
		s.notify.mu.Unlock()
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's streams run on after it ended")
		}
	}
}

// Over Streamable HTTP, a message that is no request mcp-go can take is answered as over
// stdio (malformedRequests), with status 400 and the request's id; a notification gets 202
// and an empty body. (A client's response goes on to mcp-go, which matches it with the
// requests it sent.)
func TestHTTPMalformedRequests(t *testing.T) {
	url, _ := testGate(t, HTTPOptions{}, nil, "")
	session := post(t, url+"/mcp", "", "", initBody).Header.Get("Mcp-Session-Id")
	for _, tc := range malformedRequests {
		if readEnvelope([]byte(tc.line)).response {
			continue
		}
		resp, data := call(t, url+"/mcp", session, tc.line)
		status := http.StatusBadRequest
		if tc.want == "" {
			status = http.StatusAccepted
		}
		if resp.StatusCode != status || strings.TrimSpace(string(data)) != tc.want {
			t.Errorf("%s:\n got %d %s\nwant %d %s", tc.line, resp.StatusCode, data, status, tc.want)
		}
	}
}

// A 2025-era request without a session is answered 400, with its id and what to do, as the
// transport specifies; mcp-go's plain 404 would tell the client its session had ended. So
// are a GET (a stream) and a DELETE without one. Initialize needs none, nor does a
// 2026-07-28 request, which has no sessions.
func TestHTTPRequestWithoutSession(t *testing.T) {
	url, _ := testGate(t, HTTPOptions{}, nil, "")
	const want = `"error":{"code":-32600,"message":"Bad Request: no Mcp-Session-Id header: send initialize first, then the session id it returns with every request"}}`
	for body, id := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`:                                                                             "7",
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}`:                                                               `"a"`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`:                                                                     "null",
		`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`: "8",
	} {
		resp, data := call(t, url+"/mcp", "", body)
		if got := `{"jsonrpc":"2.0","id":` + id + `,` + want; resp.StatusCode != http.StatusBadRequest || string(data) != got {
			t.Errorf("%s:\n got %d %s\nwant 400 %s", body, resp.StatusCode, data, got)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest { // a stream's body would not end
			resp.Body.Close()
			t.Errorf("%s without a session: %d, want 400", method, resp.StatusCode)
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(data), "send initialize first") {
			t.Errorf("%s without a session: %s", method, data)
		}
	}
	if resp := post(t, url+"/mcp", "", "", initBody); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize: %d", resp.StatusCode)
	}
	modern := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	resp, data := call(t, url+"/mcp", "", modern, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"memory_view"`) {
		t.Errorf("a 2026-07-28 request: %d %s", resp.StatusCode, data)
	}
}

// A legacy SSE call refused a turn to run (503) gives back the slot it took among the
// responses its stream owes: no response will go out for it, and a session whose slots
// leaked so would wait for good.
func TestSSESlotBackWhenRefusedATurn(t *testing.T) {
	started, block := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), `"block"`) {
			close(started)
			<-block
		}
		w.WriteHeader(http.StatusAccepted)
	})
	lim := Limits{Requests: 1, PerTenant: 1, Wait: time.Hour, SmallRequests: 8, RequestBytes: 1 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 2}
	g := &gate{next: next, opts: HTTPOptions{Limits: lim, MaxRequestBytes: 1 << 20}, budget: newBudget(lim),
		sse: map[string]*sseStream{}, waiting: map[string]*context.CancelFunc{}}
	st := &sseStream{pending: make(chan struct{}, lim.Pending), listens: map[*sseListen]bool{}}
	g.sse["s"] = st
	message := func(body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/message?sessionId=s", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	go g.servePost(httptest.NewRecorder(), message(`{"jsonrpc":"2.0","id":1,"method":"block"}`), "")
	<-started // it holds the one turn, and one slot
	rec := httptest.NewRecorder()
	g.servePost(rec, message(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), "")
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a call with no room to run: %d", rec.Code)
	}
	if n := len(st.pending); n != 1 {
		t.Errorf("%d responses owed, want 1: the refused call kept its slot", n)
	}
	close(block)
}
