package server

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// lockedStdio serves, until ctx ends or its input closes, a server with the given call
// timeout on an os store whose storage lock another process can take (lock and unlock),
// over an operating system's pipe, with a session opened by initialize. send writes a
// line; the server's lines come on lines; done gets what ServeStdio returned; closeInput
// ends its input.
func lockedStdio(t *testing.T, ctx context.Context, timeout time.Duration) (send func(line string), lines <-chan stdioLine, done <-chan error, closeInput func(), lock, unlock func()) {
	t.Helper()
	dir := t.TempDir()
	st, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := files.NewOSFs(dir) // another process, to hold the lock
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	s := New(handlers.New(st, handlers.DefaultLimits(), handlers.Timeout(timeout)), Config{Tools: "split", Version: "test"})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	lines, done = serveStdioTestCtx(ctx, s, r)
	send = func(line string) {
		t.Helper()
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	awaitAnswer(t, lines, "0", func(stdioLine) {})
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	lock = func() {
		t.Helper()
		if _, err := other.LockStorage(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
	unlock = func() { other.UnlockStorage() }
	return send, lines, done, func() { w.Close() }, lock, unlock
}

// createCall is the line of a call with the given id that creates /memories/a.md.
func createCall(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`
}

// A tool call over stdio is bounded by the handlers' timeout, which the stdio loop sets
// with the context it cancels the call by: a call that cannot get the storage lock gives
// up with the timeout's error in that time, and the next call works once the lock is free.
func TestStdioCallDeadline(t *testing.T) {
	send, lines, done, closeInput, lock, unlock := lockedStdio(t, context.Background(), 300*time.Millisecond)
	lock()
	start := time.Now()
	send(createCall("1"))
	answer := awaitAnswer(t, lines, "1", func(stdioLine) {})
	if d := answer.at.Sub(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("the call gave up after %v, want about 300ms", d)
	}
	if want := "Error: Could not create /memories/a.md: " + handlers.ReasonTimeout; !strings.Contains(answer.text, want) || !strings.Contains(answer.text, `"isError":true`) {
		t.Errorf("got %s, want the error %q", answer.text, want)
	}
	unlock()
	send(createCall("2"))
	if answer := awaitAnswer(t, lines, "2", func(stdioLine) {}); strings.Contains(answer.text, `"isError":true`) {
		t.Errorf("after the lock is free: %s", answer.text)
	}
	closeInput()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A stop that finds a call still running after ShutdownTimeout cancels it: the call ends
// with its error answered, and ServeStdio returns.
func TestStdioStopCancelsAStuckCall(t *testing.T) {
	if testing.Short() {
		t.Skip("waits ShutdownTimeout (5 s)")
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	send, lines, done, _, lock, unlock := lockedStdio(t, ctx, time.Minute)
	lock()
	defer unlock()
	send(createCall("1"))
	// Every other slot taken too, and one call more, which waits for a slot until the stop.
	for id := 3; id <= maxStdioRequests+2; id++ {
		send(createCall(fmt.Sprint(id)))
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	awaitAnswer(t, lines, "2", func(stdioLine) {}) // read after the calls: they have begun
	start := time.Now()
	stop()
	var returned time.Time
	select {
	case err := <-done:
		returned = time.Now()
		if err != nil {
			t.Error(err)
		}
	case <-time.After(ShutdownTimeout + 10*time.Second):
		t.Fatal("ServeStdio did not return")
	}
	if d := returned.Sub(start); d < ShutdownTimeout-time.Second {
		t.Errorf("returned after %v, before the shutdown timeout", d)
	}
	answer, stopping := stdioLine{}, 0
	for l := range lines {
		switch {
		case strings.HasPrefix(l.text, `{"jsonrpc":"2.0","id":1,`):
			answer = l
		case strings.HasSuffix(l.text, `"error":{"code":-32000,"message":"Service stopping: the request did not run; send it again once the server is back"}}`):
			stopping++ // the call that waited for a slot (the last one or, as slots come free, one just before it)
		}
	}
	if !strings.Contains(answer.text, `"isError":true`) {
		t.Errorf("the stuck call's answer: %q", answer.text)
	}
	// Cancelled at ShutdownTimeout, it is answered then; left running, it would hold
	// ServeStdio a second more, and be answered (if at all) only as that returns.
	if d := answer.at.Sub(start); d > ShutdownTimeout+500*time.Millisecond {
		t.Errorf("the stuck call was answered %v after the stop, want about %v", d, ShutdownTimeout)
	}
	if stopping != 1 {
		t.Errorf("%d calls were answered that the server stopped before they ran, want the one that waited for a slot", stopping)
	}
}
