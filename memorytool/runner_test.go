package memorytool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/memorytool"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// turn is one scripted reply of the stand-in Messages API: a tool_use with this input, and
// the tool_result the runner must send back for it.
type turn struct {
	input   map[string]any
	want    string
	isError bool
}

// messagesAPI stands in for the Messages API: each request gets the next scripted tool_use,
// then a final text; it records the tool results and tool definitions the runner sent.
type messagesAPI struct {
	t     *testing.T
	turns []turn
	mu    sync.Mutex
	n     int
	tools []json.RawMessage
	got   []toolResult
}

type toolResult struct {
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
	Content   []struct {
		Type, Text string
	} `json:"content"`
}

func (m *messagesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		http.Error(w, "not here: "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		m.t.Errorf("request body: %v\n%s", err, body)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tools = req.Tools
	if last := req.Messages[len(req.Messages)-1]; m.n > 0 && last.Role == "user" {
		for _, c := range last.Content {
			var tr toolResult
			if json.Unmarshal(c, &tr) == nil && tr.ToolUseID != "" {
				m.got = append(m.got, tr)
			}
		}
	}
	var content []any
	stop := "end_turn"
	if m.n < len(m.turns) {
		content = []any{map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", m.n), "name": "memory", "input": m.turns[m.n].input}}
		stop = "tool_use"
	} else {
		content = []any{map[string]any{"type": "text", "text": "Done."}}
	}
	m.n++
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("msg_%02d", m.n), "type": "message", "role": "assistant", "model": "claude-test",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	})
}

