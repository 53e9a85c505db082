package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// maxStdioRequests bounds the requests served at once over stdio; reading waits beyond it.
const maxStdioRequests = 32

// ServeStdio serves one client over in and out (stdin and stdout) until in ends or ctx is
// cancelled. Either way, every request already read runs to completion and its response
// is written before it returns (at most ShutdownTimeout; then running calls are cancelled).
// Nothing but protocol messages is written to out; a line longer than maxLine bytes is
// answered with an error and skipped.
//
// This is our own loop around mcp-go's message handler rather than mcp-go's StdioServer,
// which, when its input ends, cancels the calls still running and drops queued ones (their
// responses are lost and their changes may be half done).
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, maxLine int64) error {
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

	l := &stdioLoop{s: s, w: w, reqCtx: reqCtx, listenCtx: listenCtx, stopCtx: ctx, token: make(chan struct{}, 1),
		r: bufio.NewReaderSize(in, 64<<10), maxLine: maxLine, inputDone: make(chan struct{}), idleNow: make(chan struct{})}
	l.waiting = inputWaiting(in)
	if h := s.handlersFor(reqCtx); h != nil {
		l.timeout = h.Timeout()
	}
	l.workers = 1
	l.token <- struct{}{}
	defer l.calls.endAll(context.Canceled) // its timer, once every call is over
	go l.work()
	select {
	case <-l.inputDone:
	case <-ctx.Done():
	}
	cancelListen()
	if ctx.Err() != nil {
		s.log.Info().Msg("stopping: letting running calls finish")
	}
	l.mu.Lock()
	l.stopped = true
	idle := l.running == 0
	l.mu.Unlock()
	if !idle {
		select {
		case <-l.idleNow:
		case <-time.After(ShutdownTimeout):
			s.log.Warn().Msg("calls still running after the shutdown timeout; stopping anyway")
			cancelRequests()
			l.calls.endAll(context.Canceled)
			select {
			case <-l.idleNow:
			case <-time.After(time.Second):
			}
		}
	}
	select {
	case <-l.inputDone:
		if l.readErr != nil && !errors.Is(l.readErr, io.EOF) {
			return l.readErr
		}
	default: // stopped by ctx while a read is pending: it ends with the process
	}
	return nil
}

// stdioLoop serves the lines of one stdio client with a pool of workers that take turns
// at reading (leader and followers). The worker that reads a request serves it itself, on
// the goroutine that read it, with no hand-off on its way; should serving take longer than
// handoffAfter, the reading passes to another worker (an idle one, or a new one up to
// maxStdioRequests), so that the next line (a cancellation, another call) is read within
// that time. A call that ends sooner keeps the reading, and no goroutine is woken for it.
// Where the input can be polled (a pipe, on Unix), the reading passes on only once a next
// line is there (read already, or waiting in the pipe), looked for again every
// handoffAfter: a client that waits for each answer, as most do, never wakes another
// worker, even for calls that wait for the disk. Workers live as long as the input, so
// their stacks have grown already.
type stdioLoop struct {
	s                          *Server
	w                          *stdioWriter
	reqCtx, listenCtx, stopCtx context.Context

	// token is the right to read, held by one worker at a time: the leader.
	token   chan struct{}
	r       *bufio.Reader
	maxLine int64
	eof     bool // guarded by token
	// quick says the client sent its last line within twice Config.StdioPoll of the
	// leader's looking for it, so the leader looks for the next one before it waits in a
	// read when rule says so too (see spin).
	quick bool     // guarded by token
	rule  lookRule // whether to look for a quick client's line; guarded by token

	// waiting reports whether the input holds more than r has read (nil: unknown, and
	// the reading passes on unasked); buffered, whether r holds more than the leader took.
	waiting  func() bool
	buffered atomic.Bool

	timeout time.Duration // the handlers' bound on a call (Handlers.Timeout); zero: none
	calls   callWatch     // the direct calls running, their cancellation and deadlines

	inputDone chan struct{} // closed when the input ended; readErr says how
	readErr   error

	mu      sync.Mutex // guards the fields below
	workers int
	idle    int // workers waiting for the token
	running int // requests being served
	stopped bool
	idleNow chan struct{} // closed when running falls to 0 after stopped
}

