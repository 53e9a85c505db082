package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTurns runs two responders in turns: each gets a line with its time per call and its
// ratio to the first.
func TestTurns(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "responder")
	if out, err := exec.Command("go", "build", "-o", bin, "../../testdata/responder").CombinedOutput(); err != nil {
		t.Fatalf("building the responder: %v\n%s", err, out)
	}
	var out strings.Builder
	if err := run([]string{"-rounds", "2", "-calls", "20", "-warm", "5", "a=" + bin, "b=X=1 " + bin}, &out); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^a +[0-9.]+ µs/call  1\.000× a \(per-round ratios 1\.00–1\.00\)\nb +[0-9.]+ µs/call  [0-9.]+× a \(per-round ratios [0-9.]+–[0-9.]+\)\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestTurnsRefuses checks bad arguments and a server that is not there fail with an error.
func TestTurnsRefuses(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"-rounds", "0", "a=/bin/true"},
		{"noname"},
		{"a="},
		{"a=X=1"},
		{"a=" + filepath.Join(t.TempDir(), "missing")},
		{"a=/bin/true"}, // exits at once: no answer to initialize
	} {
		if err := run(args, new(strings.Builder)); err == nil {
			t.Errorf("run(%q): no error", args)
		}
	}
}
