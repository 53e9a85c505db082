package server

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// stdioServer serves a memory store over stdio for a test (see serveStdioTest): the
// server, its memory, the writer of its input and the lines it writes. When the test ends
// the input is closed and the server must have ended without an error.
func stdioServer(t *testing.T, opts ...handlers.Option) (*Server, *handlers.Memory, io.Writer, <-chan stdioLine) {
	t.Helper()
	st := files.NewMemoryStore()
	t.Cleanup(func() { st.Close() })
	mem := handlers.New(st, handlers.DefaultLimits(), opts...)
	s := New(mem, Config{Tools: "split", Version: "test"})
	inR, inW := io.Pipe()
	lines, done := serveStdioTest(s, inR)
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, mem, inW, lines
}

// fakeTimer is a timer of fakeClock's: it fires when the test says so.
type fakeTimer struct {
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

// A burst of changes to the list of files is announced at once and once more listEvery
// after the last announcement, not once per change; that one says the burst's last change
// too, and a change after a quiet listEvery is announced at once again. The clock is the
// test's: nothing here depends on how fast the machine is.
func TestListChangedOncePerBurst(t *testing.T) {
	s := New(handlers.New(files.NewMemoryStore(), handlers.DefaultLimits()), Config{Version: "test"})
	n := s.notify
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	var timers []*fakeTimer
	n.now = func() time.Time { return now }
	n.after = func(d time.Duration, f func()) interface{ Stop() bool } {
		if d <= 0 || d > listEvery {
			t.Errorf("a list_changed set for %v from now", d)
		}
		tm := &fakeTimer{f: f}
		timers = append(timers, tm)
		return tm
	}
	sess := &stdioSession{notifications: make(chan mcp.JSONRPCNotification, 100)}
	l := &listener{session: sess, listChanged: true}
	w := &watch{listeners: map[*listener]bool{l: true}}
	sent := func() int {
		k := 0
		for len(sess.notifications) > 0 {
			if note := <-sess.notifications; note.Method == string(mcp.MethodNotificationResourcesListChanged) {
				k++
			}
		}
		return k
	}
	change := func() {
		n.mu.Lock()
		n.listChangedLocked(w)
		n.mu.Unlock()
	}

	change() // the first change of a burst: at once
	if k := sent(); k != 1 {
		t.Fatalf("the first change gave %d list_changed, want 1 at once", k)
	}
	for range 39 { // the rest of the burst, a millisecond apart
		now = now.Add(time.Millisecond)
		change()
	}
	if k := sent(); k != 0 || len(timers) != 1 {
		t.Fatalf("the burst's 39 more changes gave %d list_changed at once and %d timers, want 0 and 1", k, len(timers))
	}
	now = now.Add(listEvery)
	timers[0].f() // listEvery after the first announcement: one more, for all the rest
	if k := sent(); k != 1 {
		t.Errorf("the due list_changed: %d sent, want 1", k)
	}
	now = now.Add(2 * listEvery)
	change() // after a quiet spell: at once again
	if k := sent(); k != 1 || len(timers) != 1 {
		t.Errorf("a change after a quiet spell gave %d list_changed and %d timers, want 1 at once", k, len(timers))
	}
	// A watch that ended sends nothing when its due notification comes.
	now = now.Add(time.Millisecond)
	change()
	w.ended = true
	timers[len(timers)-1].f()
	if k := sent(); k != 0 {
		t.Errorf("an ended watch sent %d list_changed", k)
	}
}

// This process's changes are announced in order, each once. Past maxQueued changes the
// watch has not taken yet, it reads the memory again instead, and still learns of them.
func TestNotifierAppliesChangesInOrder(t *testing.T) {
	s, mem, inW, lines := stdioServer(t)
	var updated, listed int // notifications seen
	count := func(l stdioLine) {
		switch {
		case strings.Contains(l.text, `"notifications/resources/updated"`):
			updated++
		case strings.Contains(l.text, `"notifications/resources/list_changed"`):
			listed++
		}
	}
	id := 0
	call := func(msg string) {
		t.Helper()
		id++
		fmt.Fprintf(inW, msg+"\n", id)
		if answer := awaitAnswer(t, lines, fmt.Sprint(id), count); strings.Contains(answer.text, `"isError":true`) || strings.Contains(answer.text, `"error":`) {
			t.Fatalf("call %d failed: %s", id, answer.text)
		}
	}
	tool := func(name, args string) {
		t.Helper()
		call(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_` + name + `","arguments":` + args + `}}`)
	}
	// drain counts the notifications that come within a while.
	drain := func() {
		t.Helper()
		for {
			select {
			case l := <-lines:
				count(l)
			case <-time.After(2*listEvery + 300*time.Millisecond):
				return
			}
		}
	}
	call(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	tool("create", `{"path":"/memories/a.md","file_text":"one\n"}`)
	call(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"memory:///memories/a.md"}}`)
	s.notify.mu.Lock()
	w := s.notify.watches[mem]
	s.notify.mu.Unlock()
	if w == nil {
		t.Fatal("the session's memory has no watch")
	}
	drain()

	updated, listed = 0, 0
	tool("str_replace", `{"path":"/memories/a.md","old_str":"one","new_str":"two"}`)
	tool("str_replace", `{"path":"/memories/a.md","old_str":"two","new_str":"three"}`)
	tool("create", `{"path":"/memories/b.md","file_text":"b"}`)
	drain()
	if updated != 2 || listed != 1 {
		t.Errorf("two changes to a subscribed file and a create gave %d updated and %d list_changed, want 2 and 1", updated, listed)
	}

	// The watch is held (it needs the lock to apply a change) while more changes are made
	// than it can hold: the last ones are dropped, and it reads the memory again.
	s.notify.mu.Lock()
	for i := range maxQueued + 2 {
		tool("create", fmt.Sprintf(`{"path":"/memories/many/%d.md","file_text":"x"}`, i))
	}
	if len(w.batches) != maxQueued || len(w.rescan) != 1 {
		t.Errorf("%d changes held and %d readings due, want %d and 1", len(w.batches), len(w.rescan), maxQueued)
	}
	s.notify.mu.Unlock()
	updated, listed = 0, 0
	drain()
	s.notify.mu.Lock()
	known := w.paths[fmt.Sprintf("/memories/many/%d.md", maxQueued+1)]
	s.notify.mu.Unlock()
	if !known || listed == 0 {
		t.Errorf("after the burst: the last file known %v, %d list_changed; want true and at least 1", known, listed)
	}
}

// A 2026-era tool call that names a log level gets the call's log message at or above it,
// over stdio; one that names none, or a higher level, gets none. (The message may come
// after the answer: the session's notifications have a writer of their own.)
func TestLogLevelPerRequest(t *testing.T) {
	_, _, inW, lines := stdioServer(t)
	for i, tc := range []struct {
		level string // "" for none
		want  bool
	}{{"info", true}, {"", false}, {"error", false}, {"debug", true}} {
		meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		if tc.level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + tc.level + `"`
		}
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{%s},"name":"memory_create","arguments":{"path":"/memories/f%d.md","file_text":"x"}}}`+"\n", i+1, meta, i)
		logged := false
		answer := awaitAnswer(t, lines, fmt.Sprint(i+1), func(l stdioLine) {
			if strings.Contains(l.text, `"notifications/message"`) && strings.Contains(l.text, fmt.Sprintf(`/memories/f%d.md`, i)) {
				logged = true
			}
		})
		if strings.Contains(answer.text, `"isError":true`) || strings.Contains(answer.text, `"error":`) {
			t.Fatalf("call %d failed: %s", i+1, answer.text)
		}
		wait := time.After(300 * time.Millisecond)
		if tc.want {
			wait = time.After(5 * time.Second)
		}
		for !logged {
			select {
			case l := <-lines:
				logged = strings.Contains(l.text, `"notifications/message"`) && strings.Contains(l.text, fmt.Sprintf(`/memories/f%d.md`, i))
				continue
			case <-wait:
			}
			break
		}
		if logged != tc.want {
			t.Errorf("log level %q: log message sent %v, want %v", tc.level, logged, tc.want)
		}
	}
}

// When the answer to initialize goes out, the memory's watch has subscribed to its feed
// and read its first listing (add), so a file created right after is announced. Done by a
// goroutine of the watch's own, the subscription could come after the client's first
// creates, whose files the first listing then held already: now and then a burst of
// creates right after initialize went unannounced (TestListChangedOncePerBurst saw none).
func TestWatchReadyBeforeInitializeAnswer(t *testing.T) {
	s, mem, inW, lines := stdioServer(t)
	notes := 0
	count := func(l stdioLine) {
		if strings.Contains(l.text, `"notifications/resources/list_changed"`) {
			notes++
		}
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	awaitAnswer(t, lines, "0", count)
	s.notify.mu.Lock()
	w := s.notify.watches[mem]
	s.notify.mu.Unlock()
	if w == nil {
		t.Fatal("no watch of the memory after initialize")
	}
	select {
	case <-w.ready:
	default:
		t.Fatal("the answer to initialize went out before the memory's first listing was read")
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/new.md","file_text":"x"}}}`+"\n")
	if a := awaitAnswer(t, lines, "1", count); strings.Contains(a.text, `"isError":true`) {
		t.Fatalf("create failed: %s", a.text)
	}
	deadline := time.After(2*listEvery + 2*time.Second)
	for notes == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the output ended")
			}
			count(l)
		case <-deadline:
			t.Fatal("a file created right after initialize was never announced (no list_changed)")
		}
	}
}

