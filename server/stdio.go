package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"golang.org/x/sync/semaphore"
)

// maxStdioRequests bounds the requests served at once over stdio; reading waits beyond it.
const maxStdioRequests = 32

// serverBusy is the JSON-RPC error code (one of those left to servers) of a request refused
// for want of room.
const serverBusy = -32000

// lineHead is how much of a line over the bound is kept, to read its request's id from.
const lineHead = 64 << 10

// ServeStdio serves one client over in and out (stdin and stdout) until in ends or ctx is
// cancelled. Either way, every request already read runs to completion and its response
// is written before it returns (at most ShutdownTimeout; then running calls are cancelled).
// Nothing but protocol messages is written to out. A line longer than maxLine bytes is
// answered with an error that carries the request's id when the line's start names it, and
// skipped; no more than lineHead bytes of it are held.
//
// This is our own loop around mcp-go's message handler rather than mcp-go's StdioServer,
// which, when its input ends, cancels the calls still running and drops queued ones (their
// responses are lost and their changes may be half done), and leaves an oversized line
// unanswered. One goroutine reads; at most maxStdioRequests requests run at once, and
// maxStdioWaiting more wait their turn while reading goes on; a ping and the notifications
// are handled in order as they are read.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, maxLine int64) error {
	s.transport.Store("stdio")
	sess := &stdioSession{notifications: make(chan mcp.JSONRPCNotification, 100)}
	if err := s.mcp.RegisterSession(ctx, sess); err != nil {
		return err
	}
	defer s.notify.close() // after the session is gone: nothing reads the memory after this returns
	defer s.mcp.UnregisterSession(context.WithoutCancel(ctx), sess.SessionID())

	// Requests run on reqCtx, which outlives ctx until the drain is over; long-lived
	// listen streams run on listenCtx, which ends as soon as the input does.
	reqCtx, cancelRequests := context.WithCancel(s.mcp.WithContext(context.WithoutCancel(ctx), sess))
	defer cancelRequests()
	listenCtx, cancelListen := context.WithCancel(reqCtx)
	defer cancelListen()

	w := &stdioWriter{out: out}
	// Notifications are written by their own goroutine, which is over before this returns:
	// nothing is written to out after that. It writes those still queued first (the log
	// messages of the last calls, sent just before their answers).
	notesDone, notesOver := make(chan struct{}), make(chan struct{})
	defer func() { close(notesDone); <-notesOver }()
	go func() {
		defer close(notesOver)
		for {
			select {
			case n := <-sess.notifications:
				w.write(n)
			case <-notesDone:
				for len(sess.notifications) > 0 { // no other goroutine reads them
					w.write(<-sess.notifications)
				}
				return
			}
		}
	}()

	// The reader reads each line in turn and dispatches it: a request to run in its turn
	// (reading waits only beyond the calls that may wait), a ping or a notification handled
	// before the next line is read. Once ctx ends nothing new starts; a read pending then is
	// left to end with the process.
	calls := newStdioCalls(maxLine)
	inputDone := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := readLine(r, maxLine, w)
			if len(line) > 0 {
				s.dispatch(line, w, calls, reqCtx, listenCtx)
			}
			if err != nil {
				inputDone <- err
				return
			}
		}
	}()
	var inputErr error
	select {
	case <-ctx.Done():
		s.log.Info().Msg("stopping: letting running calls finish")
	case inputErr = <-inputDone:
	}
	drained := calls.stop()
	cancelListen()
	select {
	case <-drained:
		close(calls.jobs) // the workers end: no request starts any more
	case <-time.After(ShutdownTimeout):
		s.log.Warn().Msg("calls still running after the shutdown timeout; stopping anyway")
		cancelRequests()
		select {
		case <-drained:
		case <-time.After(time.Second):
		}
	}
	if inputErr != nil && !errors.Is(inputErr, io.EOF) {
		return inputErr
	}
	return nil
}

// envelope is what the first level of a JSON-RPC message says, checked as a request's must
// be: a string or number id (none for a notification), a method name and an object of
// params. What fails is answered before mcp-go sees it, which would answer it without its
// id (or echo an id of another kind).
type envelope struct {
	id           string // as sent, trimmed
	method       string
	notification bool
	response     bool               // a client's response (result or error, no method)
	refusal      mcp.JSONRPCMessage // the answer instead of handling it; none goes to a notification
}

