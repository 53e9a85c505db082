package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"golang.org/x/tools/txtar"

	"github.com/memory-mcp/memory-mcp/handlers"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// scenarioConfig is the optional "config" section of a scenario.
type scenarioConfig struct {
	MaxViewChars  int   `json:"max_view_chars"`
	MaxFileBytes  int64 `json:"max_file_bytes"`
	MaxStoreBytes int64 `json:"max_store_bytes"`
	// Generate seeds large files: storage name → Count copies of Repeat.
	Generate map[string]struct {
		Repeat string `json:"repeat"`
		Count  int    `json:"count"`
	} `json:"generate"`
	// Fail makes one kind of storage operation fail with an errno name, or "panic".
	Fail *struct {
		Op    string `json:"op"`
		Errno string `json:"errno"`
	} `json:"fail"`
}

// A scenario file (testdata/scenarios/*.txtar) has a comment saying what it checks, then:
//
//	-- config --             optional JSON, see scenarioConfig
//	-- memories/NAME --      the starting tree (NAME ending in "/" is an empty directory)
//	-- call --               one native memory_20250818 input as JSON
//	-- want --               "isError: BOOL", a newline, then the exact text the model gets
//	(more call/want pairs)
//	-- after/NAME --         the tree after the last call (written by -update)
//
// Every section's content loses the one trailing newline the format adds, so a file that
// ends in a newline shows a blank line at its end. A name ending in " (quoted)" holds a Go
// quoted string instead of raw bytes; " (sha256)" holds a size and hash for large files.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../testdata/scenarios/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			runScenario(t, file)
		})
	}
}

type step struct {
	call json.RawMessage
	want string
}

func runScenario(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg scenarioConfig
	seed := map[string][]byte{}
	var steps []step
	wantAfter := map[string][]byte{}
	for _, f := range ar.Files {
		name, data := sectionData(t, f)
		switch {
		case f.Name == "config":
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatalf("config: %v", err)
			}
		case f.Name == "call":
			steps = append(steps, step{call: json.RawMessage(data)})
		case f.Name == "want":
			if len(steps) == 0 || steps[len(steps)-1].want != "" {
				t.Fatalf("a want section must follow its call")
			}
			steps[len(steps)-1].want = string(data)
		case strings.HasPrefix(name, "memories/"):
			seed[strings.TrimPrefix(name, "memories/")] = data
		case strings.HasPrefix(name, "after/"):
			wantAfter[strings.TrimPrefix(name, "after/")] = data
		default:
			t.Fatalf("unknown section %q", f.Name)
		}
	}
	for name, g := range cfg.Generate {
		seed[name] = []byte(strings.Repeat(g.Repeat, g.Count))
	}
	if len(steps) == 0 {
		t.Fatal("scenario has no call")
	}

	var firstGot []string
	var firstTree map[string][]byte
	all := backends()
	if cfg.Fail == nil { // faults are injected through the afero filesystems
		all = append(all, postgresBackend)
	}
	for _, b := range all {
		t.Run(b.name, func(t *testing.T) {
			wrap := noWrap
			if cfg.Fail != nil {
				wrap = func(fsys files.FS) files.FS {
					return &faultFs{FS: fsys, op: cfg.Fail.Op, err: errnos[cfg.Fail.Errno]}
				}
			}
			fx := b.open(t, seed, wrap)
			var lowerHash string
			if fx.lowerDir != "" {
				lowerHash = hashDir(t, fx.lowerDir)
			}
			h := handlers.New(fx.store, handlers.Limits{MaxViewChars: cfg.MaxViewChars, MaxFileBytes: cfg.MaxFileBytes, MaxStoreBytes: cfg.MaxStoreBytes})
			var got []string
			for i, s := range steps {
				var input map[string]any
				if err := json.Unmarshal(s.call, &input); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				res := h.Exec(context.Background(), input)
				out := fmt.Sprintf("isError: %v\n%s", res.IsError, res.Text)
				for _, dir := range fx.hostDirs {
					if strings.Contains(out, dir) || strings.Contains(out, "/host/secret") {
						t.Errorf("call %d: output shows a host path:\n%s", i+1, out)
					}
				}
				got = append(got, out)
				if !*update && out != s.want {
					t.Errorf("call %d %s: result differs (-want +got):\n%s", i+1, s.call, cmp.Diff(s.want, out))
				}
			}
			after := fx.tree(t)
			if !*update {
				if diff := cmp.Diff(wantAfter, canonicalTree(after), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("tree after the calls differs (-want +got):\n%s", diff)
				}
			}
			if fx.lowerDir != "" && hashDir(t, fx.lowerDir) != lowerHash {
				t.Errorf("the overlay's lower directory changed")
			}
			if firstGot == nil {
				firstGot, firstTree = got, after
			} else if diff := cmp.Diff(firstGot, got); diff != "" {
				t.Errorf("backend %s differs from %s (-first +this):\n%s", b.name, backends()[0].name, diff)
			}
		})
	}
	if *update && firstGot != nil {
		rewriteScenario(t, file, ar, firstGot, firstTree)
	}
	if !*update {
		runOnMount(t, cfg, seed, steps, wantAfter)
	}
}

