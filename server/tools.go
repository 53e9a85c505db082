package server

import (
	"github.com/mark3labs/mcp-go/mcp"
)

// Tool descriptions teach the semantics the model needs (docs/behaviour.md §2): paths start with
// /memories, create and rename never overwrite, insert goes after line N with 0 = start,
// view_range is 1-based and inclusive with -1 = end of file.
const (
	pathDesc = "Absolute virtual path: /memories or a path below it, such as /memories/notes.md."

	viewDesc = "View the memory directory or a memory file. For a directory (start with /memories), " +
		"lists files and directories two levels deep with their sizes, leaving out hidden entries and node_modules. " +
		"For a file, shows its lines numbered from 1. Pass view_range [start, end] to see part of a long file: " +
		"1-based and inclusive, end -1 means the last line. View /memories before you start any task."
	createDesc = "Create a new memory file at path (below /memories) with exactly file_text as its content; " +
		"missing parent directories are created. It never overwrites: if the path exists the call fails, so edit " +
		"existing files with str_replace or insert instead."
	strReplaceDesc = "Replace text in a memory file at path (below /memories). old_str must appear exactly once in the file, matching " +
		"character for character (it may span several lines). new_str takes its place; omit new_str to delete old_str. " +
		"Returns the edited lines with line numbers. If old_str appears zero or several times nothing changes and the " +
		"error says where it was found."
	insertDesc = "Insert insert_text into a memory file at path (below /memories) after line insert_line: 0 inserts before the first line, " +
		"N after line N (lines are numbered from 1 as view shows them; the largest valid value is the number of lines). " +
		"The text goes in as whole lines; one trailing newline of insert_text is ignored."
	deleteDesc = "Delete a memory file or directory at path (below /memories), with everything in it. /memories itself cannot be deleted. " +
		"There is no undo."
	renameDesc = "Rename or move a memory file or directory from old_path to new_path (both below /memories); " +
		"missing parent directories of new_path are created. It never overwrites: the call fails if new_path exists."
	singleDesc = "Your memory directory, /memories, which keeps what you learn across conversations (Anthropic's " +
		"memory tool, memory_20250818). Set command to one of view, create, str_replace, insert, delete, rename and " +
		"pass that command's arguments: view(path, view_range?), create(path, file_text), " +
		"str_replace(path, old_str, new_str?), insert(path, insert_line, insert_text), delete(path), " +
		"rename(old_path, new_path). Paths start with /memories. create and rename never overwrite. view lists a " +
		"directory two levels deep or shows a file with line numbers; view_range is 1-based and inclusive, -1 = end " +
		"of file. str_replace needs old_str to appear exactly once; omit new_str to delete it. insert puts the text " +
		"after line insert_line, 0 = before the first line."
)

func annotations(title string, readOnly, destructive, idempotent bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    mcp.ToBoolPtr(readOnly),
		DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint:  mcp.ToBoolPtr(idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	})
}

var (
	pathArg       = mcp.WithString("path", mcp.Required(), mcp.Description(pathDesc))
	viewRangeArg  = mcp.WithArray("view_range", mcp.Description("Optional [start, end] line range of a file, 1-based and inclusive; end -1 means the last line."), mcp.WithIntegerItems(), mcp.MinItems(2), mcp.MaxItems(2))
	fileTextArg   = mcp.WithString("file_text", mcp.Required(), mcp.Description("The exact content of the new file; no newline is added."))
	oldStrArg     = mcp.WithString("old_str", mcp.Required(), mcp.Description("The text to replace; it must appear exactly once in the file."))
	newStrArg     = mcp.WithString("new_str", mcp.Description("The replacement text; omit it to delete old_str."))
	insertLineArg = mcp.WithInteger("insert_line", mcp.Required(), mcp.Description("The line after which to insert: 0 = before the first line."))
	insertTextArg = mcp.WithString("insert_text", mcp.Required(), mcp.Description("The text to insert, as one or more whole lines."))
	oldPathArg    = mcp.WithString("old_path", mcp.Required(), mcp.Description("The file or directory to move, below /memories."))
	newPathArg    = mcp.WithString("new_path", mcp.Required(), mcp.Description("Where it goes, below /memories; it must not exist."))
)

// splitTools are the six tools of docs/behaviour.md §2, in command order, with the handler command of each.
func splitTools() []toolDef {
	return []toolDef{
		{"view", mcp.NewTool("memory_view", mcp.WithDescription(viewDesc), pathArg, viewRangeArg,
			annotations("View memory", true, false, true))},
		{"create", mcp.NewTool("memory_create", mcp.WithDescription(createDesc), pathArg, fileTextArg,
			annotations("Create a memory file", false, false, false))},
		{"str_replace", mcp.NewTool("memory_str_replace", mcp.WithDescription(strReplaceDesc), pathArg, oldStrArg, newStrArg,
			annotations("Replace text in a memory file", false, true, false))},
		{"insert", mcp.NewTool("memory_insert", mcp.WithDescription(insertDesc), pathArg, insertLineArg, insertTextArg,
			annotations("Insert lines into a memory file", false, false, false))},
		{"delete", mcp.NewTool("memory_delete", mcp.WithDescription(deleteDesc), pathArg,
			annotations("Delete a memory file or directory", false, true, false))},
		{"rename", mcp.NewTool("memory_rename", mcp.WithDescription(renameDesc), oldPathArg, newPathArg,
			annotations("Rename or move a memory file or directory", false, false, false))},
	}
}

// singleTool is the one "memory" tool whose input is the native memory_20250818 input.
// Only command is required by the schema: which other arguments are needed depends on it,
// and the handler names any that is missing.
func singleTool() toolDef {
	return toolDef{"", mcp.NewTool("memory", mcp.WithDescription(singleDesc),
		mcp.WithString("command", mcp.Required(), mcp.Enum("view", "create", "str_replace", "insert", "delete", "rename"),
			mcp.Description("The command to run.")),
		mcp.WithString("path", mcp.Description(pathDesc+" For view, create, str_replace, insert and delete.")),
		viewRangeArg,
		mcp.WithString("file_text", mcp.Description("For create: the exact content of the new file.")),
		mcp.WithString("old_str", mcp.Description("For str_replace: the text to replace; it must appear exactly once.")),
		mcp.WithString("new_str", mcp.Description("For str_replace: the replacement text; omit it to delete old_str.")),
		mcp.WithInteger("insert_line", mcp.Description("For insert: the line after which to insert, 0 = before the first line.")),
		mcp.WithString("insert_text", mcp.Description("For insert: the text to insert, as whole lines.")),
		mcp.WithString("old_path", mcp.Description("For rename: the file or directory to move.")),
		mcp.WithString("new_path", mcp.Description("For rename: where it goes; it must not exist.")),
		annotations("Memory", false, true, false))}
}

type toolDef struct {
	command string // "" for the single tool, which reads the command from its input
	tool    mcp.Tool
}
