package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// waitDone fails the test unless ctx is done within a few seconds with want.
func waitDone(t *testing.T, ctx context.Context, want error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("not done; want %v", want)
	}
	if err := ctx.Err(); !errors.Is(err, want) {
		t.Fatalf("Err() = %v, want %v", err, want)
	}
}

// notDone fails the test if ctx is done.
func notDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("done too soon: %v", ctx.Err())
	default:
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() = %v before it is done", err)
	}
}

// A call's context ends at its deadline, each call at its own, and tells what derives from
// it (a context.WithCancel child, a context.AfterFunc, a value context's child).
func TestCallContextDeadline(t *testing.T) {
	var w callWatch
	defer w.endAll(context.Canceled)
	parent := context.WithValue(context.Background(), testKey{}, "v")
	start := time.Now()
	first := w.start(parent, "1", 200*time.Millisecond)
	if d, ok := first.Deadline(); !ok || d.Sub(start) < 190*time.Millisecond || d.Sub(start) > time.Second {
		t.Errorf("Deadline() = %v, %v; want about 200ms from now", d.Sub(start), ok)
	}
	if first.Value(testKey{}) != "v" {
		t.Error("the parent's values are lost")
	}
	child, cancelChild := context.WithCancel(context.WithValue(first, testKey{}, "w"))
	defer cancelChild()
	direct, cancelDirect := context.WithCancel(first)
	defer cancelDirect()
	ran := make(chan struct{})
	context.AfterFunc(first, func() { close(ran) })
	time.Sleep(100 * time.Millisecond)
	second := w.start(parent, "2", 200*time.Millisecond) // its deadline comes 100ms after first's
	notDone(t, first)
	waitDone(t, first, context.DeadlineExceeded)
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("done after %v, before its deadline", d)
	}
	if !errors.Is(context.Cause(first), context.DeadlineExceeded) {
		t.Errorf("Cause() = %v", context.Cause(first))
	}
	waitDone(t, child, context.DeadlineExceeded)
	waitDone(t, direct, context.DeadlineExceeded)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("context.AfterFunc did not run")
	}
	notDone(t, second)
	waitDone(t, second, context.DeadlineExceeded)
	if d := time.Since(start); d < 290*time.Millisecond {
		t.Errorf("the second call done after %v, before its deadline", d)
	}
	w.end(first)
	w.end(second)
	time.Sleep(50 * time.Millisecond)
	w.mu.Lock()
	armed := w.armed
	w.mu.Unlock()
	if armed {
		t.Error("the timer is still set with no call running")
	}
	// A call started now sets the timer again.
	third := w.start(parent, "3", 50*time.Millisecond)
	waitDone(t, third, context.DeadlineExceeded)
	w.end(third)
}

type testKey struct{}

// notifications/cancelled ends every running call with its id and no other; the end of a
// call releases what derives from it; endAll ends the calls running and those to come.
func TestCallContextCancel(t *testing.T) {
	var w callWatch
	a := w.start(context.Background(), "7", time.Minute)
	b := w.start(context.Background(), "7", time.Minute) // a client reusing an id
	c := w.start(context.Background(), `"7"`, time.Minute)
	none := w.start(context.Background(), "8", 0)
	if _, ok := none.Deadline(); ok {
		t.Error("a call without a timeout has a deadline")
	}
	var stopped atomic.Bool
	stop := context.AfterFunc(c, func() { stopped.Store(true) })
	w.cancelID("7")
	waitDone(t, a, context.Canceled)
	waitDone(t, b, context.Canceled)
	notDone(t, c)
	notDone(t, none)
	if !stop() {
		t.Error("stop() = false for an AfterFunc that has not run")
	}
	w.end(c)
	time.Sleep(10 * time.Millisecond)
	if stopped.Load() {
		t.Error("a stopped AfterFunc ran")
	}
	child, cancel := context.WithCancel(none)
	defer cancel()
	w.endAll(context.Canceled)
	waitDone(t, none, context.Canceled)
	waitDone(t, child, context.Canceled)
	late := w.start(context.Background(), "9", time.Minute)
	waitDone(t, late, context.Canceled)
	ranLate := make(chan struct{})
	context.AfterFunc(late, func() { close(ranLate) })
	select {
	case <-ranLate:
	case <-time.After(5 * time.Second):
		t.Fatal("an AfterFunc on a done call did not run")
	}
}
