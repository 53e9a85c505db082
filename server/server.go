package server

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/webui"
)

// Tool modes.
const (
	ToolsSplit  = "split"  // six tools, memory_view … memory_rename
	ToolsSingle = "single" // one tool, memory, taking the native memory_20250818 input
)

// Config says how the MCP server presents the memory.
type Config struct {
	// Tools is ToolsSplit (the default) or ToolsSingle.
	Tools string
	// Instructions is sent as the server's instructions, and carried by the memory_protocol
	// prompt; "" means DefaultInstructions, as in the command.
	Instructions string
	// NoInstructions sends no instructions (the command's -instructions none); the prompt
	// still carries them.
	NoInstructions bool
	// Version is reported as the server's version.
	Version string
	// Logger receives one line per tool call and the SDK's own warnings. Contents of memory
	// files are never logged.
	Logger zerolog.Logger
	// Tenants, when not empty, makes the HTTP transports require a tenant's bearer token
	// and serve each tenant its own memory; the handlers given to New are then not used.
	Tenants []Tenant
}

// Server is memory-mcp's MCP server: the memory commands as tools, the memory protocol as
// instructions and a prompt, served over stdio, Streamable HTTP or SSE.
type Server struct {
	mcp      *mcpserver.MCPServer
	h        *handlers.Memory
	log      zerolog.Logger
	tools    string
	inflight atomic.Int64 // tool calls running now; shutdown waits for them

	hasTenants bool                     // the server was started with tenants: a request needs one
	tenants    atomic.Pointer[[]Tenant] // replaced whole by SetTenants
	sessions   sync.Map                 // MCP session id → name of the tenant that opened it
	// tenantsRemoved, set by ServeHTTP, ends the event streams of tenants SetTenants removed.
	tenantsRemoved atomic.Pointer[func(names []string)]
	authFailures   zerolog.Logger                // sampled: a flood of bad tokens writes a few lines a second
	ui             atomic.Pointer[webui.Handler] // the web page, when ServeHTTP serves it
	notify         *notifier                     // resource notifications
	transport      atomic.Value                  // "stdio", "http" or "sse": what the versions record
}

// How the server names itself to clients.
const (
	serverName        = "memory-mcp"
	serverTitle       = "Memory"
	serverDescription = "A /memories directory that keeps what the model learns across conversations (Anthropic's memory tool)."
)

