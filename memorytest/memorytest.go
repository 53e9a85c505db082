// Package memorytest runs a memory-mcp server in memory for a Go test: the server the
// memory-mcp command runs (the same tools, strings, limits, secret guard and instructions)
// over an in-memory store, and a client of the official MCP Go SDK connected to it through
// in-process pipes. Both are closed when the test ends.
//
//	func TestMyAgent(t *testing.T) {
//		env := memorytest.Start(t)
//		res, err := env.Client.CallTool(t.Context(), &mcp.CallToolParams{
//			Name: "memory_view", Arguments: map[string]any{"path": "/memories"}})
//		…
//	}
package memorytest

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// Env is a running server and its connected client.
type Env struct {
	Client *mcp.ClientSession // connected and initialized
	Memory *handlers.Memory   // the memory the server serves (its Exec runs commands directly)
	Store  *vfs.Store         // the store behind it

	once sync.Once
	stop func()
}

// Config changes what Start builds; the zero Config is the command's defaults.
type Config struct {
	Limits   handlers.Limits    // zero fields: the defaults
	Options  []handlers.Option  // such as handlers.ReadOnly() or handlers.WithMounts(…)
	Server   server.Config      // Tools, Instructions, Version, Logger (none by default)…
	Store    *vfs.Store         // nil: a new in-memory store with history
	Protocol string             // the protocol version the client asks for ("": the SDK's latest)
	Client   *mcp.ClientOptions // the client's, such as handlers of notifications (nil: none)
}

// Start runs the server of cfg (at most one; none: the defaults) and connects a client to
// it, both closed when the test ends. It fails the test if either cannot start.
func Start(t testing.TB, cfg ...Config) *Env {
	t.Helper()
	env, err := New(cfg...)
	if err != nil {
		t.Fatalf("memorytest: %v", err)
	}
	t.Cleanup(env.Close)
	return env
}

// New is Start outside a test: the caller closes the Env.
func New(cfg ...Config) (*Env, error) {
	var c Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	store := c.Store
	if store == nil {
		store = files.NewMemoryStore()
	}
	mem := handlers.New(store, c.Limits, c.Options...)
	srv := server.New(mem, c.Server)

	ctx, cancel := context.WithCancel(context.Background())
	toServerR, toServerW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeStdio(ctx, toServerR, toClientW, 64<<20)
		toClientW.Close()
	}()
	env := &Env{Memory: mem, Store: store, stop: func() {
		toServerW.Close() // end of input: the server answers what it read and returns
		cancel()
		<-served
		if c.Store == nil {
			store.Close()
		}
	}}
	client := mcp.NewClient(&mcp.Implementation{Name: "memorytest", Version: "1"}, c.Client)
	var opts *mcp.ClientSessionOptions
	if c.Protocol != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: c.Protocol}
	}
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: toClientR, Writer: toServerW}, opts)
	if err != nil {
		env.stop()
		return nil, err
	}
	env.Client = cs
	return env, nil
}

// Close closes the client, then the server and the store it made.
func (e *Env) Close() {
	e.once.Do(func() {
		e.Client.Close()
		e.stop()
	})
}