// yieldEvery is how often a worker that keeps the reading yields its thread between calls
// (runtime.Gosched). A worker that waits for its client and for the disk in system calls,
// as the leader does, never waits in the Go scheduler; after 10 ms the runtime's monitor
// takes it for one that runs too long, preempts it, takes its processor away in the middle
// of a system call and goes back to waking every 20 µs, about twenty times per round of
// seven calls. A yield now and then (one wake-up of another thread) keeps the monitor
// asleep: 9% less CPU per call over stdio on a virtual machine.
const yieldEvery = 5 * time.Millisecond

// handoffAfter is how long a call keeps the reading before passing it on (or looking whether
// to): well over what a durable change on disk takes, so that the reading is rarely passed
// on, and long enough that the timer, left set while calls follow each other (see
// handoff), wakes the runtime's poller about a hundred times a second at most. At 2 ms it
// woke it more than a thousand times a second of calls (723 wake-ups in a run of 2,100
// calls, against 211 at 10 ms and 65 with no timer at all; perf stat of the side-by-side
// mix).
const handoffAfter = 10 * time.Millisecond

// passToken hands the reading on: to an idle worker, or to a new one when none is idle and
// the pool is not full (else the first worker to finish takes it).
func (l *stdioLoop) passToken() {
	l.mu.Lock()
	if l.idle == 0 && l.workers < maxStdioRequests {
		l.workers++
		go l.work()
	}
	l.mu.Unlock()
	l.token <- struct{}{}
}

// handoff is a worker's timer that passes the reading on for a call that outlasts
// handoffAfter (see stdioLoop). mu orders the timer and the worker: serving says a call
// runs and the reading is still the worker's, start when it began; passed, that the timer
// passed it on; armed, that the timer is set.
//
// The timer is set at a call's beginning only when it is not set already, and never
// stopped at a call's end: when it fires it looks at the call running then, and is set
// again for what remains of that call's handoffAfter, or left unset when no call runs.
// A timer set and stopped for every call woke the runtime's network poller on another
// thread again and again (to shorten its sleep, and at the times the stopped timers would
// have fired), each time a virtual CPU woken from its halt on a virtual machine. Now the
// poller wakes about once per handoffAfter while calls follow each other, and not at all
// while the client is idle.
type handoff struct {
	l                      *stdioLoop
	mu                     sync.Mutex
	serving, passed, armed bool
	start                  time.Time
	timer                  *time.Timer
}

func (l *stdioLoop) newHandoff() *handoff {
	h := &handoff{l: l}
	h.timer = time.AfterFunc(time.Hour, h.fire)
	h.timer.Stop()
	return h
}

func (h *handoff) fire() {
	h.mu.Lock()
	if !h.serving {
		h.armed = false // no call runs: the next one sets the timer
		h.mu.Unlock()
		return
	}
	if left := handoffAfter - time.Since(h.start); left > 0 {
		h.timer.Reset(left) // set during an earlier call: this one has time left
		h.mu.Unlock()
		return
	}
	if !h.l.lineWaiting() {
		h.timer.Reset(handoffAfter) // nothing to read yet: look again later
		h.mu.Unlock()
		return
	}
	h.serving, h.passed, h.armed = false, true, false
	h.mu.Unlock()
	h.l.s.handoffs.Add(1)
	h.l.passToken()
}

// begin starts the clock for a call that began at now, and sets the timer unless it is set.
func (h *handoff) begin(now time.Time) {
	h.mu.Lock()
	h.serving, h.passed, h.start = true, false, now
	if !h.armed {
		h.armed = true
		h.l.s.handoffTimers.Add(1)
		h.timer.Reset(handoffAfter)
	}
	h.mu.Unlock()
}

// end reports, once the call is over, whether the worker still holds the reading (once
// passed on, it is someone else's). The timer stays set (see handoff).
func (h *handoff) end() (leading bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving = false
	return !h.passed
}

