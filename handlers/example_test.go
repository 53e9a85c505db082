package handlers_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// Run the memory tool's commands on a store directly: here one in memory
// (files.OpenOSStore opens a directory), with the command's limits and secret guard.
func ExampleMemory_Exec() {
	store := files.NewMemoryStore()
	defer store.Close()
	mem := handlers.New(store, handlers.Limits{})
	ctx := vfs.WithActor(context.Background(), "my-agent") // who the history says made the changes
	for _, input := range []map[string]any{
		{"command": "create", "path": "/memories/notes.md", "file_text": "Deploys on Tuesdays.\n"},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "Tuesdays", "new_str": "Wednesdays"},
		{"command": "view", "path": "/memories/missing.md"},
	} {
		res := mem.Exec(ctx, input)
		first, _, _ := strings.Cut(res.Text, "\n")
		fmt.Printf("isError=%v %s\n", res.IsError, first)
	}
	vs, _ := mem.Log(ctx, handlers.LogQuery{})
	for _, v := range vs {
		fmt.Println(v.Seq, v.Actor, v.Command, v.Kind, v.Path)
	}
	// Output:
	// isError=false File created successfully at: /memories/notes.md
	// isError=false The memory file has been edited. Here is the snippet showing the change (with line numbers):
	// isError=true The path /memories/missing.md does not exist. Please provide a valid path.
	// 2 my-agent str_replace modified /memories/notes.md
	// 1 my-agent create created /memories/notes.md
}

// Place other stores under /memories: a personal one, read-write, and a team's, read-only.
func ExampleWithMounts() {
	team := files.NewMemoryStore()
	defer team.Close()
	team.Update(context.Background(), func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/style.md"), []byte("Tabs.\n"))
	})
	teamRO := handlers.New(team, handlers.Limits{}, handlers.ReadOnly())
	mem := handlers.New(files.NewMemoryStore(), handlers.Limits{}, handlers.WithMounts(
		handlers.Mount{Name: "me", Memory: handlers.New(files.NewMemoryStore(), handlers.Limits{})},
		handlers.Mount{Name: "team", Memory: teamRO},
	))
	ctx := context.Background()
	fmt.Println(mem.Exec(ctx, map[string]any{"command": "create", "path": "/memories/me/prefs.md", "file_text": "Short answers.\n"}).Text)
	fmt.Println(mem.Exec(ctx, map[string]any{"command": "create", "path": "/memories/team/new.md", "file_text": "x"}).Text)
	fmt.Println(mem.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}).Text)
	// Output:
	// File created successfully at: /memories/me/prefs.md
	// Error: The memory store at /memories/team is read-only
	// Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:
	// 21B	/memories
	// 15B	/memories/me/
	// 15B	/memories/me/prefs.md
	// 6B	/memories/team/
	// 6B	/memories/team/style.md
}
