package webui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
)

//go:embed assets
var assets embed.FS

// Prefix is where the page is served.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every response: the page's own script and style
// only, no inline script or style, no plugins, no framing, and requests to its own origin
// only. A memory file is always shown as text, and this is the second line of defence.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Limits of the page's requests.
const (
	maxSessions        = 1000           // sessions at once; beyond, the least recently used of the memory with the most ends
	maxSessionsMemory  = 100            // of one memory (a tenant); beyond, its own least recently used ends
	sessionIdle        = 12 * time.Hour // a session unused this long ends
	sessionMaxAge      = 7 * 24 * time.Hour
	maxBusy            = 32               // API requests being served at once
	maxBusyMemory      = 8                // of one memory: a quarter, as on the MCP side
	maxStreams         = 64               // live activity streams at once
	maxStreamsMemory   = 16               // of one memory: a quarter
	maxStreamsPer      = 4                // of one session
	loginBurst         = 20               // logins one client address, or one tenant, may make at once
	loginEvery         = 3 * time.Second  // and then one per this long
	bodyTimeout        = 30 * time.Second // to receive a request's body
	cookieName         = "memory_mcp_ui"
	csrfHeader         = "X-CSRF-Token"
	defaultMaxBodySize = 8 << 20
)

// Config connects the page to the memories it shows.
type Config struct {
	// Login returns the name of the memory a bearer token opens (a tenant's), or false.
	// Nil: only the tokens of login links (LoginLink) are accepted.
	Login func(token string) (memory string, ok bool)
	// Memory returns the handlers of the named memory, or nil when it no longer exists (a
	// tenant removed from the tenants file): its sessions then end.
	Memory func(name string) *handlers.Memory
	// AllowedOrigins are web origins, besides the page's own, whose requests are accepted
	// (the server's -allowed-origins, for a page reached through a proxy that rewrites Host).
	AllowedOrigins []string
	// MaxBodyBytes caps a request body (0: 8 MiB); a file edit larger than this is refused.
	MaxBodyBytes int64
	// WatchInterval is how often a live activity stream checks for changes made by other
	// processes (0: one second).
	WatchInterval time.Duration
	// Logger receives a line per change made on the page and per failed login.
	Logger zerolog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Handler serves the page, its assets and its API under Prefix.
type Handler struct {
	cfg    Config
	static http.Handler
	fails  zerolog.Logger // sampled: failed logins

	mu       sync.Mutex
	sessions map[[sha256.Size]byte]*session // by the digest of the cookie's value
	links    map[[sha256.Size]byte]link     // login links' tokens, by digest
	streams  int                            // live streams
	busy     int                            // API requests being served
	// By memory: its sessions, live streams and API requests being served, so that one
	// tenant cannot take the whole page from the others.
	memSessions, memStreams, memBusy map[string]int
	logins                           buckets // login attempts, by client address and by memory
}

type session struct {
	memory    string
	csrf      string
	created   time.Time
	lastSeen  time.Time
	streams   int
	cancelled chan struct{} // closed when the session ends: its streams end too
}

type link struct {
	memory string
	once   bool
}

// New returns the page's handler.
func New(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxBodySize
	}
	if cfg.WatchInterval <= 0 {
		cfg.WatchInterval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sub, _ := fs.Sub(assets, "assets")
	return &Handler{
		cfg:      cfg,
		static:   http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub)),
		fails:    cfg.Logger.Sample(&zerolog.BurstSampler{Burst: 5, Period: time.Second}),
		sessions: map[[sha256.Size]byte]*session{},
		links:    map[[sha256.Size]byte]link{},

		memSessions: map[string]int{}, memStreams: map[string]int{}, memBusy: map[string]int{},
		logins: buckets{burst: loginBurst, every: loginEvery, m: map[string]bucket{}},
	}
}

// LoginLink returns a path with a fresh token that logs a browser in to the named memory:
// once, or, when once is false, as often as wanted while the process runs.
func (h *Handler) LoginLink(memory string, once bool) string {
	token := randomToken()
	h.mu.Lock()
	h.links[sha256Sum(token)] = link{memory: memory, once: once}
	h.mu.Unlock()
	return Prefix + "login?token=" + url.QueryEscape(token)
}