// stop unsets the timer of a worker that ends.
func (h *handoff) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving, h.armed = false, false
	h.timer.Stop()
}

func (l *stdioLoop) work() {
	handoff := l.newHandoff()
	defer handoff.stop()
	leading := false
	yielded := time.Now()
	for {
		if !leading {
			l.mu.Lock()
			l.idle++
			l.mu.Unlock()
			<-l.token
			l.mu.Lock()
			l.idle--
			l.mu.Unlock()
			leading = true
		}
		if l.eof {
			l.token <- struct{}{} // for the next worker, which ends too
			return
		}
		if now := time.Now(); now.Sub(yielded) >= yieldEvery {
			runtime.Gosched()
			yielded = now
			l.s.yields.Add(1)
		}
		line, err := l.next()
		if err != nil {
			l.eof, l.readErr = true, err
			close(l.inputDone)
			l.token <- struct{}{}
			return
		}
		if l.stopCtx.Err() != nil {
			continue // stopping: nothing new starts
		}
		var req rpcRequest
		if !l.s.parse(line, &req, l.w) {
			continue
		}
		switch {
		case len(req.ID) == 0 || string(req.ID) == "null":
			// A notification, served before the next line is read, in order.
			if req.Method == string(mcp.MethodNotificationCancelled) {
				l.cancel(req.Params.RequestID)
			}
			l.s.handle(l.reqCtx, line, req.Method)
			continue
		case req.Method == string(mcp.MethodSubscriptionsListen):
			go func() { l.w.write(l.s.handle(l.listenCtx, line, req.Method)) }()
			continue
		}
		l.mu.Lock()
		stopped := l.stopped
		if !stopped {
			l.running++
		}
		l.mu.Unlock()
		if stopped {
			continue
		}
		handoff.begin(time.Now())
		l.serve(line, &req)
		leading = handoff.end()
		l.mu.Lock()
		if l.running--; l.running == 0 && l.stopped {
			close(l.idleNow)
		}
		l.mu.Unlock()
	}
}

// lineWaiting reports whether a next line may be there to read (see stdioLoop).
func (l *stdioLoop) lineWaiting() bool {
	return l.waiting == nil || l.buffered.Load() || l.waiting()
}

// serve answers one request.
func (l *stdioLoop) serve(line []byte, req *rpcRequest) {
	handler, info, ok := l.s.direct(l.reqCtx, req)
	var args map[string]any
	if ok {
		args, ok = callArguments(req)
	}
	if ok {
		// The call's deadline comes with its cancellation, rather than from the handlers
		// under it, which keep it (see Handlers.Timeout and callContext).
		ctx := l.calls.start(l.reqCtx, string(bytes.TrimSpace(req.ID)), l.timeout)
		l.w.writeRaw(l.s.callDirect(ctx, handler, info, req, args))
		l.calls.end(ctx)
		return
	}
	l.w.write(l.s.handle(l.reqCtx, line, req.Method))
}

// cancel cancels the direct call with the given id, if one runs.
func (l *stdioLoop) cancel(id json.RawMessage) {
	l.calls.cancelID(string(bytes.TrimSpace(id)))
}

// MaxStdioPoll bounds Config.StdioPoll: a look that finds nothing costs its whole length of
// CPU.
const MaxStdioPoll = 10 * time.Millisecond

// lineHead is how much of a line over maxLine bytes is kept, to read its request's id from.
const lineHead = 64 << 10

