package server

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// A tool call over stdio is bounded by the handlers' timeout, which the stdio loop sets
// with the context it cancels the call by: a call that cannot get the storage lock gives
// up with the timeout's error in that time, and the next call works once the lock is free.
func TestStdioCallDeadline(t *testing.T) {
	dir := t.TempDir()
	st, err := vfs.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := vfs.NewOSFs(dir) // another process holding the lock
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s := New(handlers.New(st, handlers.DefaultLimits(), handlers.Timeout(300*time.Millisecond)), Config{Tools: "split", Version: "test"})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lines, done := serveStdioTest(s, r)
	send := func(line string) {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	awaitAnswer(t, lines, "0", func(stdioLine) {})
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	if _, err := other.LockStorage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`)
	answer := awaitAnswer(t, lines, "1", func(stdioLine) {})
	if d := answer.at.Sub(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("the call gave up after %v, want about 300ms", d)
	}
	if want := "Error: Could not create /memories/a.md: " + handlers.ReasonTimeout; !strings.Contains(answer.text, want) || !strings.Contains(answer.text, `"isError":true`) {
		t.Errorf("got %s, want the error %q", answer.text, want)
	}
	other.UnlockStorage()
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`)
	if answer := awaitAnswer(t, lines, "2", func(stdioLine) {}); strings.Contains(answer.text, `"isError":true`) {
		t.Errorf("after the lock is free: %s", answer.text)
	}
	w.Close()
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
	dir := t.TempDir()
	st, err := vfs.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := vfs.NewOSFs(dir) // another process holding the lock
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s := New(handlers.New(st, handlers.DefaultLimits(), handlers.Timeout(time.Minute)), Config{Tools: "split", Version: "test"})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(ctx, r, outW, 1<<20)
		outW.Close()
	}()
	lines := make(chan stdioLine, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- stdioLine{sc.Text(), time.Now()}
		}
		close(lines)
	}()
	io.WriteString(w, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	awaitAnswer(t, lines, "0", func(stdioLine) {})
	io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	if _, err := other.LockStorage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	defer other.UnlockStorage()
	io.WriteString(w, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`+"\n")
	time.Sleep(100 * time.Millisecond) // the call waits for the lock
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
	answer := awaitAnswer(t, lines, "1", func(stdioLine) {})
	if !strings.Contains(answer.text, `"isError":true`) {
		t.Errorf("the stuck call's answer: %s", answer.text)
	}
	// Cancelled at ShutdownTimeout, it is answered then; left running, it would hold
	// ServeStdio a second more, and be answered (if at all) only as that returns.
	if d := answer.at.Sub(start); d > ShutdownTimeout+500*time.Millisecond {
		t.Errorf("the stuck call was answered %v after the stop, want about %v", d, ShutdownTimeout)
	}
}
