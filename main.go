// Command memory-mcp serves Anthropic's memory tool (memory_20250818) over the Model
// Context Protocol: a /memories directory the model reads and edits with six commands,
// kept on disk, in memory, in a copy-on-write overlay or in PostgreSQL, behind a jail. Its
// subcommands run one command, serve the web page, and read, restore, export and import
// the memory and its history. Run memory-mcp -help for the commands and flags (help.go);
// every flag can also be set as MEMORY_MCP_<FLAG>, and a flag on the command line wins.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
)

// version, commit and date are set at build time (-ldflags "-X main.version=…"); when they
// are not, the module's build information (go install, or a build from a checkout) fills in.
var version, commit, date = "", "", ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole program, testable: it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, rest, err := parseArgs(args, getenv)
	var help helpRequest
	if errors.As(err, &help) {
		err = printHelp(stdout, help.topic)
		if err == nil {
			return 0
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "memory-mcp: %v (see memory-mcp -help)\n", err)
		return 2
	}
	if c.version {
		printVersion(stdout)
		return 0
	}
	if len(rest) > 0 && rest[0] == "token" {
		return printToken(rest[1:], stdout, stderr)
	}
	if len(rest) > 0 && rest[0] == "migrate" {
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		version, err := postgres.Migrate(mctx, c.dsn)
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: migrate: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "The database's schema is at version %d.\n", version)
		return 0
	}

	var specs []server.TenantSpec
	if c.tenants != "" {
		if specs, err = readTenants(c.tenants); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: -tenants: %v\n", err)
			return 2
		}
	}
	var dbErr error
	switch {
	case c.backend == "postgres":
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		c.pg, dbErr = postgres.Open(octx, c.dsn, c.migrate && !c.readOnly)
		cancel()
	case c.postgresMount():
		// Only mounts live there: a database that is down fails only the calls under them.
		c.pg, dbErr = postgres.Connect(c.dsn, c.migrate && !c.readOnly)
	}
	if dbErr != nil {
		fmt.Fprintf(stderr, "memory-mcp: cannot open the database: %v\n", dbErr)
		return 1
	}
	if c.pg != nil {
		defer c.pg.Close() // after the stores, which are closed by deferred calls made later
	}
	p := &program{c: c, getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, log: newLogger(c, stderr),
		limits: handlers.Limits{MaxViewChars: c.maxViewChars, MaxFileBytes: c.maxFileBytes, MaxStoreBytes: c.maxStoreBytes}}
	defer p.mounted.close()
	if err := p.mounted.open(c, c.mounts, func(store *vfs.Store, m mountSpec) (*handlers.Memory, error) {
		kind, _ := m.kind()
		return p.memoryOf(store, kind == "memory", m.readOnly || c.readOnly)
	}); err != nil {
		fmt.Fprintf(stderr, "memory-mcp: %v\n", err)
		return 1
	}
	if len(rest) > 0 {
		return p.subcommand(ctx, rest, specs)
	}
	return p.serve(ctx, specs)
}

// program is one run's configuration and the mounts of its flags; its methods open a
// memory the same way for the server, its tenants and a subcommand.
type program struct {
	c              *config
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	log            zerolog.Logger
	limits         handlers.Limits
	mounted        openedMounts
}

func readTenants(name string) ([]server.TenantSpec, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return server.ParseTenants(data)
}

// memoryOf is the memory over a store opened for it: access tracked, the server's limits
// and options.
func (p *program) memoryOf(store *vfs.Store, memoryBackend, readOnly bool, more ...handlers.Option) (*handlers.Memory, error) {
	// Every process that uses the storage records access (a read-only one records nothing),
	// so that expiry, in whichever process runs it, counts them all. Memory is this
	// process's alone: there, only expiry needs the record.
	if !memoryBackend || p.c.expireAfter > 0 {
		if err := store.TrackAccess(time.Now); err != nil {
			return nil, err
		}
	}
	opts := []handlers.Option{handlers.Timeout(p.c.callTimeout)}
	if readOnly {
		opts = append(opts, handlers.ReadOnly())
	}
	if p.c.secrets == "off" {
		opts = append(opts, handlers.AllowSecrets())
	}
	return handlers.New(store, p.limits, append(opts, more...)...), nil
}

