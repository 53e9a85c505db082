package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// BenchmarkInProcess calls the tools through mcp-go's in-process client: the handlers'
// cost plus the SDK's request handling, without a transport.
func BenchmarkInProcess(b *testing.B) {
	h := handlers.New(files.NewMemoryStore(), handlers.Limits{MaxFileBytes: 4 << 20, MaxStoreBytes: 1 << 30}, handlers.RejectSecrets())
	s := server.New(h, server.Config{Version: "bench"})
	_, c := newServerFrom(b, s)
	big := strings.Repeat(strings.Repeat("x", 63)+"\n", 16384)
	callB(b, c, "memory_create", map[string]any{"path": "/memories/small.md", "file_text": "unique marker: small\n" + strings.Repeat("a small memory line\n", 39)})
	callB(b, c, "memory_create", map[string]any{"path": "/memories/big.txt", "file_text": big})
	for _, tt := range []struct {
		name string
		tool string
		args func(i int) map[string]any
	}{
		{"noop", "memory_view", func(int) map[string]any { return map[string]any{} }},
		{"view", "memory_view", func(int) map[string]any { return map[string]any{"path": "/memories/small.md"} }},
		{"str_replace", "memory_str_replace", func(i int) map[string]any {
			from, to := "small", "SMALL"
			if i%2 == 1 {
				from, to = to, from
			}
			return map[string]any{"path": "/memories/small.md", "old_str": "unique marker: " + from, "new_str": "unique marker: " + to}
		}},
		{"create", "memory_create", func(i int) map[string]any {
			return map[string]any{"path": "/memories/new/" + strconv.Itoa(i) + "-" + strconv.Itoa(b.N) + ".md", "file_text": "a new memory"}
		}},
		{"insert", "memory_insert", func(i int) map[string]any {
			return map[string]any{"path": "/memories/small.md", "insert_line": 0, "insert_text": "- another fact"}
		}},
		{"rename", "memory_rename", func(i int) map[string]any {
			from, to := "/memories/small.md", "/memories/renamed.md"
			if i%2 == 1 {
				from, to = to, from
			}
			return map[string]any{"old_path": from, "new_path": to}
		}},
		{"delete", "memory_delete", func(int) map[string]any { return map[string]any{"path": "/memories/doomed.md"} }},
		{"view-1MiB", "memory_view", func(int) map[string]any { return map[string]any{"path": "/memories/big.txt"} }},
		{"create-1MiB", "memory_create", func(i int) map[string]any {
			return map[string]any{"path": "/memories/copies/" + strings.Repeat("c", i%7+1) + string(rune('a'+i%26)) + ".txt", "file_text": big}
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if tt.name == "rename" && i == 0 {
					b.StopTimer()
					call(b, c, "memory_rename", map[string]any{"old_path": "/memories/renamed.md", "new_path": "/memories/small.md"}) // left renamed by an earlier run
					b.StartTimer()
				}
				if tt.name == "delete" {
					b.StopTimer()
					callB(b, c, "memory_create", map[string]any{"path": "/memories/doomed.md", "file_text": "x"})
					b.StartTimer()
				}
				if tt.name == "create-1MiB" {
					b.StopTimer()
					call(b, c, "memory_delete", map[string]any{"path": "/memories/copies"}) // absent at first
					b.StartTimer()
				}
				req := mcp.CallToolRequest{}
				req.Params.Name = tt.tool
				req.Params.Arguments = tt.args(i)
				if _, err := c.CallTool(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
