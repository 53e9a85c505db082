package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// SessionLimits bound the Streamable HTTP sessions (protocol versions up to 2025-11-25;
// 2026-07-28 requests carry none).
type SessionLimits struct {
	// Idle is how long a session lives without a request; then its id is refused (404,
	// and the client starts a new session, as the MCP specification says).
	Idle time.Duration
	// Max and MaxPerTenant cap the sessions; beyond them the least recently used session
	// (of the tenant, or of all) ends to make room.
	Max, MaxPerTenant int
	// Key signs session ids. Replicas that share it can verify each other's ids; empty
	// means a random key of this process.
	Key []byte
	// Store, when set, keeps the sessions where every replica sees them (replicas must
	// share Key too): a session started on one replica is served by all, and one ended on
	// any (deleted, idle, evicted) is ended on all. Nil: this process's memory.
	Store SessionStore
}

// SessionStore keeps the sessions of several replicas. A replica that cannot reach it
// takes a signed id on trust until it can again, and records the sessions it started
// meanwhile once it can.
type SessionStore interface {
	// Add records session id of tenant, used at now; beyond max sessions, or
	// maxPerTenant of the tenant, it removes the least recently used and returns them.
	Add(ctx context.Context, id, tenant string, now time.Time, max, maxPerTenant int) (evicted []string, err error)
	// Touch records a use at now and reports whether id is a session of tenant used within
	// idle (a longer idle one is removed).
	Touch(ctx context.Context, id, tenant string, now time.Time, idle time.Duration) (bool, error)
	// Remove ends session id.
	Remove(ctx context.Context, id string) error
	// Sweep removes the sessions unused since before and returns them.
	Sweep(ctx context.Context, before time.Time) ([]string, error)
}

// storeTimeout bounds each use of a SessionStore.
const storeTimeout = 5 * time.Second

// DefaultSessionLimits: 30 minutes idle, 1,000 sessions, 100 per tenant.
func DefaultSessionLimits() SessionLimits {
	return SessionLimits{Idle: 30 * time.Minute, Max: 1000, MaxPerTenant: 100}
}

// sessionTable issues and checks session ids. An id is "mm1." followed by, in base64url,
// 16 random bytes, the issue time, the first 8 bytes of the tenant's name hash, and an
// HMAC-SHA256 of those, cut to 16 bytes: a forged or altered id fails the signature before
// any lookup, and the tenant it belongs to can be read off it (another replica sharing the
// key can verify it too). A signed id must also be in the table: ids of sessions that were
// deleted, expired or evicted, and those of before a restart, are refused.
type sessionTable struct {
	limits SessionLimits
	now    func() time.Time
	// end terminates a session in mcp-go (its per-session state); called without mu held.
	end func(id string)

	mu        sync.Mutex
	byID      map[string]*sessionEntry
	perTenant map[string]int
	pending   map[string]string // with a Store: sessions started while it was out of reach, and their tenants
}

type sessionEntry struct {
	tenant string
	last   time.Time
}

const sessionPrefix = "mm1."

var errSession = errors.New("unknown or expired session")

func newSessionTable(l SessionLimits, now func() time.Time) *sessionTable {
	if len(l.Key) == 0 {
		l.Key = make([]byte, 32)
		rand.Read(l.Key)
	}
	return &sessionTable{limits: l, now: now, byID: map[string]*sessionEntry{}, perTenant: map[string]int{}, pending: map[string]string{}, end: func(string) {}}
}

func tenantTag(tenant string) []byte {
	h := sha256.Sum256([]byte(tenant))
	return h[:8]
}

func (t *sessionTable) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, t.limits.Key)
	m.Write(payload)
	return m.Sum(nil)[:16]
}

// issue mints and records a session id for tenant, evicting the least recently used
// session when a cap is reached.
func (t *sessionTable) issue(tenant string) string {
	payload := make([]byte, 16+8+8)
	rand.Read(payload[:16])
	binary.BigEndian.PutUint64(payload[16:24], uint64(t.now().Unix()))
	copy(payload[24:], tenantTag(tenant))
	id := sessionPrefix + base64.RawURLEncoding.EncodeToString(append(payload, t.sign(payload)...))

	if t.limits.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		evicted, err := t.limits.Store.Add(ctx, id, tenant, t.now(), t.limits.Max, t.limits.MaxPerTenant)
		if err != nil {
			// Recorded at its next use. At most Max of them wait (the memory a long outage
			// can make the table hold); beyond that, a session ends with the outage and its
			// client starts another.
			t.mu.Lock()
			if len(t.pending) < max(t.limits.Max, 1) {
				t.pending[id] = tenant
			}
			t.mu.Unlock()
		}
		for _, e := range evicted {
			t.end(e)
		}
		return id
	}
	var evicted []string
	t.mu.Lock()
	for t.limits.MaxPerTenant > 0 && t.perTenant[tenant] >= t.limits.MaxPerTenant {
		evicted = append(evicted, t.evictLocked(tenant, true))
	}
	for t.limits.Max > 0 && len(t.byID) >= t.limits.Max {
		evicted = append(evicted, t.evictLocked("", false))
	}
	t.byID[id] = &sessionEntry{tenant: tenant, last: t.now()}
	t.perTenant[tenant]++
	t.mu.Unlock()
	for _, e := range evicted {
		t.end(e)
	}
	return id
}