// open opens the memory of a storage directory (a tenant's, or "" for the server's) with
// the mounts of the flags and more; with plain, without any (a tenant's mount).
func (p *program) open(sub string, readOnly, plain bool, more ...handlers.Mount) (*handlers.Memory, *vfs.Store, string, error) {
	readOnly = readOnly || p.c.readOnly
	store, where, err := openStore(p.c, sub, readOnly, p.getenv)
	if err != nil {
		return nil, nil, "", err
	}
	mounts := append(slices.Clone(p.mounted.mounts), more...)
	if plain {
		mounts = nil
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		if seen[m.Name] {
			store.Close()
			return nil, nil, "", fmt.Errorf("two mounts named %s (the flags' and the tenants file's)", m.Name)
		}
		seen[m.Name] = true
	}
	h, err := p.memoryOf(store, p.c.backend == "memory", readOnly, handlers.WithMounts(mounts...))
	if err != nil {
		store.Close()
		return nil, nil, "", err
	}
	if len(mounts) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.CheckMounts(ctx); err != nil {
			store.Close()
			return nil, nil, "", err
		}
	}
	return h, store, where, nil
}

// subcommand runs a subcommand on one memory: the server's, or the -tenant's.
func (p *program) subcommand(ctx context.Context, rest []string, specs []server.TenantSpec) int {
	c, stderr := p.c, p.stderr
	readOnly := historyCommands[rest[0]] && rest[0] != "restore" && rest[0] != "redact" || rest[0] == "export"
	var (
		h     *handlers.Memory
		store *vfs.Store
		where string
	)
	if c.tenant != "" {
		// The tenant's memory as the server opens it, mounts and all.
		i := slices.IndexFunc(specs, func(s server.TenantSpec) bool { return s.Name == c.tenant })
		if i < 0 {
			fmt.Fprintf(stderr, "memory-mcp: no tenant %q in %s\n", c.tenant, c.tenants)
			return 2
		}
		spec := specs[i]
		spec.ReadOnly = spec.ReadOnly || readOnly
		one := newTenantSet(p.open, len(p.mounted.mounts))
		defer one.close()
		if err := one.load([]server.TenantSpec{spec}); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: %v\n", err)
			return 1
		}
		o := one.stores[spec.Dir]
		h, store, where = o.h, o.store, o.where
	} else {
		var err error
		if h, store, where, err = p.open("", readOnly, false); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot open the memory store: %v\n", err)
			return 1
		}
		defer store.Close()
	}
	switch {
	case transferCommands[rest[0]]:
		if i := slices.IndexFunc(p.mounted.mounts, func(m handlers.Mount) bool { return m.Name == c.sub.mount }); i >= 0 {
			h, store, where = p.mounted.mounts[i].Memory, p.mounted.stores[i], "the store mounted at /memories/"+c.sub.mount
		}
		return runTransfer(ctx, c, h, store, where, rest, p.stdin, p.stdout, stderr)
	case rest[0] == "exec":
		return execOne(ctx, h, rest[1], p.stdin, p.stdout, stderr)
	case rest[0] == "ui":
		return serveUI(ctx, c, h, p.log, p.stdout, stderr)
	}
	return runHistory(ctx, c, h, rest, p.stdout, stderr)
}

