package vfs

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// encoded is what the logs' encoder writes for line.
func encoded(t *testing.T, line any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(line); err != nil {
		return "error: " + err.Error()
	}
	return buf.String()
}

// randomVersion is a version with every field chosen at random, strings included.
func randomVersion(r *rand.Rand) Version {
	texts := []string{"", "local", "/memories/a b.md", "<&>", "q\"\\", "\x00\x1f\x7f", "\u2028ü😀", "bad\xff", strings.Repeat("x", 300)}
	pick := func() string { return texts[r.IntN(len(texts))] }
	zones := []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("", -5*3600-30*60), time.FixedZone("", 45), time.FixedZone("", 25*3600)}
	v := Version{
		Seq: r.Uint64N(1 << 40), Time: time.Unix(r.Int64N(1<<35)-1<<34, r.Int64N(1e9)).In(zones[r.IntN(len(zones))]),
		Actor: pick(), Command: pick(), Kind: ChangeKind(pick()), Path: pick(), NewPath: pick(),
		Size: r.Int64N(1<<20) - 10, PrevSize: r.Int64N(3) * r.Int64N(1<<20),
	}
	if r.IntN(2) == 0 {
		v.SHA256 = DigestOf([]byte(pick()))
	}
	if r.IntN(2) == 0 {
		v.Prev = DigestOf([]byte(pick()))
	}
	v.PrevRedacted = r.IntN(4) == 0
	if r.IntN(8) == 0 {
		v.Redacted = &Redaction{By: pick(), Time: v.Time}
	}
	if r.IntN(16) == 0 {
		v.Time = time.Date(10000+r.IntN(5), 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return v
}

// The logs' common lines are written by hand byte for byte as the encoder writes them;
// the others are left to it.
func TestLinesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	handled := 0
	for range 3000 {
		v := randomVersion(r)
		vs := []Version{v, randomVersion(r)}[:1+r.IntN(2)]
		var only []int
		for range r.IntN(3) {
			only = append(only, r.IntN(5))
		}
		var content []walContent
		for range r.IntN(3) {
			b := []byte(nil)
			switch r.IntN(3) {
			case 1:
				b = []byte{}
			case 2:
				b = []byte(strings.Repeat("content\x00\xff", r.IntN(20)))
			}
			content = append(content, walContent{D: DigestOf(b), B: b})
		}
		g := r.Uint64N(1 << 30)
		logLines := []logLine{{G: g, V: &vs[0]}, {Settle: g}, {Settle: g, Partial: true, Only: only}, {History: 1, Epoch: "e"}, {G: g}}
		walLines := []walLine{{G: g, V: vs, C: content}, {G: g}, {Settle: g, Only: only}, {WAL: 3, Boot: "b", Cycle: "c"}, {G: g, Settle: g}}
		for i := range logLines {
			got, ok := appendLogLine([]byte("x"), &logLines[i])
			handled += checkLine(t, &logLines[i], got, ok)
		}
		for i := range walLines {
			got, ok := appendWALLine([]byte("x"), &walLines[i])
			handled += checkLine(t, &walLines[i], got, ok)
		}
	}
	if handled < 10000 {
		t.Errorf("only %d lines written by hand", handled)
	}
}

// checkLine compares what was written by hand after "x" (ok) with the encoder's bytes, or
// checks that nothing was written (a line left to the encoder); it returns 1 for the first.
func checkLine(t *testing.T, line any, got []byte, ok bool) int {
	t.Helper()
	switch {
	case !ok && string(got) != "x":
		t.Fatalf("%+v left to the encoder, but %q written", line, got)
	case ok && string(got) != "x"+encoded(t, line):
		t.Fatalf("%+v:\n got %s\nwant %s", line, got[1:], encoded(t, line))
	case ok:
		return 1
	}
	return 0
}
