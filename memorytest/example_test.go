package memorytest_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/memorytest"
)

// A running in-memory server and a connected client; in a test, memorytest.Start(t) closes
// them when the test ends.
func Example() {
	env, err := memorytest.New()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()
	for _, args := range []map[string]any{
		{"path": "/memories/notes.md", "file_text": "The user prefers tabs.\n"},
		{"path": "/memories/token.md", "file_text": "ghp_a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2\n"},
	} {
		res, err := env.Client.CallTool(ctx, &mcp.CallToolParams{Name: "memory_create", Arguments: args})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	}
	fmt.Println(env.Memory.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}).Text)
	// Output:
	// false File created successfully at: /memories/notes.md
	// true Error: The text contains what looks like a GitHub token on line 1; memory files must not store credentials. Remove it and try again.
	// Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:
	// 23B	/memories
	// 23B	/memories/notes.md
}
