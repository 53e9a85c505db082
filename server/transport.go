package server

import (
	"context"
	"errors"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
)

// ShutdownTimeout is how long a stopping server lets running tool calls finish.
const ShutdownTimeout = 5 * time.Second

// HTTPOptions configure the HTTP transports.
type HTTPOptions struct {
	// Transport is "http" (Streamable HTTP at /mcp, the default) or "sse" (the legacy
	// HTTP+SSE transport at /sse and /message).
	Transport string
	// Listener is where to serve; the server closes it.
	Listener net.Listener
	// MaxRequestBytes caps a request body; a larger one gets 413 (zero: 4 MiB).
	MaxRequestBytes int64
	// Limits bound the work and streams in flight (zero: DefaultLimits).
	Limits Limits
	// Sessions bound the Streamable HTTP sessions (zero: DefaultSessionLimits).
	Sessions SessionLimits
	// AllowedOrigins are the web origins (scheme://host[:port]) whose pages may call the
	// server; any other request carrying an Origin is refused, except a local page on a
	// loopback listener.
	AllowedOrigins []string
	// AllowedHosts are Host names (with or without a port) that a loopback listener also
	// answers, such as the name a reverse proxy on the same host forwards with.
	AllowedHosts []string
	// Timeouts: reading a request's headers, then its body; writing each part of a
	// response (a client that does not read its event stream for that long is
	// disconnected); and keeping an idle connection. Zero: DefaultTimeouts.
	Timeouts Timeouts
	// Now is the clock for session expiry (time.Now when nil).
	Now func() time.Time
	// UI serves the web page under /ui/: tenants log in with their bearer token; without
	// tenants, a login link valid while the server runs is logged at start.
	UI bool
}

// Timeouts of the HTTP transports.
type Timeouts struct {
	Header, Body, Write, Idle time.Duration
}

// DefaultTimeouts: 10 s for headers, 30 s for a body, 30 s per write, 60 s idle.
func DefaultTimeouts() Timeouts {
	return Timeouts{Header: 10 * time.Second, Body: 30 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second}
}

// maxConns is the number of open connections beyond which idle keep-alive connections are
// closed to make room.
const maxConns = 1024

