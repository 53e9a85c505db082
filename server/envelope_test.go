package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// envelopeSeeds are lines scanRequest takes, and lines it leaves to json.Unmarshal.
var envelopeSeeds = []struct {
	line  string
	takes bool
}{
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_view","arguments":{}}}` + "\n", true},
	{`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"caf\u00e9 \"x\" é 😀\n"}}}`, true},
	{` { "jsonrpc" : "2.0" , "id" : -1.5e+3 , "method" : "tools/call" , "params" : { "arguments" : [ 1 , true , false , null , { } , [ ] ] , "name" : "x" } } ` + "\r\n", true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"memory_view","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, true},
	{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, true},
	{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"x"}}`, false},
	{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"task":{"ttl":1}}}`, true},
	{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call"}`, false},
	{`{"jsonrpc":"2.0","ID":1,"method":"tools/call"}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools\/call"}`, false},
	{`{"jsonrpc":2,"id":1,"method":"tools/call"}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":1e400}}}`, true},
	{`{"jsonrpc":"2.0","id":01,"method":"tools/call"}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call"} x`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":"\ud800"}}}`, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":"` + "\xff" + `"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":"\x"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":[[[[[[]]]]]]}}`, true},
	{`{}`, true},
	{`[]`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call",}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, false},
}

// FuzzScanRequestAsUnmarshal checks that every line scanRequest takes is one json.Unmarshal
// decodes without error into the same request.
func FuzzScanRequestAsUnmarshal(f *testing.F) {
	for _, s := range envelopeSeeds {
		f.Add([]byte(s.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var got rpcRequest
		if !scanRequest(line, &got) {
			return
		}
		var want rpcRequest
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("scanRequest took %q, which json.Unmarshal refuses: %v", line, err)
		}
		same := func(a, b json.RawMessage) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }
		if got.JSONRPC != want.JSONRPC || got.Method != want.Method || got.Params.Name != want.Params.Name ||
			!same(got.ID, want.ID) || !same(got.Params.Arguments, want.Params.Arguments) || !same(got.Params.Task, want.Params.Task) ||
			!same(got.Params.Meta, want.Params.Meta) || !same(got.Params.RequestID, want.Params.RequestID) {
			t.Fatalf("%q:\nscanRequest    %+v\njson.Unmarshal %+v", line, got, want)
		}
	})
}

// scanRequest takes the lines clients send for tool calls, and leaves the others (and
// any it is unsure of) to json.Unmarshal.
func TestScanRequestTakes(t *testing.T) {
	for _, s := range envelopeSeeds {
		var req rpcRequest
		if got := scanRequest([]byte(s.line), &req); got != s.takes {
			t.Errorf("scanRequest(%q) = %v, want %v", s.line, got, s.takes)
		}
	}
}

// The version, the methods of a call and every tool's name come out of the scan without
// an allocation.
func TestInternedNames(t *testing.T) {
	names := []string{"2.0", "tools/call", "notifications/initialized", "notifications/cancelled", "ping"}
	for _, tools := range [][]toolDef{splitTools(), {singleTool()}} {
		for _, d := range tools {
			names = append(names, d.tool.Name)
		}
	}
	for _, name := range names {
		b := []byte(name)
		if n := testing.AllocsPerRun(10, func() { _ = intern(b) }); n != 0 || intern(b) != name {
			t.Errorf("intern(%q) = %q with %v allocations", name, intern(b), n)
		}
	}
}
