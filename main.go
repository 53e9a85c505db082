// Command memory-mcp serves Anthropic's memory tool (memory_20250818) over the Model
// Context Protocol: a /memories directory the model reads and edits with six commands,
// kept on disk, in memory, or in a copy-on-write overlay, behind a jail.
//
// Usage:
//
//	memory-mcp [flags]               serve (stdio by default)
//	memory-mcp [flags] exec JSON|-   run one memory_20250818 input and print the result
//
// Every flag can also be set as MEMORY_MCP_<FLAG> (upper case, "-" as "_"); a flag on the
// command line wins. Run memory-mcp -help for the list.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise the module
// version that go install recorded is used.
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

type config struct {
	transport, addr, backend, root, lower, tools, instructions string
	maxViewChars                                               int
	maxFileBytes, maxStoreBytes, maxRequestBytes               int64
	logLevel, logFormat                                        string
	version                                                    bool
	rootSet                                                    bool
}

// usageError is a bad flag or value: one line on stderr, exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func newFlags(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("memory-mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.transport, "transport", "stdio", "stdio, http (Streamable HTTP at /mcp) or sse (legacy HTTP+SSE at /sse and /message)")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address the http and sse transports listen on")
	fs.StringVar(&c.backend, "backend", "os", "storage: os (a directory), memory (gone when the server stops) or overlay (read-only -lower under a writable layer)")
	fs.StringVar(&c.root, "root", "", "the directory that is /memories (default: memory-mcp/memories in the user's data directory); with -backend overlay, the writable upper layer (default: memory)")
	fs.StringVar(&c.lower, "lower", "", "with -backend overlay: the read-only lower directory, never modified")
	fs.StringVar(&c.tools, "tools", server.ToolsSplit, "split (six tools memory_view … memory_rename) or single (one memory tool taking the native memory_20250818 input)")
	fs.StringVar(&c.instructions, "instructions", "", "a file whose text replaces the built-in memory protocol sent as instructions, or none to send no instructions")
	fs.IntVar(&c.maxViewChars, "max-view-chars", 16000, "characters one view may return before it is truncated")
	fs.Int64Var(&c.maxFileBytes, "max-file-bytes", 1<<20, "largest size of one memory file, in bytes")
	fs.Int64Var(&c.maxStoreBytes, "max-store-bytes", 100<<20, "largest size of all memory files together, in bytes")
	fs.Int64Var(&c.maxRequestBytes, "max-request-bytes", 4<<20, "largest HTTP request body, in bytes (larger gets 413)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or console")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	return fs
}

// parseArgs reads the environment and then the command line; it returns the config and the
// arguments left (the subcommand and its operand).
func parseArgs(args []string, getenv func(string) string) (*config, []string, error) {
	c := &config{}
	fs := newFlags(c)
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "MEMORY_MCP_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = usageError{fmt.Sprintf("invalid value %q for %s: %v", v, env, e)}
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		return nil, nil, err
	}
	// Flags may also follow the subcommand: memory-mcp exec -root DIR '{...}'.
	if len(rest) > 0 && rest[0] == "exec" {
		more, err := parseFlags(fs, rest[1:])
		if err != nil {
			return nil, nil, err
		}
		rest = append([]string{"exec"}, more...)
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "root" {
			c.rootSet = true
		}
	})
	if getenv("MEMORY_MCP_ROOT") != "" {
		c.rootSet = true
	}
	return c, rest, c.validate(rest)
}

func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	return fs.Args(), nil
}

func (c *config) validate(rest []string) error {
	oneOf := func(name, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return usageError{fmt.Sprintf("invalid value %q for -%s: use %s", v, name, strings.Join(allowed, ", "))}
	}
	for _, err := range []error{
		oneOf("transport", c.transport, "stdio", "http", "sse"),
		oneOf("backend", c.backend, "os", "memory", "overlay"),
		oneOf("tools", c.tools, server.ToolsSplit, server.ToolsSingle),
		oneOf("log-format", c.logFormat, "json", "console"),
		oneOf("log-level", c.logLevel, "debug", "info", "warn", "error"),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case c.maxViewChars < 200:
		return usageError{fmt.Sprintf("invalid value %d for -max-view-chars: use at least 200", c.maxViewChars)}
	case c.maxFileBytes <= 0, c.maxStoreBytes <= 0, c.maxRequestBytes <= 0:
		return usageError{"-max-file-bytes, -max-store-bytes and -max-request-bytes must be positive"}
	case c.backend == "overlay" && c.lower == "":
		return usageError{"-backend overlay needs -lower DIR, the read-only layer"}
	case c.backend != "overlay" && c.lower != "":
		return usageError{"-lower is only for -backend overlay"}
	case c.backend == "memory" && c.rootSet:
		return usageError{"-root has no effect with -backend memory"}
	}
	if c.transport != "stdio" {
		if _, _, err := net.SplitHostPort(c.addr); err != nil {
			return usageError{fmt.Sprintf("invalid value %q for -addr: use HOST:PORT, such as 127.0.0.1:8080", c.addr)}
		}
	}
	switch {
	case len(rest) == 0:
	case rest[0] == "exec" && len(rest) == 2:
	case rest[0] == "exec":
		return usageError{"exec takes one argument: a memory_20250818 input as JSON, or - to read it from stdin"}
	default:
		return usageError{fmt.Sprintf("unknown command %q: the only command is exec", rest[0])}
	}
	return nil
}

