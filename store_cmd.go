package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/webui"
	"github.com/rs/zerolog"
)

// openStore opens the configured storage, or a tenant's directory sub in it, and says
// where it is, for the log.
func openStore(c *config, sub string, readOnly bool, getenv func(string) string) (*vfs.Store, string, error) {
	opts := []vfs.Option{vfs.WithHistory(vfs.HistoryConfig{
		Off: !c.history, MaxAge: c.historyMaxAge, MaxVersions: c.historyMaxVersions, MaxBytes: c.historyMaxBytes,
	})}
	if readOnly {
		opts = append(opts, vfs.ReadOnly())
	}
	switch c.backend {
	case "memory":
		return files.NewMemoryStore(opts...), "memory", nil
	case "postgres":
		name := c.store
		if sub != "" {
			name = sub
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := c.pg.Store(ctx, name, opts...)
		return s, "postgres store " + name, err
	case "overlay":
		lower, upper := filepath.Join(c.lower, sub), c.root
		if upper != "" {
			upper = filepath.Join(upper, sub)
		}
		s, err := files.OpenOverlayStore(lower, upper, opts...)
		if upper == "" {
			upper = "memory"
		}
		return s, lower + " under " + upper, err
	}
	root := c.root
	if root == "" {
		var err error
		if root, err = defaultRoot(getenv); err != nil {
			return nil, "", err
		}
	}
	root = filepath.Join(root, sub)
	if readOnly {
		// A read-only store writes nothing, so it cannot create its directory either.
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, "", err
		}
	}
	s, err := files.OpenOSStore(root, opts...)
	return s, root, err
}

// defaultRoot is the memory's directory when neither -root nor MEMORY_MCP_ROOT names one:
// ~/.memory-mcp/memories on every system, the Claude Desktop bundle's default too, so that
// the bundle, the binary and its subcommands (ui, log) find one memory. A memory kept
// where earlier releases kept it (the system's data directory) is used while nothing is at
// the new place, so an upgrade finds what it had.
func defaultRoot(getenv func(string) string) (string, error) {
	root := expandHome("~/.memory-mcp/memories", getenv)
	if !filepath.IsAbs(root) {
		return "", errors.New("no home directory to put the memory in: set -root")
	}
	if _, err := os.Stat(root); err == nil {
		return root, nil
	}
	if dir, err := dataDir(getenv); err == nil {
		old := filepath.Join(dir, "memory-mcp", "memories")
		if fi, err := os.Stat(old); err == nil && fi.IsDir() {
			return old, nil
		}
	}
	return root, nil
}

// dataDir is the system's directory for a user's application data, where releases before
// the one default kept the memory: $XDG_DATA_HOME or ~/.local/share on Linux and other Unix
// systems, ~/Library/Application Support on macOS, %LocalAppData% on Windows.
func dataDir(getenv func(string) string) (string, error) {
	switch runtime.GOOS {
	case "windows":
		if d := getenv("LocalAppData"); d != "" {
			return d, nil
		}
	case "darwin":
		if h := getenv("HOME"); h != "" {
			return filepath.Join(h, "Library", "Application Support"), nil
		}
	default:
		if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
			return d, nil
		}
		if h := getenv("HOME"); h != "" {
			return filepath.Join(h, ".local", "share"), nil
		}
	}
	return "", errors.New("no home directory to put the memory in: set -root")
}

// execOne runs one native input and prints the result; the status is 1 for an error result.
func execOne(ctx context.Context, h *handlers.Memory, operand string, stdin io.Reader, stdout, stderr io.Writer) int {
	data := []byte(operand)
	if operand == "-" {
		var err error
		if data, err = io.ReadAll(stdin); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: reading stdin: %v\n", err)
			return 2
		}
	}
	input, err := handlers.DecodeInput(data)
	if err != nil {
		fmt.Fprintf(stderr, "memory-mcp: exec needs a JSON object such as {\"command\":\"view\",\"path\":\"/memories\"}: %v\n", err)
		return 2
	}
	res := h.Exec(vfs.WithActor(ctx, vfs.ActorExec), input)
	fmt.Fprintln(stdout, res.Text)
	if res.Err != nil {
		fmt.Fprintf(stderr, "memory-mcp: %v\n", res.Err)
	}
	if res.IsError {
		return 1
	}
	return 0
}

// serveUI serves the web page over one memory on a free loopback port until ctx is done;
// the first line on stdout is the page's address with a one-time login token.
func serveUI(ctx context.Context, c *config, h *handlers.Memory, log zerolog.Logger, stdout, stderr io.Writer) int {
	name := c.tenant
	ui := webui.New(webui.Config{
		Memory: func(memory string) *handlers.Memory {
			if memory == name {
				return h
			}
			return nil
		},
		MaxBodyBytes: c.maxRequestBytes,
		Logger:       log,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(stderr, "memory-mcp: ui: cannot listen on 127.0.0.1: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "http://%s%s\n", ln.Addr(), ui.LoginLink(name, true))
	fmt.Fprintln(stdout, "Open that address in a browser (the link works once); stop with Ctrl+C.")
	if err := webui.Serve(ctx, ln, ui); err != nil {
		log.Error().Err(err).Msg("web page stopped with an error")
		return 1
	}
	return 0
}
