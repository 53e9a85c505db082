package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// sseStream is what the gate follows of a legacy SSE session, whose calls are answered on
// its event stream after their POSTs have ended: the responses it owes its client (a slot
// of pending each), the calls waiting for one, and its open subscriptions/listen streams.
type sseStream struct {
	pending chan struct{}
	waiting atomic.Int64
	mu      sync.Mutex
	ended   bool // the session's event stream has ended
	listens map[*sseListen]bool
}

// sseListen is a subscriptions/listen stream opened on a legacy SSE session. mcp-go serves
// each of the session's messages on a goroutine of its own, on a context that outlives the
// session: a cancellation may overtake the stream it ends, and the stream would outlast its
// client. So the gate follows such a stream: it holds one of the tenant's event streams
// until it ends, and endSSEListens ends it once it runs, when the client has cancelled it
// or the session has ended.
type sseListen struct {
	id      string          // idKey of the request's id
	over    context.Context // done once the client cancels it or the session ends
	cancel  context.CancelFunc
	release func()      // gives back the stream's slot; once
	started atomic.Bool // mcp-go runs it: its end gives the slot back
}

type sseListenKey struct{}

// listen records stream id opened on the session; its slot is given back by release, or
// when the session ends (at once if it has).
func (st *sseStream) listen(id string, release func()) *sseListen {
	l := &sseListen{id: id}
	l.over, l.cancel = context.WithCancel(context.Background())
	l.release = sync.OnceFunc(func() {
		st.mu.Lock()
		delete(st.listens, l)
		st.mu.Unlock()
		release()
	})
	st.mu.Lock()
	ended := st.ended
	if !ended {
		st.listens[l] = true
	}
	st.mu.Unlock()
	if ended {
		l.cancel()
		l.release()
	}
	return l
}

// cancel marks the session's streams with id cancelled by the client.
func (st *sseStream) cancel(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for l := range st.listens {
		if l.id == id {
			l.cancel()
		}
	}
}

// answered gives back the slot of a stream with id that never started: mcp-go answered
// it at once (a malformed listen, one it refused). A stream that starts after all, its
// slot given back, ends at once.
func (st *sseStream) answered(id string) {
	st.mu.Lock()
	var refused *sseListen
	for l := range st.listens {
		if l.id == id && !l.started.Load() {
			refused = l
			break
		}
	}
	st.mu.Unlock()
	if refused != nil {
		refused.cancel()
		refused.release()
	}
}

// listening reports whether the session holds a listen stream.
func (st *sseStream) listening() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.listens) > 0
}

// end closes the session: its streams end, and their slots are given back.
func (st *sseStream) end() {
	st.mu.Lock()
	st.ended = true
	open := slices.Collect(maps.Keys(st.listens))
	st.mu.Unlock()
	for _, l := range open {
		l.cancel()
		l.release()
	}
}

// endSSEListens ends a subscriptions/listen stream of a legacy SSE session, once it runs,
// when its client has cancelled it or its session has ended, through mcp-go's own
// cancellation.
func endSSEListens(h *mcpserver.Hooks, s *Server) {
	h.AddBeforeSubscriptionsListen(func(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
		l, ok := ctx.Value(sseListenKey{}).(*sseListen)
		if !ok || id == nil {
			return
		}
		l.started.Store(true)
		stop := context.AfterFunc(l.over, func() {
			cancel, _ := json.Marshal(mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
				Method: string(mcp.MethodNotificationCancelled), Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id}}}})
			s.mcp.HandleMessage(context.WithoutCancel(ctx), cancel)
		})
		context.AfterFunc(ctx, func() {
			stop()
			l.release()
		})
	})
}

// idKey is a request id as mcp-go compares them (numbers by value, as float64s): a number
// or a string ("" otherwise).
func idKey(raw json.RawMessage) string {
	var v any
	json.Unmarshal(raw, &v)
	switch v.(type) {
	case float64, string:
		return fmt.Sprintf("%T %v", v, v)
	}
	return ""
}

// take takes a slot for one more response, waiting at most l.Wait, with at most
// l.QueuePerTenant calls of the session waiting.
func (st *sseStream) take(ctx context.Context, l Limits) bool {
	select {
	case st.pending <- struct{}{}:
		return true
	default:
	}
	if st.waiting.Add(1) > int64(l.QueuePerTenant) {
		st.waiting.Add(-1)
		return false
	}
	defer st.waiting.Add(-1)
	t := time.NewTimer(l.Wait)
	defer t.Stop()
	select {
	case st.pending <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// delivered gives back the slot of a response sent.
func (st *sseStream) delivered() {
	select {
	case <-st.pending:
	default:
	}
}

// owesResponse reports whether mcp-go answers the message: one with an id that is not
// a response (as its HandleMessage decides). A client's answer to the server's keep-alive
// ping carries an id too, and is owed nothing.
func owesResponse(body []byte) bool {
	var head struct {
		ID     any `json:"id"`
		Result any `json:"result"`
	}
	return json.Unmarshal(body, &head) == nil && head.ID != nil && head.Result == nil
}

func (g *gate) sseSession(id string) *sseStream {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sse[id]
}

// watchSSE follows a legacy SSE stream: its first event names the session's message
// endpoint (and so its id); each response event settles one pending request.
func (w *deadlineWriter) watchSSE(b []byte) {
	if w.stream == nil {
		_, q, ok := strings.Cut(string(b), "sessionId=")
		if !ok {
			return
		}
		id, _, _ := strings.Cut(q, "\r")
		id, _, _ = strings.Cut(id, "\n")
		id, _, _ = strings.Cut(id, "&")
		w.session, w.stream = id, &sseStream{pending: make(chan struct{}, w.sse.opts.Limits.Pending), listens: map[*sseListen]bool{}}
		w.sse.mu.Lock()
		w.sse.sse[id] = w.stream
		w.sse.mu.Unlock()
		return
	}
	if rest, ok := bytes.CutPrefix(b, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":")); ok {
		w.stream.delivered()
		if w.stream.listening() {
			var id json.RawMessage
			if json.NewDecoder(bytes.NewReader(rest)).Decode(&id) == nil {
				w.stream.answered(idKey(id))
			}
		}
	}
}

func (w *deadlineWriter) endSSE() {
	if w.stream != nil {
		w.sse.mu.Lock()
		delete(w.sse.sse, w.session)
		w.sse.mu.Unlock()
		w.stream.end()
	}
}
