package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
)

// ShutdownTimeout is how long a stopping server lets running tool calls finish.
const ShutdownTimeout = 5 * time.Second

// HTTPOptions configure the HTTP transports.
type HTTPOptions struct {
	// Transport is "http" (Streamable HTTP at /mcp) or "sse" (the legacy HTTP+SSE transport
	// at /sse and /message).
	Transport string
	// Listener is where to serve; the server closes it.
	Listener net.Listener
	// MaxRequestBytes caps a request body; a larger one gets 413.
	MaxRequestBytes int64
}

// ServeHTTP serves until ctx is cancelled, then stops accepting connections, lets running
// calls finish (at most ShutdownTimeout), closes the remaining streams and returns nil.
func (s *Server) ServeHTTP(ctx context.Context, opts HTTPOptions) error {
	sdkLog := slog.New(zerolog.NewSlogHandler(sdkLogger(s.log)))
	httpServer := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          stdlog.New(sdkLogger(s.log).With().Str("component", "net/http").Logger(), "", 0),
	}
	mux := http.NewServeMux()
	var closeStreams func()
	switch opts.Transport {
	case "sse":
		sse := mcpserver.NewSSEServer(s.mcp,
			mcpserver.WithSSEContextFunc(copyTenant),
			mcpserver.WithUseFullURLForMessageEndpoint(false),
			mcpserver.WithKeepAlive(true),
			mcpserver.WithHTTPServer(httpServer))
		mux.Handle("/sse", sse)
		mux.Handle("/message", sse)
		closeStreams = sse.CloseSessions
	default:
		streamable := mcpserver.NewStreamableHTTPServer(s.mcp,
			mcpserver.WithHTTPContextFunc(copyTenant),
			mcpserver.WithStreamableHTTPLogger(sdkLog),
			mcpserver.WithStreamableHTTPServer(httpServer),
			mcpserver.WithHeartbeatInterval(30*time.Second))
		mux.Handle("/mcp", streamable)
		closeStreams = func() { streamable.CloseSessions(context.Background()) }
	}
	var handler http.Handler = mux
	if len(s.tenants) > 0 {
		handler = s.authorize(mux)
	}
	httpServer.Handler = guard(handler, opts.MaxRequestBytes, isLoopback(opts.Listener.Addr()))

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
	if err := <-shut; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	<-done
	return nil
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// guard refuses, before any MCP handling, what a local memory server must not serve: on a
// loopback listener, a request whose Host or Origin names another host (DNS rebinding: a
// web page in the user's browser talking to the server) gets 403; a body over maxBytes
// gets 413.
func guard(next http.Handler, maxBytes int64, loopback bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback && (!loopbackHost(r.Host) || !loopbackOrigin(r.Header.Get("Origin"))) {
			http.Error(w, "Forbidden: this server only answers requests addressed to the local host", http.StatusForbidden)
			return
		}
		if r.Body != nil && maxBytes > 0 {
			if r.ContentLength > maxBytes {
				tooLarge(w)
				return
			}
			if r.ContentLength < 0 {
				// Unknown length (chunked): read up to the cap to decide now, not half-way
				// through the SDK's parsing.
				body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
				if err != nil {
					http.Error(w, "Bad request body", http.StatusBadRequest)
					return
				}
				if int64(len(body)) > maxBytes {
					tooLarge(w)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			} else {
				r.Body = http.MaxBytesReader(w, r.Body, maxBytes)
			}
		}
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.Error(w, "Request too large", http.StatusRequestEntityTooLarge)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackOrigin(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && loopbackHost(u.Host)
}