// serve serves the memory, or the tenants' memories, until ctx is done or the client goes.
func (p *program) serve(ctx context.Context, specs []server.TenantSpec) int {
	c, log, stderr := p.c, p.log, p.stderr
	var (
		h      *handlers.Memory
		where  string
		expiry []server.ExpiryTarget
	)
	for i, m := range p.mounted.mounts {
		if !m.Memory.ReadOnlyStore() {
			expiry = append(expiry, server.ExpiryTarget{Store: p.mounted.stores[i]})
		}
	}
	ts := newTenantSet(p.open, len(p.mounted.mounts))
	defer ts.close()
	if specs != nil {
		if err := ts.load(specs); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: %v\n", err)
			return 1
		}
		where = fmt.Sprintf("%d tenants", len(specs))
	} else {
		var store *vfs.Store
		var err error
		if h, store, where, err = p.open("", false, false); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot open the memory store: %v\n", err)
			return 1
		}
		defer store.Close()
		expiry = append(expiry, server.ExpiryTarget{Store: store})
	}
	if c.expireAfter > 0 {
		// The loop must be over before the deferred Closes above run, also when the server
		// stops because stdin ended rather than on a signal.
		expiryCtx, stopExpiry := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			targets := func() []server.ExpiryTarget { return append(expiry, ts.expiry()...) }
			server.RunExpiry(expiryCtx, targets, c.expireAfter, c.expireDryRun, log)
		}()
		defer func() { stopExpiry(); <-done }()
	}

	instructions := ""
	if c.instructions != "" && c.instructions != "none" {
		data, err := os.ReadFile(c.instructions)
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot read -instructions: %v\n", err)
			return 2
		}
		instructions = string(data)
	}
	srv := server.New(h, server.Config{Tools: c.tools, Instructions: instructions, NoInstructions: c.instructions == "none", Version: buildVersion(), Logger: log, Tenants: ts.tenants()})
	if c.tenants != "" {
		// SIGHUP reloads the tenants file: new tenants are admitted, removed ones refused,
		// rotated tokens take effect; a file with a mistake changes nothing.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				specs, err := readTenants(c.tenants)
				if err == nil {
					err = ts.load(specs)
				}
				if err != nil {
					log.Error().Err(err).Msg("tenants file not reloaded; the tenants stay as they were")
					continue
				}
				srv.SetTenants(ts.tenants())
				log.Info().Int("tenants", len(specs)).Msg("tenants file reloaded")
			}
		}()
	}
	log.Info().Str("transport", c.transport).Str("backend", c.backend).Str("store", where).Str("tools", c.tools).Str("version", buildVersion()).Msg("memory-mcp starting")

	var err error
	if c.transport == "stdio" {
		if f, ok := p.stdin.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			// A person started it in a terminal: what it waits for is not obvious.
			fmt.Fprintf(stderr, "memory-mcp is waiting for an MCP client on stdin (clients start it themselves: see the README); its memory is %s. Try memory-mcp -help for the flags and commands, or memory-mcp ui to see the memory in a browser. Ctrl+C stops it.\n", where)
		}
		err = srv.ServeStdio(ctx, p.stdin, p.stdout, c.maxLineBytes)
	} else {
		opts, lerr := p.listen(ctx)
		if lerr != nil {
			fmt.Fprintf(stderr, "memory-mcp: %v\n", lerr)
			return 1
		}
		err = srv.ServeHTTP(ctx, opts)
	}
	if err != nil {
		log.Error().Err(err).Msg("server stopped with an error")
		return 1
	}
	log.Info().Msg("memory-mcp stopped")
	return 0
}

// listen listens on the flags' address and returns the HTTP transport's options.
func (p *program) listen(ctx context.Context) (server.HTTPOptions, error) {
	c := p.c
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return server.HTTPOptions{}, fmt.Errorf("cannot listen on %s: %v", c.addr, err)
	}
	path := "/mcp"
	if c.transport == "sse" {
		path = "/sse"
	}
	p.log.Info().Str("addr", ln.Addr().String()).Str("url", "http://"+ln.Addr().String()+path).Msg("listening")
	limits := server.DefaultLimits()
	limits.Requests, limits.PerTenant, limits.RequestBytes = c.maxInflight, max(1, c.maxInflight/4), c.maxInflightBytes
	limits.Queue, limits.QueuePerTenant, limits.Wait = c.maxQueue, max(1, c.maxQueue/2), c.queueWait
	limits.SmallRequests = limits.Requests + limits.Queue + 64
	sessions := server.SessionLimits{Idle: c.sessionIdle, Max: c.maxSessions, MaxPerTenant: c.maxSessionsPerTenant}
	if c.backend == "postgres" {
		// Replicas on one database share their sessions: no sticky routing needed.
		kctx, cancel := context.WithTimeout(ctx, time.Minute)
		sessions.Key, err = c.pg.Sessions().Key(kctx)
		cancel()
		if err != nil {
			ln.Close()
			return server.HTTPOptions{}, fmt.Errorf("cannot read the session key from the database: %v", err)
		}
		sessions.Store = c.pg.Sessions()
	}
	return server.HTTPOptions{
		Transport: c.transport, Listener: ln, MaxRequestBytes: c.maxRequestBytes,
		Limits:         limits,
		Sessions:       sessions,
		AllowedOrigins: splitList(c.allowedOrigins, "/"),
		AllowedHosts:   splitList(c.allowedHosts, ""),
		UI:             c.ui,
	}, nil
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

// printToken prints a new bearer token and the tenants-file entry that admits it.
func printToken(args []string, stdout, stderr io.Writer) int {
	name := "NAME"
	if len(args) == 1 {
		name = args[0]
		if err := server.ValidTenantName(name); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: token: %v\n", err)
			return 2
		}
	}
	token, sha := server.NewToken()
	entry, _ := json.Marshal(server.TenantSpec{Name: name, TokenSHA256: sha})
	fmt.Fprintf(stdout, "token: %s\n", token)
	fmt.Fprintf(stdout, "tenants file entry: %s\n", entry)
	fmt.Fprintln(stdout, "Give the token to the client (Authorization: Bearer <token>); keep only the entry on the server.")
	return 0
}
