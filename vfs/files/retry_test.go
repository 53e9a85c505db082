package files

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A rename or removal that another program blocks for a moment (Windows) is tried again,
// waiting longer each time, for about two seconds; any other failure returns at once.
func TestRetryWhileHeld(t *testing.T) {
	errHeld, errOther := errors.New("held open"), errors.New("denied for good")
	for _, tc := range []struct {
		name   string
		fails  []error // what the tries return before they succeed
		want   error
		sleeps int
	}{
		{"succeeds", nil, nil, 0},
		{"held twice", []error{errHeld, errHeld}, nil, 2},
		{"refused", []error{errOther, errHeld}, errOther, 0},
		{"held, then refused", []error{errHeld, errOther}, errOther, 1},
		{"held throughout", slices.Repeat([]error{errHeld}, 20), errHeld, len(heldWaits)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			var slept []time.Duration
			err := retryWhile(func() error {
				tries++
				if tries <= len(tc.fails) {
					return tc.fails[tries-1]
				}
				return nil
			}, func(err error) bool { return err == errHeld }, func(d time.Duration) { slept = append(slept, d) })
			if err != tc.want || len(slept) != tc.sleeps || tries != tc.sleeps+1 {
				t.Errorf("error %v after %d tries and waits %v, want %v after %d waits", err, tries, slept, tc.want, tc.sleeps)
			}
			if !slices.Equal(slept, heldWaits[:len(slept)]) {
				t.Errorf("waits %v, want the first of %v", slept, heldWaits)
			}
		})
	}
	var total time.Duration
	for _, w := range heldWaits {
		total += w
	}
	if total < time.Second || total > 3*time.Second {
		t.Errorf("the waits add up to %v, want about two seconds", total)
	}
}
