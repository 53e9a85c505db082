package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
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
	// Mounts place other stores of the storage under the tenant's /memories (besides the
	// mounts of the flags, which every tenant has).
	Mounts []TenantMount `json:"mounts,omitempty"`
}

// TenantMount is one of a tenant's mounts: the store in the storage directory Dir (as a
// tenant's dir), at /memories/Name. Several tenants may mount one store; none may mount a
// tenant's own.
type TenantMount struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

var tenantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidTenantName refuses a name the tenants file would refuse.
func ValidTenantName(name string) error {
	if !tenantName.MatchString(name) {
		return fmt.Errorf("name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// ParseTenants reads a tenants file: {"tenants": [TenantSpec, ...]}. Unknown fields and
// keys given twice are errors, so a misspelt or repeated "read_only" does not silently
// grant write access. Each tenant's dir must be its own directory strictly inside the
// storage: not the storage itself, not the server's bookkeeping, and neither inside nor
// around another tenant's (compared case-folded where the filesystem folds case).
func ParseTenants(data []byte) ([]TenantSpec, error) {
	var file struct {
		Tenants []TenantSpec `json:"tenants"`
	}
	if err := checkJSON(data); err != nil {
		return nil, fmt.Errorf("tenants file: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("tenants file: %v", err)
	}
	if len(file.Tenants) == 0 {
		return nil, fmt.Errorf("tenants file lists no tenants")
	}
	names, hashes := map[string]bool{}, map[string]bool{}
	dirs, dirsShown := map[string]string{}, map[string]string{} // by dirKey: the tenant, the dir as given
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
		t.Dir = filepath.Clean(t.Dir)
		if !insideStorage(t.Dir) {
			return nil, fmt.Errorf("tenant %s: dir %q must be a directory inside the storage, not the storage itself nor the server's own files", t.Name, t.Dir)
		}
		for _, seen := range []struct {
			m    map[string]bool
			key  string
			what string
		}{{names, t.Name, "name"}, {hashes, t.TokenSHA256, "token"}} {
			if seen.m[seen.key] {
				return nil, fmt.Errorf("tenant %s: another tenant has the same %s", t.Name, seen.what)
			}
			seen.m[seen.key] = true
		}
		key := dirKey(t.Dir)
		for other, name := range dirs {
			if nest(key, other) {
				return nil, fmt.Errorf("tenants %s and %s: directories %q and %q are the same or nest: each tenant needs its own, apart from the others", name, t.Name, dirsShown[other], t.Dir)
			}
		}
		dirs[key] = t.Name
		dirsShown[key] = t.Dir
		mountNames := map[string]bool{}
		for j := range t.Mounts {
			m := &t.Mounts[j]
			if err := handlers.ValidMountName(m.Name); err != nil || mountNames[m.Name] {
				return nil, fmt.Errorf("tenant %s: mount %d: a name of one path element, given once (%v)", t.Name, j+1, err)
			}
			mountNames[m.Name] = true
			m.Dir = filepath.Clean(m.Dir)
			if !insideStorage(m.Dir) {
				return nil, fmt.Errorf("tenant %s: mount %s: dir %q must be a directory inside the storage, not the storage itself nor the server's own files", t.Name, m.Name, m.Dir)
			}
		}
	}
	// A mount never reaches a tenant's own memory: its directory is apart from every one.
	for _, t := range file.Tenants {
		for _, m := range t.Mounts {
			key := dirKey(m.Dir)
			for other, name := range dirs {
				if nest(key, other) {
					return nil, fmt.Errorf("tenant %s: mount %s: directory %q is tenant %s's memory or nests with it (%q): a mount needs a directory of its own", t.Name, m.Name, m.Dir, name, dirsShown[other])
				}
			}
		}
	}
	return file.Tenants, nil
}

// insideStorage reports whether dir (cleaned) is a directory inside the storage: not the
// storage itself, and not the server's own files.
func insideStorage(dir string) bool {
	return dir != "." && filepath.IsLocal(dir) && !slices.ContainsFunc(strings.Split(filepath.ToSlash(dir), "/"), vfs.IsBookkeeping)
}

// nest reports whether two directory keys are the same or one holds the other.
func nest(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// foldsCase is whether the storage's filesystem takes names that differ only in case for
// one name: the default ones of macOS and Windows do.
var foldsCase = runtime.GOOS == "darwin" || runtime.GOOS == "windows"

// dirKey is what two tenant directories are compared by: slashes, and folded case where
// the filesystem folds it.
func dirKey(dir string) string {
	key := filepath.ToSlash(dir)
	if foldsCase {
		key = strings.ToLower(key)
	}
	return key
}

// checkJSON refuses what encoding/json lets through or words poorly: a syntax error is
// named by line and column, and an object key given twice is refused (the decoder keeps
// the last, silently).
func checkJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			var keys []string
			for dec.More() {
				at := dec.InputOffset()
				for at < int64(len(data)) && bytes.IndexByte([]byte(" \t\r\n,"), data[at]) >= 0 {
					at++
				}
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := k.(string)
				// encoding/json matches field names as strings.EqualFold does ('ſ' is 's').
				if slices.ContainsFunc(keys, func(k string) bool { return strings.EqualFold(k, key) }) {
					return fmt.Errorf("%s: the key %q is given twice in one object", position(data, at), key)
				}
				keys = append(keys, key)
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	err := walk()
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("%s: %v", position(data, syn.Offset), err)
	}
	return err
}

// Tenant is a tenant with its memory, as the server uses it.
type Tenant struct {
	Name   string
	hash   [sha256.Size]byte
	Memory *handlers.Memory
}

// NewTenant pairs a spec with the handlers over its memory.
func NewTenant(spec TenantSpec, h *handlers.Memory) Tenant {
	t := Tenant{Name: spec.Name, Memory: h}
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

// position names the line and column (both from 1) of a byte offset in data.
func position(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
