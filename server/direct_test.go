package server

import (
	"fmt"
	"github.com/mark3labs/mcp-go/mcp"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// A 2026-era tool call over Streamable HTTP is served the direct way (directHTTP); status,
// content type and body must be byte for byte what mcp-go's way gives, which the same call
// with a progress token in _meta still takes. Each tenant's calls reach its own memory.
// Calls the direct way must not serve (headers missing or disagreeing with the body, a log
// level asked for, an older client's call) go to mcp-go and answer as it does.
func TestHTTPDirectCallsAnswerAsMCPGo(t *testing.T) {
	tokens := map[string]string{"alice": "token-alice", "bob": "token-bob"}
	directURL, directSrv := testGate(t, HTTPOptions{}, tokens, "")
	mcpgoURL, mcpgoSrv := testGate(t, HTTPOptions{}, tokens, "")

	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	type call struct {
		token, tool, args string
		headers           []string // set on top of the era's own (an empty value removes one)
		meta              string   // more _meta
		direct            bool     // served the direct way (without the progress token)
	}
	calls := []call{
		{"token-alice", "memory_create", `{"path":"/memories/a.md","file_text":"one\ntwo <&> \"q\" \u00e9\n"}`, nil, "", true},
		{"token-alice", "memory_view", `{"path":"/memories/a.md"}`, nil, "", true},
		{"token-bob", "memory_view", `{"path":"/memories/a.md"}`, nil, "", true},
		{"token-bob", "memory_view", `{"path":"/memories"}`, nil, "", true},
		{"token-alice", "memory_str_replace", `{"path":"/memories/a.md","old_str":"two","new_str":"2"}`, nil, "", true},
		{"token-alice", "memory_insert", `{"path":"/memories/a.md","insert_line":1,"insert_text":"x"}`, nil, "", true},
		{"token-alice", "memory_rename", `{"old_path":"/memories/a.md","new_path":"/memories/b.md"}`, nil, "", true},
		{"token-alice", "memory_view", `{"path":"/memories"}`, nil, "", true},
		{"token-alice", "memory_view", `{}`, nil, "", true},
		{"token-alice", "memory_view", `null`, nil, "", true},
		{"token-alice", "memory_view", `[1]`, nil, "", false},
		{"token-alice", "memory_create", `{"path":"/etc/passwd","file_text":"x"}`, nil, "", true},
		{"token-alice", "no_such_tool", `{}`, nil, "", false},
		{"token-alice", "memory_view", `{"path":"/memories"}`, []string{"Mcp-Name", ""}, "", false},
		{"token-alice", "memory_view", `{"path":"/memories"}`, []string{"Mcp-Name", "memory_create"}, "", false},
		{"token-alice", "memory_view", `{"path":"/memories"}`, []string{"Mcp-Protocol-Version", ""}, "", false},
		{"token-alice", "memory_view", `{"path":"/memories"}`, []string{"Mcp-Protocol-Version", "2025-11-25"}, "", false},
		{"token-alice", "memory_view", `{"path":"/memories"}`, []string{"Content-Type", "text/plain"}, "", false},
		{"token-alice", "memory_view", `{"path":"/memories"}`, nil, `,"io.modelcontextprotocol/logLevel":"info"`, false},
		{"token-alice", "memory_delete", `{"path":"/memories/b.md"}`, nil, "", true},
	}
	// A log message streamed before the answer (mcp-go's way, when one is asked for) is left
	// out: mcp-go sometimes drops it, racing the answer.
	logEvent := regexp.MustCompile(`event: message\ndata: \{"jsonrpc":"2.0","method":"notifications/message"[^\n]*\n\n`)
	send := func(url string, id int, c call, extraMeta string) (int, string, string) {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{%s%s%s},"name":%q,"arguments":%s}}`,
			id, meta, c.meta, extraMeta, c.tool, c.args)
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", c.tool)
		for i := 0; i+1 < len(c.headers); i += 2 {
			if c.headers[i+1] == "" {
				req.Header.Del(c.headers[i])
			} else {
				req.Header.Set(c.headers[i], c.headers[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), logEvent.ReplaceAllString(string(b), "")
	}
	for i, c := range calls {
		before := directSrv.directCalls.Load()
		dStatus, dType, dBody := send(directURL, i+1, c, "")
		if served := directSrv.directCalls.Load() > before; served != c.direct {
			t.Errorf("call %d (%s %s, headers %v, meta %q): served the direct way: %v, want %v", i+1, c.tool, c.args, c.headers, c.meta, served, c.direct)
		}
		mStatus, mType, mBody := send(mcpgoURL, i+1, c, `,"progressToken":"p"`)
		if dStatus != mStatus || dType != mType || dBody != mBody {
			t.Errorf("call %d (%s %s, headers %v):\ndirect: %d %s %s\nmcp-go: %d %s %s", i+1, c.tool, c.args, c.headers, dStatus, dType, dBody, mStatus, mType, mBody)
		}
	}
	if n := mcpgoSrv.directCalls.Load(); n != 0 {
		t.Errorf("%d calls with a progress token were served the direct way", n)
	}
	// The tenants' memories stayed apart: bob never saw alice's file.
	if _, _, body := send(directURL, 99, call{"token-bob", "memory_view", `{"path":"/memories"}`, nil, "", true}, ""); strings.Contains(body, ".md") {
		t.Errorf("bob's memory shows a file: %s", body)
	}
}

// The direct way over HTTP leaves out mcp-go's check of the headers a tool's arguments are
// bound to (x-mcp-header in its schema), because our tools bind none; a tool that binds one
// must bring that check back into directHTTP.
func TestToolsBindNoHeaders(t *testing.T) {
	for _, d := range append(splitTools(), singleTool()) {
		if b := mcp.ExtractParamHeaderBindings(&d.tool); len(b) > 0 {
			t.Errorf("tool %s binds arguments to headers %v: directHTTP must check them as mcp-go does", d.tool.Name, b)
		}
	}
}