func readEnvelope(msg []byte) (e envelope) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Params jsonKind        `json:"params"`
		Result jsonKind        `json:"result"`
		Error  jsonKind        `json:"error"`
	}
	if err := json.Unmarshal(msg, &head); err != nil {
		// Not one JSON object (a batch array among them): answered with the id when the
		// message's start names one.
		code, text := mcp.PARSE_ERROR, "Parse error"
		if json.Valid(msg) {
			code, text = mcp.INVALID_REQUEST, "Invalid Request: send one JSON-RPC object at a time"
		}
		return envelope{refusal: errorResponse(headID(msg), code, text)}
	}
	if head.Method == nil && (head.Result != 0 || head.Error != 0) {
		return envelope{response: true}
	}
	e.id = string(bytes.TrimSpace(head.ID))
	e.notification = e.id == "" || e.id == "null"
	switch {
	case !e.notification && !(e.id[0] == '"' || e.id[0] == '-' || '0' <= e.id[0] && e.id[0] <= '9'):
		e.refusal = errorResponse(nil, mcp.INVALID_REQUEST, "Invalid Request: the id must be a string or a number")
	case json.Unmarshal(head.Method, &e.method) != nil:
		e.refusal = errorResponse(headID(msg), mcp.INVALID_REQUEST, "Invalid Request: the method must be a string")
	case head.Params != 0 && head.Params != '{' && head.Params != 'n':
		e.refusal = errorResponse(headID(msg), mcp.INVALID_PARAMS, "Invalid params: params must be an object")
	}
	return e
}

