package server

import (
	"errors"
	"testing"
)

// Resource URIs percent-encode each path segment as RFC 3986 requires and decode back to
// the same path; URIs that name nothing inside /memories are refused.
func TestResourceURIs(t *testing.T) {
	for path, uri := range map[string]string{
		"/memories/notes.md":           "memory:///memories/notes.md",
		"/memories/a b.md":             "memory:///memories/a%20b.md",
		"/memories/hash#1.md":          "memory:///memories/hash%231.md",
		"/memories/100%.txt":           "memory:///memories/100%25.txt",
		"/memories/why?.md":            "memory:///memories/why%3F.md",
		"/memories/ünï 日本.md":          "memory:///memories/%C3%BCn%C3%AF%20%E6%97%A5%E6%9C%AC.md",
		"/memories/dir x/y+z&w=1;k.md": "memory:///memories/dir%20x/y+z&w=1%3Bk.md", // Go also encodes ";" and ","
		"/memories/a:b@c$,d'e.md":      "memory:///memories/a:b@c$%2Cd%27e.md",
	} {
		if got := fileURI(path); got != uri {
			t.Errorf("fileURI(%q) = %q, want %q", path, got, uri)
		}
		p, err := uriPath(uri)
		if err != nil || p.String() != path {
			t.Errorf("uriPath(%q) = %q, %v; want %q", uri, p.String(), err, path)
		}
	}
	for _, uri := range []string{
		"memory:///memories", "memory:///memories/", "memory:///etc/passwd", "memory:///memories/../etc/passwd",
		"memory:///memories/%2E%2E/x", "memory://host/memories/a.md", "memory:///memories/a.md?x=1",
		"memory:///memories/a.md#top", "file:///memories/a.md", "memory:memories/a.md", "memory:///memories/a%ZZ.md",
		"memory:///memories/a\x00.md",
	} {
		if _, err := uriPath(uri); !errors.Is(err, errNoResource) {
			t.Errorf("uriPath(%q): %v, want a refusal", uri, err)
		}
	}
}
