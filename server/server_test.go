package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/memorytest"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func newServer(t *testing.T, tools string, log *bytes.Buffer) (*server.Server, *client.Client) {
	t.Helper()
	logger := zerolog.Nop()
	if log != nil {
		logger = zerolog.New(log)
	}
	h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	return newServerFrom(t, server.New(h, server.Config{Tools: tools, Instructions: server.DefaultInstructions(tools), Version: "test", Logger: logger}))
}

// newServerFrom connects an in-process client to s.
func newServerFrom(t testing.TB, s *server.Server) (*server.Server, *client.Client) {
	t.Helper()
	c, err := client.NewInProcessClient(s.MCP())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}

// golden compares got with testdata/toolsnaps/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("..", "testdata", "toolsnaps", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file %s (run go test ./... -update): %v", path, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, diff)
	}
}

func indentJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var generic any // re-decoding sorts object keys
	json.Unmarshal(raw, &generic)
	out, _ := json.MarshalIndent(generic, "", "  ")
	return append(out, '\n')
}

// Every tool definition, the prompt and the instructions are snapshotted under
// testdata/toolsnaps and compared on every run.
func TestSnapshots(t *testing.T) {
	for _, mode := range []string{server.ToolsSplit, server.ToolsSingle} {
		_, c := newServer(t, mode, nil)
		ctx := context.Background()
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			golden(t, tool.Name+".json", indentJSON(t, tool))
		}
		pr := mcp.GetPromptRequest{}
		pr.Params.Name = "memory_protocol"
		prompt, err := c.GetPrompt(ctx, pr)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "prompt_memory_protocol_"+mode+".json", indentJSON(t, prompt))
	}
}

// The resource template and the resources of a small memory (awkward names included) are
// snapshotted too. The memory keeps no history, so no last-modified time varies the list.
func TestResourceSnapshots(t *testing.T) {
	h := handlers.New(files.NewMemoryStore(vfs.WithHistory(vfs.HistoryConfig{Off: true})), handlers.DefaultLimits())
	ctx := context.Background()
	for _, p := range []string{"/memories/notes.md", "/memories/projects/a b#1.txt", "/memories/ü?.md", "/memories/.hidden.md"} {
		if res := h.Exec(ctx, map[string]any{"command": "create", "path": p, "file_text": "text of " + p + "\n"}); res.IsError {
			t.Fatal(res.Text)
		}
	}
	_, c := newServerFrom(t, server.New(h, server.Config{Version: "test", Logger: zerolog.Nop()}))
	templates, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "resource_templates.json", indentJSON(t, templates))
	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "resources_list.json", indentJSON(t, list))
}

func TestToolFacts(t *testing.T) {
	_, c := newServer(t, server.ToolsSplit, nil)
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type facts struct {
		required                                 []string
		readOnly, destructive, idempotent, world bool
	}
	want := map[string]facts{
		"memory_view":        {[]string{"path"}, true, false, true, false},
		"memory_create":      {[]string{"path", "file_text"}, false, false, false, false},
		"memory_str_replace": {[]string{"path", "old_str"}, false, true, false, false},
		"memory_insert":      {[]string{"path", "insert_line", "insert_text"}, false, false, false, false},
		"memory_delete":      {[]string{"path"}, false, true, false, false},
		"memory_rename":      {[]string{"old_path", "new_path"}, false, false, false, false},
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		a := tool.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: every hint must be set explicitly: %+v", tool.Name, a)
			continue
		}
		got := facts{tool.InputSchema.Required, *a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint}
		if diff := cmp.Diff(w, got, cmp.AllowUnexported(facts{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tool.Name, diff)
		}
	}
	if len(names) != 6 {
		t.Errorf("tools = %v, want the six", names)
	}
}

func callB(b *testing.B, c *client.Client, name string, args map[string]any) {
	b.Helper()
	if _, isErr := call(b, c, name, args); isErr {
		b.Fatalf("%s failed", name)
	}
}

func call(t testing.TB, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: a protocol error, want a tool result: %v", name, err)
	}
	return res.Content[0].(mcp.TextContent).Text, res.IsError
}

