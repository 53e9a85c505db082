package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// nothing is written to out after that.
	notesDone, notesOver := make(chan struct{}), make(chan struct{})
	defer func() { close(notesDone); <-notesOver }()
	go func() {
		defer close(notesOver)
		for {
			select {
			case n := <-sess.notifications:
				w.write(n)
			case <-notesDone:
				return
			}
		}
	}()

	lines := make(chan []byte)
	readDone := make(chan error, 1)
	go func() { readDone <- readLines(in, maxLine, lines, w) }()

	var running sync.WaitGroup
	slots := make(chan struct{}, maxStdioRequests)
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			s.dispatch(reqCtx, listenCtx, line, w, &running, slots)
		case <-ctx.Done():
			break read
		}
	}
	cancelListen()
	if ctx.Err() != nil {
		s.log.Info().Msg("stopping: letting running calls finish")
	}
	done := make(chan struct{})
	go func() { running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ShutdownTimeout):
		s.log.Warn().Msg("calls still running after the shutdown timeout; stopping anyway")
		cancelRequests()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
	select {
	case err := <-readDone:
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	default: // stopped by ctx while a read is pending: it ends with the process
	}
	return nil
}

// readLines sends each line of in to lines and closes it at the end of in. A line over
// maxLine bytes is skipped, with an error response (its id is unknown: null).
func readLines(in io.Reader, maxLine int64, lines chan<- []byte, w *stdioWriter) error {
	defer close(lines)
	r := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if int64(len(buf)+len(chunk)) > maxLine && maxLine > 0 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			if err == nil || len(chunk) > 0 {
				w.write(errorResponse(nil, mcp.INVALID_REQUEST, fmt.Sprintf("Request too large: the limit is %d bytes", maxLine)))
			}
		} else if len(bytes.TrimSpace(buf)) > 0 {
			lines <- buf
		}
		buf, tooLong = nil, false
		if err != nil {
			return err
		}
	}
}

// dispatch serves one line: a request on its own goroutine (at most maxStdioRequests at
// once), a notification inline, a response to a request of ours (we send none) not at all.
func (s *Server) dispatch(reqCtx, listenCtx context.Context, line []byte, w *stdioWriter, running *sync.WaitGroup, slots chan struct{}) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		w.write(errorResponse(nil, mcp.PARSE_ERROR, "Parse error"))
		return
	}
	if head.Method == "" {
		return
	}
	if len(head.ID) == 0 || string(head.ID) == "null" {
		s.handle(reqCtx, line, head.Method)
		return
	}
	if head.Method == string(mcp.MethodSubscriptionsListen) {
		go func() { w.write(s.handle(listenCtx, line, head.Method)) }()
		return
	}
	running.Add(1)
	slots <- struct{}{}
	go func() {
		defer running.Done()
		defer func() { <-slots }()
		w.write(s.handle(reqCtx, line, head.Method))
	}()
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
