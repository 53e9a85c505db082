package vfs

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var kinds = map[string]PathErrorKind{"chars": BadCharacters, "root": NotUnderRoot, "escape": Escapes, "toolong": TooLong}

type hostilePath struct {
	kind PathErrorKind
	path string
}

// hostilePaths reads ../testdata/paths/hostile.txt and adds the ones too long to write there.
func hostilePaths(t testing.TB) []hostilePath {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "paths", "hostile.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []hostilePath
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, quoted, _ := strings.Cut(line, " ")
		p, err := strconv.Unquote(quoted)
		if err != nil || kinds[kind] == 0 {
			t.Fatalf("bad line %q: %v", line, err)
		}
		out = append(out, hostilePath{kinds[kind], p})
	}
	return append(out,
		hostilePath{TooLong, "/memories/" + strings.Repeat("a", 256)},
		hostilePath{TooLong, "/memories/" + strings.Repeat("abcdefgh/", 500)},
		hostilePath{TooLong, "/memories/ok/" + strings.Repeat("é", 128)},
		hostilePath{Escapes, "/memories/" + strings.Repeat("../", 1000) + "etc/passwd"},
	)
}

func TestResolveRefusesHostilePaths(t *testing.T) {
	paths := hostilePaths(t)
	if len(paths) < 40 {
		t.Fatalf("only %d hostile paths", len(paths))
	}
	for _, hp := range paths {
		_, err := Resolve(hp.path)
		pe, ok := err.(*PathError)
		if !ok {
			t.Errorf("Resolve(%q) = %v, want a refusal", hp.path, err)
			continue
		}
		if pe.Kind != hp.kind {
			t.Errorf("Resolve(%q): kind %d, want %d (%s)", hp.path, pe.Kind, hp.kind, pe.Error())
		}
		if pe.Path != hp.path {
			t.Errorf("Resolve(%q): the error must carry the path as sent, got %q", hp.path, pe.Path)
		}
	}
}

func TestResolveAccepts(t *testing.T) {
	tests := []struct {
		path, clean, name string
	}{
		{"/memories", "/memories", ""},
		{"/memories/", "/memories", ""},
		{"/memories/.", "/memories", ""},
		{"/memories/x/..", "/memories", ""},
		{"/memories/a/../b.txt", "/memories/b.txt", "b.txt"},
		{"/memories//a", "/memories/a", "a"},
		{"/memories/a/./b", "/memories/a/b", "a/b"},
		{"/memories/%41", "/memories/%41", "%41"},
		{"/memories/100%", "/memories/100%", "100%"},
		{"/memories/%zz", "/memories/%zz", "%zz"},
		{"/memories/café.md", "/memories/café.md", "café.md"},
		{"/memories/日本語/ノート.txt", "/memories/日本語/ノート.txt", "日本語/ノート.txt"},
		{"/memories/.hidden", "/memories/.hidden", ".hidden"},
		{"/memories/..hidden", "/memories/..hidden", "..hidden"},
		{"/memories/a..b", "/memories/a..b", "a..b"},
		{"/memories/a b.txt", "/memories/a b.txt", "a b.txt"},
		{"/memories/emoji 👍.md", "/memories/emoji 👍.md", "emoji 👍.md"},
		{"/memories/.memory", "/memories/.memory", ".memory"},
		{"/memories/" + strings.Repeat("a", 255), "/memories/" + strings.Repeat("a", 255), strings.Repeat("a", 255)},
	}
	for _, tt := range tests {
		p, err := Resolve(tt.path)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tt.path, err)
			continue
		}
		if p.String() != tt.clean || p.Name() != tt.name {
			t.Errorf("Resolve(%q) = %q (name %q), want %q (name %q)", tt.path, p.String(), p.Name(), tt.clean, tt.name)
		}
	}
}

