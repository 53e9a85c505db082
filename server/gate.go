package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/cors"

	"github.com/memory-mcp/memory-mcp/webui"
)

// gate is everything an HTTP request passes before mcp-go sees it, in this order:
//
//  1. Host and Origin: a request whose Origin is not allowed is refused (403), and on a
//     loopback listener so is one addressed to another host (DNS rebinding). A page of an
//     allowed origin gets the CORS headers a browser needs, its preflight answered here.
//  2. The bearer token, when there are tenants: checked before any byte of the body is
//     read; without a valid one, 401 and the connection is closed.
//  3. Room: a request takes a share of the work-in-flight budget (by count and body size,
//     globally and per tenant), a stream a share of the stream budget; without room, it
//     waits its turn, and beyond the queue gets 503 with Retry-After. A cancellation or a
//     ping takes no turn.
//  4. The body, read whole under a deadline and a size cap (413).
//  5. Writes with a deadline each, so a client that stops reading is disconnected.
type gate struct {
	s        *Server
	next     http.Handler
	cors     http.Handler // answers preflights, adds CORS headers, then serveMCP
	opts     HTTPOptions
	loopback bool
	budget   *budget
	sessions *sessionTable

	mu      sync.Mutex
	sse     map[string]*sseStream                   // legacy SSE sessions by id: their responses not yet sent
	streams map[string]map[*context.CancelFunc]bool // open event streams by tenant, to end them
	waiting map[string]*context.CancelFunc          // calls waiting for their turn, by callKey
}

// callKey names a call of a session (of a tenant) by its id, as notifications/cancelled
// names it; "" for a call that a cancellation cannot name (no session, no id).
func callKey(tenant, session string, id json.RawMessage) string {
	k := idKey(id)
	if session == "" || k == "" {
		return ""
	}
	return tenant + "\x00" + session + "\x00" + k
}

// waitTurn waits for the call's turn to execute (see budget.execute); a cancellation of the
// call by its client meanwhile ends the wait, and cancelled says so: the call never runs.
func (g *gate) waitTurn(r *http.Request, tenant, key string) (ok, cancelled bool) {
	if key == "" {
		return g.budget.execute(r.Context(), tenant), false
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	g.mu.Lock()
	g.waiting[key] = &cancel // a client that sends one id twice at once cancels the later
	g.mu.Unlock()
	ok = g.budget.execute(ctx, tenant)
	g.mu.Lock()
	if g.waiting[key] == &cancel {
		delete(g.waiting, key)
	}
	g.mu.Unlock()
	return ok, !ok && r.Context().Err() == nil && ctx.Err() != nil
}

// cancelWaiting ends the wait of the call a cancellation names, if it waits for its turn.
func (g *gate) cancelWaiting(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cancel := g.waiting[key]; cancel != nil {
		(*cancel)()
	}
}

// smallBodyTimeout is how long a small body may take to arrive.
const smallBodyTimeout = 5 * time.Second

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz", "/readyz":
		g.health(w, r)
		return
	}
	if ui := g.s.ui.Load(); ui != nil && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, webui.Prefix)) {
		// The page checks origins, sessions and CSRF tokens itself (its own origin is
		// allowed, as the MCP endpoint's is not); the Host check is the same.
		if g.loopback && !webui.LoopbackHost(r.Host) && !g.hostAllowed(r.Host) {
			refuse(w, http.StatusForbidden, "Forbidden: this server only answers requests addressed to the local host")
			return
		}
		ui.ServeHTTP(w, r)
		return
	}
	if !g.originAllowed(r) {
		refuse(w, http.StatusForbidden, "Forbidden: requests from this web origin are not allowed (see -allowed-origins)")
		return
	}
	if g.loopback && !webui.LoopbackHost(r.Host) && !g.hostAllowed(r.Host) {
		refuse(w, http.StatusForbidden, "Forbidden: this server only answers requests addressed to the local host")
		return
	}
	g.cors.ServeHTTP(w, r)
}

