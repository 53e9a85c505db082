package webui

import (
	"fmt"
	"testing"
	"time"
)

// Login attempts are paced per key, and the keys remembered stay bounded however many
// come at once.
func TestBucketsBounded(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	b := buckets{burst: 2, every: time.Second, m: map[string]bucket{}}
	for i, want := range []bool{true, true, false} {
		if _, ok := b.take("a", now); ok != want {
			t.Errorf("attempt %d at once: %v, want %v", i+1, ok, want)
		}
	}
	if _, ok := b.take("a", now.Add(time.Second)); !ok {
		t.Error("an attempt after the wait was refused")
	}
	for i := range 3 * maxBucketKeys {
		b.take(fmt.Sprint("addr-", i), now)
		if len(b.m) > maxBucketKeys {
			t.Fatalf("%d keys remembered after %d new ones", len(b.m), i+1)
		}
	}
}