// run is the whole program, testable: it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, rest, err := parseArgs(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "memory-mcp: %v (see memory-mcp -help)\n", err)
		return 2
	}
	if c.version {
		fmt.Fprintln(stdout, "memory-mcp", buildVersion())
		return 0
	}
	log := newLogger(c, stderr)

	store, where, err := openStore(c, getenv)
	if err != nil {
		log.Error().Err(err).Msg("cannot open the memory store")
		fmt.Fprintf(stderr, "memory-mcp: cannot open the memory store: %v\n", err)
		return 1
	}
	defer store.Close()
	h := handlers.New(store, handlers.Limits{MaxViewChars: c.maxViewChars, MaxFileBytes: c.maxFileBytes, MaxStoreBytes: c.maxStoreBytes})

	if len(rest) > 0 {
		return execOne(ctx, h, rest[1], stdin, stdout, stderr)
	}

	instructions := server.DefaultInstructions(c.tools)
	switch c.instructions {
	case "":
	case "none":
		instructions = ""
	default:
		data, err := os.ReadFile(c.instructions)
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot read -instructions: %v\n", err)
			return 2
		}
		instructions = string(data)
	}
	srv := server.New(h, server.Config{Tools: c.tools, Instructions: instructions, Version: buildVersion(), Logger: log})
	log.Info().Str("transport", c.transport).Str("backend", c.backend).Str("store", where).Str("tools", c.tools).Str("version", buildVersion()).Msg("memory-mcp starting")

	if c.transport == "stdio" {
		err = srv.ServeStdio(ctx, stdin, stdout)
	} else {
		var ln net.Listener
		ln, err = net.Listen("tcp", c.addr)
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot listen on %s: %v\n", c.addr, err)
			return 1
		}
		path := "/mcp"
		if c.transport == "sse" {
			path = "/sse"
		}
		log.Info().Str("addr", ln.Addr().String()).Str("url", "http://"+ln.Addr().String()+path).Msg("listening")
		err = srv.ServeHTTP(ctx, server.HTTPOptions{Transport: c.transport, Listener: ln, MaxRequestBytes: c.maxRequestBytes})
	}
	if err != nil {
		log.Error().Err(err).Msg("server stopped with an error")
		return 1
	}
	log.Info().Msg("memory-mcp stopped")
	return 0
}

func newLogger(c *config, stderr io.Writer) zerolog.Logger {
	level, _ := zerolog.ParseLevel(c.logLevel)
	var w io.Writer = stderr
	if c.logFormat == "console" {
		// Out set and NoColor: a bare ConsoleWriter writes colour codes, and to stdout.
		w = zerolog.ConsoleWriter{Out: stderr, NoColor: true}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// openStore opens the configured storage and says where it is, for the log.
func openStore(c *config, getenv func(string) string) (*vfs.Store, string, error) {
	switch c.backend {
	case "memory":
		return vfs.NewMemoryStore(), "memory", nil
	case "overlay":
		upper := c.root
		s, err := vfs.OpenOverlayStore(c.lower, upper)
		if upper == "" {
			upper = "memory"
		}
		return s, c.lower + " under " + upper, err
	}
	root := c.root
	if root == "" {
		dir, err := dataDir(getenv)
		if err != nil {
			return nil, "", err
		}
		root = filepath.Join(dir, "memory-mcp", "memories")
	}
	s, err := vfs.OpenOSStore(root)
	return s, root, err
}

// dataDir is the user's data directory: $XDG_DATA_HOME or ~/.local/share on Linux and other
// Unix systems, ~/Library/Application Support on macOS, %LocalAppData% on Windows.
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
func execOne(ctx context.Context, h *handlers.Handlers, operand string, stdin io.Reader, stdout, stderr io.Writer) int {
	data := []byte(operand)
	if operand == "-" {
		var err error
		if data, err = io.ReadAll(stdin); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: reading stdin: %v\n", err)
			return 2
		}
	}
	var input map[string]any
	if err := json.Unmarshal(data, &input); err != nil {
		fmt.Fprintf(stderr, "memory-mcp: exec needs a JSON object such as {\"command\":\"view\",\"path\":\"/memories\"}: %v\n", err)
		return 2
	}
	res := h.Exec(ctx, input)
	fmt.Fprintln(stdout, res.Text)
	if res.Err != nil {
		fmt.Fprintf(stderr, "memory-mcp: %v\n", res.Err)
	}
	if res.IsError {
		return 1
	}
	return 0
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `memory-mcp: Anthropic's memory tool (memory_20250818) as an MCP server.

Usage:
  memory-mcp [flags]               serve (stdio by default)
  memory-mcp [flags] exec JSON|-   run one memory_20250818 input, print the result (exit 1 on an error result)

Flags (each also settable as MEMORY_MCP_<FLAG>, e.g. MEMORY_MCP_MAX_VIEW_CHARS):
`)
	fs := newFlags(&config{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}