// Argument problems are tool results naming the argument, never JSON-RPC errors; both modes
// give the handlers' strings (through the official client, over memorytest's pipes).
func TestCallsAndArgumentErrors(t *testing.T) {
	split := memorytest.Start(t).Client
	callSDK := func(cs *gosdk.ClientSession, tool string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &gosdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		return res.Content[0].(*gosdk.TextContent).Text, res.IsError
	}
	for _, tt := range []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"memory_create", map[string]any{"path": "/memories/a.md", "file_text": "x"}, "File created successfully at: /memories/a.md", false},
		{"memory_create", map[string]any{"path": "/memories/b.md"}, "Error: Missing required parameter `file_text`", true},
		{"memory_insert", map[string]any{"path": "/memories/a.md", "insert_line": "one", "insert_text": "y"}, "Error: Parameter `insert_line` must be an integer", true},
		{"memory_view", map[string]any{"path": "/memories/a.md", "view_range": []any{1, 2, 3}}, "Error: Invalid `view_range`. It should be a list of two integers.", true},
		{"memory_view", map[string]any{}, "Error: Missing required parameter `path`", true},
		{"memory_view", map[string]any{"path": "/etc/passwd"}, "Error: Path must be /memories or start with /memories/, got: /etc/passwd", true},
	} {
		got, isErr := callSDK(split, tt.tool, tt.args)
		if got != tt.want || isErr != tt.isError {
			t.Errorf("%s %v = %q (isError %v), want %q (isError %v)", tt.tool, tt.args, got, isErr, tt.want, tt.isError)
		}
	}

	single := memorytest.Start(t, memorytest.Config{Server: server.Config{Tools: server.ToolsSingle}}).Client
	for _, tt := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"}, "File created successfully at: /memories/a.md"},
		{map[string]any{"command": "bogus"}, "Error: Unknown command bogus. Use one of: view, create, str_replace, insert, delete, rename"},
		{map[string]any{}, "Error: Missing required parameter `command`"},
	} {
		if got, _ := callSDK(single, "memory", tt.args); got != tt.want {
			t.Errorf("memory %v = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// One log line per call with tool, command, virtual paths, sizes, duration and outcome,
// and never the contents.
func TestCallLog(t *testing.T) {
	var log bytes.Buffer
	_, c := newServer(t, server.ToolsSplit, &log)
	call(t, c, "memory_create", map[string]any{"path": "/memories/secret.md", "file_text": "the password is hunter2"})
	call(t, c, "memory_view", map[string]any{"path": "/memories/nope"})
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var entries []map[string]any
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if e["message"] == "tool call" || e["message"] == "audit" {
			entries = append(entries, e)
		}
	}
	if len(entries) != 2 {
		t.Fatalf("want 2 call lines, got %d:\n%s", len(entries), log.String())
	}
	for key, want := range map[string]any{"message": "audit", "tool": "memory_create", "command": "create", "path": "/memories/secret.md", "bytes_in": float64(23), "bytes_before": float64(0), "bytes_after": float64(23), "outcome": "ok"} {
		if entries[0][key] != want {
			t.Errorf("log %s = %v, want %v", key, entries[0][key], want)
		}
	}
	if _, ok := entries[0]["duration"]; !ok {
		t.Error("log line has no duration")
	}
	if entries[1]["outcome"] != "refused" || entries[1]["message"] != "tool call" {
		t.Errorf("second call outcome = %v, want refused", entries[1]["outcome"])
	}
	if strings.Contains(log.String(), "hunter2") {
		t.Error("the log contains file contents")
	}
}

func serveHTTP(t *testing.T, transport string, maxBytes int64) (base string) {
	t.Helper()
	s, _ := newServer(t, server.ToolsSplit, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ServeHTTP(ctx, server.HTTPOptions{Transport: transport, Listener: ln, MaxRequestBytes: maxBytes})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeHTTP: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeHTTP did not stop")
		}
	})
	return "http://" + ln.Addr().String()
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url, host, origin, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Requests over the cap get 413 and the server keeps serving; on loopback, a foreign Host
// or Origin gets 403.
func TestHTTPGuards(t *testing.T) {
	base := serveHTTP(t, "http", 1024)
	url := base + "/mcp"
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/x","file_text":"` + strings.Repeat("x", 2048) + `"}}}`
	for _, tt := range []struct {
		name, host, origin, body string
		want                     int
	}{
		{"over the cap", "", "", big, http.StatusRequestEntityTooLarge},
		{"still serving", "", "", initBody, http.StatusOK},
		{"foreign host", "evil.example.com", "", initBody, http.StatusForbidden},
		{"foreign host with port", "evil.example.com:8080", "", initBody, http.StatusForbidden},
		{"foreign origin", "", "https://evil.example.com", initBody, http.StatusForbidden},
		{"null origin", "", "null", initBody, http.StatusForbidden},
		{"localhost host and origin", "localhost:8080", "http://localhost:3000", initBody, http.StatusOK},
	} {
		if got := post(t, url, tt.host, tt.origin, tt.body); got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
	// A body of unknown length over the cap is refused the same way.
	req, _ := http.NewRequest(http.MethodPost, url, struct{ *strings.Reader }{strings.NewReader(big)})
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body over the cap: status %d, want 413", resp.StatusCode)
	}

	sse := serveHTTP(t, "sse", 1024)
	if got := post(t, sse+"/message?sessionId=x", "", "", big); got != http.StatusRequestEntityTooLarge {
		t.Errorf("sse over the cap: status %d, want 413", got)
	}
	if got := post(t, sse+"/message?sessionId=x", "evil.example.com", "", initBody); got != http.StatusForbidden {
		t.Errorf("sse foreign host: status %d, want 403", got)
	}
}

// The audit line of every changing command: the bytes before and after come from the change
// feed's batch (a directory counts every file below it), the paths are those the call
// named, and every error carries its code.
func TestAuditLines(t *testing.T) {
	var log bytes.Buffer
	_, c := newServer(t, server.ToolsSplit, &log)
	calls := []struct {
		tool string
		args map[string]any
		want map[string]any
	}{
		{"memory_create", map[string]any{"path": "/memories/d/a.md", "file_text": "hello"},
			map[string]any{"message": "audit", "command": "create", "path": "/memories/d/a.md", "bytes_before": 0.0, "bytes_after": 5.0, "outcome": "ok"}},
		{"memory_create", map[string]any{"path": "/memories/d/b.md", "file_text": "abc"},
			map[string]any{"message": "audit", "bytes_before": 0.0, "bytes_after": 3.0}},
		{"memory_str_replace", map[string]any{"path": "/memories/d/a.md", "old_str": "hello", "new_str": "hi"},
			map[string]any{"message": "audit", "command": "str_replace", "bytes_before": 5.0, "bytes_after": 2.0, "outcome": "ok"}},
		{"memory_insert", map[string]any{"path": "/memories/d/a.md", "insert_line": 0, "insert_text": "top"},
			map[string]any{"message": "audit", "command": "insert", "bytes_before": 2.0, "bytes_after": 6.0}},
		{"memory_rename", map[string]any{"old_path": "/memories/d", "new_path": "/memories/e"},
			map[string]any{"message": "audit", "command": "rename", "old_path": "/memories/d", "new_path": "/memories/e", "bytes_before": 9.0, "bytes_after": 9.0}},
		{"memory_create", map[string]any{"path": "/memories/e/b.md", "file_text": "again"},
			map[string]any{"message": "audit", "outcome": "refused", "code": "exists", "bytes_before": 0.0, "bytes_after": 0.0}},
		{"memory_str_replace", map[string]any{"path": "/memories/e/a.md", "old_str": "absent", "new_str": "x"},
			map[string]any{"message": "audit", "outcome": "refused", "code": "no_match"}},
		{"memory_delete", map[string]any{"path": "/memories/../etc"},
			map[string]any{"message": "audit", "outcome": "refused", "code": "escape"}},
		{"memory_view", map[string]any{"path": "/memories/none"},
			map[string]any{"message": "tool call", "outcome": "refused", "code": "not_found"}},
		{"memory_delete", map[string]any{"path": "/memories/e"},
			map[string]any{"message": "audit", "command": "delete", "path": "/memories/e", "bytes_before": 9.0, "bytes_after": 0.0, "outcome": "ok"}},
	}
	for _, tt := range calls {
		log.Reset()
		call(t, c, tt.tool, tt.args)
		var line map[string]any
		for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(l), &e) == nil && (e["message"] == "audit" || e["message"] == "tool call") {
				line = e
			}
		}
		for k, want := range tt.want {
			if line[k] != want {
				t.Errorf("%s %v: %s = %v, want %v (line %v)", tt.tool, tt.args, k, line[k], want, line)
			}
		}
		if line["outcome"] == "ok" {
			if _, has := line["code"]; has {
				t.Errorf("%s: a success carries a code: %v", tt.tool, line)
			}
		}
	}
}
