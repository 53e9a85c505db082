package handlers

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkSecretScan scans a mebibyte of ordinary text (no rule's keyword in it) and one of
// prose that contains keywords without credentials, as a 1 MiB create does.
func BenchmarkSecretScan(b *testing.B) {
	var plain, wordy strings.Builder
	for i := 0; plain.Len() < 1<<20; i++ {
		fmt.Fprintf(&plain, "line %d of a one-mebibyte memory file, with nothing secret in it\n", i)
		fmt.Fprintf(&wordy, "line %d: do see https://example.com and the aws docs, ask the npm folks\n", i)
	}
	for _, tc := range []struct {
		name string
		text []byte
	}{{"plain", []byte(plain.String()[:1<<20])}, {"keywords", []byte(wordy.String()[:1<<20])}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				if kind, _, found := findSecret(tc.text, 0, len(tc.text)); found {
					b.Fatal(kind)
				}
			}
		})
	}
}