// FuzzResolve checks that whatever Resolve accepts stays inside the root, resolves to itself
// again, and is a name os.Root accepts as local.
func FuzzResolve(f *testing.F) {
	for _, hp := range hostilePaths(f) {
		f.Add(hp.path)
	}
	for _, p := range []string{"/memories", "/memories/a/../b", "/memories/%41", "/memories/.hidden/x", "/memories/日本"} {
		f.Add(p)
	}
	root, err := os.OpenRoot(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, vpath string) {
		p, err := Resolve(vpath)
		if err != nil {
			if _, ok := err.(*PathError); !ok {
				t.Fatalf("Resolve(%q) returned %T, want *PathError", vpath, err)
			}
			return
		}
		name := p.Name()
		if name != "" && !filepath.IsLocal(name) {
			t.Fatalf("Resolve(%q) gives name %q, which is not local", vpath, name)
		}
		for _, elem := range strings.Split(name, "/") {
			if elem == ".." || strings.ContainsAny(elem, "\\\x00") || IsBookkeeping(elem) {
				t.Fatalf("Resolve(%q) gives name %q with element %q", vpath, name, elem)
			}
		}
		if p.String() != Root && !strings.HasPrefix(p.String(), Root+"/") {
			t.Fatalf("Resolve(%q) = %q, outside %s", vpath, p, Root)
		}
		again, err := Resolve(p.String())
		if err != nil || again != p {
			t.Fatalf("Resolve is not idempotent: %q -> %q -> %q, %v", vpath, p, again, err)
		}
		if name != "" {
			if _, err := root.Stat(name); err != nil && unwrapPathErr(err).Error() == "path escapes from parent" {
				t.Fatalf("os.Root says %q (from %q) escapes", name, vpath)
			}
		}
	})
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Windows' name rules are a pure function, checked here on every platform; on Windows,
// Resolve applies them to every element of a path.
func TestWindowsNames(t *testing.T) {
	refused := map[string]string{
		"CON":      `"CON" is a reserved device name`,
		"con.txt":  `"con.txt" is a reserved device name`,
		"Nul.md":   `"Nul.md" is a reserved device name`,
		"aux":      `"aux" is a reserved device name`,
		"COM1":     `"COM1" is a reserved device name`,
		"lpt9.log": `"lpt9.log" is a reserved device name`,
		"COM¹":     `"COM¹" is a reserved device name`,
		"PRN .txt": `"PRN .txt" is a reserved device name`,
		"notes.":   "names may not end with a dot or a space",
		"notes ":   "names may not end with a dot or a space",
		"a<b":      `names may not contain "<"`,
		"a>b":      `names may not contain ">"`,
		"a:b":      `names may not contain ":"`,
		`a"b`:      `names may not contain "\""`,
		"a|b":      `names may not contain "|"`,
		"what?":    `names may not contain "?"`,
		"*.md":     `names may not contain "*"`,
	}
	for name, want := range refused {
		if got := WindowsNameProblem(name); got != want {
			t.Errorf("%q: got %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"notes.md", "CONSOLE.md", "com10", "COM", "lpt", "nul-results", "a.b.c", ".hidden", "console", "com1x"} {
		if got := WindowsNameProblem(name); got != "" {
			t.Errorf("%q refused: %s", name, got)
		}
	}
	_, err := resolve("/memories/projects/con.txt", true)
	if pe, ok := err.(*PathError); !ok || pe.Kind != WindowsName || pe.Detail != `"con.txt" is a reserved device name` {
		t.Errorf("resolve on Windows: %v", err)
	}
	if _, err := resolve("/memories/projects/con.txt", false); err != nil {
		t.Errorf("elsewhere the name is fine: %v", err)
	}
	if _, err := resolve("/memories", true); err != nil {
		t.Errorf("the root: %v", err)
	}
}

// ValidName's quick answer for plain names is the one Resolve gives.
func FuzzValidName(f *testing.F) {
	for _, name := range []string{"notes.md", "..", ".", "...", "a/b", "%2e%2e", ".memory-mcp-x", ".Memory-MCP.lock", "a\\b", "a\nb", "日本", "a\u2215b", strings.Repeat("x", 256), "", "~", "a b"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		_, err := Resolve(Root + "/" + name)
		want := err == nil && name != "" && name != "." && !strings.Contains(name, "/")
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	})
}