// evictLocked removes the least recently used session (of tenant, when only is set).
func (t *sessionTable) evictLocked(tenant string, only bool) string {
	var oldest string
	var at time.Time
	for id, e := range t.byID {
		if only && e.tenant != tenant {
			continue
		}
		if oldest == "" || e.last.Before(at) {
			oldest, at = id, e.last
		}
	}
	t.removeLocked(oldest)
	return oldest
}

func (t *sessionTable) removeLocked(id string) {
	if e, ok := t.byID[id]; ok {
		delete(t.byID, id)
		if t.perTenant[e.tenant]--; t.perTenant[e.tenant] <= 0 {
			delete(t.perTenant, e.tenant)
		}
	}
}

// signed returns the payload of a well-formed id signed with this table's key.
func (t *sessionTable) signed(id string) (payload []byte, ok bool) {
	rest, found := strings.CutPrefix(id, sessionPrefix)
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if !found || err != nil || len(raw) != 48 || !hmac.Equal(raw[32:], t.sign(raw[:32])) {
		return nil, false
	}
	return raw[:32], true
}

// verify reports whether id is signed with this table's key and was issued to tenant. It
// does not look at the table.
func (t *sessionTable) verify(id, tenant string) bool {
	payload, ok := t.signed(id)
	return ok && hmac.Equal(payload[24:32], tenantTag(tenant))
}

// verifyAny reports whether id is signed with this table's key, whoever it was issued to.
func (t *sessionTable) verifyAny(id string) bool {
	_, ok := t.signed(id)
	return ok
}

// check refuses an id that is forged, another tenant's, unknown, or idle for too long
// (which ends it); otherwise it records the use.
func (t *sessionTable) check(id, tenant string) error {
	if !t.verify(id, tenant) {
		return errSession
	}
	now := t.now()
	if st := t.limits.Store; st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		ok, err := st.Touch(ctx, id, tenant, now, t.limits.Idle)
		if err != nil {
			return nil // the store is out of reach: the signature vouches for the id meanwhile
		}
		if ok {
			return nil
		}
		t.mu.Lock()
		_, pending := t.pending[id]
		delete(t.pending, id)
		t.mu.Unlock()
		if !pending {
			return errSession
		}
		if _, err := st.Add(ctx, id, tenant, now, t.limits.Max, t.limits.MaxPerTenant); err != nil {
			t.mu.Lock()
			t.pending[id] = tenant
			t.mu.Unlock()
		}
		return nil
	}
	t.mu.Lock()
	e, ok := t.byID[id]
	expired := ok && t.limits.Idle > 0 && now.Sub(e.last) > t.limits.Idle
	switch {
	case !ok:
	case expired:
		t.removeLocked(id)
	default:
		e.last = now
	}
	t.mu.Unlock()
	if expired {
		t.end(id)
	}
	if !ok || expired {
		return errSession
	}
	return nil
}

func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	t.removeLocked(id)
	delete(t.pending, id)
	t.mu.Unlock()
	if t.limits.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		t.limits.Store.Remove(ctx, id)
	}
}

// sweep ends every session idle for longer than the limit.
func (t *sessionTable) sweep() {
	if t.limits.Idle <= 0 {
		return
	}
	now := t.now()
	if t.limits.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		ended, _ := t.limits.Store.Sweep(ctx, now.Add(-t.limits.Idle))
		for _, id := range ended {
			t.end(id)
		}
		return
	}
	var ended []string
	t.mu.Lock()
	for id, e := range t.byID {
		if now.Sub(e.last) > t.limits.Idle {
			t.removeLocked(id)
			ended = append(ended, id)
		}
	}
	t.mu.Unlock()
	for _, id := range ended {
		t.end(id)
	}
}

// sessionManager is the table as mcp-go's SessionIdManager, for one request's tenant.
type sessionManager struct {
	t      *sessionTable
	tenant string
}

func (m sessionManager) Generate() string { return m.t.issue(m.tenant) }
func (m sessionManager) Validate(id string) (bool, error) {
	return false, m.t.check(id, m.tenant)
}
func (m sessionManager) Terminate(id string) (bool, error) {
	m.t.remove(id)
	return false, nil
}

// ResolveSessionIdManager gives each request a manager bound to its tenant.
func (t *sessionTable) ResolveSessionIdManager(r *http.Request) mcpserver.SessionIdManager {
	tenant := ""
	if r != nil {
		if tn := tenantFrom(r.Context()); tn != nil {
			tenant = tn.Name
		}
	}
	return sessionManager{t: t, tenant: tenant}
}

// discardWriter is the response writer of the requests the server makes to itself to end
// a session in mcp-go.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