func sha256Sum(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ServeHTTP serves everything under Prefix. Every response carries the security headers;
// the API needs a session, and a change also the session's CSRF token and a request from
// the page's own origin.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")

	path := r.URL.Path
	if path != Prefix+"api/events" {
		// A client that does not read its response is dropped (the live stream sets its
		// deadline per event).
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(bodyTimeout))
	}
	switch {
	case path == strings.TrimSuffix(Prefix, "/"):
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	case path == Prefix+"login":
		h.linkLogin(w, r)
	case strings.HasPrefix(path, Prefix+"api/"):
		h.api(w, r, strings.TrimPrefix(path, Prefix+"api/"))
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		apiError(w, http.StatusMethodNotAllowed, "only GET here")
	default:
		h.static.ServeHTTP(w, r)
	}
}

// linkLogin exchanges a login link's token for a session cookie, and sends the browser on
// to the page without the token in its address bar.
func (h *Handler) linkLogin(w http.ResponseWriter, r *http.Request) {
	if !h.loginAllowed(w, "address "+clientAddress(r)) {
		return
	}
	memory, ok := h.linkToken(r.URL.Query().Get("token"))
	if !ok {
		h.fails.Warn().Str("remote", r.RemoteAddr).Msg("web page: login link refused")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte("This login link is not valid (any more): a link from memory-mcp ui works once.\nRun memory-mcp ui again: it prints a new link.\n"))
		return
	}
	h.startSession(w, r, memory)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// startSession opens a session on the memory and sets its cookie.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, memory string) {
	id := randomToken()
	now := h.cfg.Now()
	s := &session{memory: memory, csrf: randomToken(), created: now, lastSeen: now, cancelled: make(chan struct{})}
	h.mu.Lock()
	if h.memSessions[memory] >= maxSessionsMemory {
		h.endLocked(h.oldestLocked(memory))
	} else if len(h.sessions) >= maxSessions {
		most := memory
		for m, n := range h.memSessions {
			if n > h.memSessions[most] {
				most = m
			}
		}
		h.endLocked(h.oldestLocked(most))
	}
	h.memSessions[memory]++
	h.sessions[sha256Sum(id)] = s
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
		MaxAge: int(sessionMaxAge / time.Second),
	})
}

func (h *Handler) endLocked(key [sha256.Size]byte) {
	if s, ok := h.sessions[key]; ok {
		close(s.cancelled)
		delete(h.sessions, key)
		if h.memSessions[s.memory]--; h.memSessions[s.memory] <= 0 {
			delete(h.memSessions, s.memory)
		}
	}
}

// oldestLocked returns the key of the memory's least recently used session.
func (h *Handler) oldestLocked(memory string) (oldest [sha256.Size]byte) {
	var at time.Time
	for k, o := range h.sessions {
		if o.memory == memory && (at.IsZero() || o.lastSeen.Before(at)) {
			oldest, at = k, o.lastSeen
		}
	}
	return oldest
}

// hold counts a request being served (or, with stream, a live stream) for the session
// when the page's bound, the memory's share and (for a stream) the session's allow it;
// release gives it back.
func (h *Handler) hold(s *session, stream bool) (release func(), ok bool) {
	total, max, per, perMax := &h.busy, maxBusy, h.memBusy, maxBusyMemory
	if stream {
		total, max, per, perMax = &h.streams, maxStreams, h.memStreams, maxStreamsMemory
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if *total >= max || per[s.memory] >= perMax || stream && s.streams >= maxStreamsPer {
		return nil, false
	}
	*total++
	per[s.memory]++
	if stream {
		s.streams++
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		*total--
		if per[s.memory]--; per[s.memory] <= 0 {
			delete(per, s.memory)
		}
		if stream {
			s.streams--
		}
	}, true
}

// loginAllowed spends one login attempt of the key's (a client address's or a memory's);
// false when its share is spent for now.
func (h *Handler) loginAllowed(w http.ResponseWriter, key string) bool {
	h.mu.Lock()
	wait, ok := h.logins.take(key, h.cfg.Now())
	h.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		apiError(w, http.StatusTooManyRequests, "too many logins; wait a moment and try again")
	}
	return ok
}

// clientAddress is the host part of the request's peer address.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// buckets are token buckets by key: burst at once, then one per every. Past maxBucketKeys
// keys, the ones paid back are forgotten, and if that is not enough, all of them: the map
// stays bounded whatever keys come (a flood from that many addresses at once starts afresh).
// maxBucketKeys bounds the keys buckets remember.
const maxBucketKeys = 10000

