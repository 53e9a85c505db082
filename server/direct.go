package server

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/memory-mcp/memory-mcp/internal/jsonstr"
)

// The direct way: a tool call decoded once and run on its handler, answered with the bytes
// mcp-go would write, without mcp-go's dispatch (which decodes a message four or five times
// more and, over HTTP, starts a goroutine and builds a session for every request). It
// serves the common calls: over stdio, every tool call of a session opened by initialize
// and every 2026-era tool call; over Streamable HTTP, 2026-era tool calls that ask for no
// log messages. Everything else takes mcp-go's way, and tests (TestStdioDirectCallsAnswerAsMCPGo,
// TestHTTPDirectCallsAnswerAsMCPGo) compare both ways byte for byte.

// rpcRequest is a message as the direct way decodes it: once, arguments included.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  rpcParams       `json:"params"`
}

type rpcParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      json.RawMessage `json:"task"`
	Meta      json.RawMessage `json:"_meta"`
	RequestID json.RawMessage `json:"requestId"` // of notifications/cancelled
}

// directTool returns the handler of a tools/call that the direct way can serve as far as
// the message itself tells: one of our tools, arguments that are an object (or absent), not
// run as a task, and an ID that mcp-go writes back as it came (a string, or an integer
// written plainly: mcp-go decodes IDs as numbers and writes them again).
func (s *Server) directTool(req *rpcRequest) (mcpserver.ToolHandlerFunc, bool) {
	if req.Method != string(mcp.MethodToolsCall) || req.JSONRPC != mcp.JSONRPC_VERSION || len(req.Params.Task) > 0 || !plainID(req.ID) {
		return nil, false
	}
	if a := bytes.TrimSpace(req.Params.Arguments); len(a) > 0 && a[0] != '{' && string(a) != "null" {
		return nil, false
	}
	h, ok := s.toolHandlers[req.Params.Name]
	return h, ok
}

// plainID reports whether id is a JSON string without escapes, or an integer of at most 15
// digits (exact as a float64) written without sign, exponent or leading zero.
func plainID(id json.RawMessage) bool {
	switch {
	case len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"':
		return !bytes.ContainsAny(id[1:len(id)-1], "\"\\")
	case len(id) == 0 || len(id) > 15 || id[0] == '0' && len(id) > 1:
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// direct is the stdio loop's test: the handler of a tool call it can serve, and for a
// 2026-era call its protocol (info). A call without _meta must come in a session opened by
// initialize; a 2026-era call's _meta must hold only what that era puts there (see
// modernInfo). mcp-go's dispatch adds nothing else to such a call (no hooks or filters are
// set for tools) but its cancellation, which the stdio loop does for it; a progress token,
// a trace context, a version or capabilities mcp-go refuses take mcp-go's way.
func (s *Server) direct(ctx context.Context, req *rpcRequest) (h mcpserver.ToolHandlerFunc, info *mcpserver.RequestProtocolInfo, ok bool) {
	if h, ok = s.directTool(req); !ok {
		return nil, nil, false
	}
	sess := mcpserver.ClientSessionFromContext(ctx)
	if sess == nil {
		return nil, nil, false
	}
	if len(req.Params.Meta) > 0 {
		if info, ok = s.infos.get(req.Params.Meta); !ok {
			return nil, nil, false
		}
	} else if !sess.Initialized() {
		return nil, nil, false
	}
	return h, info, true
}

// infoCache keeps what modernInfo read of the _meta values it was given, by their bytes: a
// client sends the same _meta with every call (its protocol version, capabilities and name),
// and reading it as mcp-go does was a fifth of the direct way's JSON time over HTTP. It
// holds at most maxInfos values of at most maxInfoBytes each (a longer one is read every
// time), and starts over when full, so that the clients of the moment are the ones kept.
type infoCache struct {
	mu    sync.Mutex
	infos map[string]*mcpserver.RequestProtocolInfo // nil: not a 2026-era _meta the direct way serves
}

const (
	maxInfos     = 256
	maxInfoBytes = 2048
)

// get is modernInfo(raw), a copy of the cached one where there is one.
func (c *infoCache) get(raw json.RawMessage) (*mcpserver.RequestProtocolInfo, bool) {
	if len(raw) > maxInfoBytes {
		return modernInfo(raw)
	}
	c.mu.Lock()
	info, found := c.infos[string(raw)]
	c.mu.Unlock()
	if !found {
		var ok bool
		if info, ok = modernInfo(raw); !ok {
			info = nil
		}
		c.mu.Lock()
		if c.infos == nil {
			c.infos = map[string]*mcpserver.RequestProtocolInfo{}
		}
		if len(c.infos) >= maxInfos {
			clear(c.infos) // many clients, or one sending a new _meta each time: start over
		}
		c.infos[string(raw)] = info
		c.mu.Unlock()
	}
	if info == nil {
		return nil, false
	}
	cp := *info // the call's own: nothing shares what it may change
	return &cp, true
}

// modernInfo reads a 2026-era request's _meta as mcp-go does (mcp.Meta's accessors); ok is
// false for a progress token or any key but the era's own, a version mcp-go does not accept,
// or missing capabilities (mcp-go then answers, or serves the request its way).
func modernInfo(raw json.RawMessage) (*mcpserver.RequestProtocolInfo, bool) {
	var meta mcp.Meta
	if json.Unmarshal(raw, &meta) != nil || meta.ProgressToken != nil {
		return nil, false
	}
	for k := range meta.AdditionalFields {
		switch k {
		case mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, mcp.MetaKeyClientInfo, mcp.MetaKeyLogLevel:
		default:
			return nil, false
		}
	}
	v := meta.ProtocolVersion()
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(v) || !mcp.IsValidProtocolVersion(v) || caps == nil {
		return nil, false
	}
	if _, ok := meta.AdditionalFields[mcp.MetaKeyClientInfo]; ok && meta.ClientInfo() == nil {
		return nil, false
	}
	return &mcpserver.RequestProtocolInfo{Modern: true, ProtocolVersion: v, ClientInfo: meta.ClientInfo(),
		LogLevel: meta.LogLevel(), ClientCapabilities: caps}, true
}

// callArguments decodes a tool call's arguments as mcp-go does; ok is false when they do
// not decode that way (mcp-go then answers with its error, and nothing runs).
func callArguments(req *rpcRequest) (args map[string]any, ok bool) {
	if string(req.Params.Arguments) == "{}" {
		return map[string]any{}, true // as decoded, without the decoder's setting up
	}
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, false
		}
	}
	return args, true
}

