package server

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// A call that waits (here 100 ms for the storage lock) passes the reading of stdin on only
// once a next line is there, where stdin is a pipe the loop can poll: a client that waits
// for each answer wakes no other worker. Any other reader is passed on unasked.
// (TestStdioCancelAndReadWhileACallWaits checks that a line sent meanwhile is read.)
func TestStdioPassesTheReadingOnForALineOnly(t *testing.T) {
	for _, osPipe := range []bool{true, false} {
		name := map[bool]string{true: "os-pipe", false: "io-pipe"}[osPipe]
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			st, err := vfs.OpenOSStore(root)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			lock, err := vfs.NewOSFs(root)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			s := New(handlers.New(st, handlers.DefaultLimits()), Config{Tools: "split", Version: "test"})

			var inR io.Reader
			var inW io.WriteCloser
			if osPipe {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				inR, inW = r, w
			} else {
				inR, inW = io.Pipe()
			}
			lines, done := serveStdioTest(s, inR)
			call := func(line, id string) string {
				t.Helper()
				if _, err := io.WriteString(inW, line+"\n"); err != nil {
					t.Fatal(err)
				}
				return awaitAnswer(t, lines, id, func(l stdioLine) {
					if strings.Contains(l.text, `"id":`) { // not the notifications
						t.Fatalf("got %s, want the answer to %s", l.text, id)
					}
				}).text
			}
			call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "0")
			io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "2")
			s.handoffs.Store(0) // a slow first call may have passed it on with the notification waiting

			if _, err := lock.LockStorage(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			unlocked := make(chan struct{})
			time.AfterFunc(100*time.Millisecond, func() { lock.UnlockStorage(); close(unlocked) })
			defer func() { <-unlocked }() // before lock.Close
			if a := call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`, "1"); strings.Contains(a, `"isError":true`) {
				t.Fatalf("the call failed: %s", a)
			}
			n := s.handoffs.Load()
			if osPipe && n != 0 {
				t.Errorf("the reading was passed on %d times with nothing to read", n)
			}
			if !osPipe && n == 0 {
				t.Error("the reading of an input that cannot be polled was not passed on")
			}
			inW.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A worker that keeps the reading through a stream of calls yields its thread every
// yieldEvery, so that the runtime's monitor never takes it for a goroutine that runs too
// long (see yieldEvery).
func TestStdioWorkerYieldsBetweenCalls(t *testing.T) {
	s, call, end := initializedStdio(t)
	defer end()
	before := s.yields.Load()
	start := time.Now()
	// 40 ms of calls, and at least four (on a machine slow enough that a call takes 5 ms,
	// each of them yields).
	for i := 1; i <= 4 || time.Since(start) < 8*yieldEvery; i++ {
		id := strconv.Itoa(i)
		call(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`, id)
	}
	elapsed := time.Since(start)
	// Once per yieldEvery at the most, and at least three times (generous: 40 ms of calls
	// make seven or eight yields where calls are quick).
	if n, most := s.yields.Load()-before, int64(elapsed/yieldEvery)+1; n < 3 || n > most {
		t.Errorf("%d yields in %v of calls, want 3 to %d", n, elapsed, most)
	}
}