// New builds the server over the given handlers.
func New(h *handlers.Memory, cfg Config) *Server {
	if cfg.Tools == "" {
		cfg.Tools = ToolsSplit
	}
	s := &Server{h: h, log: cfg.Logger, tools: cfg.Tools, hasTenants: len(cfg.Tenants) > 0}
	tenants := cfg.Tenants
	s.tenants.Store(&tenants)
	s.authFailures = cfg.Logger.Sample(&zerolog.BurstSampler{Burst: 5, Period: time.Second})
	hooks := &mcpserver.Hooks{}
	// A session belongs to the tenant that opened it; authorize refuses anyone else's token.
	hooks.AddOnRegisterSession(func(ctx context.Context, session mcpserver.ClientSession) {
		if t := tenantFrom(ctx); t != nil {
			s.sessions.Store(session.SessionID(), t.Name)
		}
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, session mcpserver.ClientSession) {
		s.sessions.Delete(session.SessionID())
	})
	endSSEListens(hooks, s)
	// A read-only store lists only view. Calls of the other tools still reach the handlers,
	// which refuse them with the message the model can act on (a filter would make them
	// "tool not found" protocol errors).
	hooks.AddAfterListTools(func(ctx context.Context, id any, req *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		if h := s.handlersFor(ctx); h != nil && h.ReadOnlyStore() && s.tools == ToolsSplit {
			res.Tools = slices.DeleteFunc(res.Tools, func(t mcp.Tool) bool { return t.Name != "memory_view" })
		}
	})
	// The instructions name the mounts of the memory the session works on.
	nameMounts := func(ctx context.Context, instructions *string) {
		if h := s.handlersFor(ctx); h != nil && *instructions != "" {
			*instructions += MountInstructions(h)
		}
	}
	hooks.AddAfterInitialize(func(ctx context.Context, id any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
		nameMounts(ctx, &res.Instructions)
	})
	hooks.AddAfterDiscover(func(ctx context.Context, id any, req *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		nameMounts(ctx, &res.Instructions)
	})
	s.notify = newNotifier(s)
	s.notify.hooks(hooks)
	hooks.AddAfterListResources(func(ctx context.Context, id any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		s.listResources(ctx, req, res)
	})
	opts := []mcpserver.ServerOption{
		mcpserver.WithHooks(hooks),
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithPromptCapabilities(false),
		mcpserver.WithResourceCapabilities(true, true),
		mcpserver.WithCompletions(),
		mcpserver.WithResourceCompletionProvider(s),
		mcpserver.WithLogging(),
		mcpserver.WithLogger(slog.New(zerolog.NewSlogHandler(sdkLogger(cfg.Logger)))),
		mcpserver.WithTitle(serverTitle),
		mcpserver.WithDescription(serverDescription),
	}
	if cfg.Instructions == "" {
		cfg.Instructions = DefaultInstructions(cfg.Tools)
	}
	if !cfg.NoInstructions {
		opts = append(opts, mcpserver.WithInstructions(cfg.Instructions))
	}
	s.mcp = mcpserver.NewMCPServer(serverName, cfg.Version, opts...)

	defs := splitTools()
	if cfg.Tools == ToolsSingle {
		defs = []toolDef{singleTool()}
	}
	for _, d := range defs {
		s.mcp.AddTool(d.tool, s.toolHandler(d.tool.Name, d.command))
	}
	s.mcp.AddPrompt(protocolPrompt(cfg.Instructions))
	s.mcp.AddResourceTemplate(resourcesTemplate(), s.readResource)
	return s
}

// sdkLogger is the logger handed to mcp-go. Its info lines (two per request) are noise next
// to ours, so they show only at debug level; its warnings and errors always do.
func sdkLogger(l zerolog.Logger) zerolog.Logger {
	l = l.With().Str("component", "mcp-go").Logger()
	if l.GetLevel() > zerolog.DebugLevel {
		return l.Level(max(l.GetLevel(), zerolog.WarnLevel))
	}
	return l
}

// handlersFor returns the memory a request works on: its tenant's, or the server's.
func (s *Server) handlersFor(ctx context.Context) *handlers.Memory {
	if t := tenantFrom(ctx); t != nil {
		return t.Memory
	}
	if s.hasTenants {
		return nil // tenants configured, and this request has none: never a default memory
	}
	return s.h
}

// SetTenants replaces the tenants (the tenants file was reloaded). A removed tenant's token
// is refused from now on, its sessions are forgotten and its event streams end; a tenant
// whose token changed must use the new one, and its sessions on the web page end (a token
// is rotated when it may have leaked).
func (s *Server) SetTenants(tenants []Tenant) {
	old := *s.tenants.Swap(&tenants)
	var removed, rotated []string
	for _, o := range old {
		i := slices.IndexFunc(tenants, func(t Tenant) bool { return t.Name == o.Name })
		switch {
		case i < 0:
			removed = append(removed, o.Name)
		case tenants[i].hash != o.hash:
			rotated = append(rotated, o.Name)
		}
	}
	if ui := s.ui.Load(); ui != nil && len(removed)+len(rotated) > 0 {
		ui.EndSessions(append(removed, rotated...))
	}
	if len(removed) == 0 {
		return
	}
	s.sessions.Range(func(id, owner any) bool {
		if slices.Contains(removed, owner.(string)) {
			s.sessions.Delete(id)
		}
		return true
	})
	if end := s.tenantsRemoved.Load(); end != nil {
		(*end)(removed)
	}
}

// MCP returns the underlying mcp-go server, for in-process clients.
func (s *Server) MCP() *mcpserver.MCPServer { return s.mcp }