// callDirect runs a tool call on its handler and returns the response, as mcp-go would write
// it (without a line end).
func (s *Server) callDirect(ctx context.Context, handler mcpserver.ToolHandlerFunc, info *mcpserver.RequestProtocolInfo, req *rpcRequest, args map[string]any) (resp []byte) {
	internalError := func() []byte {
		resp := append([]byte(`{"jsonrpc":"2.0","id":`), req.ID...)
		return append(resp, `,"error":{"code":-32603,"message":"internal error"}}`...)
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Interface("panic", r).Str("method", req.Method).Msg("panic while handling a message")
			resp = internalError()
		}
	}()
	call := mcp.CallToolRequest{}
	call.Method = req.Method
	call.Params.Name = req.Params.Name
	call.Params.Arguments = args
	if info != nil {
		// As mcp-go serves a 2026-era request: a session takes the client's identity and
		// capabilities from it (there is no initialize), and the request's protocol (its log
		// level among it) goes with the call. Over HTTP there is no session to keep.
		if sess := mcpserver.ClientSessionFromContext(ctx); sess != nil {
			if withInfo, ok := sess.(mcpserver.SessionWithClientInfo); ok {
				if info.ClientInfo != nil {
					withInfo.SetClientInfo(*info.ClientInfo)
				}
				withInfo.SetClientCapabilities(*info.ClientCapabilities)
			}
			if !sess.Initialized() {
				sess.Initialize()
			}
		}
		ctx = mcpserver.WithRequestProtocolInfo(ctx, info)
	}
	result, err := handler(ctx, call)
	if err != nil || result == nil {
		// Our handlers turn every failure into a result; this is never reached, and the
		// call must not run twice.
		s.log.Error().Err(err).Str("tool", req.Params.Name).Msg("a tool handler gave no result")
		return internalError()
	}
	var metaJSON []byte // the encoded metadata, when it is the server's own
	if info != nil {
		// The 2026 era's result metadata, as mcp-go stamps it.
		if result.GetResultType() == "" {
			result.SetResultType(mcp.ResultTypeComplete)
		}
		if result.Meta == nil {
			metaJSON = s.metaJSON
		}
		if meta := result.EnsureResultMeta(); meta.ServerInfo() == nil {
			meta.SetServerInfo(s.implementation)
		}
	}
	resp = make([]byte, 0, len(req.ID)+len(metaJSON)+100+resultSize(result))
	resp = append(resp, `{"jsonrpc":"2.0","id":`...)
	resp = append(resp, req.ID...)
	resp = append(resp, `,"result":`...)
	resp, err = appendResult(resp, result, metaJSON)
	if err != nil {
		return internalError()
	}
	return append(resp, '}')
}

