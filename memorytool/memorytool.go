// Package memorytool is Anthropic's memory tool (memory_20250818) for the Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2), backed by a memory-mcp memory: the same
// strings, limits, secret guard and history as the memory-mcp server.
//
// Give the tool to the SDK's tool runner, and its Definition in the request's tools, so that
// the model gets the memory tool it was trained on rather than a custom schema:
//
//	mem := handlers.New(store, handlers.Limits{})
//	tool := memorytool.New(mem)
//	runner := client.Beta.Messages.NewToolRunner([]anthropic.BetaTool{tool}, anthropic.BetaToolRunnerParams{
//		BetaMessageNewParams: anthropic.BetaMessageNewParams{
//			Tools: []anthropic.BetaToolUnionParam{tool.Definition()},
//			Betas: []anthropic.AnthropicBeta{anthropic.AnthropicBetaContextManagement2025_06_27},
//			// Model, MaxTokens, Messages…
//		},
//	})
//
// The runner marks a tool's error only by sending "Error: " and the error's text. Most of the
// memory tool's refusals begin with "Error: " and arrive exactly, marked as errors; the three
// that do not (view of a missing path, a str_replace without exactly one match, a file over
// the line limit) arrive exactly too, unmarked: their text says what failed. Run gives the
// result with its IsError for a loop of your own.
package memorytool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// Name is the memory tool's name, as the model calls it.
const Name = "memory"

// Tool runs the model's memory_20250818 calls on a memory. It is an anthropic.BetaTool.
type Tool struct {
	mem   *handlers.Memory
	actor string
}

var _ anthropic.BetaTool = (*Tool)(nil)

// New returns the memory tool over mem. Its versions are made by actor "agent" (see
// WithActor).
func New(mem *handlers.Memory) *Tool { return &Tool{mem: mem, actor: "agent"} }

// WithActor returns the tool recording its changes as made by actor (a user's or an
// agent's name), as log and the web page show them.
func (t *Tool) WithActor(actor string) *Tool { return &Tool{mem: t.mem, actor: actor} }

// Definition is the memory_20250818 tool, for the request's tools.
func (t *Tool) Definition() anthropic.BetaToolUnionParam {
	return anthropic.BetaToolUnionParam{OfMemoryTool20250818: &anthropic.BetaMemoryTool20250818Param{}}
}

// Name is "memory".
func (t *Tool) Name() string { return Name }

// Description describes the tool; the model reads the memory tool's own description, which
// comes with its definition.
func (t *Tool) Description() string {
	return "Anthropic's memory tool: view, create, str_replace, insert, delete and rename files under /memories"
}

// InputSchema is the native input's shape, for a runner that needs one; the request sends
// Definition instead.
func (t *Tool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{
		Properties: map[string]any{
			"command": map[string]any{"type": "string", "enum": handlers.Commands},
			"path":    map[string]any{"type": "string"},
		},
		Required: []string{"command"},
	}
}

// Run runs one native input (its JSON) and returns the result with its IsError.
func (t *Tool) Run(ctx context.Context, input json.RawMessage) handlers.Result {
	args, err := handlers.DecodeInput(input)
	if err != nil {
		return handlers.Result{Text: "Error: The input must be a JSON object such as {\"command\":\"view\",\"path\":\"/memories\"}", IsError: true, Code: handlers.CodeInvalid}
	}
	ctx = vfs.WithClient(vfs.WithActor(ctx, t.actor), vfs.Client{Name: "anthropic-sdk-go", Transport: "tool runner"})
	return t.mem.Exec(ctx, args)
}

// Execute runs one call for the SDK's tool runner (see the package documentation for how
// errors arrive).
func (t *Tool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	res := t.Run(ctx, input)
	if rest, ok := strings.CutPrefix(res.Text, "Error: "); ok && res.IsError {
		return nil, errors.New(rest) // the runner sends "Error: " + rest, marked as an error
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: res.Text}}}, nil
}
