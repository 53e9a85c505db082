package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// queuedUntil waits until n requests wait in b's queue.
func queuedUntil(b *budget, n int) {
	for {
		b.mu.Lock()
		q := b.queued
		b.mu.Unlock()
		if q == n {
			return
		}
		runtime.Gosched()
	}
}

// Requests beyond the running bound wait their turn: first come, first served within a
// tenant, and tenants take turns; a full queue, or a wait past its bound, is refused.
func TestBudgetQueue(t *testing.T) {
	b := newBudget(Limits{Requests: 1, PerTenant: 1, Queue: 3, QueuePerTenant: 2, Wait: time.Hour})
	ctx := context.Background()
	if !b.execute(ctx, "a") {
		t.Fatal("the first request waited")
	}
	served := make(chan string, 3)
	for i, who := range []string{"a1", "a2", "b1"} {
		go func() {
			if b.execute(ctx, who[:1]) {
				served <- who
			}
		}()
		queuedUntil(b, i+1)
	}
	if b.execute(ctx, "a") {
		t.Error("a third request of a tenant with two waiting was not refused")
	}
	var order []string
	tenant := "a"
	for range 3 {
		b.done(tenant)
		who := <-served
		order = append(order, who)
		tenant = who[:1]
	}
	if got := strings.Join(order, " "); got != "a1 b1 a2" {
		t.Errorf("served %s, want a1 b1 a2 (tenants in turn, each in order)", got)
	}
	b.done(tenant)

	// A wait past the bound, or an ended context, gives up and leaves the queue.
	b = newBudget(Limits{Requests: 1, PerTenant: 1, Queue: 4, QueuePerTenant: 4, Wait: time.Millisecond})
	b.execute(ctx, "a")
	if b.execute(ctx, "a") {
		t.Error("a wait past the bound was granted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	b.limits.Wait = time.Hour
	if b.execute(cctx, "a") {
		t.Error("a wait whose request ended was granted")
	}
	if b.queued != 0 || len(b.turns) != 0 || len(b.waiting) != 0 {
		t.Errorf("requests that gave up are still queued: %d, %v, %v", b.queued, b.turns, b.waiting)
	}
}

// Over HTTP: while one call runs and one waits, a third gets 503 with Retry-After; the
// two are served once the store is free.
func TestQueueFullGets503(t *testing.T) {
	_, url, session, release := oneCallAtATime(t, 1)
	answers := make(chan answer, 3)
	for i := range 3 {
		callAsync(url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/q%d.md","file_text":"x"}}}`, i+10, i), answers)
	}
	first := <-answers
	if first.status != http.StatusServiceUnavailable || first.retry == "" {
		t.Errorf("the call beyond the queue: %d, Retry-After %q: %s", first.status, first.retry, first.body)
	}
	release()
	for range 2 {
		if a := <-answers; a.status != 200 || !strings.Contains(a.body, "File created successfully") {
			t.Errorf("a call that waited: %d %s", a.status, a.body)
		}
	}
}

// The id of a request cut short is read when it comes before the cut.
func TestHeadID(t *testing.T) {
	for _, tc := range []struct {
		head string
		want any
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"file_text":"xxxx`, int64(7)},
		{`{"id":"abc","jsonrpc":"2.0","method":"tools/call","params":{"argu`, "abc"},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"file_text":"xxxx`, nil},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"a":1},"id":3,"x":"yyyy`, int64(3)},
		{`{"id":1.5,"method":"x`, nil},
		{`{"method":"tools/call","params":{"a":1},"id":12`, nil}, // the id may go on past the cut
		{`{"method":"tools/call","params":{"a":1},"id":12 `, int64(12)},
		{`{"id":null,"method":"x`, nil},
		{`[{"id":1}`, nil},
		{`not json`, nil},
	} {
		if got := headID([]byte(tc.head)); got != tc.want {
			t.Errorf("headID(%s) = %#v, want %#v", tc.head, got, tc.want)
		}
	}
}

// Wherever a line is cut, the id read from its head is the whole line's or none.
func FuzzHeadID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"file_text":"xxxx"}}}`), 40)
	f.Add([]byte(`{"method":"x","params":{"id":1},"id":"abc"}`), 30)
	f.Add([]byte(`{"id":9007199254740993,"method":"x"}`), 12)
	f.Fuzz(func(t *testing.T, line []byte, cut int) {
		whole := headID(line)
		if cut < 0 || cut > len(line) {
			return
		}
		if got := headID(line[:cut]); got != nil && got != whole {
			t.Fatalf("%q cut at %d: id %#v, the whole line's %#v", line, cut, got, whole)
		}
	})
}

// A cancellation never waits for a turn: queued, it would wait behind the very call it ends.
// Here the one call that may run waits for the store; cancelling it ends it at once.
func TestCancellationTakesNoTurn(t *testing.T) {
	s, url, session, _ := oneCallAtATime(t, 4)

	calls := make(chan answer, 1)
	callAsync(url, session, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/c.md","file_text":"x"}}}`, calls)
	for s.inflight.Load() == 0 { // the call runs, waiting for the store
		runtime.Gosched()
	}
	cancelled := make(chan answer, 1)
	callAsync(url, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10}}`, cancelled)
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second): // bounds a failure only
		t.Fatal("the cancellation waits for a turn")
	}
	if a := <-calls; !strings.Contains(a.body, `"id":10,`) || !strings.Contains(a.body, `"isError":true`) {
		t.Errorf("the cancelled call's answer: %s", a.body)
	}
}

// A call that waits for its turn and is cancelled by its client never runs: its wait ends,
// it is answered -32800 at once, and nothing it would have changed is changed.
func TestCancelledWhileWaitingNeverRuns(t *testing.T) {
	s, url, session, release := oneCallAtATime(t, 4)
	callAsync(url, session, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`, make(chan answer, 1))
	for s.inflight.Load() == 0 { // it runs, waiting for the store; the next waits for its turn
		runtime.Gosched()
	}
	waiting := make(chan answer, 1)
	callAsync(url, session, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/b.md","file_text":"x"}}}`, waiting)
	const want = `{"jsonrpc":"2.0","id":11,"error":{"code":-32800,"message":"Request cancelled by the client before it ran"}}`
	deadline := time.After(10 * time.Second) // bounds a failure only
	for got := ""; got != want; {
		// Again until it is answered: a cancellation may come before the call waits.
		call(t, url+"/mcp", session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}`)
		select {
		case a := <-waiting:
			if got = a.body; got != want {
				t.Fatalf("the cancelled call: %s, want %s", got, want)
			}
		case <-deadline:
			t.Fatal("the cancelled call still waits for its turn")
		default:
			runtime.Gosched()
		}
	}
	release()
	// A call after it runs after it, had it waited on: b.md is not there by then.
	call(t, url+"/mcp", session, `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/c.md","file_text":"x"}}}`)
	if _, data := call(t, url+"/mcp", session, `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`); strings.Contains(string(data), "b.md") || !strings.Contains(string(data), "c.md") {
		t.Errorf("after the cancelled call: %s", data)
	}
}

// A ping takes no turn either: it is answered at once while every turn is taken.
func TestPingTakesNoTurn(t *testing.T) {
	s, url, session, _ := oneCallAtATime(t, 4)
	callAsync(url, session, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`, make(chan answer, 1))
	for s.inflight.Load() == 0 { // it runs, waiting for the store
		runtime.Gosched()
	}
	pong := make(chan answer, 1)
	callAsync(url, session, `{"jsonrpc":"2.0","id":11,"method":"ping"}`, pong)
	select {
	case a := <-pong:
		if !strings.Contains(a.body, `{"jsonrpc":"2.0","id":11,"result":{}}`) {
			t.Errorf("the ping: %s", a.body)
		}
	case <-time.After(10 * time.Second): // bounds a failure only
		t.Fatal("the ping waits for a turn")
	}
}

// oneCallAtATime serves a memory store over HTTP with room for one call at a time and queue
// places for more, opens a session, and holds the store until release: a call then runs,
// waiting for the store.
func oneCallAtATime(t *testing.T, queue int) (s *Server, url, session string, release func()) {
	store := files.NewMemoryStore()
	s = New(handlers.New(store, handlers.DefaultLimits()), Config{Version: "test", Logger: zerolog.Nop()})
	lim := Limits{Requests: 1, PerTenant: 1, Queue: queue, QueuePerTenant: queue, Wait: time.Hour, SmallRequests: 8, RequestBytes: 1 << 20, Streams: 4, StreamsPerTenant: 4, Pending: 4}
	url = serve(t, s, HTTPOptions{Limits: lim}, "")
	session = post(t, url+"/mcp", "", "", initBody).Header.Get("Mcp-Session-Id")
	hold, held := make(chan struct{}), make(chan struct{})
	go store.Apply(context.Background(), "hold", func(*vfs.Tx) error { close(held); <-hold; return nil })
	<-held
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	return s, url, session, release
}

// answer is what an HTTP request got: its status, its Retry-After and its body (or the
// error that stopped it).
type answer struct {
	status int
	retry  string
	body   string
}

// callAsync sends one message in session from a goroutine of its own, and gives what it
// got on to.
func callAsync(url, session, body string, to chan<- answer) {
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			to <- answer{body: err.Error()}
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		to <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(data)}
	}()
}
