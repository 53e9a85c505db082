package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callResult is one tool call's outcome, safe to gather from many goroutines.
func callResult(cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		return "", fmt.Errorf("%s", text)
	}
	return text, nil
}

// all runs n calls at once and fails the test with every call that did not succeed.
func all(t *testing.T, n int, call func(i int) (string, error)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = call(i) })
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed++; failed <= 5 {
				t.Errorf("call %d: %v", i, err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d calls at once failed", failed, n)
	}
}

// lines is a file of n numbered lines.
func lines(n int, format string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return b.String()
}

// One client's burst of calls is served, with default flags, over both HTTP transports and
// both protocol eras: 256 creates at once, then 64 str_replace at once on distinct lines
// of one file, every edit landing.
func TestBurstIsServed(t *testing.T) {
	for eraName, version := range eras {
		for _, transport := range []string{"http", "sse"} {
			t.Run(transport+"/"+eraName, func(t *testing.T) {
				p := startHTTP(t, transport)
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}
				var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", HTTPClient: client, MaxRetries: -1}
				if transport == "sse" {
					tr = &mcp.SSEClientTransport{Endpoint: p.url + "/sse", HTTPClient: client}
				}
				cs := connect(t, tr, version)
				all(t, 256, func(i int) (string, error) {
					return callResult(cs, "memory_create", map[string]any{"path": fmt.Sprintf("/memories/burst/f%03d.md", i), "file_text": fmt.Sprint(i)})
				})
				listing, err := callResult(cs, "memory_view", map[string]any{"path": "/memories/burst"})
				if err != nil || strings.Count(listing, ".md") != 256 {
					t.Errorf("after 256 creates the listing has %d files (%v)", strings.Count(listing, ".md"), err)
				}
				if _, err := callResult(cs, "memory_create", map[string]any{"path": "/memories/lines.md", "file_text": lines(64, "line %02d")}); err != nil {
					t.Fatal(err)
				}
				all(t, 64, func(i int) (string, error) {
					return callResult(cs, "memory_str_replace", map[string]any{"path": "/memories/lines.md", "old_str": fmt.Sprintf("line %02d\n", i), "new_str": fmt.Sprintf("LINE %02d\n", i)})
				})
				got, err := callResult(cs, "memory_view", map[string]any{"path": "/memories/lines.md"})
				if err != nil || strings.Count(got, "\tLINE") != 64 || strings.Contains(got, "\tline ") {
					t.Errorf("after 64 edits at once, %d landed (%v)", strings.Count(got, "LINE"), err)
				}
			})
		}
	}
}
