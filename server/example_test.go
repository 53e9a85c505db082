package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// Serve MCP over stdio-style pipes in-process: what the memory-mcp command does on stdin and
// stdout, with its tools, instructions and limits. Requests run at once, as over any
// transport: a client waits for an answer before sending a call that depends on it.
func ExampleServer_ServeStdio() {
	mem := handlers.New(files.NewMemoryStore(), handlers.Limits{})
	srv := server.New(mem, server.Config{})
	in := strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"hello\n"}}}`,
	}, "\n") + "\n")
	outR, outW := io.Pipe()
	go func() {
		srv.ServeStdio(context.Background(), in, outW, 64<<20) // returns once the input ends and all is answered
		outW.Close()
	}()
	answers := map[float64]string{}
	sc := bufio.NewScanner(outR)
	for sc.Scan() {
		var msg struct {
			ID     float64
			Result struct {
				Instructions string
				Content      []struct{ Text string }
			}
		}
		json.Unmarshal(sc.Bytes(), &msg)
		switch {
		case msg.Result.Instructions != "":
			answers[msg.ID], _, _ = strings.Cut(msg.Result.Instructions, "\n")
		case len(msg.Result.Content) > 0:
			answers[msg.ID] = msg.Result.Content[0].Text
		}
	}
	fmt.Println(answers[1])
	fmt.Println(answers[2])
	fmt.Printf("%q\n", mem.Exec(context.Background(), map[string]any{"command": "view", "path": "/memories/a.md"}).Text)
	// Output:
	// IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.
	// File created successfully at: /memories/a.md
	// "Here's the content of /memories/a.md with line numbers:\n     1\thello\n     2\t"
}

// Serve Streamable HTTP from an http.Handler: here in an httptest server, with the official
// client.
func ExampleServer_Handler() {
	srv := server.New(handlers.New(files.NewMemoryStore(), handlers.Limits{}), server.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := httptest.NewServer(srv.Handler(ctx, server.HTTPOptions{Transport: "http"}))
	defer hs.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp"}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_view", Arguments: map[string]any{"path": "/memories"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:
	// 0B	/memories
}
