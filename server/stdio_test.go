package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

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
		sc.Buffer(nil, 4<<20)
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

// The instructions name the memory's mounts in server/discover's answer as in initialize's.
func TestDiscoverNamesTheMounts(t *testing.T) {
	team := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.ReadOnly())
	mem := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.WithMounts(handlers.Mount{Name: "team", Memory: team}))
	s := New(mem, Config{Version: "test"})
	inR, inW := io.Pipe()
	lines, done := serveStdioTest(s, inR)
	for id, request := range []string{
		`"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`,
		`"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`,
	} {
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,%s}`+"\n", id+1, request)
		answer := awaitAnswer(t, lines, fmt.Sprint(id+1), func(stdioLine) {})
		if !strings.Contains(answer.text, `MEMORY STORES`) || !strings.Contains(answer.text, `- /memories/team (read-only`) {
			t.Errorf("the instructions do not name the mount: %.600s", answer.text)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// malformedRequests are messages that are no request mcp-go can take, each with its answer
// ("" for none): the id wherever the message names one, and a response or a notification
// never answered.
var malformedRequests = []struct{ line, want string }{
	{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":[]}`, `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params: params must be an object"}}`},
	{`{"jsonrpc":"2.0","id":"b","method":"ping","params":"x"}`, `{"jsonrpc":"2.0","id":"b","error":{"code":-32602,"message":"Invalid params: params must be an object"}}`},
	{`{"jsonrpc":"2.0","id":3,"method":5}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: the method must be a string"}}`},
	{`{"jsonrpc":"2.0","id":4}`, `{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Invalid Request: the method must be a string"}}`},
	{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number"}}`},
	{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number"}}`},
	{`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: send one JSON-RPC object at a time"}}`},
	{`{"jsonrpc":"2.0","id":13,"method":"ping"`, `{"jsonrpc":"2.0","id":13,"error":{"code":-32700,"message":"Parse error"}}`},
	{`{"jsonrpc":"2.0","id":14,"method":"ping",}`, `{"jsonrpc":"2.0","id":14,"error":{"code":-32700,"message":"Parse error"}}`},
	{`not json`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
	{`{"jsonrpc":"2.0","id":5,"result":{}}`, ""},
	{`{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"x"}}`, ""},
	{`{"jsonrpc":"2.0","method":5}`, ""},
	{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}`, ""},
}

// Every line a stdio client sends that is not a request mcp-go can take is answered here,
// with the request's id wherever the line names one, and a response or a notification is
// never answered.
func TestStdioMalformedRequests(t *testing.T) {
	s := New(handlers.New(files.NewMemoryStore(), handlers.DefaultLimits()), Config{Version: "test"})
	inR, inW := io.Pipe()
	lines, done := serveStdioTest(s, inR)
	for i, tc := range malformedRequests {
		marker := fmt.Sprint(1000 + i)
		fmt.Fprintf(inW, "%s\n{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}\n", tc.line, marker)
		var got []string
		awaitAnswer(t, lines, marker, func(l stdioLine) { got = append(got, l.text) })
		if want := []string{tc.want}; tc.want == "" && len(got) != 0 || tc.want != "" && fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.line, got, tc.want)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// Whatever one line holds, the loop goes on; it answers a request that carries a string or
// integer id exactly once, with that id, and writes nothing but JSON-RPC messages.
func FuzzStdioLine(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":[]}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a","file_text":1e999}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`,
		`{"id":5,"method":"ping"}`,
		`[1]`,
		`{"jsonrpc":"2.0","id":6,"method":"ping"`,
	} {
		f.Add(seed)
	}
	s := New(handlers.New(files.NewMemoryStore(), handlers.DefaultLimits()), Config{Version: "test"})
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") || strings.Contains(line, "zz-marker") || strings.Contains(line, string(mcp.MethodSubscriptionsListen)) {
			return
		}
		var req struct {
			ID     any             `json:"id"`
			Method *string         `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var wantID string // the id the answer must carry, as JSON ("": none is owed)
		if json.Valid([]byte(line)) && dec.Decode(&req) == nil && req.Method != nil {
			switch id := req.ID.(type) {
			case string:
				b, _ := json.Marshal(id)
				wantID = string(b)
			case json.Number:
				if n, err := id.Int64(); err == nil {
					wantID = strconv.FormatInt(n, 10)
				}
			}
		}
		lines, done := serveStdioTest(s, strings.NewReader(line+"\n"+`{"jsonrpc":"2.0","id":"zz-marker","method":"ping"}`+"\n"))
		var answered, marker int
		for l := range lines {
			var msg struct {
				JSONRPC string `json:"jsonrpc"`
				ID      any    `json:"id"`
			}
			dec := json.NewDecoder(strings.NewReader(l.text))
			dec.UseNumber()
			if err := dec.Decode(&msg); err != nil || msg.JSONRPC != "2.0" {
				t.Fatalf("wrote %q", l.text)
			}
			id, _ := json.Marshal(msg.ID) // as wantID writes it
			if wantID != "" && string(id) == wantID {
				answered++
			}
			if string(id) == `"zz-marker"` {
				marker++
			}
		}
		if marker != 1 {
			t.Fatalf("after %q, the next request was answered %d times", line, marker)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if wantID != "" && answered != 1 {
			t.Fatalf("%s: answered %d times with id %s", line, answered, wantID)
		}
	})
}

// The calls running over stdio hold lines of at most one line's bound together (each holds
// several times its line while it runs): a call whose line does not fit waits, and a line
// of any size runs once the others are done.
func TestStdioCallsBoundTheirBytes(t *testing.T) {
	c := newStdioCalls(600)
	ctx := context.Background()
	_, endA, _ := c.start(ctx, "a", 400)
	if c.bytes.TryAcquire(201) {
		t.Fatal("a call's line of 201 bytes would run beside one of 400, over the bound of 600")
	}
	_, endB, _ := c.start(ctx, "b", 200)
	endA()
	endB()
	_, endBig, _ := c.start(ctx, "big", 1<<20) // over the bound: it waits for all the room, no more
	if c.bytes.TryAcquire(1) {
		t.Fatal("a line over the bound runs beside another")
	}
	endBig()
	if !c.bytes.TryAcquire(600) {
		t.Fatal("the room was not given back")
	}
}

// With every slot of a stdio client taken (its calls wait for the store), reading goes on:
// a ping is answered at once, and a call that waits for a slot, once cancelled, is answered
// -32800 and never runs.
func TestStdioReadsOnWhileEverySlotIsTaken(t *testing.T) {
	store := files.NewMemoryStore()
	s := New(handlers.New(store, handlers.DefaultLimits()), Config{Version: "test", Logger: zerolog.Nop()})
	inR, inW := io.Pipe()
	lines, done := serveStdioTest(s, inR)
	// Written on their own goroutine: with reading held up, a write would wait for good.
	send := make(chan string, maxStdioRequests+8)
	go func() {
		for l := range send {
			fmt.Fprintln(inW, l)
		}
		inW.Close()
	}()
	send <- `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	awaitAnswer(t, lines, "0", func(stdioLine) {})
	hold, held := make(chan struct{}), make(chan struct{})
	go store.Apply(context.Background(), "hold", func(*vfs.Tx) error { close(held); <-hold; return nil })
	<-held
	release := sync.OnceFunc(func() { close(hold) })
	defer release()
	const create = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/f%d.md","file_text":"x"}}}`
	for id := 1; id <= maxStdioRequests; id++ {
		send <- fmt.Sprintf(create, id, id)
	}
	for s.inflight.Load() < maxStdioRequests { // every slot taken, each call waiting for the store
		runtime.Gosched()
	}
	waiting := maxStdioRequests + 1
	send <- fmt.Sprintf(create, waiting, waiting)
	send <- `{"jsonrpc":"2.0","id":100,"method":"ping"}`
	if got := awaitAnswer(t, lines, "100", func(l stdioLine) { t.Errorf("before the ping's answer: %s", l.text) }); got.text != `{"jsonrpc":"2.0","id":100,"result":{}}` {
		t.Errorf("the ping: %s", got.text)
	}
	send <- fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, waiting)
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32800,"message":"Request cancelled by the client before it ran"}}`, waiting)
	if got := awaitAnswer(t, lines, fmt.Sprint(waiting), func(l stdioLine) { t.Errorf("before the cancelled call's answer: %s", l.text) }); got.text != want {
		t.Errorf("the cancelled call: %s, want %s", got.text, want)
	}
	release()
	for left := maxStdioRequests; left > 0; { // the calls that ran, answered in any order
		switch l := <-lines; {
		case strings.Contains(l.text, `"method":"notifications/`):
		case strings.Contains(l.text, `"result":{"content":[{"type":"text","text":"File created successfully at: /memories/f`):
			left--
		default:
			t.Fatalf("a call that ran: %s", l.text)
		}
	}
	send <- `{"jsonrpc":"2.0","id":101,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`
	close(send)
	for l := range lines {
		if strings.Contains(l.text, `"id":101,`) && (strings.Contains(l.text, fmt.Sprintf("f%d.md", waiting)) || !strings.Contains(l.text, fmt.Sprintf("f%d.md", maxStdioRequests))) {
			t.Errorf("after the cancelled call: %s", l.text)
		}
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A stdio client has at most maxStdioRequests subscriptions/listen streams open at once (each
// holds a listener and a goroutine for as long as it lasts): one more is refused with its
// id until notifications/cancelled ends one of them.
func TestStdioListenStreamsBounded(t *testing.T) {
	s := New(handlers.New(files.NewMemoryStore(), handlers.DefaultLimits()), Config{Version: "test"})
	inR, inW := io.Pipe()
	lines, done := serveStdioTest(s, inR)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	awaitAnswer(t, lines, "0", func(stdioLine) {})
	listen := `{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourcesListChanged":true}}}` + "\n"
	for id := 1; id <= maxStdioRequests+1; id++ {
		fmt.Fprintf(inW, listen, id)
	}
	busy := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32000,"message":"Service busy: at most %d subscriptions/listen streams at once; cancel one first"}}`, maxStdioRequests+1, maxStdioRequests)
	if got := awaitAnswer(t, lines, fmt.Sprint(maxStdioRequests+1), func(stdioLine) {}); got.text != busy {
		t.Fatalf("one stream too many: %s, want %s", got.text, busy)
	}
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	awaitAnswer(t, lines, "1", func(stdioLine) {})
	fmt.Fprintf(inW, listen, 100)
	for l := range lines {
		if strings.Contains(l.text, `"id":100,`) {
			t.Fatalf("a stream after one ended: %s", l.text)
		}
		if strings.Contains(l.text, `subscriptionId":100}`) {
			break // acknowledged: it is open
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// Whatever mix of calls, subscriptions/listen streams, cancellations and broken lines a
// stdio client sends, every request is answered exactly once, with its id, by the time
// its input ends (a stream beyond the bound with the busy error), and the loop returns.
// Each op is a line: a call, a listen, the cancellation of an earlier request, or a
// malformed request.
func FuzzStdioSession(f *testing.F) {
	f.Add([]byte{1, 1, 2, 0, 3, 1, 5})
	f.Add(bytes.Repeat([]byte{1}, 40))
	f.Add([]byte{1, 1, 1, 6, 10, 1, 4, 0, 0})
	s := New(handlers.New(files.NewMemoryStore(), handlers.DefaultLimits()), Config{Version: "test"})
	listen := `{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourcesListChanged":true}}}`
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 80 {
			return
		}
		var in strings.Builder
		owed := map[string]int{}
		for i, op := range ops {
			id := i + 1
			switch op % 5 {
			case 0:
				fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/f%d.md","file_text":"x"}}}`, id, op/5%4)
			case 1:
				fmt.Fprintf(&in, listen, id)
			case 2:
				fmt.Fprintf(&in, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, int(op/5)%(i+1)+1)
				id = 0
			case 3:
				fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":[]}`, id)
			case 4:
				fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories"}}}`, id)
			}
			in.WriteByte('\n')
			if id != 0 {
				owed[strconv.Itoa(id)]++
			}
		}
		lines, done := serveStdioTest(s, strings.NewReader(in.String()))
		for l := range lines {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if err := json.Unmarshal([]byte(l.text), &msg); err != nil {
				t.Fatalf("wrote %q", l.text)
			}
			if msg.Method != "" {
				continue // a notification
			}
			if owed[string(msg.ID)]--; owed[string(msg.ID)] < 0 {
				t.Fatalf("an answer not owed: %s", l.text)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for id, n := range owed {
			if n != 0 {
				t.Fatalf("request %s was not answered", id)
			}
		}
	})
}