// toolHandler adapts one command (or, for command "", the native input) to a tool. Every
// outcome is a tool result: errors the model can fix and storage failures alike carry
// isError, so the model sees them; a panic in a command becomes docs/behaviour.md §4's internal error.
func (s *Server) toolHandler(tool, command string) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		start := time.Now()
		args := req.GetArguments()
		if args == nil {
			args = map[string]any{}
		}
		cmd := command
		if cmd == "" {
			cmd, _ = args["command"].(string)
		}
		log := s.log
		actor := vfs.ActorLocal
		client := s.client(ctx)
		if t := tenantFrom(ctx); t != nil {
			log = log.With().Str("tenant", t.Name).Logger()
			actor, client.Tenant = t.Name, t.Name
		}
		ctx = vfs.WithClient(vfs.WithActor(ctx, actor), client)
		res := s.call(ctx, command, cmd, args)
		d := time.Since(start)
		c := describeCall(tool, cmd, args, res, d)
		logCall(log, c)
		s.logToClient(ctx, c)
		if res.IsError {
			return mcp.NewToolResultError(res.Text), nil
		}
		return mcp.NewToolResultText(res.Text), nil
	}
}

// client says which MCP client a call came from, for the versions it makes: the name and
// version the request's _meta gives, else the session's initialize, cut to printable
// labels (the client chose them).
func (s *Server) client(ctx context.Context) vfs.Client {
	var info mcp.Implementation
	if p := mcpserver.RequestProtocolInfoFromContext(ctx); p != nil && p.ClientInfo != nil {
		info = *p.ClientInfo
	} else if cs, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		info = cs.GetClientInfo()
	}
	transport, _ := s.transport.Load().(string)
	return vfs.Client{Name: label(info.Name), Version: label(info.Version), Transport: transport}
}

// label is a client-given name kept printable (see vfs.Label) and short.
func label(s string) string {
	s = vfs.Label(s)
	for len(s) > 64 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return strings.TrimSpace(s)
}

// call runs the command on the request's memory. The handlers turn every failure, a panic
// included, into a result.
func (s *Server) call(ctx context.Context, command, cmd string, args map[string]any) handlers.Result {
	h := s.handlersFor(ctx)
	if h == nil {
		return handlers.NoMemory(cmd)
	}
	if command == "" {
		return h.Exec(ctx, args)
	}
	return h.Call(ctx, command, args)
}

// call describes one tool call for the log and the client: tool, command, virtual paths,
// bytes in and out, duration and outcome ("ok", "refused" for an error the model can act
// on, "failed" for a storage failure or panic) with the error's code. A changing command's
// line is an audit line, which also gives the bytes before and after the change: the sums
// over the files the change feed says it changed (a directory counts every file below it).
// File contents are never part of it.
type callLine struct {
	tool, command     string
	paths             [][2]string // argument name, value
	bytesIn, bytesOut int
	duration          time.Duration
	outcome, code     string
	err               error
	audit             bool
	before, after     int64
}

func describeCall(tool, cmd string, args map[string]any, res handlers.Result, d time.Duration) callLine {
	c := callLine{tool: tool, command: cmd, bytesOut: len(res.Text), duration: d, outcome: "ok", code: res.Code, err: res.Err}
	switch {
	case res.Err != nil:
		c.outcome = "failed"
	case res.IsError:
		c.outcome = "refused"
	}
	for _, k := range []string{"path", "old_path", "new_path"} {
		if v, ok := args[k].(string); ok {
			if len(v) > vfs.MaxPathBytes || handlers.HasSecret(v) {
				v = "[redacted]" // a path that could not be valid, or that carries a credential
			}
			c.paths = append(c.paths, [2]string{k, v})
		}
	}
	for _, k := range []string{"file_text", "old_str", "new_str", "insert_text"} {
		if v, ok := args[k].(string); ok {
			c.bytesIn += len(v)
		}
	}
	c.audit = cmd != "view" && slices.Contains(handlers.Commands, cmd)
	if c.audit && res.Batch != nil {
		c.before, c.after = res.Batch.Bytes()
	}
	return c
}