// newCORS answers a browser's preflight (which carries no token) and lets a page read the
// answers, errors included, for origins the gate allowed: a listed origin, or a local page
// calling a loopback listener.
func newCORS(next http.Handler) http.Handler {
	return cors.New(cors.Options{
		AllowOriginVaryRequestFunc: func(*http.Request, string) (bool, []string) { return true, nil },
		AllowedMethods:             []string{http.MethodGet, http.MethodPost, http.MethodDelete},
		AllowedHeaders:             []string{"*"},
		ExposedHeaders:             []string{mcpserver.HeaderKeySessionID, "Retry-After", "WWW-Authenticate"},
		MaxAge:                     600,
		AllowPrivateNetwork:        true, // a listed public origin may call a server on this machine
	}).Handler(next)
}

// serveMCP serves a request that passed the Host and Origin checks.
func (g *gate) serveMCP(w http.ResponseWriter, r *http.Request) {
	tenant := ""
	if g.s.hasTenants {
		t := g.s.authenticate(r)
		if t != nil && !g.s.ownsSession(t, r, g.sessions) {
			t = nil
		}
		if t == nil {
			g.s.authFailures.Warn().Str("remote", r.RemoteAddr).Str("method", r.Method).Str("path", r.URL.Path).
				Bool("token_sent", r.Header.Get("Authorization") != "").Msg("authentication failed")
			w.Header().Set("WWW-Authenticate", `Bearer realm="memory-mcp"`)
			refuse(w, http.StatusUnauthorized, "Unauthorized: send Authorization: Bearer <token> with a token from the tenants file")
			return
		}
		tenant = t.Name
		r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, t))
	}
	if r.URL.Path == "/mcp" && r.Method != http.MethodPost && r.Header.Get(mcpserver.HeaderKeySessionID) == "" &&
		!mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		// mcp-go would open a stream for a session of its own, which takes a place in the
		// session table and hears nothing (GET), or answer 200 for no session (DELETE).
		refuse(w, http.StatusBadRequest, noSession)
		return
	}
	switch r.Method {
	case http.MethodGet:
		g.serveStream(w, r, tenant)
	case http.MethodPost:
		g.servePost(w, r, tenant)
	default: // DELETE and the like: no body is expected, and none is waited for long
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(smallBodyTimeout))
		g.next.ServeHTTP(&deadlineWriter{ResponseWriter: w, timeout: g.opts.Timeouts.Write, origin: r.Header.Get("Origin")}, r)
	}
}

// endStreams ends the event streams of the named tenants.
func (g *gate) endStreams(tenants []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range tenants {
		for cancel := range g.streams[t] {
			(*cancel)()
		}
	}
}

// hostAllowed reports whether host (with or without a port) is listed in -allowed-hosts.
func (g *gate) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return slices.ContainsFunc(g.opts.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) || strings.EqualFold(a, hostport) })
}

// health answers the probes of a supervisor or load balancer, without authentication and
// revealing nothing: /healthz says the process serves; /readyz that every memory's storage
// answers (503 otherwise).
func (g *gate) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Path == "/healthz" {
		io.WriteString(w, "ok\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if !g.s.ready(ctx) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ready\n")
}

// refuse answers with an error and closes the connection: the rest of the request, if it
// has a body, is not worth reading. (net/http would otherwise read up to 256 KiB of an unread
// body after the handler returns, and wait for it as long as the client stalls; a read
// deadline in the past makes that read end at once.)
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

func busy(w http.ResponseWriter, what string) {
	w.Header().Set("Retry-After", "1")
	refuse(w, http.StatusServiceUnavailable, "Service busy: too many "+what+" in flight; retry shortly")
}

// originAllowed: no Origin (not a browser), a listed origin, or on a loopback listener a
// page served from the local host.
func (g *gate) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if slices.Contains(g.opts.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	return g.loopback && err == nil && u.Host != "" && webui.LoopbackHost(u.Host)
}

// serveStream serves a long-lived event stream (GET /mcp, GET /sse) within the stream
// budget.
func (g *gate) serveStream(w http.ResponseWriter, r *http.Request, tenant string) {
	if !g.budget.stream(tenant) {
		busy(w, "event streams")
		return
	}
	defer g.budget.endStream(tenant)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	g.mu.Lock()
	if g.streams[tenant] == nil {
		g.streams[tenant] = map[*context.CancelFunc]bool{}
	}
	g.streams[tenant][&cancel] = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.streams[tenant], &cancel)
		g.mu.Unlock()
	}()
	dw := &deadlineWriter{ResponseWriter: w, timeout: g.opts.Timeouts.Write, origin: r.Header.Get("Origin")}
	if r.URL.Path == "/sse" {
		dw.sse = g
		defer dw.endSSE()
	}
	g.next.ServeHTTP(dw, r)
}

