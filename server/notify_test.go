package server

import (
	"bufio"
	"context"
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
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(context.Background(), inR, outW, 1<<20)
		outW.Close()
	}()
	type line struct {
		text string
		at   time.Time
	}
	lines := make(chan line, 1000)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- line{sc.Text(), time.Now()}
		}
		close(lines)
	}()
	var notes []time.Time // list_changed arrivals
	call := func(id int, msg string) time.Time {
		t.Helper()
		fmt.Fprintf(inW, msg+"\n", id)
		for {
			select {
			case l := <-lines:
				switch {
				case strings.Contains(l.text, `"notifications/resources/list_changed"`):
					notes = append(notes, l.at)
				case strings.Contains(l.text, fmt.Sprintf(`"id":%d,`, id)):
					if strings.Contains(l.text, `"isError":true`) {
						t.Fatalf("call %d failed: %s", id, l.text)
					}
					return l.at
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no answer to call %d", id)
			}
		}
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
			case l := <-lines:
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
