package server

import (
	"context"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// memoryProtocol is the guidance Anthropic's API injects with the native memory tool; MCP
// clients do not, so the server ships it. {view} stands for the way to view memory in the
// tool mode in use.
const memoryProtocol = "IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.\n" +
	"MEMORY PROTOCOL:\n" +
	"1. Use the `{view}` tool to check for earlier progress.\n" +
	"2. ... (work on the task) ...\n" +
	"- As you make progress, record status / progress / thoughts etc in your memory.\n" +
	"ASSUME INTERRUPTION: Your context window might be reset at any moment, so you risk losing any progress that is not recorded in your memory directory.\n" +
	"Note: when editing your memory folder, always try to keep its content up-to-date, coherent and organized. You can rename or delete files that are no longer relevant. Do not create new files unless necessary."

// DefaultInstructions returns the memory protocol with the tool name of the given mode
// ("split" names memory_view, "single" names memory).
func DefaultInstructions(tools string) string {
	view := "memory_view"
	if tools == ToolsSingle {
		view = "memory"
	}
	return strings.ReplaceAll(memoryProtocol, "{view}", view)
}

const promptName = "memory_protocol"

func protocolPrompt(text string) (mcp.Prompt, func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error)) {
	prompt := mcp.NewPrompt(promptName, mcp.WithPromptDescription(
		"How to use the memory tools: view memory first, record progress as you go, assume interruption."))
	return prompt, func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("The memory protocol",
			[]mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text))}), nil
	}
}