// servePost reads a request's body within the budget, size cap and deadline, then hands
// it on within the execution budget. A subscriptions/listen request becomes a stream once
// read.
func (g *gate) servePost(w http.ResponseWriter, r *http.Request, tenant string) {
	max := g.opts.MaxRequestBytes
	if r.ContentLength > max {
		refuse(w, http.StatusRequestEntityTooLarge, "Request too large")
		return
	}
	release, ok := g.budget.read(tenant, r.ContentLength, max)
	if !ok {
		busy(w, "requests")
		return
	}
	defer release()

	timeout := g.opts.Timeouts.Body
	if r.ContentLength >= 0 && r.ContentLength <= SmallBody {
		timeout = min(timeout, smallBodyTimeout) // any client sends 64 KiB at once
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(timeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err == nil && int64(len(body)) <= max {
		rc.SetReadDeadline(time.Time{}) // the call may take longer than reading did
	}
	switch {
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			refuse(w, http.StatusRequestTimeout, "Request body not received in time")
			return
		}
		refuse(w, http.StatusBadRequest, "Bad request body")
		return
	case int64(len(body)) > max:
		refuse(w, http.StatusRequestEntityTooLarge, "Request too large")
		return
	}
	e := readEnvelope(body)
	if r.URL.Path == "/mcp" && e.refusal == nil && !e.response && e.method != string(mcp.MethodInitialize) &&
		r.Header.Get(mcpserver.HeaderKeySessionID) == "" && !modernRequest(r, body) {
		// mcp-go would answer 404 "Invalid session ID" in plain text, which a client takes
		// for a session that ended; the transport's answer to a missing session is 400.
		e.refusal = errorResponse(headID(body), mcp.INVALID_REQUEST, noSession)
		e.notification = false
	}
	if e.refusal != nil && r.URL.Path == "/mcp" {
		// Answered here as over stdio, with its id (a legacy SSE client's answers go on
		// its stream, and mcp-go gives them).
		if e.notification {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		data, _ := json.Marshal(e.refusal)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(data)
		return
	}
	if fixed, changed := quoteHugeNumbers(body); changed {
		body = fixed
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	dw := &deadlineWriter{ResponseWriter: w, timeout: g.opts.Timeouts.Write, origin: r.Header.Get("Origin")}

	listen := e.method == string(mcp.MethodSubscriptionsListen)
	if listen && r.URL.Path == "/message" && !owesResponse(body) {
		listen = false // no id, or a result: mcp-go starts no stream for it
	}
	if listen && r.URL.Path != "/message" {
		g.serveStream(w, r, tenant)
		return
	}
	var cancels json.RawMessage // the id of the call a notifications/cancelled ends
	if e.notification && e.method == string(mcp.MethodNotificationCancelled) {
		var n struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		json.Unmarshal(body, &n) // what does not decode names no call
		cancels = n.Params.RequestID
	}
	var owed *sseStream // the SSE session whose slot this call took
	if r.URL.Path == "/message" {
		// The response goes out on the client's SSE stream, after this request has ended:
		// a call waits for room among the responses the stream owes. A listen stream takes
		// one of the tenant's event streams too, as over Streamable HTTP.
		st := g.sseSession(r.URL.Query().Get("sessionId"))
		if st != nil && owesResponse(body) {
			if !st.take(r.Context(), g.opts.Limits) {
				busy(w, "responses waiting for this SSE client")
				return
			}
			owed = st
		}
		switch {
		case st != nil && listen && !g.budget.stream(tenant):
			st.delivered()
			busy(w, "event streams")
			return
		case st != nil && listen:
			l := st.listen(idKey(json.RawMessage(e.id)), func() { g.budget.endStream(tenant) })
			r = r.WithContext(context.WithValue(r.Context(), sseListenKey{}, l))
		case st != nil && cancels != nil:
			st.cancel(idKey(cancels))
		}
	}
	if cancels != nil {
		// It ends a call and waits for nothing: in the queue it would wait behind the very
		// calls it is sent to end. A call still waiting for its turn never runs.
		g.cancelWaiting(callKey(tenant, sessionOf(r), cancels))
		g.next.ServeHTTP(dw, r)
		return
	}
	if e.method == string(mcp.MethodPing) {
		g.next.ServeHTTP(dw, r) // it asks whether the server is there: answered at once, however busy
		return
	}
	ok, cancelled := g.waitTurn(r, tenant, callKey(tenant, sessionOf(r), json.RawMessage(e.id)))
	if !ok {
		if owed != nil {
			owed.delivered() // no response will go out for it
		}
		switch {
		case cancelled && r.URL.Path == "/message":
			w.WriteHeader(http.StatusAccepted)
		case cancelled:
			data, _ := json.Marshal(errorResponse(headID(body), mcp.REQUEST_INTERRUPTED, "Request cancelled by the client before it ran"))
			w.Header().Set("Content-Type", "application/json")
			w.Write(data)
		default:
			busy(w, "requests")
		}
		return
	}
	defer g.budget.done(tenant)
	g.next.ServeHTTP(dw, r)
}

const noSession = "Bad Request: no Mcp-Session-Id header: send initialize first, then the session id it returns with every request"

// modernRequest reports whether a request speaks protocol version 2026-07-28 or later,
// which has no sessions, as mcp-go decides it: by its header or its _meta.
func modernRequest(r *http.Request, body []byte) bool {
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return true
	}
	var head struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	return json.Unmarshal(body, &head) == nil && mcp.IsModernProtocol(head.Params.Meta.ProtocolVersion())
}

// deadlineWriter gives every write of a response a deadline, so a client that stops
// reading is disconnected instead of holding the server's memory, and puts the page's own
// origin, or none, in place of the wildcard Access-Control-Allow-Origin that mcp-go's SSE
// transport sets (the gate decides origins).
// On a legacy SSE stream it also learns the session's id from the endpoint event and counts
// the responses it delivers.
type deadlineWriter struct {
	http.ResponseWriter
	timeout time.Duration
	wrote   bool
	origin  string // the page's allowed origin, "" for none

	sse     *gate
	session string
	stream  *sseStream
}

func (w *deadlineWriter) prepare() {
	if !w.wrote {
		w.wrote = true
		if w.Header().Get("Access-Control-Allow-Origin") == "*" {
			w.Header().Del("Access-Control-Allow-Origin")
			if w.origin != "" {
				w.Header().Set("Access-Control-Allow-Origin", w.origin) // as the gate's CORS set it
			}
		}
	}
	if w.timeout > 0 {
		http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.prepare()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.prepare()
	if w.sse != nil {
		w.watchSSE(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() {
	w.prepare()
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ownsSession reports whether the request may use the session it names: a session belongs
// to the tenant that opened it (a signed Streamable HTTP id says whose it is; a legacy SSE
// session is looked up).
func (s *Server) ownsSession(t *Tenant, r *http.Request, sessions *sessionTable) bool {
	if id := r.Header.Get(mcpserver.HeaderKeySessionID); id != "" {
		if strings.HasPrefix(id, sessionPrefix) && !sessions.verify(id, t.Name) && sessions.verifyAny(id) {
			return false
		}
	}
	id := sessionOf(r)
	if id == "" {
		return true
	}
	owner, ok := s.sessions.Load(id)
	return !ok || owner == t.Name
}

// connTracker closes idle keep-alive connections when more than max connections are open,
// so that parked connections cannot use up the process's file descriptors.
type connTracker struct {
	mu   sync.Mutex
	max  int
	open int
	idle map[net.Conn]time.Time
}

func newConnTracker(max int) *connTracker {
	return &connTracker{max: max, idle: map[net.Conn]time.Time{}}
}

func (c *connTracker) track(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch state {
	case http.StateNew:
		c.open++
		// Close the oldest idle connections beyond the cap (each reports StateClosed), but
		// none that went idle in the last second: its client may be sending on it now.
		for excess := c.open - c.max; excess > 0 && len(c.idle) > 0; excess-- {
			var oldest net.Conn
			var at time.Time
			for ic, t := range c.idle {
				if oldest == nil || t.Before(at) {
					oldest, at = ic, t
				}
			}
			if time.Since(at) < time.Second {
				break
			}
			delete(c.idle, oldest)
			oldest.Close()
		}
	case http.StateIdle:
		c.idle[conn] = time.Now()
	case http.StateActive:
		delete(c.idle, conn)
	case http.StateClosed, http.StateHijacked:
		delete(c.idle, conn)
		c.open--
	}
}