// dispatch serves one line read from a stdio client (see ServeStdio).
func (s *Server) dispatch(line []byte, w *stdioWriter, calls *stdioCalls, reqCtx, listenCtx context.Context) {
	e := readEnvelope(line)
	id, method, notification := e.id, e.method, e.notification
	switch {
	case e.response:
		return // over stdio the server sends no requests, and a response is never answered
	case e.refusal != nil:
		if !notification {
			w.write(e.refusal)
		}
	case notification:
		// A notification, handled before the next line, in order.
		if method == string(mcp.MethodNotificationCancelled) {
			var cancelled struct {
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			json.Unmarshal(line, &cancelled)
			calls.cancelID(string(bytes.TrimSpace(cancelled.Params.RequestID)))
		}
		s.handle(reqCtx, line, method)
	case method == string(mcp.MethodSubscriptionsListen):
		select {
		case calls.listens <- struct{}{}:
		default:
			w.write(errorResponse(headID(line), serverBusy, fmt.Sprintf("Service busy: at most %d subscriptions/listen streams at once; cancel one first", cap(calls.listens))))
			return
		}
		ctx, end, ok := calls.begin(listenCtx, id)
		if !ok {
			<-calls.listens
			return // stopping: nothing new starts
		}
		go func() {
			defer end()
			resp := s.handle(ctx, line, method)
			<-calls.listens // before the answer: the client may open another once it has it
			w.write(resp)
		}()
	case method == string(mcp.MethodPing):
		w.write(s.handle(reqCtx, line, method)) // whether the server is there: answered at once, however busy
	default:
		ctx, end, ok := calls.start(reqCtx, id, int64(len(line)))
		if !ok {
			return // stopping: nothing new starts
		}
		calls.run(reqCtx, ctx, func() {
			defer end()
			w.write(s.handle(ctx, line, method))
		}, func() {
			defer end()
			if reqCtx.Err() != nil {
				w.write(errorResponse(headID(line), serverBusy, "Service stopping: the request did not run; send it again once the server is back"))
			} else {
				w.write(errorResponse(headID(line), mcp.REQUEST_INTERRUPTED, "Request cancelled by the client before it ran"))
			}
		})
	}
}

// jsonKind is the first byte of a JSON value (0: absent), read without copying the value.
type jsonKind byte

func (k *jsonKind) UnmarshalJSON(b []byte) error {
	*k = jsonKind(b[0])
	return nil
}

// stdioCalls are the requests begun: a slot each while they run (up to maxStdioWaiting more
// wait for one, beyond which reading waits), their lines' bytes (together at most one
// line's bound, since a call holds several times its line while it runs), and their
// cancellation by id, so that notifications/cancelled can end one; once stopped, none
// starts, and idle is closed when the last one ends. They run on a pool of workers that
// live as long as the input (their stacks grown already), one more started only when none
// is free.
type stdioCalls struct {
	slots    chan struct{}
	waits    chan struct{} // a place each for the calls waiting for a slot
	listens  chan struct{} // a slot each for the subscriptions/listen streams open
	bytes    *semaphore.Weighted
	maxBytes int64
	jobs     chan func()
	workers  int // started; only the reader starts them
	mu       sync.Mutex
	cancel   map[string]*context.CancelFunc // by id; a client may use an id again once answered
	running  int
	stopped  bool
	idle     chan struct{}
}

// maxStdioWaiting bounds the calls that wait for a slot over stdio, as a client's over HTTP.
const maxStdioWaiting = 256

func newStdioCalls(maxLine int64) *stdioCalls {
	return &stdioCalls{cancel: map[string]*context.CancelFunc{}, slots: make(chan struct{}, maxStdioRequests), waits: make(chan struct{}, maxStdioWaiting),
		listens: make(chan struct{}, maxStdioRequests), jobs: make(chan func()), idle: make(chan struct{}), bytes: semaphore.NewWeighted(maxLine), maxBytes: maxLine}
}

// start takes room for the size bytes of request id's line (waiting for it) and begins the
// request.
func (c *stdioCalls) start(parent context.Context, id string, size int64) (ctx context.Context, end func(), ok bool) {
	size = min(size, c.maxBytes)
	c.bytes.Acquire(context.Background(), size)
	ctx, done, ok := c.begin(parent, id)
	if !ok {
		c.bytes.Release(size)
		return nil, nil, false
	}
	return ctx, func() { c.bytes.Release(size); done() }, true
}

// begin returns the context of request id, which notifications/cancelled for id ends, and
// the function that ends it; ok is false once the loop is stopping, which waits for every
// request begun.
func (c *stdioCalls) begin(parent context.Context, id string) (ctx context.Context, end func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(parent)
	key := &cancel
	c.cancel[id] = key
	c.running++
	return ctx, func() {
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cancel[id] == key {
			delete(c.cancel, id)
		}
		if c.running--; c.running == 0 && c.stopped {
			close(c.idle)
		}
	}, true
}

// run runs job, the call of ctx, once it has a slot, in turn. With every slot taken it waits
// on a goroutine of its own, so that reading goes on (a cancellation or a ping is read at
// once); if ctx or its parent ends before its turn comes, refused runs instead. (The parent
// is asked too: it ends before ctx does, and a call it ended may free the slot.)
func (c *stdioCalls) run(parent, ctx context.Context, job, refused func()) {
	withSlot := func() {
		defer func() { <-c.slots }()
		job()
	}
	if len(c.waits) == 0 { // none waits before it
		select {
		case c.slots <- struct{}{}:
			c.hand(withSlot)
			return
		default:
		}
	}
	c.waits <- struct{}{}
	go func() {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			<-c.waits
			refused()
			return
		}
		<-c.waits
		if parent.Err() != nil || ctx.Err() != nil {
			<-c.slots
			refused()
			return
		}
		withSlot()
	}()
}

// hand runs job on a free worker, or on a new one when none is free and fewer than the
// slots are started; else the next worker to be free takes it.
func (c *stdioCalls) hand(job func()) {
	select {
	case c.jobs <- job:
		return
	default:
	}
	if c.workers == cap(c.slots) {
		c.jobs <- job
		return
	}
	c.workers++
	go c.work(job)
}

// work runs job, then every job it is given, until the jobs end.
func (c *stdioCalls) work(job func()) {
	for ok := true; ok; job, ok = <-c.jobs {
		job()
	}
}

// stop lets no request start any more, and returns a channel closed once none runs.
func (c *stdioCalls) stop() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		if c.running == 0 {
			close(c.idle)
		}
	}
	return c.idle
}

func (c *stdioCalls) cancelID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.cancel[id]; ok {
		(*cancel)()
	}
}