// appendResult appends a tool's result to dst as json.Marshal encodes it (mcp-go's
// CallToolResult.MarshalJSON, through a map: the keys in order). A result of text content,
// a result type and metadata whose encoding the caller knows (metaJSON, or none), and
// nothing else (what the tools give) is written field by field: the map's way took half
// the JSON time of a call over stdio.
func appendResult(dst []byte, r *mcp.CallToolResult, metaJSON []byte) ([]byte, error) {
	plain := (r.Meta == nil || metaJSON != nil) && r.StructuredContent == nil && len(r.RawStructuredContent) == 0 &&
		len(r.InputRequests) == 0 && r.RequestState == ""
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); !ok || t.Annotations != nil || t.Meta != nil {
			plain = false
		}
	}
	if !plain {
		body, err := json.Marshal(r)
		return append(dst, body...), err
	}
	dst = append(dst, '{')
	if r.Meta != nil {
		dst = append(dst, `"_meta":`...)
		dst = append(dst, metaJSON...)
		dst = append(dst, ',')
	}
	dst = append(dst, `"content":[`...)
	for i, c := range r.Content {
		t := c.(mcp.TextContent)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = appendJSONString(dst, t.Type)
		dst = append(dst, `,"text":`...)
		dst = appendJSONString(dst, t.Text)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if r.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if r.ResultType != "" {
		dst = append(dst, `,"resultType":`...)
		dst = appendJSONString(dst, string(r.ResultType))
	}
	return append(dst, '}'), nil
}

// stampedMeta returns the encoding of the metadata callDirect stamps on a 2026-era result
// that has none: the server's own name and version (impl).
func stampedMeta(impl mcp.Implementation) []byte {
	var meta mcp.Meta
	meta.SetServerInfo(impl)
	b, _ := json.Marshal(&meta) // an Implementation always encodes
	return b
}

// appendJSONString appends s as json.Marshal encodes a string (HTML escaped): written by
// hand so that a listing's text is escaped in one pass, straight into the response.
func appendJSONString(dst []byte, s string) []byte { return jsonstr.Append(dst, s, true) }

// resultSize estimates the encoded size of r's text, to size the response once.
func resultSize(r *mcp.CallToolResult) int {
	n := 0
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); ok {
			n += len(t.Text) + len(t.Text)/8 + 32
		}
	}
	return n
}

// directHTTP answers a Streamable HTTP POST the direct way when it can: a 2026-era tool
// call (that era has no sessions: mcp-go serves each request on a session of its own and
// keeps nothing) that asks for no log messages (which mcp-go would stream as server-sent
// events), with the headers that era requires agreeing with the body as mcp-go checks them.
// body is the request's, read and bounded by the gate; the tenant is in r's context. It
// returns the response body (application/json, status 200), or ok false for mcp-go's way.
func (s *Server) directHTTP(r *http.Request, body []byte) (resp []byte, ok bool) {
	// The headers first, so that an older client's request, or any but a tool call, costs
	// no decoding here: that era's tool call names its version and method in them.
	if !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) || r.Header.Get(mcp.HeaderMethod) != string(mcp.MethodToolsCall) ||
		r.Header.Get(mcp.HeaderLastEventID) != "" {
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, false
	}
	var req rpcRequest
	if !scanRequest(body, &req) { // a line it takes has no result or error, and its params are an object if any
		var msg struct { // decoded once: the arguments stay raw until callArguments
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  *rpcParams      `json:"params"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Result != nil || msg.Error != nil || msg.Params == nil {
			return nil, false
		}
		req = rpcRequest{JSONRPC: msg.JSONRPC, ID: msg.ID, Method: msg.Method, Params: *msg.Params}
	}
	if req.Method != string(mcp.MethodToolsCall) {
		return nil, false
	}
	handler, ok := s.directTool(&req)
	if !ok || len(req.Params.Meta) == 0 {
		return nil, false // an older client's call belongs to a session: mcp-go's way
	}
	info, ok := s.infos.get(req.Params.Meta)
	if !ok || info.LogLevel != "" || r.Header.Get(mcp.HeaderProtocolVersion) != info.ProtocolVersion {
		return nil, false
	}
	// The headers are checked against the tool's name, all that mcp-go reads of a tool
	// call's params there (mcp.ExtractHeaderName decodes them into a struct of the name
	// alone, as req.Params was decoded): params of the name only, not the arguments again.
	name := appendJSONString([]byte(`{"name":`), req.Params.Name)
	if mcp.ValidateStandardHeaders(r.Header.Get, info.ProtocolVersion, mcp.MethodToolsCall, append(name, '}')) != nil {
		return nil, false
	}
	// mcp-go also checks the headers bound to arguments (x-mcp-header in a tool's schema);
	// our tools bind none (TestToolsBindNoHeaders), so that check always passes, after
	// encoding the tool's schema again to find there are none (about 5% of the server's CPU
	// by perf, with 32 writers).
	args, ok := callArguments(&req)
	if !ok {
		return nil, false
	}
	s.directCalls.Add(1)
	return append(s.callDirect(r.Context(), handler, info, &req, args), '\n'), true
}
