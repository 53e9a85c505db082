// Package handlers runs the six commands of Anthropic's memory tool (memory_20250818):
// view, create, str_replace, insert, delete and rename, over a vfs.Store, with the exact
// result and error strings of docs/behaviour.md §2–§5.
//
// It is plain Go: no MCP library and no logger. The MCP server, the exec subcommand and the
// tests share it through Exec (a native input with "command"), Call (a command and its
// arguments as decoded from JSON) and the typed commands (Create, StrReplace, …). All of them
// go through one table of commands and one guarded entry point, which refuses changes on a
// read-only store, bounds each call's time, and turns a panic into docs/behaviour.md §4's internal error. Every outcome is a Result: the text the model sees and
// whether it is an error. Argument problems, refused paths, limits and storage failures
// are all error results; a storage failure's cause, and a recovered panic, are carried in
// Result.Err for the operator's log and never shown to the model.
//
// Choices where the memory tool leaves the choice open (also listed in the README's Behaviour section):
//   - Arguments are checked before paths: a missing or mistyped argument, and an empty
//     old_str, are reported before the path is validated. Unknown arguments are ignored.
//   - A change that grows neither the file nor the store is never refused by the limits, so
//     an oversized file can still be trimmed.
//   - A final symbolic link that stays inside the storage, and any special file, is "not a
//     regular file or directory" for view, str_replace and insert; create and rename treat
//     it as existing; delete removes the link itself; listings leave it out.
package handlers