// readLine reads the next line of r. A line over maxLine bytes is skipped, with an error
// response that carries the request's id when the line's first lineHead bytes name it
// (null otherwise); no more than those bytes of it are held.
func readLine(r *bufio.Reader, maxLine int64, w *stdioWriter) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			buf = append(buf, chunk...)
			if int64(len(buf)) > maxLine && maxLine > 0 {
				tooLong, buf = true, slices.Clone(buf[:min(len(buf), lineHead)])
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			w.write(errorResponse(headID(buf), mcp.INVALID_REQUEST, fmt.Sprintf(
				"Request too large: a line may hold at most %d bytes (the server's -max-line-bytes); send less at once", maxLine)))
			buf = nil
		}
		if len(bytes.TrimSpace(buf)) == 0 {
			buf = nil
		}
		return buf, err
	}
}

// handle runs one message through mcp-go, recovering a panic. A tools/call whose arguments
// hold a number beyond the range of a float64 (which mcp-go's decoder refuses outright,
// as a protocol error) is retried with such numbers turned into strings, so the model
// gets the tool error that names the argument.
func (s *Server) handle(ctx context.Context, line []byte, method string) (resp mcp.JSONRPCMessage) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Interface("panic", r).Str("method", method).Msg("panic while handling a message")
			var head struct {
				ID any `json:"id"`
			}
			json.Unmarshal(line, &head)
			resp = errorResponse(head.ID, mcp.INTERNAL_ERROR, "internal error")
		}
	}()
	resp = s.mcp.HandleMessage(ctx, line)
	if _, failed := resp.(mcp.JSONRPCError); failed && method == string(mcp.MethodToolsCall) {
		if fixed, changed := quoteHugeNumbers(line); changed {
			resp = s.mcp.HandleMessage(ctx, fixed)
		}
	}
	return resp
}

// headID reads the id of the JSON-RPC request that head begins (a line cut short), or
// returns nil when it does not come before the cut: only a number or a string is an id.
func headID(head []byte) any {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "id" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		switch v, _ := dec.Token(); v := v.(type) {
		case json.Number:
			// A number that runs to the cut may go on past it.
			if n, err := v.Int64(); err == nil && dec.InputOffset() < int64(len(head)) {
				return n
			}
		case string:
			return v
		}
		return nil
	}
	return nil
}

func errorResponse(id any, code int, msg string) mcp.JSONRPCMessage {
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Error: mcp.NewJSONRPCErrorDetails(code, msg, nil)}
}

// stdioWriter writes whole messages, one per line, one at a time.
type stdioWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *stdioWriter) write(msg any) {
	if msg == nil {
		return
	}
	if m, ok := msg.(mcp.JSONRPCMessage); ok && m == nil {
		return
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return
	}
	w.writeRaw(data)
}

// writeRaw writes one message already encoded.
func (w *stdioWriter) writeRaw(data []byte) {
	if len(data) == 0 {
		return
	}
	data = append(data, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(data)
}

// stdioSession is the one client session of a stdio server.
type stdioSession struct {
	notifications chan mcp.JSONRPCNotification
	initialized   atomic.Bool
	level         atomic.Value // mcp.LoggingLevel

	mu   sync.Mutex
	info mcp.Implementation
	caps mcp.ClientCapabilities
}

var (
	_ mcpserver.SessionWithLogging    = (*stdioSession)(nil)
	_ mcpserver.SessionWithClientInfo = (*stdioSession)(nil)
)

func (s *stdioSession) SessionID() string { return "stdio" }
func (s *stdioSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notifications
}
func (s *stdioSession) Initialize()       { s.initialized.Store(true) }
func (s *stdioSession) Initialized() bool { return s.initialized.Load() }
func (s *stdioSession) SetLogLevel(level mcp.LoggingLevel) {
	s.level.Store(level)
}
func (s *stdioSession) GetLogLevel() mcp.LoggingLevel {
	if l, ok := s.level.Load().(mcp.LoggingLevel); ok {
		return l
	}
	return mcp.LoggingLevelError
}
func (s *stdioSession) GetClientInfo() mcp.Implementation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}
func (s *stdioSession) SetClientInfo(info mcp.Implementation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info = info
}
func (s *stdioSession) GetClientCapabilities() mcp.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}
func (s *stdioSession) SetClientCapabilities(caps mcp.ClientCapabilities) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps = caps
}
