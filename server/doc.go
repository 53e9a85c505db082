// Package server serves a memory (a handlers.Memory) over the Model Context Protocol: the
// memory tool's commands as tools (six memory_* tools, or one native memory tool), the memory
// protocol as instructions and a prompt, the files as resources with change notifications,
// and the web page. It is the memory-mcp command's server, with the same defaults:
//
//	srv := server.New(mem, server.Config{})       // instructions, split tools, no log
//	err := srv.ServeStdio(ctx, os.Stdin, os.Stdout, 64<<20)
//	// or, in an HTTP server of your own (Streamable HTTP at /mcp):
//	http.Handle("/", srv.Handler(ctx, server.HTTPOptions{}))
//
// ServeHTTP listens itself and stops gracefully; Tenants in Config give each bearer token
// its own memory. Package memorytest runs one in memory with a connected client, for tests.
package server
