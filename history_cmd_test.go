package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// cli runs memory-mcp in this process with args, returning the exit status and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string { return map[string]string{"MEMORY_MCP_LOG_LEVEL": "error"}[k] }
	code := run(context.Background(), args, getenv, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, args...)
	if code != 0 {
		t.Fatalf("memory-mcp %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

type logEntry struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`
	Command string    `json:"command"`
	Kind    string    `json:"kind"`
	Path    string    `json:"path"`
	NewPath string    `json:"new_path"`
	SHA256  *string   `json:"sha256"`
}

func jsonLog(t *testing.T, args ...string) []logEntry {
	t.Helper()
	var out []logEntry
	for _, line := range strings.Split(strings.TrimSpace(mustCLI(t, append([]string{"log", "-json"}, args...)...)), "\n") {
		if line == "" {
			continue
		}
		var e logEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log -json line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// The history subcommands end to end: log (table and JSON, with filters), show, diff,
// restore of a file, of a deleted directory and of the whole store at a time, the undo of
// a restore, and redact.
func TestHistoryCommands(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	r := []string{"-root", root}
	ex := func(input string) { mustCLI(t, append(r, "exec", input)...) }
	ex(`{"command":"create","path":"/memories/notes.md","file_text":"alpha\nbeta\n"}`)                     // 1
	ex(`{"command":"str_replace","path":"/memories/notes.md","old_str":"beta","new_str":"API key: none"}`) // 2
	ex(`{"command":"create","path":"/memories/projects/a.md","file_text":"a\n"}`)                          // 3
	ex(`{"command":"create","path":"/memories/projects/b.md","file_text":"b\n"}`)                          // 4
	ex(`{"command":"rename","old_path":"/memories/notes.md","new_path":"/memories/facts.md"}`)             // 5
	time.Sleep(10 * time.Millisecond)
	mid := time.Now().UTC()
	time.Sleep(10 * time.Millisecond)
	ex(`{"command":"delete","path":"/memories/projects"}`)                                                  // 6
	ex(`{"command":"str_replace","path":"/memories/facts.md","old_str":"API key: none","new_str":"gamma"}`) // 7

	// log: a table, newest first.
	out := mustCLI(t, append(r, "log")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 9 || !strings.HasPrefix(lines[0], "SEQ  TIME") || !strings.HasPrefix(lines[1], "7 ") ||
		!strings.Contains(lines[1], "exec   str_replace  modified /memories/facts.md (12 bytes)") ||
		!strings.Contains(out, "moved /memories/notes.md -> /memories/facts.md") || !strings.Contains(out, "deleted /memories/projects/a.md") {
		t.Errorf("log:\n%s", out)
	}
	// log -json PATH follows the file back through its rename; sha256 is absent for deletions.
	es := jsonLog(t, append(r, "/memories/facts.md")...)
	if len(es) != 4 || es[0].Seq != 7 || es[1].Kind != "moved" || es[1].Path != "/memories/notes.md" || es[1].NewPath != "/memories/facts.md" || es[3].Seq != 1 || es[0].Actor != "exec" || es[0].SHA256 == nil {
		t.Errorf("log -json /memories/facts.md: %+v", es)
	}
	if es := jsonLog(t, append(r, "/memories/projects")...); len(es) != 4 || es[0].SHA256 != nil || es[0].Command != "delete" {
		t.Errorf("log -json /memories/projects: %+v", es)
	}
	if es := jsonLog(t, append(r, "-n", "2")...); len(es) != 2 || es[1].Seq != 6 {
		t.Errorf("log -n 2: %+v", es)
	}
	if es := jsonLog(t, append(r, "-since", mid.Format(time.RFC3339Nano))...); len(es) != 3 {
		t.Errorf("log -since: %+v", es)
	}
	if es := jsonLog(t, append(r, "-until", mid.Format(time.RFC3339Nano), "-actor", "exec")...); len(es) != 5 {
		t.Errorf("log -until -actor: %+v", es)
	}
	if es := jsonLog(t, append(r, "-actor", "local")...); len(es) != 0 {
		t.Errorf("log -actor local: %+v", es)
	}

	// show and diff.
	if out := mustCLI(t, append(r, "show", "/memories/notes.md@1")...); out != "alpha\nbeta\n" {
		t.Errorf("show notes.md@1: %q", out)
	}
	if out := mustCLI(t, append(r, "diff", "/memories/facts.md")...); out != "--- /memories/facts.md@5\n+++ /memories/facts.md@7\n@@ -1,2 +1,2 @@\n alpha\n-API key: none\n+gamma\n" {
		t.Errorf("diff facts.md:\n%s", out)
	}
	if out := mustCLI(t, append(r, "diff", "/memories/notes.md", "1", "2")...); !strings.Contains(out, "-beta\n+API key: none\n") {
		t.Errorf("diff notes.md 1 2:\n%s", out)
	}

	// restore the deleted directory, then undo the restore.
	out = mustCLI(t, append(r, "restore", "/memories/projects@5")...)
	if !strings.HasPrefix(out, "Restored /memories/projects as it was after version 5, as version 8 (undo: memory-mcp restore /memories/projects@7).") ||
		!strings.Contains(out, "created /memories/projects/a.md") {
		t.Errorf("restore projects@5:\n%s", out)
	}
	if data, err := os.ReadFile(filepath.Join(root, "projects", "b.md")); err != nil || string(data) != "b\n" {
		t.Errorf("restored file: %q, %v", data, err)
	}
	mustCLI(t, append(r, "restore", "/memories/projects@7")...)
	if _, err := os.Stat(filepath.Join(root, "projects")); !os.IsNotExist(err) {
		t.Errorf("after the undo, projects is still there: %v", err)
	}
	if out := mustCLI(t, append(r, "restore", "/memories/projects@9")...); !strings.HasPrefix(out, "Nothing to restore") {
		t.Errorf("a restore with nothing to do: %q", out)
	}

	// restore a file to a version.
	mustCLI(t, append(r, "restore", "/memories/facts.md@5")...)
	if data, _ := os.ReadFile(filepath.Join(root, "facts.md")); string(data) != "alpha\nAPI key: none\n" {
		t.Errorf("facts.md after its restore: %q", data)
	}

	// restore the whole store to a time.
	out = mustCLI(t, append(r, "restore", "-at", mid.Format(time.RFC3339Nano))...)
	if !strings.Contains(out, "created /memories/projects/a.md") {
		t.Errorf("restore -at:\n%s", out)
	}
	for name, want := range map[string]string{"facts.md": "alpha\nAPI key: none\n", "projects/a.md": "a\n", "projects/b.md": "b\n"} {
		if data, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(data) != want {
			t.Errorf("after restore -at: %s = %q, %v", name, data, err)
		}
	}

	// redact: refused while facts.md holds the content, done once it no longer does.
	if code, _, errOut := cli(t, append(r, "redact", "/memories/notes.md@2")...); code != 1 || !strings.Contains(errOut, "/memories/facts.md still holds this content") {
		t.Errorf("redact of held content: exit %d, %q", code, errOut)
	}
	ex(`{"command":"str_replace","path":"/memories/facts.md","old_str":"API key: none","new_str":"gamma"}`)
	out = mustCLI(t, append(r, "redact", "/memories/notes.md@2")...)
	if !strings.HasPrefix(out, "Redacted the content of /memories/notes.md@2 from the history (3 versions had it).") {
		t.Errorf("redact: %q", out)
	}
	if code, _, errOut := cli(t, append(r, "show", "/memories/notes.md@2")...); code != 1 || !strings.Contains(errOut, "redacted") {
		t.Errorf("show of a redacted version: exit %d, %q", code, errOut)
	}
	if out := mustCLI(t, append(r, "log", "/memories/notes.md")...); !strings.Contains(out, "[redacted by local at ") {
		t.Errorf("log does not mark the redacted version:\n%s", out)
	}
	objects, _ := os.ReadDir(filepath.Join(root, ".memory-mcp-history", "objects"))
	for _, o := range objects {
		data, _ := os.ReadFile(filepath.Join(root, ".memory-mcp-history", "objects", o.Name()))
		if strings.Contains(string(data), "API key") {
			t.Errorf("the redacted content is still kept in %s", o.Name())
		}
	}
}

// Mistakes get one line and status 2 (usage) or 1 (refused).
func TestHistoryCommandErrors(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	mustCLI(t, "-root", root, "exec", `{"command":"create","path":"/memories/a","file_text":"x"}`)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"show", "/memories/a"}, 2, "show takes one PATH@SEQ"},
		{[]string{"show", "/memories/a@x"}, 2, `"/memories/a@x" is not PATH@SEQ`},
		{[]string{"show", "/memories/a@7"}, 1, "there is no version 7: the versions go up to 1"},
		{[]string{"show", "/etc/passwd@1"}, 1, "is not a memory path"},
		{[]string{"show", "/memories/../x@1"}, 1, "not a valid memory path"},
		{[]string{"diff"}, 2, "diff takes a path and at most two version numbers"},
		{[]string{"diff", "/memories/a", "one"}, 2, `"one" is not a version number`},
		{[]string{"restore", "-at", "yesterday"}, 2, `restore: -at "yesterday": use an RFC 3339 time (2026-11-01T00:00:00Z) or a duration ago (24h)`},
		{[]string{"log", "-sinse", "1h"}, 2, "flag provided but not defined: -sinse (did you mean -since?)"},
		{[]string{"log", "-since", "soon"}, 2, "use an RFC 3339 time"},
		{[]string{"log", "a", "b"}, 2, "log takes at most one path"},
		{[]string{"-backend", "memory", "log"}, 2, "a memory store's history ends with its process"},
		{[]string{"-history=false", "log"}, 1, "keeps no history"},
		{[]string{"-tenant", "alice", "log"}, 2, "-tenant picks a tenant's memory"},
	} {
		args := tt.args
		if args[0] != "-backend" {
			args = append([]string{"-root", root}, args...)
		}
		code, out, errOut := cli(t, args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
}

// -tenant with -tenants picks a tenant's memory; a read-only tenant's history can be read
// but not changed.
func TestHistoryCommandsTenant(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(t.TempDir(), "tenants.json")
	os.WriteFile(file, []byte(`{"tenants":[
		{"name":"alice","token_sha256":"`+strings.Repeat("a", 64)+`"},
		{"name":"bob","token_sha256":"`+strings.Repeat("b", 64)+`","read_only":true}]}`), 0o600)
	ts := []string{"-root", root, "-tenants", file}
	for _, input := range []string{`{"command":"create","path":"/memories/a","file_text":"x"}`, `{"command":"delete","path":"/memories/a"}`} {
		mustCLI(t, append(ts, "-tenant", "alice", "exec", input)...)
		mustCLI(t, "-root", filepath.Join(root, "bob"), "exec", input) // bob's, written by his operator
	}
	if _, err := os.Stat(filepath.Join(root, "alice", ".memory-mcp-history", "log")); err != nil {
		t.Fatalf("alice's history is not in her directory: %v", err)
	}
	if es := jsonLog(t, append(ts, "-tenant", "bob")...); len(es) != 2 || es[0].Actor != "exec" {
		t.Errorf("bob's log: %+v", es)
	}
	if code, _, errOut := cli(t, append(ts, "-tenant", "bob", "restore", "/memories/a@1")...); code != 1 || !strings.Contains(errOut, "read-only") {
		t.Errorf("restore by a read-only tenant: exit %d, %q", code, errOut)
	}
	mustCLI(t, append(ts, "-tenant", "alice", "restore", "/memories/a@1")...)
	if data, _ := os.ReadFile(filepath.Join(root, "alice", "a")); string(data) != "x" {
		t.Errorf("alice's restored file: %q", data)
	}
	if code, _, errOut := cli(t, append(ts, "-tenant", "carol", "log")...); code != 2 || !strings.Contains(errOut, `no tenant "carol"`) {
		t.Errorf("an unknown tenant: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli(t, append(ts, "log")...); code != 2 || !strings.Contains(errOut, "give -tenant NAME") {
		t.Errorf("-tenants without -tenant: exit %d, %q", code, errOut)
	}
}

// Stored strings that hold control characters (an older history, a log edited by hand) are
// printed escaped: they cannot move the operator's cursor or colour the terminal.
func TestLogEscapesControlCharacters(t *testing.T) {
	var out bytes.Buffer
	printLog(&out, []vfs.Version{{
		Seq: 7, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Actor: "evil\n\x1b[31mred\u202e", Command: "create\r",
		Kind: vfs.Moved, Path: "/memories/a\x07", NewPath: "/memories/b\xff",
		Redacted: &vfs.Redaction{By: "x\x1b]0;title\x07", Time: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
	}})
	got := out.String()
	for _, want := range []string{`evil\x0a\x1b[31mred\u202e`, `create\x0d`, `/memories/a\x07 -> /memories/b\xff`, `redacted by x\x1b]0;title\x07`} {
		if !strings.Contains(got, want) {
			t.Errorf("log does not show %s:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\x1b\r\x07\u202e") || strings.Count(got, "\n") != 2 {
		t.Errorf("log prints control characters raw:\n%q", got)
	}
}

// import holds an archive to the store's limits and the secret guard, as the commands hold
// the model, each with the flag that lifts it; a refused import leaves the store empty, so
// the corrected archive then goes in.
func TestImportHeldToLimitsAndSecretGuard(t *testing.T) {
	tmp := t.TempDir()
	archive := func(name string, files map[string]string) string {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		put := func(name, data string) {
			tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg})
			tw.Write([]byte(data))
		}
		put("memory-mcp-export.json", `{"format":1,"history":false}`+"\n")
		for _, f := range slices.Sorted(maps.Keys(files)) {
			put("memories/"+f, files[f])
		}
		tw.Close()
		file := filepath.Join(tmp, name)
		os.WriteFile(file, buf.Bytes(), 0o600)
		return file
	}
	big := archive("big.tar", map[string]string{"a.md": strings.Repeat("a", 3000), "b.md": strings.Repeat("b", 3000)})
	keys := archive("keys.tar", map[string]string{"a.md": "fine\n", "aws.md": "aws_access_key_id = AKIAIOSFODNN7EXAMPLF\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ\n"})
	root := filepath.Join(tmp, "store")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-max-file-bytes", "2000", "import", big}, `"memories/a.md" is 3000 bytes, over the limit of 2000 bytes per memory file (raise -max-file-bytes to import it)`},
		{[]string{"-max-store-bytes", "5000", "import", big}, "over the store's limit of 5000 bytes (raise -max-store-bytes to import them)"},
		{[]string{"import", keys}, "/memories/aws.md holds what looks like an Amazon Web Services access key on line 1; memory files must not store credentials (import with -secrets off to take it anyway)"},
	} {
		code, _, errOut := cli(t, append([]string{"-root", root}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, errOut, c.want)
		}
		if files := memoryFiles(t, root); len(files) > 0 {
			t.Errorf("%v: the refused import left %v", c.args, slices.Collect(maps.Keys(files)))
		}
	}
	mustCLI(t, "-root", root, "-max-store-bytes", "6000", "import", big)
	mustCLI(t, "-root", filepath.Join(tmp, "other"), "-secrets", "off", "import", keys)
}

// restore -at takes a duration ago, as log -since does.
func TestRestoreAtADurationAgo(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	runExec(t, root, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"})
	out := mustCLI(t, "-root", root, "restore", "-at", "10m")
	if !strings.HasPrefix(out, "Restored /memories as it was at ") || !strings.Contains(out, "deleted /memories/a.md") {
		t.Errorf("restore -at 10m: %q", out)
	}
}

// Every subcommand has its own help: its usage, what it does, its flags and the global
// flags it takes, and no others; help works as a command too.
func TestSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, nope []string
	}{
		{[]string{"log", "-help"}, []string{"Usage: memory-mcp [flags] log [-since T]", "-since string", "-root string"}, []string{"-transport", "-max-inflight"}},
		{[]string{"help", "log"}, []string{"Usage: memory-mcp [flags] log [-since T]"}, nil},
		{[]string{"exec", "-help"}, []string{"Usage: memory-mcp [flags] exec JSON|-", "-max-file-bytes int", "-secrets string"}, []string{"-transport", "-since"}},
		{[]string{"ui", "-h"}, []string{"Usage: memory-mcp [flags] ui\n", "-root string"}, []string{"-transport", "-addr"}},
		{[]string{"token", "-help"}, []string{"Usage: memory-mcp [flags] token [NAME]"}, []string{"token:", "-root"}},
		{[]string{"restore", "-help"}, []string{"-at string", "a duration ago (10m)"}, []string{"-since"}},
		{[]string{"help"}, []string{"Usage:\n  memory-mcp [flags]", "-transport string", "memory-mcp [flags] export [-no-history] [-of MOUNT] [FILE]\n"}, nil},
	} {
		code, out, errOut := cli(t, tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
		for _, n := range tc.nope {
			if strings.Contains(out, n) {
				t.Errorf("%v: %q in\n%s", tc.args, n, out)
			}
		}
	}
	if code, _, errOut := cli(t, "help", "nope"); code != 2 || !strings.Contains(errOut, `no help on "nope": the commands are diff, exec, export`) {
		t.Errorf("help nope: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli(t, "-roo", "x"); code != 2 || !strings.Contains(errOut, "-roo (did you mean -root?)") {
		t.Errorf("-roo: exit %d, %q", code, errOut)
	}
}
