package server

import (
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
