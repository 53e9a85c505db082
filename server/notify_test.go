package server

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// A burst of changes to the list of files is announced at once and once more listEvery
// after the last announcement, not once per change; the last announcement comes after the
// burst's last change, and a change after a quiet listEvery is announced at once again.
func TestListChangedOncePerBurst(t *testing.T) {
	st := vfs.NewMemoryStore()
	defer st.Close()
	s := New(handlers.New(st, handlers.DefaultLimits()), Config{Tools: "split", Version: "test"})
	inR, inW := io.Pipe()
	lines, done := serveStdioTest(s, inR)
	var notes []time.Time // list_changed arrivals
	call := func(id int, msg string) time.Time {
		t.Helper()
		fmt.Fprintf(inW, msg+"\n", id)
		answer := awaitAnswer(t, lines, fmt.Sprint(id), func(l stdioLine) {
			if strings.Contains(l.text, `"notifications/resources/list_changed"`) {
				notes = append(notes, l.at)
			}
		})
		if strings.Contains(answer.text, `"isError":true`) {
			t.Fatalf("call %d failed: %s", id, answer.text)
		}
		return answer.at
	}
	call(0, `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	create := func(id int) time.Time {
		return call(id, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/f`+fmt.Sprint(id)+`.md","file_text":"x"}}}`)
	}
	// wait collects list_changed notifications until none came for twice listEvery.
	wait := func() {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return
				}
				if strings.Contains(l.text, `"notifications/resources/list_changed"`) {
					notes = append(notes, l.at)
				}
			case <-time.After(2*listEvery + 500*time.Millisecond):
				return
			}
		}
	}

	start := time.Now()
	var last time.Time // when the last create was sent: its change comes after
	for id := 1; id <= 40; id++ {
		last = time.Now()
		create(id)
	}
	burst := time.Since(start)
	wait()
	if max := int(burst/listEvery) + 2; len(notes) > max || len(notes) < 1 {
		t.Errorf("40 creates in %v gave %d list_changed, want 1 to %d", burst, len(notes), max)
	}
	if len(notes) > 0 && notes[len(notes)-1].Before(last) {
		t.Errorf("the last list_changed came before the last create was sent: a client re-listing then misses it")
	}

	notes = nil
	answered := create(100)
	wait()
	if len(notes) != 1 || notes[0].Sub(answered) > listEvery/2 {
		t.Errorf("a create after a quiet spell gave list_changed at %v after its answer (%d of them), want one at once", func() time.Duration {
			if len(notes) == 0 {
				return -1
			}
			return notes[0].Sub(answered)
		}(), len(notes))
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
