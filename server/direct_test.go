package server

import (
	"encoding/json"
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

// A tool's result is encoded byte for byte as json.Marshal encodes it, whichever way
// appendResult takes.
func TestResultEncodedAsJSONMarshal(t *testing.T) {
	texts := []string{"", "plain", "Error: The path /memories/x does not exist.", "a\tb\nc\r\"q\" \\ end",
		"<b>&amp;</b>", "\x00\x01\x08\x0c\x1f\x7f", "line\u2028sep\u2029", "ünï 😀 中文", "bad \xff\xfe utf-8 \xc3", strings.Repeat("x", 5000)}
	var results []*mcp.CallToolResult
	for _, s := range texts {
		results = append(results, mcp.NewToolResultText(s), mcp.NewToolResultError(s))
	}
	two := mcp.NewToolResultText("one")
	two.Content = append(two.Content, mcp.NewTextContent("two"))
	annotated := mcp.NewToolResultText("a")
	priority := 1.0
	annotated.Content[0] = mcp.TextContent{Type: "text", Text: "a", Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Priority: &priority}}}
	structured := mcp.NewToolResultStructured(map[string]any{"k": "v"}, "k: v")
	typed := mcp.NewToolResultText("t")
	typed.ResultType = mcp.ResultTypeComplete
	meta := mcp.NewToolResultText("m")
	meta.EnsureResultMeta().SetServerInfo(mcp.Implementation{Name: "memory-mcp", Version: "1"})
	image := mcp.NewToolResultImage("alt", "AAAA", "image/png")
	results = append(results, two, annotated, structured, typed, meta, image, &mcp.CallToolResult{}, &mcp.CallToolResult{IsError: true})
	for i, r := range results {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendResult([]byte("prefix"), r, nil)
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("result %d: got %s (%v), want prefix%s", i, got, err, want)
		}
	}
	// A 2026-era result as callDirect stamps it, the metadata's encoding given.
	srv := New(nil, Config{Version: "test"})
	for i, r := range []*mcp.CallToolResult{mcp.NewToolResultText("a <b> & \"c\""), mcp.NewToolResultError("no")} {
		r.SetResultType(mcp.ResultTypeComplete)
		r.EnsureResultMeta().SetServerInfo(srv.implementation)
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendResult(nil, r, srv.metaJSON)
		if err != nil || string(got) != string(want) {
			t.Errorf("stamped result %d: got %s (%v), want %s", i, got, err, want)
		}
	}
}

func FuzzResultEncodedAsJSONMarshal(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c\n", "<>&\u2028", "\xff\x00", "😀"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, isError bool) {
		r := mcp.NewToolResultText(text)
		r.IsError = isError
		want, _ := json.Marshal(r)
		if got, err := appendResult(nil, r, nil); err != nil || string(got) != string(want) {
			t.Errorf("got %s (%v), want %s", got, err, want)
		}
	})
}

// The direct way reads a 2026-era _meta once per distinct value, as modernInfo reads it,
// and gives every call a copy of its own; it keeps at most maxInfos values, starting over
// when full, and none beyond maxInfoBytes.
func TestInfoCache(t *testing.T) {
	var c infoCache
	meta := func(name string) json.RawMessage {
		return json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"` + name + `","version":"1"}}`)
	}
	for _, raw := range []json.RawMessage{meta("a"), meta("b"), json.RawMessage(`{"progressToken":1}`), json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}`)} {
		want, wantOK := modernInfo(raw)
		for range 3 {
			got, ok := c.get(raw)
			if ok != wantOK || (ok && (got.ProtocolVersion != want.ProtocolVersion || got.ClientInfo.Name != want.ClientInfo.Name)) {
				t.Fatalf("%s: got %+v %v, want %+v %v", raw, got, ok, want, wantOK)
			}
			if ok {
				got.LogLevel = "debug" // a call's change stays its own
			}
		}
	}
	if info, _ := c.get(meta("a")); info.LogLevel != "" {
		t.Errorf("a call's change reached the next call: log level %q", info.LogLevel)
	}
	for i := range 2 * maxInfos {
		if info, ok := c.get(meta(fmt.Sprint("client-", i))); !ok || info.ClientInfo.Name != fmt.Sprint("client-", i) {
			t.Fatalf("client %d: %+v %v", i, info, ok)
		}
	}
	if n := len(c.infos); n == 0 || n > maxInfos {
		t.Errorf("%d values kept, want 1 to %d", n, maxInfos)
	}
	if _, kept := c.infos[string(meta(fmt.Sprint("client-", 2*maxInfos-1)))]; !kept {
		t.Error("the latest client's _meta is not kept")
	}
	long := meta(strings.Repeat("x", maxInfoBytes))
	n := len(c.infos)
	if info, ok := c.get(long); !ok || len(info.ClientInfo.Name) != maxInfoBytes {
		t.Fatalf("a long _meta: %v", ok)
	}
	if len(c.infos) != n {
		t.Errorf("a _meta over %d bytes was kept", maxInfoBytes)
	}
}
