// Package handlers runs the six commands of Anthropic's memory tool (memory_20250818):
// view, create, str_replace, insert, delete and rename, over a vfs.Store, with the exact
// result and error strings of docs/behaviour.md §2–§5. It is where a Go program starts
// when it wants the memory without MCP:
//
//	mem := handlers.New(files.NewMemoryStore(), handlers.Limits{}) // or files.OpenOSStore(dir)
//	res := mem.Exec(ctx, map[string]any{"command": "view", "path": "/memories"})
//	// res.Text is what the model reads; res.IsError says whether it is an error.
//
// New's defaults are the memory-mcp command's: the limits of docs/behaviour.md §5, the
// secret guard on (AllowSecrets turns it off), a call timeout of DefaultTimeout. WithMounts
// places other memories under /memories (docs/behaviour.md §9). The history (Log, Show,
// Diff, Restore, Redact) and the web page's operations (Files, Read, Write, Remove,
// Search) work on the same memory. To serve it over MCP, see package server; for
// Anthropic's Go SDK, package memorytool; for tests, package memorytest.
//
// It is plain Go: no MCP library and no logger. Exec (a native input with "command"), Call
// (a command and its arguments as decoded from JSON) and the typed commands (Create,
// StrReplace, …) go through one table of commands and one guarded entry point, which routes
// a path to its mount, refuses changes on a read-only store, bounds each call's time, and
// turns a panic into docs/behaviour.md §4's internal error. Every outcome is a Result:
// argument problems, refused paths, limits and storage failures are all error results; a
// storage failure's cause, and a recovered panic, are carried in Result.Err for the
// operator's log and never shown to the model.
//
// Choices where the memory tool leaves the choice open (also in docs/behaviour.md §8):
//   - Arguments are checked before paths: a missing or mistyped argument, and an empty
//     old_str, are reported before the path is validated. Unknown arguments are ignored.
//   - A change that grows neither the file nor the store is never refused by the limits, so
//     an oversized file can still be trimmed.
//   - A final symbolic link that stays inside the storage, and any special file, is "not a
//     regular file or directory" for view, str_replace and insert; create and rename treat
//     it as existing; delete removes the link itself; listings leave it out.
package handlers
