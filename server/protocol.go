package server

import (
	"context"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/memory-mcp/memory-mcp/handlers"
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

// MountInstructions names a memory's mounts for the model ("" without any): where each
// store is, which are read-only, and that a file moves between stores by create and delete.
func MountInstructions(h *handlers.Memory) string {
	mounts := h.Mounts()
	if len(mounts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nMEMORY STORES: /memories is made of several stores. Each of these directories is a store of its own:\n")
	for _, m := range mounts {
		b.WriteString("- " + m.Memory.Top())
		if m.Memory.ReadOnlyStore() {
			b.WriteString(" (read-only: view it, never change it)")
		}
		b.WriteString("\n")
	}
	b.WriteString("Everything else under /memories is the main store. A file cannot be renamed from one store to another: create it at the new path and delete the old one.")
	return b.String()
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
