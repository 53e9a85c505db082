package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var seeds = []string{"", "plain", "a\tb\nc\r\"q\" \\ end", "<b>&amp;</b>", "\x00\x01\x08\x0c\x1f\x7f",
	"line\u2028sep\u2029", "ünï 😀 中文", "bad \xff\xfe utf-8 \xc3", strings.Repeat("x<", 3000)}

// check compares Append with encoding/json, with and without HTML escaping.
func check(t *testing.T, s string) {
	t.Helper()
	want, _ := json.Marshal(s)
	if got := Append([]byte("x"), s, true); string(got) != "x"+string(want) {
		t.Errorf("html %q: got %s, want %s", s, got[1:], want)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	if got := Append(nil, s, false); string(got)+"\n" != buf.String() {
		t.Errorf("text %q: got %s, want %s", s, got, buf.String())
	}
}

func TestAppendAsEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		check(t, s)
	}
	for b := range 256 { // every byte, alone and between letters
		check(t, string([]byte{byte(b)}))
		check(t, "a"+string([]byte{byte(b)})+"z")
	}
}

func FuzzAppendAsEncodingJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(check)
}