// A worker that serves a stream of quick calls sets its hand-off timer at most once per
// handoffAfter, not once per call (see handoff): the timer, left set from call to call,
// fires at most once per handoffAfter, and is set again only after it found no call
// running.
func TestStdioHandoffTimerNotSetPerCall(t *testing.T) {
	s, call, end := initializedStdio(t)
	defer end()
	before := s.handoffTimers.Load()
	start := time.Now()
	const calls = 200
	for i := 1; i <= calls; i++ {
		id := strconv.Itoa(i)
		call(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`, id)
	}
	elapsed := time.Since(start)
	n, most := s.handoffTimers.Load()-before, int64(elapsed/handoffAfter)+1
	if n > most {
		t.Errorf("the hand-off timer was set %d times in %v of %d calls, want at most %d", n, elapsed, calls, most)
	}
	if most >= calls {
		t.Logf("calls too slow to tell (%v for %d): the timer may be set for each", elapsed, calls)
	}
}

// The reading worker looks for a quick client's next line before it waits for it in a read
// (see stdioLoop.spin), once the rule has seen the client take its time to answer (see
// lookRule, tested on its own by TestLookRule); a slow client costs at most one such look,
// and an input that cannot be polled none. The look's length is set here so that which
// client counts as quick does not hang on the machine's speed: one that writes its next
// line a millisecond after the answer is quick for 200 ms looks (and takes the rule's
// 30 µs and more), and one that waits 20 ms is slow for 1 ms looks. Each case first sends
// such paced lines, more than the rule's first window, so that the rule would look.
func TestStdioLooksForAQuickClientsLine(t *testing.T) {
	view := func(i int) (string, string) {
		id := strconv.Itoa(i)
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`, id
	}
	const calls = 3 * lookWindow
	paced := func(call func(line, id string), from, n int) {
		for i := from; i < from+n; i++ {
			time.Sleep(time.Millisecond)
			call(view(i))
		}
	}
	t.Run("quick", func(t *testing.T) {
		s, call, end := initializedStdio(t, func(s *Server) { s.stdioPoll = 200 * time.Millisecond })
		defer end()
		paced(call, 1, calls)
		// Every line after the rule's first window was found by looking; generous, for a
		// machine that stalls now and then.
		if in, out := s.spunIn.Load(), s.spunOut.Load(); in < (calls-lookWindow)/2 {
			t.Errorf("%d of %d lines of a quick client found by looking (%d looks found none)", in, calls, out)
		}
	})
	t.Run("slow", func(t *testing.T) {
		s, call, end := initializedStdio(t, func(s *Server) { s.stdioPoll = time.Millisecond })
		defer end()
		paced(call, 1, lookWindow+1) // the rule now says to look
		in0, out0 := s.spunIn.Load(), s.spunOut.Load()
		for i := 1; i <= 10; i++ {
			time.Sleep(20 * time.Millisecond)
			call(view(lookWindow + 1 + i))
		}
		if in, out := s.spunIn.Load()-in0, s.spunOut.Load()-out0; in != 0 || out > 1 {
			t.Errorf("a client that waits 20 ms: %d lines found by looking, %d looks that found none; want 0 and at most 1", in, out)
		}
	})
	t.Run("off", func(t *testing.T) { // Config.StdioPoll 0, as New's zero Config has it
		s, call, end := initializedStdio(t)
		defer end()
		paced(call, 1, calls)
		if in, out := s.spunIn.Load(), s.spunOut.Load(); in+out != 0 {
			t.Errorf("with StdioPoll 0 the input was looked at %d times", in+out)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		st := vfs.NewMemoryStore()
		defer st.Close()
		if s := New(handlers.New(st, handlers.DefaultLimits()), Config{StdioPoll: time.Hour}); s.stdioPoll != MaxStdioPoll {
			t.Errorf("StdioPoll of an hour became %v, want %v", s.stdioPoll, MaxStdioPoll)
		}
	})
	t.Run("not polled", func(t *testing.T) {
		pipe := func() (io.ReadCloser, io.WriteCloser, error) { r, w := io.Pipe(); return r, w, nil }
		s, call, end := initializedStdioOver(t, pipe, func(s *Server) { s.stdioPoll = 200 * time.Millisecond })
		defer end()
		paced(call, 1, calls)
		if in, out := s.spunIn.Load(), s.spunOut.Load(); in+out != 0 {
			t.Errorf("an input that cannot be polled was looked at %d times", in+out)
		}
	})
}

// initializedStdio serves a server on a memory store over an operating system's pipe (or
// another reader, when pipe is given), with a session opened by initialize, and returns
// it, a call that sends a line and waits for the answer with the given id, and end, which
// closes the input and waits for the server. configure, when given, sets the server up
// before it serves.
func initializedStdio(t *testing.T, configure ...func(*Server)) (s *Server, call func(line, id string), end func()) {
	return initializedStdioOver(t, func() (io.ReadCloser, io.WriteCloser, error) { return os.Pipe() }, configure...)
}

// initializedStdioOver is initializedStdio with the input made by pipe.
func initializedStdioOver(t *testing.T, pipe func() (io.ReadCloser, io.WriteCloser, error), configure ...func(*Server)) (s *Server, call func(line, id string), end func()) {
	t.Helper()
	st := vfs.NewMemoryStore()
	s = New(handlers.New(st, handlers.DefaultLimits()), Config{Tools: "split", Version: "test"})
	for _, c := range configure {
		c(s)
	}
	r, w, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	lines, done := serveStdioTest(s, r)
	call = func(line, id string) {
		t.Helper()
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			t.Fatal(err)
		}
		awaitAnswer(t, lines, id, func(stdioLine) {})
	}
	call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "0")
	io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	end = func() {
		w.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
		r.Close()
		st.Close()
	}
	return s, call, end
}

// stdioLine is a line the server wrote, with the time the test read it.
type stdioLine struct {
	text string
	at   time.Time
}

// serveStdioTest serves s over stdio, reading in, and returns the lines it writes as they
// come (closed once its output ends) and what ServeStdio returned.
func serveStdioTest(s *Server, in io.Reader) (<-chan stdioLine, <-chan error) {
	return serveStdioTestCtx(context.Background(), s, in)
}

// serveStdioTestCtx is serveStdioTest until ctx ends.
func serveStdioTestCtx(ctx context.Context, s *Server, in io.Reader) (<-chan stdioLine, <-chan error) {
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(ctx, in, outW, 1<<20)
		outW.Close()
	}()
	lines := make(chan stdioLine, 1000)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- stdioLine{sc.Text(), time.Now()}
		}
		close(lines)
	}()
	return lines, done
}

// awaitAnswer returns the answer to request id, passing the lines before it to other.
func awaitAnswer(t *testing.T, lines <-chan stdioLine, id string, other func(stdioLine)) stdioLine {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("no answer to %s: the output ended", id)
			}
			if strings.Contains(l.text, `"id":`+id+`,`) {
				return l
			}
			other(l)
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %s", id)
		}
	}
}