// ServeHTTP serves until ctx is cancelled, then stops accepting connections, lets running
// calls finish (at most ShutdownTimeout), closes the remaining streams and returns nil.
func (s *Server) ServeHTTP(ctx context.Context, opts HTTPOptions) error {
	conns := newConnTracker(maxConns)
	httpServer := &http.Server{
		MaxHeaderBytes: 64 << 10,
		ConnState:      conns.track,
		ErrorLog:       stdlog.New(sdkLogger(s.log).With().Str("component", "net/http").Logger(), "", 0),
	}
	var closeStreams func()
	httpServer.Handler, closeStreams = s.httpHandler(ctx, &opts, httpServer)
	httpServer.ReadHeaderTimeout, httpServer.IdleTimeout = opts.Timeouts.Header, opts.Timeouts.Idle
	done := make(chan error, 1)
	go func() { done <- httpServer.Serve(opts.Listener) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.log.Info().Msg("stopping: no new connections; letting running calls finish")
	shutCtx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout+time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- httpServer.Shutdown(shutCtx) }()
	if !s.drain(ShutdownTimeout) {
		s.log.Warn().Msg("calls still running after the shutdown timeout; stopping anyway")
	}
	closeStreams() // long-lived event streams would otherwise hold Shutdown open
	if ui := s.ui.Load(); ui != nil {
		ui.EndAll() // and so would the web page's
	}
	err := <-shut
	<-done
	s.notify.close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Handler returns the HTTP transport of opts (Streamable HTTP at /mcp, or SSE) with
// everything ServeHTTP puts before it (origins, hosts, tokens, budgets and queue, sessions,
// the web page) as an http.Handler, for an HTTP server of the caller's own or an httptest
// server; its background work stops when ctx is done. With no opts.Listener it answers as a
// loopback listener does: Hosts other than local ones and opts.AllowedHosts are refused.
func (s *Server) Handler(ctx context.Context, opts HTTPOptions) http.Handler {
	h, _ := s.httpHandler(ctx, &opts, nil)
	return h
}

// httpHandler builds the handler of ServeHTTP and Handler, filling in opts' defaults; with
// httpServer, mcp-go's transports know the server they run in.
func (s *Server) httpHandler(ctx context.Context, opts *HTTPOptions, httpServer *http.Server) (http.Handler, func()) {
	if opts.Transport == "" {
		opts.Transport = "http"
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 4 << 20
	}
	s.transport.Store(opts.Transport)
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits()
	}
	if opts.Sessions.Idle == 0 && opts.Sessions.Max == 0 {
		key, store := opts.Sessions.Key, opts.Sessions.Store
		opts.Sessions = DefaultSessionLimits()
		opts.Sessions.Key, opts.Sessions.Store = key, store
	}
	if opts.Timeouts == (Timeouts{}) {
		opts.Timeouts = DefaultTimeouts()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	sdkLog := slog.New(zerolog.NewSlogHandler(sdkLogger(s.log)))
	mux := http.NewServeMux()
	var closeStreams func()
	sessions := newSessionTable(opts.Sessions, opts.Now)
	switch opts.Transport {
	case "sse":
		sseOpts := []mcpserver.SSEOption{
			mcpserver.WithSSEContextFunc(copyTenant),
			mcpserver.WithUseFullURLForMessageEndpoint(false),
			mcpserver.WithKeepAlive(true),
		}
		if httpServer != nil {
			sseOpts = append(sseOpts, mcpserver.WithHTTPServer(httpServer))
		}
		sse := mcpserver.NewSSEServer(s.mcp, sseOpts...)
		mux.Handle("/sse", sse)
		mux.Handle("/message", sse)
		closeStreams = sse.CloseSessions
	default:
		streamOpts := []mcpserver.StreamableHTTPOption{
			mcpserver.WithHTTPContextFunc(copyTenant),
			mcpserver.WithStreamableHTTPLogger(sdkLog),
			mcpserver.WithSessionIdManagerResolver(sessions),
			mcpserver.WithDisableLocalhostProtection(true), // the gate checks Host, with -allowed-hosts
			mcpserver.WithHeartbeatInterval(30 * time.Second),
		}
		if httpServer != nil {
			streamOpts = append(streamOpts, mcpserver.WithStreamableHTTPServer(httpServer))
		}
		streamable := mcpserver.NewStreamableHTTPServer(s.mcp, streamOpts...)
		// Ending a session also releases what mcp-go keeps for it: the same as the
		// client's DELETE, sent to mcp-go directly.
		sessions.end = func(id string) {
			r, _ := http.NewRequest(http.MethodDelete, "/mcp", nil)
			r.Header.Set(mcpserver.HeaderKeySessionID, id)
			streamable.ServeHTTP(&discardWriter{}, r)
		}
		mux.Handle("/mcp", streamable)
		closeStreams = func() { streamable.CloseSessions(context.Background()) }
		go func() {
			every := min(max(opts.Sessions.Idle/4, time.Second), time.Minute)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					sessions.sweep()
				}
			}
		}()
	}
	if opts.UI {
		s.startUI(*opts)
	}
	g := &gate{
		s: s, next: mux, opts: *opts, sessions: sessions,
		loopback: opts.Listener == nil || isLoopback(opts.Listener.Addr()),
		budget:   newBudget(opts.Limits),
		sse:      map[string]*sseStream{},
		streams:  map[string]map[*context.CancelFunc]bool{},
		waiting:  map[string]*context.CancelFunc{},
	}
	g.cors = newCORS(http.HandlerFunc(g.serveMCP))
	end := g.endStreams
	s.tenantsRemoved.Store(&end)
	return g, closeStreams

}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
