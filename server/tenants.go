package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/memory-mcp/memory-mcp/handlers"
)

// TenantSpec is one entry of the tenants file.
type TenantSpec struct {
	// Name identifies the tenant in logs.
	Name string `json:"name"`
	// TokenSHA256 is the hex SHA-256 of the tenant's bearer token; the token itself is
	// never stored.
	TokenSHA256 string `json:"token_sha256"`
	// Dir is the tenant's memory directory, relative to the storage root; default: Name.
	Dir string `json:"dir,omitempty"`
	// ReadOnly lists only view and refuses every change.
	ReadOnly bool `json:"read_only,omitempty"`
}

var tenantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidTenantName refuses a name the tenants file would refuse.
func ValidTenantName(name string) error {
	if !tenantName.MatchString(name) {
		return fmt.Errorf("name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// ParseTenants reads a tenants file: {"tenants": [TenantSpec, ...]}. Unknown fields are
// errors, so a misspelt "read_only" does not silently grant write access.
func ParseTenants(data []byte) ([]TenantSpec, error) {
	var file struct {
		Tenants []TenantSpec `json:"tenants"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("tenants file: %v", err)
	}
	if len(file.Tenants) == 0 {
		return nil, fmt.Errorf("tenants file lists no tenants")
	}
	names, hashes, dirs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := range file.Tenants {
		t := &file.Tenants[i]
		if err := ValidTenantName(t.Name); err != nil {
			return nil, fmt.Errorf("tenant %d: %v", i+1, err)
		}
		h, err := hex.DecodeString(t.TokenSHA256)
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("tenant %s: token_sha256 must be 64 hex digits (memory-mcp token prints one)", t.Name)
		}
		t.TokenSHA256 = strings.ToLower(t.TokenSHA256)
		if t.Dir == "" {
			t.Dir = t.Name
		}
		if !filepath.IsLocal(t.Dir) || strings.HasPrefix(strings.ToLower(filepath.Base(t.Dir)), ".memory-mcp") {
			return nil, fmt.Errorf("tenant %s: dir %q must be a relative path inside the storage", t.Name, t.Dir)
		}
		t.Dir = filepath.Clean(t.Dir)
		for _, seen := range []struct {
			m    map[string]bool
			key  string
			what string
		}{{names, t.Name, "name"}, {hashes, t.TokenSHA256, "token"}, {dirs, t.Dir, "dir"}} {
			if seen.m[seen.key] {
				return nil, fmt.Errorf("tenant %s: another tenant has the same %s", t.Name, seen.what)
			}
			seen.m[seen.key] = true
		}
	}
	for d := range dirs {
		for other := range dirs {
			if d != other && strings.HasPrefix(other, d+string(filepath.Separator)) {
				return nil, fmt.Errorf("tenant directories %q and %q nest: each tenant needs its own", d, other)
			}
		}
	}
	return file.Tenants, nil
}

// Tenant is a tenant with its memory, as the server uses it.
type Tenant struct {
	Name     string
	hash     [sha256.Size]byte
	Handlers *handlers.Handlers
}

// NewTenant pairs a spec with the handlers over its memory.
func NewTenant(spec TenantSpec, h *handlers.Handlers) Tenant {
	t := Tenant{Name: spec.Name, Handlers: h}
	hex.Decode(t.hash[:], []byte(spec.TokenSHA256))
	return t
}

// NewToken returns a fresh random bearer token and its SHA-256 in hex.
func NewToken() (token, sha string) {
	var b [32]byte
	rand.Read(b[:])
	token = "mmcp_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}

type tenantKey struct{}

func tenantFrom(ctx context.Context) *Tenant {
	t, _ := ctx.Value(tenantKey{}).(*Tenant)
	return t
}

// copyTenant carries the tenant the HTTP layer authenticated into the SDK's request context.
func copyTenant(ctx context.Context, r *http.Request) context.Context {
	if t := tenantFrom(r.Context()); t != nil {
		return context.WithValue(ctx, tenantKey{}, t)
	}
	return ctx
}

// authenticate finds the tenant whose token the request bears. Every tenant's hash is
// compared, in constant time, whatever matches, so timing tells nothing about the tokens.
func (s *Server) authenticate(r *http.Request) *Tenant {
	auth := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return nil
	}
	return s.tenantByToken(strings.TrimSpace(auth[len(prefix):]))
}

// tenantByToken finds the tenant whose token this is.
func (s *Server) tenantByToken(token string) *Tenant {
	sum := sha256.Sum256([]byte(token))
	var found *Tenant
	tenants := *s.tenants.Load()
	for i := range tenants {
		if subtle.ConstantTimeCompare(sum[:], tenants[i].hash[:]) == 1 {
			found = &tenants[i]
		}
	}
	return found
}

// sessionOf returns the MCP session a request belongs to, if it names one.
func sessionOf(r *http.Request) string {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		return id
	}
	return r.URL.Query().Get("sessionId")
}
