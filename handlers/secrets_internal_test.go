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

// TestKeywordHitsEverywhere places each rule's keywords at every offset of texts of many
// lengths (the scan looks at eight positions at a time, then at the tail one by one) and
// holds keywordHits to a plain search for each keyword.
func TestKeywordHitsEverywhere(t *testing.T) {
	c := secretRules()
	want := func(text string) uint64 {
		var hits uint64
		for i, r := range c.rules {
			for _, k := range r.keywords {
				if strings.Contains(text, k) {
					hits |= 1 << i
				}
			}
		}
		return hits
	}
	for _, r := range c.rules {
		for _, k := range r.keywords {
			for size := len(k); size <= len(k)+20; size++ {
				for at := 0; at+len(k) <= size; at++ {
					text := strings.Repeat(".", at) + k + strings.Repeat(".", size-at-len(k))
					if got, w := c.keywordHits([]byte(text)), want(text); got != w {
						t.Fatalf("keywordHits(%q) = %b, want %b", text, got, w)
					}
				}
			}
		}
	}
	for _, text := range []string{"", "a", "aw", "aws", "xox: sk-1 ://"} {
		if got, w := c.keywordHits([]byte(text)), want(text); got != w {
			t.Errorf("keywordHits(%q) = %b, want %b", text, got, w)
		}
	}
}