// The SDK's own tool runner against a stand-in for the Messages API that scripts tool_use
// blocks for all six commands and the mistakes a model makes: every tool result the runner
// sends back is the exact text, the store holds what the calls made, and its history has
// the versions.
func TestToolRunner(t *testing.T) {
	const listing = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"
	turns := []turn{
		{map[string]any{"command": "view", "path": "/memories"}, listing + "0B\t/memories", false},
		{map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\nTabs.\n"}, "File created successfully at: /memories/notes.md", false},
		{map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "again"}, "Error: File /memories/notes.md already exists", true},
		{map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "Tabs.", "new_str": "Spaces."}, "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t# Notes\n     2\tSpaces.\n     3\t", false},
		{map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "Tabs.", "new_str": "x"}, "No replacement was performed, old_str `Tabs.` did not appear verbatim in /memories/notes.md.", false},
		{map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "Owner: Dana"}, "The file /memories/notes.md has been edited.", false},
		{map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 99, "insert_text": "x"}, "Error: Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 4]", true},
		{map[string]any{"command": "view", "path": "/memories/notes.md"}, "Here's the content of /memories/notes.md with line numbers:\n     1\t# Notes\n     2\tOwner: Dana\n     3\tSpaces.\n     4\t", false},
		{map[string]any{"command": "view", "path": "/memories/missing.md"}, "The path /memories/missing.md does not exist. Please provide a valid path.", false},
		{map[string]any{"command": "view", "path": "/memories/../etc/passwd"}, "Error: Path /memories/../etc/passwd would escape /memories directory", true},
		{map[string]any{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/archive/notes.md"}, "Successfully renamed /memories/notes.md to /memories/archive/notes.md", false},
		{map[string]any{"command": "delete", "path": "/memories/notes.md"}, "Error: The path /memories/notes.md does not exist", true},
		{map[string]any{"command": "create", "path": "/memories/key.md", "file_text": "token: ghp_" + strings.Repeat("a1B2", 9) + "\n"}, "Error: The text contains what looks like a GitHub token on line 1; memory files must not store credentials. Remove it and try again.", true},
		{map[string]any{"command": "remember", "path": "/memories"}, "Error: Unknown command remember. Use one of: view, create, str_replace, insert, delete, rename", true},
		{map[string]any{"command": "create", "path": "/memories/x.md"}, "Error: Missing required parameter `file_text`", true},
		{map[string]any{"command": "create", "path": "/memories/scratch.md", "file_text": "tmp\n"}, "File created successfully at: /memories/scratch.md", false},
		{map[string]any{"command": "delete", "path": "/memories/scratch.md"}, "Successfully deleted /memories/scratch.md", false},
	}
	api := &messagesAPI{t: t, turns: turns}
	srv := httptest.NewServer(api)
	defer srv.Close()

	store := files.NewMemoryStore()
	tool := memorytool.New(handlers.New(store, handlers.Limits{}))
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	runner := client.Beta.Messages.NewToolRunner([]anthropic.BetaTool{tool}, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model:     "claude-test",
			MaxTokens: 1024,
			Tools:     []anthropic.BetaToolUnionParam{tool.Definition()},
			Betas:     []anthropic.AnthropicBeta{anthropic.AnthropicBetaContextManagement2025_06_27},
			Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Remember my preferences."))},
		},
		DisableThread: true,
	})
	final, err := runner.RunToCompletion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(final.Content) != 1 || final.Content[0].Text != "Done." {
		t.Errorf("final message: %+v", final.Content)
	}

	if len(api.tools) != 1 || !strings.Contains(string(api.tools[0]), `"type":"memory_20250818"`) || !strings.Contains(string(api.tools[0]), `"name":"memory"`) {
		t.Errorf("the request's tools are not the memory_20250818 definition: %s", api.tools)
	}
	if len(api.got) != len(turns) {
		t.Fatalf("%d tool results sent back, want %d", len(api.got), len(turns))
	}
	for i, tr := range api.got {
		want := turns[i]
		if tr.ToolUseID != fmt.Sprintf("toolu_%02d", i) || len(tr.Content) != 1 || tr.Content[0].Text != want.want || tr.IsError != want.isError {
			t.Errorf("call %d %v:\n got %+v\nwant (is_error %v) %q", i, want.input, tr, want.isError, want.want)
		}
	}

	// The store holds what the calls made, with a version for each change.
	var content []byte
	var versions []vfs.Version
	if err := store.View(context.Background(), func(tx *vfs.Tx) (err error) {
		if content, err = tx.ReadFile(vfs.MustResolve("/memories/archive/notes.md")); err != nil {
			return err
		}
		versions, err = tx.Versions()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(content) != "# Notes\nOwner: Dana\nSpaces.\n" {
		t.Errorf("the file in the store: %q", content)
	}
	var kinds []string
	for _, v := range versions {
		kinds = append(kinds, string(v.Kind)+" "+v.Path)
		if v.Actor != "agent" || v.Client == nil || v.Client.Name != "anthropic-sdk-go" {
			t.Errorf("version %d was made by %q through %+v", v.Seq, v.Actor, v.Client)
		}
	}
	if got := strings.Join(kinds, ", "); got != "created /memories/notes.md, modified /memories/notes.md, modified /memories/notes.md, moved /memories/notes.md, created /memories/scratch.md, deleted /memories/scratch.md" {
		t.Errorf("the history: %s", got)
	}
}

// The tool reads its input as the server does: a number beyond a float64's range is an
// argument's error, named; what is not one JSON object is refused with an example.
func TestRunInputs(t *testing.T) {
	tool := memorytool.New(handlers.New(files.NewMemoryStore(), handlers.Limits{}))
	const notObject = "Error: The input must be a JSON object such as {\"command\":\"view\",\"path\":\"/memories\"}"
	for _, tc := range []struct{ input, want string }{
		{`{"command":"view","path":"/memories","view_range":[1e400,2]}`, "Error: Invalid `view_range`. It should be a list of two integers."},
		{`{"command":"insert","path":"/memories/a.md","insert_line":1e400,"insert_text":"x"}`, "Error: Parameter `insert_line` must be an integer"},
		{`{"command":"create","path":"/memories/a.md","file_text":"x"}`, "File created successfully at: /memories/a.md"},
		{`{"command":"insert","path":"/memories/a.md","insert_line":1.0,"insert_text":"y"}`, "The file /memories/a.md has been edited."},
		{`{"command":"view","path":"/memories"}{"command":"delete","path":"/memories/a.md"}`, notObject},
		{`null`, notObject},
		{`[1]`, notObject},
	} {
		if res := tool.Run(context.Background(), json.RawMessage(tc.input)); res.Text != tc.want {
			t.Errorf("%s: %q, want %q", tc.input, res.Text, tc.want)
		}
	}
}
