package handlers

import (
	"strings"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// The words for every kind of refused path (docs/behaviour.md §1), with the code each carries.
func TestPathRefusedMessages(t *testing.T) {
	tests := []struct {
		path, want, code string
	}{
		{"/memories/a\x00b", `Error: Path "/memories/a\x00b" contains characters that are not allowed`, CodeInvalidPath},
		{"/memories\\b.txt", `Error: Path "/memories\\b.txt" contains characters that are not allowed`, CodeInvalidPath},
		{"/memoriesX/a", "Error: Path must be /memories or start with /memories/, got: /memoriesX/a", CodeInvalidPath},
		{"", "Error: Path must be /memories or start with /memories/, got: ", CodeInvalidPath},
		{"/memories/../x", "Error: Path /memories/../x would escape /memories directory", CodeEscape},
		{"/memories/%2e%2e/x", "Error: Path /memories/%2e%2e/x would escape /memories directory", CodeEscape},
		{"/memories/" + strings.Repeat("a", 256), "Error: Path /memories/" + strings.Repeat("a", 256) + " is too long: each name may have at most 255 bytes and the whole path at most 4096 bytes", CodeInvalidPath},
	}
	for _, tt := range tests {
		_, err := vfs.Resolve(tt.path)
		if err == nil {
			t.Fatalf("Resolve(%q) accepted", tt.path)
		}
		res := pathRefused(err)
		if !res.IsError || res.Text != tt.want || res.Code != tt.code {
			t.Errorf("Resolve(%q): %+v\nwant %s (%s)", tt.path, res, tt.want, tt.code)
		}
	}
	res := pathRefused(&vfs.PathError{Path: "/memories/projects/con.txt", Kind: vfs.WindowsName, Detail: `"con.txt" is a reserved device name`})
	if want := `Error: Path /memories/projects/con.txt cannot be stored on Windows: "con.txt" is a reserved device name. Choose another name.`; res.Text != want {
		t.Errorf("Windows name: %q\nwant %q", res.Text, want)
	}
}