// runOnMount runs a scenario again with its store mounted at /memories/m of an empty main
// store: every path under /memories becomes one under /memories/m, in the calls and in
// the texts wanted. A scenario with a path that would not land in the mount (one the path
// rules refuse, or that cleans to outside it) or that changes /memories itself runs on the
// main store only, and so does one with a view limit (the longer paths move where a text is
// cut).
func runOnMount(t *testing.T, cfg scenarioConfig, seed map[string][]byte, steps []step, wantAfter map[string][]byte) {
	const top = "/memories/m"
	if cfg.MaxViewChars != 0 {
		return
	}
	inputs := make([]map[string]any, len(steps))
	for i, s := range steps {
		if err := json.Unmarshal(s.call, &inputs[i]); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		for _, k := range []string{"path", "old_path", "new_path"} {
			p, ok := inputs[i][k].(string)
			if !ok {
				continue
			}
			vp, err := vfs.Resolve(p)
			if err != nil || p != "/memories" && !strings.HasPrefix(p, "/memories/") || vp.IsRoot() && inputs[i]["command"] != "view" {
				return
			}
			inputs[i][k] = top + strings.TrimPrefix(p, "/memories")
			if q, err := vfs.Resolve(inputs[i][k].(string)); err != nil || q.String() != top && !strings.HasPrefix(q.String(), top+"/") {
				return
			}
		}
	}
	t.Run("mounted", func(t *testing.T) {
		wrap := noWrap
		if cfg.Fail != nil {
			wrap = func(fsys files.FS) files.FS {
				return &faultFs{FS: fsys, op: cfg.Fail.Op, err: errnos[cfg.Fail.Errno]}
			}
		}
		fx := backends()[0].open(t, seed, wrap)
		m := handlers.New(fx.store, handlers.Limits{MaxViewChars: cfg.MaxViewChars, MaxFileBytes: cfg.MaxFileBytes, MaxStoreBytes: cfg.MaxStoreBytes})
		h := handlers.New(files.NewMemoryStore(), handlers.Limits{}, handlers.WithMounts(handlers.Mount{Name: "m", Memory: m}))
		for i, s := range steps {
			res := h.Exec(context.Background(), inputs[i])
			out := fmt.Sprintf("isError: %v\n%s", res.IsError, res.Text)
			if want := underMount(s.want, top); out != want {
				t.Errorf("call %d %v: result differs (-want +got):\n%s", i+1, inputs[i], cmp.Diff(want, out))
			}
		}
		if diff := cmp.Diff(wantAfter, canonicalTree(fx.tree(t)), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("tree after the calls differs (-want +got):\n%s", diff)
		}
	})
}

// underMount rewrites the paths in a text wanted from the main store to those under top.
func underMount(text, top string) string {
	var b strings.Builder
	for {
		i := strings.Index(text, "/memories")
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		rest := text[i+len("/memories"):]
		if rest != "" && (rest[0] == '_' || rest[0] == '-' || unicode.IsLetter(rune(rest[0])) || unicode.IsDigit(rune(rest[0]))) || strings.HasPrefix(rest, " directory") {
			b.WriteString("/memories")
		} else {
			b.WriteString(top)
		}
		text = rest
	}
}

// sectionData decodes a section's name and content per the conventions above.
func sectionData(t *testing.T, f txtar.File) (string, []byte) {
	data := bytes.TrimSuffix(f.Data, []byte("\n"))
	switch {
	case strings.HasSuffix(f.Name, " (quoted)"):
		s, err := strconv.Unquote(string(data))
		if err != nil {
			t.Fatalf("section %q: %v", f.Name, err)
		}
		return strings.TrimSuffix(f.Name, " (quoted)"), []byte(s)
	case strings.HasSuffix(f.Name, " (sha256)"):
		return strings.TrimSuffix(f.Name, " (sha256)"), data
	}
	return f.Name, data
}

// canonicalTree turns a dumped tree into what the after sections hold: large files as a
// size and hash.
func canonicalTree(tree map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for name, data := range tree {
		if len(data) > largeSection {
			sum := sha256.Sum256(data)
			data = []byte(fmt.Sprintf("%d bytes, sha256 %s", len(data), hex.EncodeToString(sum[:])))
		}
		if data == nil {
			data = []byte{}
		}
		out[name] = data
	}
	return out
}

func rewriteScenario(t *testing.T, file string, ar *txtar.Archive, got []string, tree map[string][]byte) {
	var files []txtar.File
	i := 0
	for _, f := range ar.Files {
		switch {
		case f.Name == "want" || strings.HasPrefix(f.Name, "after/"):
			continue
		case f.Name == "call":
			files = append(files, f, txtar.File{Name: "want", Data: []byte(got[i] + "\n")})
			i++
		default:
			files = append(files, f)
		}
	}
	for _, name := range sortedNames(tree) {
		files = append(files, encodeSection("after/"+name, tree[name]))
	}
	ar.Files = files
	if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
}

func encodeSection(name string, data []byte) txtar.File {
	switch {
	case len(data) > largeSection:
		sum := sha256.Sum256(data)
		return txtar.File{Name: name + " (sha256)", Data: []byte(fmt.Sprintf("%d bytes, sha256 %s\n", len(data), hex.EncodeToString(sum[:])))}
	case !utf8.Valid(data) || bytes.Contains(data, []byte("\r")) || bytes.Contains(data, []byte("\n-- ")) || bytes.HasPrefix(data, []byte("-- ")):
		return txtar.File{Name: name + " (quoted)", Data: []byte(strconv.Quote(string(data)) + "\n")}
	}
	return txtar.File{Name: name, Data: append(append([]byte{}, data...), '\n')}
}

// largeSection is the size above which an after section holds a size and hash, not the bytes.
const largeSection = 256
