package memorytool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/memorytool"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// The memory tool in the SDK's tool runner. A stand-in for the Messages API plays the model
// here (it asks for one create, then ends its turn); with a real client, drop the base URL.
func Example() {
	turn := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		content := []any{map[string]any{"type": "text", "text": "Noted."}}
		stop := "end_turn"
		if turn++; turn == 1 {
			content = []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "memory",
				"input": map[string]any{"command": "create", "path": "/memories/prefs.md", "file_text": "Prefers tabs.\n"}}}
			stop = "tool_use"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg", "type": "message", "role": "assistant", "model": "claude",
			"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
	}))
	defer api.Close()

	mem := handlers.New(files.NewMemoryStore(), handlers.Limits{}) // or files.OpenOSStore(dir), a PostgreSQL store…
	tool := memorytool.New(mem)
	client := anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("key"))
	runner := client.Beta.Messages.NewToolRunner([]anthropic.BetaTool{tool}, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model:     anthropic.ModelClaudeSonnet5_5,
			MaxTokens: 1024,
			Tools:     []anthropic.BetaToolUnionParam{tool.Definition()}, // memory_20250818, not a custom schema
			Betas:     []anthropic.AnthropicBeta{anthropic.AnthropicBetaContextManagement2025_06_27},
			Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("I prefer tabs."))},
		},
		DisableThread: true,
	})
	final, err := runner.RunToCompletion(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(final.Content[0].Text)
	fmt.Println(mem.Exec(context.Background(), map[string]any{"command": "view", "path": "/memories"}).Text)
	// Output:
	// Noted.
	// Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:
	// 14B	/memories
	// 14B	/memories/prefs.md
}