// logCall writes the call's line to the server's log.
func logCall(log zerolog.Logger, c callLine) {
	ev := log.Info()
	if c.err != nil {
		ev = log.Error().Err(c.err)
	}
	ev = ev.Str("tool", c.tool).Str("command", c.command)
	for _, p := range c.paths {
		ev = ev.Str(p[0], p[1])
	}
	ev = ev.Int("bytes_in", c.bytesIn).Int("bytes_out", c.bytesOut).Dur("duration", c.duration).Str("outcome", c.outcome)
	if c.code != "" {
		ev = ev.Str("code", c.code)
	}
	if !c.audit {
		ev.Msg("tool call")
		return
	}
	ev.Int64("bytes_before", c.before).Int64("bytes_after", c.after).Msg("audit")
}

// logToClient sends the call's line to the client as an MCP log message (logging
// capability), when the session asked for that level: info for a call that worked, warning
// for a refused one, error for a failure (whose cause stays in the server's log).
func (s *Server) logToClient(ctx context.Context, c callLine) {
	level := mcp.LoggingLevelInfo
	switch c.outcome {
	case "refused":
		level = mcp.LoggingLevelWarning
	case "failed":
		level = mcp.LoggingLevelError
	}
	if !wantsLog(ctx, level) {
		return // the message's map would be built for nothing
	}
	data := map[string]any{"tool": c.tool, "command": c.command, "bytes_in": c.bytesIn, "bytes_out": c.bytesOut,
		"duration_ms": float64(c.duration.Microseconds()) / 1000, "outcome": c.outcome}
	for _, p := range c.paths {
		data[p[0]] = p[1]
	}
	if c.code != "" {
		data["code"] = c.code
	}
	if c.audit {
		data["bytes_before"], data["bytes_after"] = c.before, c.after
	}
	s.mcp.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, "memory-mcp", data))
}

// wantsLog reports whether the call's client takes log messages of level, as mcp-go's
// SendLogMessageToClient decides, which then decides again: a 2026-era request names its
// level itself; a 2025-era session set one with logging/setLevel.
func wantsLog(ctx context.Context, level mcp.LoggingLevel) bool {
	session := mcpserver.ClientSessionFromContext(ctx)
	if session == nil || !session.Initialized() {
		return false
	}
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && level.ShouldSendTo(info.LogLevel)
	}
	sl, ok := session.(mcpserver.SessionWithLogging)
	return ok && level.ShouldSendTo(sl.GetLogLevel())
}

// drain waits until no tool call is running, or until timeout; it reports whether all finished.
func (s *Server) drain(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for s.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// ready reports whether every memory the server serves answers a look at its root.
func (s *Server) ready(ctx context.Context) bool {
	var all []*handlers.Memory
	if s.h != nil && !s.hasTenants {
		all = append(all, s.h)
	}
	for _, t := range *s.tenants.Load() {
		all = append(all, t.Memory)
	}
	for _, h := range all {
		if h.Ready(ctx) != nil {
			return false
		}
	}
	return true
}

// startUI makes the web page that ServeHTTP serves under /ui/. With tenants, a tenant logs
// in with its bearer token and sees its own memory; without, the server's memory is opened
// by a login link, logged now, that works while the server runs.
func (s *Server) startUI(opts HTTPOptions) {
	cfg := webui.Config{
		AllowedOrigins: opts.AllowedOrigins,
		MaxBodyBytes:   opts.MaxRequestBytes,
		Logger:         s.log,
		Memory: func(name string) *handlers.Memory {
			if !s.hasTenants {
				return s.h
			}
			for _, t := range *s.tenants.Load() {
				if t.Name == name {
					return t.Memory
				}
			}
			return nil
		},
	}
	if s.hasTenants {
		cfg.Login = func(token string) (string, bool) {
			if t := s.tenantByToken(token); t != nil {
				return t.Name, true
			}
			return "", false
		}
	}
	ui := webui.New(cfg)
	s.ui.Store(ui)
	host := "HOST"
	if opts.Listener != nil {
		host = opts.Listener.Addr().String()
	}
	if !s.hasTenants {
		s.log.Info().Str("url", "http://"+host+ui.LoginLink("", false)).
			Msg("web page: open this link to log in (it works while the server runs)")
	} else {
		s.log.Info().Str("url", "http://"+host+webui.Prefix).Msg("web page: tenants log in with their token")
	}
}
