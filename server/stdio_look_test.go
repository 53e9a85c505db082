package server

import (
	"slices"
	"testing"
	"time"
)

// feed gives r n lines, the i-th taking at(i, look) to come, looked for when r said to
// look, and returns how many were looked for.
func feed(r *lookRule, n int, at func(i int, look bool) time.Duration) (looked int) {
	for i := range n {
		look := r.shouldLook()
		if look {
			looked++
		}
		r.observe(at(i, look), look)
	}
	return looked
}

// every is a client whose every line takes d to come.
func every(d time.Duration) func(int, bool) time.Duration {
	return func(int, bool) time.Duration { return d }
}

func TestLookRule(t *testing.T) {
	const us = time.Microsecond
	t.Run("a client that takes its time", func(t *testing.T) {
		var r lookRule
		if n := feed(&r, lookWindow, every(100*us)); n != 0 {
			t.Errorf("looked for %d lines of the first window, want none", n)
		}
		if n := feed(&r, 10000, every(100*us)); n != 10000 {
			t.Errorf("looked for %d of the next 10000 lines, want all", n)
		}
	})
	t.Run("a client that answers at once", func(t *testing.T) {
		var r lookRule
		if n := feed(&r, 10000, every(3*us)); n != 0 {
			t.Errorf("looked for %d of 10000 lines that came within 3 µs, want none", n)
		}
	})
	t.Run("lines already there now and then", func(t *testing.T) {
		// As the TypeScript client's are: about a quarter there before the worker turns
		// to read (the worker finds them at once), the others 40–160 µs after.
		var r lookRule
		looked := feed(&r, 10000, func(i int, _ bool) time.Duration {
			if i%4 == 0 {
				return 2 * us
			}
			return 80 * us
		})
		if looked < 10000-lookWindow {
			t.Errorf("looked for %d of 10000 lines, want all but the first window's", looked)
		}
	})
	t.Run("a quick client in a slow run", func(t *testing.T) {
		// Waited for, its lines take 60 µs (the worker's own wake-up); looked for, 20 µs:
		// each window of looks rests the looks, twice as long each time.
		var r lookRule
		const lines = 200000
		looked, rests := 0, []int{}
		for range lines {
			look, before := r.shouldLook(), r.rest
			d := 60 * us
			if look {
				looked++
				d = 20 * us
			}
			r.observe(d, look)
			if r.rest > before {
				rests = append(rests, r.rest)
			}
		}
		want := []int{1024, 2048, 4096, 8192, 16384, 32768, 65536, 65536}
		if len(rests) < len(want) || !slices.Equal(rests[:len(want)], want) {
			t.Errorf("rests %v, want them to begin %v", rests, want)
		}
		if looked > lines/100 {
			t.Errorf("looked for %d of %d lines, want at most 1%%", looked, lines)
		}
	})
}
