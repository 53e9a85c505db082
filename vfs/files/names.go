package files

import (
	"strings"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// nameOf is the storage name of the virtual path p (one the history recorded): p relative
// to the root, "" for the root itself.
func nameOf(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, vfs.Root), "/") }

// contentRef is a content a version names: its digest and size.
type contentRef struct {
	sum  vfs.Digest
	size int64
}

// contentsOf returns the contents after and before the version (zero digests where none).
func contentsOf(v *vfs.Version) [2]contentRef {
	return [2]contentRef{{v.SHA256, v.Size}, {v.Prev, v.PrevSize}}
}