// What a session or a listen stream follows is bounded, in URIs and in their bytes, and
// holds only URIs that name a memory file: a subscription beyond, or to any other URI, is
// acknowledged and ignored. (A client once made the server hold 515 MB with 300
// subscriptions of 1 MB URIs.)
func TestSubscriptionsBounded(t *testing.T) {
	s, _, inW, lines := stdioServer(t)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	awaitAnswer(t, lines, "0", func(stdioLine) {})
	long := "memory:///memories/" + strings.Repeat("d/", 1000) // 2 KB, a valid path
	uris := []string{
		"memory:///memories/a.md", "memory:///memories/a.md", // once
		"memory:///memories/" + strings.Repeat("x", 100_000), // no memory path is that long
		"https://example.com/a.md", "memory:///memories/../etc", "memory:///memories",
	}
	for i := range maxSubscriptionBytes/len(long) + 5 {
		uris = append(uris, fmt.Sprintf("%s%d.md", long, i))
	}
	var listen []string
	for i, uri := range uris {
		q, _ := json.Marshal(uri)
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":%s}}`+"\n", i+1, q)
		awaitAnswer(t, lines, fmt.Sprint(i+1), func(stdioLine) {})
		listen = append(listen, string(q))
	}
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourceSubscriptions":[%s]}}}`+"\n", strings.Join(listen, ","))
	acked := false
	for l := range lines {
		if strings.Contains(l.text, `"id":"l"`) {
			t.Fatalf("the stream failed: %.300s", l.text)
		}
		if acked = strings.Contains(l.text, `subscriptionId":"l"}`); acked {
			break
		}
	}
	if !acked {
		t.Fatal("the stream was not acknowledged")
	}
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	var followers []*listener
	for _, w := range s.notify.watches {
		for l := range w.listeners {
			followers = append(followers, l)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("%d listeners, want the session and the stream", len(followers))
	}
	for _, l := range followers {
		total := 0
		for uri := range l.uris {
			total += len(uri)
			if _, err := uriPath(uri); err != nil {
				t.Errorf("follows %.40q, which names no memory file", uri)
			}
		}
		if _, ok := l.uris["memory:///memories/a.md"]; !ok || total != l.uriBytes || total > maxSubscriptionBytes || total < maxSubscriptionBytes-len(long)-10 {
			t.Errorf("follows %d URIs of %d bytes (counted %d), a.md %v; want at most %d bytes, nearly all of them", len(l.uris), total, l.uriBytes, ok, maxSubscriptionBytes)
		}
	}
}

// While a mount's store fails (gone: a disk not mounted), reading the memory
// again announces nothing of the files in it: they did not change, and neither did the list;
// nor once the store is back as it was.
func TestNoNotificationsWhileAMountFails(t *testing.T) {
	fsys := &vfstest.DownFS{FS: files.NewMemFs()}
	s, mem, inW, lines := stdioServer(t, handlers.WithMounts(handlers.Mount{Name: "me", Memory: handlers.New(vfs.NewStore(files.NewAferoStorage(fsys)), handlers.DefaultLimits())}))
	var notes []string
	id := 0
	call := func(msg string) {
		t.Helper()
		id++
		fmt.Fprintf(inW, msg+"\n", id)
		if answer := awaitAnswer(t, lines, fmt.Sprint(id), func(l stdioLine) { notes = append(notes, l.text) }); strings.Contains(answer.text, `"isError":true`) || strings.Contains(answer.text, `"error":`) {
			t.Fatalf("call %d failed: %s", id, answer.text)
		}
	}
	drain := func() []string { // the notifications that come within a while
		t.Helper()
		for {
			select {
			case l := <-lines:
				notes = append(notes, l.text)
			case <-time.After(2*listEvery + 300*time.Millisecond):
				got := notes
				notes = nil
				return got
			}
		}
	}
	call(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	call(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/me/b.md","file_text":"b\n"}}}`)
	call(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"memory:///memories/me/b.md"}}`)
	drain()
	s.notify.mu.Lock()
	w := s.notify.watches[mem]
	s.notify.mu.Unlock()
	if w == nil {
		t.Fatal("the session's memory has no watch")
	}
	for _, down := range []bool{true, false} {
		fsys.Down.Store(down)
		w.rescan <- struct{}{}
		if got := drain(); len(got) != 0 {
			t.Errorf("the mount's store down %v, reading the memory again sent %q", down, got)
		}
	}
	call(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_str_replace","arguments":{"path":"/memories/me/b.md","old_str":"b","new_str":"c"}}}`)
	if got := drain(); !slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, `"notifications/resources/updated"`) }) {
		t.Errorf("a change once the mount is back sent %q, want its update", got)
	}
}