type buckets struct {
	burst int
	every time.Duration
	m     map[string]bucket
}

type bucket struct {
	used float64 // attempts not yet paid back
	at   time.Time
}

func (b *buckets) take(key string, now time.Time) (wait time.Duration, ok bool) {
	c := b.m[key]
	c.used = max(0, c.used-float64(now.Sub(c.at))/float64(b.every))
	c.at = now
	if c.used+1 > float64(b.burst) {
		b.m[key] = c
		return time.Duration((c.used + 1 - float64(b.burst)) * float64(b.every)), false
	}
	c.used++
	if len(b.m) >= maxBucketKeys {
		for k, o := range b.m {
			if o.used-float64(now.Sub(o.at))/float64(b.every) <= 0 {
				delete(b.m, k)
			}
		}
		if len(b.m) >= maxBucketKeys {
			clear(b.m)
		}
	}
	b.m[key] = c
	return 0, true
}

// session returns the request's live session and the handlers of its memory.
func (h *Handler) session(r *http.Request) (*session, *handlers.Memory) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	key := sha256Sum(c.Value)
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[key]
	if !ok {
		return nil, nil
	}
	if now.Sub(s.lastSeen) > sessionIdle || now.Sub(s.created) > sessionMaxAge {
		h.endLocked(key)
		return nil, nil
	}
	mem := h.cfg.Memory(s.memory)
	if mem == nil {
		h.endLocked(key) // the tenant was removed
		return nil, nil
	}
	s.lastSeen = now
	return s, mem
}

// EndSessions ends the sessions of the named memories (tenants removed from the tenants
// file) and their live streams.
func (h *Handler) EndSessions(memories []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, s := range h.sessions {
		if slices.Contains(memories, s.memory) {
			h.endLocked(k)
		}
	}
}

// sameOrigin reports whether a request comes from the page itself: its Origin, when sent,
// is the origin the request was addressed to or an allowed one, and Sec-Fetch-Site, when
// sent, says same-origin.
func (h *Handler) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's request: it still needs the cookie and the CSRF token
	}
	if slices.Contains(h.cfg.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) && (u.Scheme == "http" || u.Scheme == "https")
}

// Serve serves the page alone on a loopback listener until ctx is done: memory-mcp ui. A
// request addressed to another host than the local one is refused (DNS rebinding).
func Serve(ctx context.Context, ln net.Listener, h *Handler) error {
	mux := http.NewServeMux()
	mux.Handle(Prefix, h)
	mux.Handle("/", http.RedirectHandler(Prefix, http.StatusSeeOther))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !LoopbackHost(r.Host) {
				w.Header().Set("Content-Security-Policy", CSP)
				http.Error(w, "Forbidden: this page only answers requests addressed to the local host", http.StatusForbidden)
				return
			}
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	h.EndAll()
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutCtx)
	<-done
	return nil
}

// EndAll ends every session and live stream (the server is stopping).
func (h *Handler) EndAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.sessions {
		h.endLocked(k)
	}
}

// LoopbackHost reports whether a Host header names this machine: localhost or a loopback
// address, with or without a port.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiError answers with {"error": msg}.
func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// validToken compares tokens in constant time.
func validToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// errStatus maps an operation's error to a status and a message for the person.
func (h *Handler) errStatus(err error, r *http.Request) (int, string) {
	var refusal *handlers.Refusal
	var bad badRequest
	var partial *handlers.NotRestored
	switch {
	case errors.As(err, &partial): // the rest was restored: say so, and why this mount was not
		status, msg := h.errStatus(partial.Err, r)
		return status, partial.Because(msg)
	case errors.As(err, &bad):
		return http.StatusBadRequest, string(bad)
	case errors.As(err, &refusal) && refusal.Stale:
		return http.StatusConflict, refusal.Msg // the file is not as the person last saw it
	case errors.As(err, &refusal):
		return http.StatusUnprocessableEntity, refusal.Msg // refused as the model's change would be
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "the storage did not answer in time; try again"
	}
	h.cfg.Logger.Error().Err(err).Str("path", r.URL.Path).Msg("web page: storage failure")
	return http.StatusInternalServerError, "the storage failed; the server's log says why"
}