// next reads the next non-blank line. A line over maxLine bytes is skipped, with an error
// response that carries the request's id when the line's first lineHead bytes name it
// (null otherwise); no more than those bytes of it are held.
func (l *stdioLoop) next() ([]byte, error) {
	var buf []byte
	tooLong := false
	// For a quick client, look for its line before waiting for it if the rule says so;
	// either way, note how soon it came (see spin).
	var looked time.Time
	spun := false
	if l.waiting != nil && l.s.stdioPoll > 0 && l.r.Buffered() == 0 {
		looked = time.Now()
		if l.quick && l.rule.shouldLook() {
			l.spin(looked)
			spun = true
		}
	}
	for {
		chunk, err := l.r.ReadSlice('\n')
		if !looked.IsZero() {
			d := time.Since(looked)
			l.quick = d < 2*l.s.stdioPoll
			l.rule.observe(d, spun)
			looked = time.Time{}
		}
		if !tooLong {
			if int64(len(buf)+len(chunk)) > l.maxLine && l.maxLine > 0 {
				buf = append(buf, chunk...)
				tooLong, buf = true, slices.Clone(buf[:min(len(buf), lineHead)])
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			if err == nil || len(chunk) > 0 {
				l.w.write(errorResponse(headID(buf), mcp.INVALID_REQUEST, fmt.Sprintf(
					"Request too large: a line may hold at most %d bytes (the server's -max-line-bytes); send less at once", l.maxLine)))
			}
		} else if len(bytes.TrimSpace(buf)) > 0 {
			l.buffered.Store(l.r.Buffered() > 0)
			return buf, nil
		}
		buf, tooLong = nil, false
		if err != nil {
			return nil, err
		}
	}
}

// spin looks for a next line in the input until one is there or Config.StdioPoll has
// passed since start: next does so when StdioPoll is set (-stdio-poll, 100 µs unless set
// otherwise; New's zero Config has it off), for a quick client, when the look's rule says
// so (lookRule).
//
// A client is quick when its last line came within twice the look's length of the worker's
// looking for it (or waiting for it), as one does that waits for each answer and sends its
// next request soon after: 40–160 µs for the TypeScript SDK's client on this project's
// machine.
//
// Why: a thread that waits in a read is woken by the client's write, and on a virtual
// machine whose idle virtual CPUs halt at once (as this project's do: no halt polling),
// that wake-up is the host scheduling a halted virtual CPU, tens of microseconds on each
// call. Looking for the line meanwhile (poll(2) with no timeout, on an input that can be
// polled, yielding the CPU between looks to any thread that wants it) keeps the CPU awake
// and finds the line without a wake-up. A quick client whose line comes late costs the
// whole look in CPU; a slow one (a model's turn, a person) costs at most one look, after
// which the worker waits in reads until the client is quick again. (Twice, because a line
// read after a wait in a read came that much later: the wake-up's own time.)
//
// Why the rule: looking helps a client that takes its time to answer and slows one that
// answers at once. With the TypeScript SDK's client, 100 µs looks gave about 8% more
// calls/s in the side-by-side mix for about 35 µs more CPU per call; a Go client whose
// next line is mostly there within 5 µs of a plain wait took 14–20% longer per no-op call
// with every line looked for (2.1–2.7× as long in short turns), and lookRule keeps its
// looks to a fraction of a percent of its lines (docs/performance.md, "Looking for the
// client's line", "Why a look slows a Go client" and "The look's rule").
func (l *stdioLoop) spin(start time.Time) {
	for !l.waiting() {
		yieldThread() // to a thread that wants this CPU, such as the client's
		if time.Since(start) >= l.s.stdioPoll {
			l.s.spunOut.Add(1)
			return
		}
	}
	l.s.spunIn.Add(1)
}

// parse decodes a line into req, answering a line that is no JSON with a parse error. It
// reports whether the line is a message to serve (a response to a request of ours, which
// we never send, is not).
func (s *Server) parse(line []byte, req *rpcRequest, w *stdioWriter) bool {
	if scanRequest(line, req) {
		return req.Method != ""
	}
	if err := json.Unmarshal(line, req); err != nil {
		// Arguments that do not decode as they are (a number beyond a float64's range):
		// the head alone, and mcp-go's way.
		*req = rpcRequest{}
		var h struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(line, &h); err != nil {
			w.write(errorResponse(nil, mcp.PARSE_ERROR, "Parse error"))
			return false
		}
		req.ID, req.Method = h.ID, h.Method
	}
	return req.Method != ""
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
			if n, err := v.Int64(); err == nil {
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
