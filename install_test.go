package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// -version prints the version, commit, build date and Go version; the release build stamps
// them, and a build from a checkout takes them from what Go recorded.
func TestVersionOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-version"}, func(string) string { return "" }, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := regexp.MustCompile(`^memory-mcp \S+ \(commit \S+, built \S+, ` + regexp.QuoteMeta(runtime.Version()) + `, ` + regexp.QuoteMeta(jsonBuild()) + `\)\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("got %q", out.String())
	}

	version, commit, date = "v1.2.3", "0123abc", "2026-11-22T10:00:00Z"
	defer func() { version, commit, date = "", "", "" }()
	out.Reset()
	run(context.Background(), []string{"-version"}, func(string) string { return "" }, nil, &out, &errOut)
	if got, want := out.String(), "memory-mcp v1.2.3 (commit 0123abc, built 2026-11-22T10:00:00Z, "+runtime.Version()+", "+jsonBuild()+")\n"; got != want {
		t.Errorf("stamped: got %q, want %q", got, want)
	}

	// The test binary's build: a checkout records its revision; the JSON it says is the
	// one it was built with.
	cmd := exec.Command(binary, "-version")
	data, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(data), "memory-mcp ") {
		t.Errorf("binary: %q %v", data, err)
	}
	v2 := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "v2"), ".")
	v2.Env = append(os.Environ(), "GOEXPERIMENT=jsonv2")
	if out, err := v2.CombinedOutput(); err != nil {
		t.Fatalf("build with jsonv2: %v\n%s", err, out)
	}
	if data, err := exec.Command(v2.Args[3], "-version").Output(); err != nil || !strings.Contains(string(data), ", encoding/json v2 (GOEXPERIMENT=jsonv2))") {
		t.Errorf("a jsonv2 build's -version: %q %v", data, err)
	}
}

// A -root (or -lower, -tenants, -instructions) that starts with ~/ is under the home
// directory: client configurations are JSON, where no shell expands it.
func TestHomeExpansion(t *testing.T) {
	home := t.TempDir()
	getenv := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-root", "~/memories", "exec", `{"command":"create","path":"/memories/a.md","file_text":"x"}`}, getenv, nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	if _, err := os.Stat(filepath.Join(home, "memories", "a.md")); err != nil {
		t.Errorf("not under the home directory: %v", err)
	}
	for in, want := range map[string]string{"~/a/b": filepath.Join(home, "a", "b"), "~": home, "/abs/~/x": "/abs/~/x", "~user/x": "~user/x", "rel": "rel"} {
		if got := expandHome(in, getenv); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// memory-mcp token refuses a name the tenants file would refuse.
func TestTokenName(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"token", "no spaces please"}, func(string) string { return "" }, nil, &out, &errOut); code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), `name "no spaces please" must be`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"token", "ci-bot.2"}, func(string) string { return "" }, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), `"name":"ci-bot.2"`) {
		t.Errorf("a valid name: exit %d, %q", code, out.String())
	}
}
