// Command memory-mcp serves Anthropic's memory tool (memory_20250818) over the Model
// Context Protocol: a /memories directory the model reads and edits with six commands,
// kept on disk, in memory, or in a copy-on-write overlay, behind a jail.
//
// Usage:
//
//	memory-mcp [flags]               serve (stdio by default)
//	memory-mcp [flags] exec JSON|-   run one memory_20250818 input and print the result
//	memory-mcp token [NAME]          print a new bearer token and its tenants-file entry
//	memory-mcp -backend postgres -dsn URL migrate
//	memory-mcp [flags] export [-no-history] [FILE], import [FILE]
//	                                 move a store between backends as a tar stream
//	memory-mcp [flags] log [PATH]    the history of changes, newest first
//	memory-mcp [flags] show PATH@SEQ, diff PATH [SEQ [SEQ]], restore PATH@SEQ | -at TIME [PATH],
//	                   redact PATH@SEQ
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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
	"github.com/memory-mcp/memory-mcp/webui"
)

// version, commit and date are set at build time (-ldflags "-X main.version=…"); when they
// are not, the module's build information (go install, or a build from a checkout) fills in.
var version, commit, date = "", "", ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

type config struct {
	transport, addr, backend, root, lower, tools, instructions string
	maxViewChars                                               int
	maxFileBytes, maxStoreBytes, maxRequestBytes, maxLineBytes int64
	logLevel, logFormat                                        string
	version                                                    bool
	rootSet                                                    bool
	tenants, secrets                                           string
	insecureNoAuth, readOnly, expireDryRun, anyRoot            bool
	expireAfter, callTimeout, sessionIdle, stdioPoll           time.Duration
	allowedOrigins, allowedHosts                               string
	maxSessions, maxSessionsPerTenant, maxInflight             int
	maxInflightBytes                                           int64
	maxQueue                                                   int
	queueWait                                                  time.Duration

	history            bool
	historyMaxAge      time.Duration
	historyMaxVersions int
	historyMaxBytes    int64
	tenant             string
	ui                 bool
	dsn, store         string
	migrate            bool
	sub                subFlags // the history subcommands' own flags

	pg *postgres.DB // with -backend postgres: the database, opened once for every store
}

// usageError is a bad flag or value: one line on stderr, exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func newFlags(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("memory-mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.transport, "transport", "stdio", "stdio, http (Streamable HTTP at /mcp) or sse (legacy HTTP+SSE at /sse and /message)")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address the http and sse transports listen on")
	fs.StringVar(&c.backend, "backend", "os", "storage: os (a directory), memory (gone when the server stops), overlay (read-only -lower under a writable layer) or postgres (a store in the -dsn database, shared by replicas)")
	fs.StringVar(&c.dsn, "dsn", "", "with -backend postgres: the database, as a postgres:// URL or key/value DSN (PG* environment variables fill in what it leaves out)")
	fs.StringVar(&c.store, "store", "default", "with -backend postgres and no -tenants: the name of the store that is /memories (with -tenants, each tenant's dir names its store)")
	fs.BoolVar(&c.migrate, "migrate", true, "with -backend postgres: bring the database's schema up to date at start (false: an operator runs memory-mcp migrate)")
	fs.StringVar(&c.root, "root", "", "the directory that is /memories (default: ~/.memory-mcp/memories); with -backend overlay, the writable upper layer (default: memory)")
	fs.StringVar(&c.lower, "lower", "", "with -backend overlay: the read-only lower directory, never modified")
	fs.StringVar(&c.tools, "tools", server.ToolsSplit, "split (six tools memory_view … memory_rename) or single (one memory tool taking the native memory_20250818 input)")
	fs.StringVar(&c.instructions, "instructions", "", "a file whose text replaces the built-in memory protocol sent as instructions, or none to send no instructions")
	fs.IntVar(&c.maxViewChars, "max-view-chars", 16000, "characters one view may return before it is truncated")
	fs.Int64Var(&c.maxFileBytes, "max-file-bytes", 1<<20, "largest size of one memory file, in bytes")
	fs.Int64Var(&c.maxStoreBytes, "max-store-bytes", 100<<20, "largest size of all memory files together, in bytes")
	fs.Int64Var(&c.maxRequestBytes, "max-request-bytes", 4<<20, "largest HTTP request body, in bytes (larger gets 413)")
	fs.Int64Var(&c.maxLineBytes, "max-line-bytes", 64<<20, "largest line (one message) on stdio, in bytes; a longer one gets a JSON-RPC error with the request's id, and below it a file over -max-file-bytes gets the per-file error")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or console")
	fs.StringVar(&c.tenants, "tenants", "", "a JSON file of tenants (see the README): http and sse then require a tenant's bearer token and give each tenant its own memory under -root")
	fs.BoolVar(&c.anyRoot, "allow-any-root", false, "accept a -root or -lower that is a filesystem's root or a pseudo-filesystem (/proc, /sys, /dev), which is refused otherwise")
	fs.BoolVar(&c.insecureNoAuth, "insecure-no-auth", false, "serve http or sse on a non-loopback address without -tenants (only behind something that authenticates)")
	fs.BoolVar(&c.readOnly, "read-only", false, "list only view and refuse every change")
	fs.DurationVar(&c.expireAfter, "expire-after", 0, "delete files not viewed or changed for longer than this, such as 720h (0: never)")
	fs.BoolVar(&c.expireDryRun, "expire-dry-run", false, "with -expire-after: only log what would be deleted")
	fs.DurationVar(&c.callTimeout, "call-timeout", handlers.DefaultTimeout, "longest a tool call may take (waiting for the storage included) before it fails with a storage error")
	fs.DurationVar(&c.stdioPoll, "stdio-poll", 0, "accepted and ignored (the stdio loop no longer looks for a client's next line); it goes in a later release")
	fs.StringVar(&c.secrets, "secrets", "reject", "reject (refuse text that looks like a credential) or off")
	fs.StringVar(&c.allowedOrigins, "allowed-origins", "", "comma-separated web origins (such as https://app.example.com) whose pages may call the http and sse transports; requests from any other origin get 403 (a local page may call a loopback listener)")
	fs.StringVar(&c.allowedHosts, "allowed-hosts", "", "comma-separated Host names that a loopback listener also answers (such as the name a reverse proxy on this host forwards with); other non-local Hosts get 403")
	fs.DurationVar(&c.sessionIdle, "session-idle", 30*time.Minute, "Streamable HTTP sessions end after this long without a request")
	fs.IntVar(&c.maxSessions, "max-sessions", 1000, "most Streamable HTTP sessions at once; beyond it the least recently used ends")
	fs.IntVar(&c.maxSessionsPerTenant, "max-sessions-per-tenant", 100, "most Streamable HTTP sessions of one tenant at once")
	fs.IntVar(&c.maxInflight, "max-inflight", 64, "most HTTP requests executing at once (a quarter of it per tenant); beyond it a call waits its turn (see -max-queue)")
	fs.IntVar(&c.maxQueue, "max-queue", 512, "most HTTP and SSE calls waiting for their turn beyond -max-inflight (half of it per tenant, and per SSE client); beyond it 503 with Retry-After")
	fs.DurationVar(&c.queueWait, "queue-wait", 30*time.Second, "longest a call waits for its turn; then 503 with Retry-After")
	fs.Int64Var(&c.maxInflightBytes, "max-inflight-bytes", 32<<20, "most bytes of HTTP request bodies held at once (half of it per tenant); beyond it 503 with Retry-After")
	fs.BoolVar(&c.history, "history", true, "keep a version of every change, for log, diff, restore and redact")
	fs.DurationVar(&c.historyMaxAge, "history-max-age", vfs.DefaultHistory.MaxAge, "prune versions older than this (0: keep them however old); a file's current version is always kept")
	fs.IntVar(&c.historyMaxVersions, "history-max-versions", vfs.DefaultHistory.MaxVersions, "keep at most this many versions per file (0: no limit)")
	fs.Int64Var(&c.historyMaxBytes, "history-max-bytes", vfs.DefaultHistory.MaxBytes, "bytes of contents the history keeps, apart from -max-store-bytes; beyond it the oldest versions are pruned (0: no limit)")
	fs.StringVar(&c.tenant, "tenant", "", "with -tenants, the tenant whose memory exec, ui and the history subcommands work on")
	fs.BoolVar(&c.ui, "ui", true, "serve the web page under /ui/ on the http and sse transports (tenants log in with their token)")
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
	if errors.Is(err, flag.ErrHelp) {
		return nil, nil, helpRequest{}
	}
	if err != nil {
		return nil, nil, err
	}
	switch {
	case len(rest) > 0 && rest[0] == "help":
		topic := ""
		if len(rest) > 1 {
			topic = rest[1]
		}
		return nil, nil, helpRequest{topic}
	case len(rest) > 0 && (rest[0] == "token" || rest[0] == "migrate") && wantsHelp(rest[1:]):
		return nil, nil, helpRequest{rest[0]}
	}
	// Flags may also follow the subcommand: memory-mcp exec -root DIR '{...}'; the history
	// subcommands have flags of their own.
	if len(rest) > 0 && (rest[0] == "exec" || rest[0] == "ui" || historyCommands[rest[0]] || transferCommands[rest[0]]) {
		sub := fs
		if historyCommands[rest[0]] || transferCommands[rest[0]] {
			sub = c.sub.flags(rest[0])
			fs.VisitAll(func(f *flag.Flag) { sub.Var(f.Value, f.Name, f.Usage) })
		}
		more, err := parseFlags(sub, rest[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, helpRequest{rest[0]}
		}
		if err != nil {
			return nil, nil, err
		}
		if sub != fs {
			sub.Visit(func(f *flag.Flag) { fs.Set(f.Name, f.Value.String()) }) // marks it set
		}
		rest = append([]string{rest[0]}, more...)
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "root" {
			c.rootSet = true
		}
	})
	if getenv("MEMORY_MCP_ROOT") != "" {
		c.rootSet = true
	}
	// Client configurations are JSON, where no shell expands "~": do it here.
	for _, p := range []*string{&c.root, &c.lower, &c.tenants, &c.instructions} {
		*p = expandHome(*p, getenv)
	}
	return c, rest, c.validate(rest)
}

// expandHome replaces a leading "~/" (or "~\" on Windows) with the user's home directory,
// taken from HOME, or USERPROFILE on Windows.
func expandHome(p string, getenv func(string) string) string {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok && runtime.GOOS == "windows" {
		rest, ok = strings.CutPrefix(p, `~\`)
	}
	if p == "~" {
		rest, ok = "", true
	}
	if !ok {
		return p
	}
	home := getenv("HOME")
	if home == "" {
		home = getenv("USERPROFILE")
	}
	if home == "" {
		return p
	}
	return filepath.Join(home, rest)
}

func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{suggest(err, fs).Error()}
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
		oneOf("backend", c.backend, "os", "memory", "overlay", "postgres"),
		oneOf("tools", c.tools, server.ToolsSplit, server.ToolsSingle),
		oneOf("log-format", c.logFormat, "json", "console"),
		oneOf("log-level", c.logLevel, "debug", "info", "warn", "error"),
		oneOf("secrets", c.secrets, "reject", "off"),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case c.maxViewChars < 200:
		return usageError{fmt.Sprintf("invalid value %d for -max-view-chars: use at least 200", c.maxViewChars)}
	case c.maxFileBytes <= 0, c.maxStoreBytes <= 0, c.maxRequestBytes <= 0, c.maxLineBytes <= 0:
		return usageError{"-max-file-bytes, -max-store-bytes, -max-request-bytes and -max-line-bytes must be positive"}
	case c.backend == "overlay" && c.lower == "":
		return usageError{"-backend overlay needs -lower DIR, the read-only layer"}
	case c.backend != "overlay" && c.lower != "":
		return usageError{"-lower is only for -backend overlay"}
	case c.backend == "memory" && c.rootSet:
		return usageError{"-root has no effect with -backend memory"}
	case c.backend == "postgres" && c.rootSet:
		return usageError{"-root has no effect with -backend postgres: the memory is the -store in the -dsn database"}
	case c.backend != "postgres" && (c.dsn != "" || len(rest) > 0 && rest[0] == "migrate"):
		return usageError{"-dsn and migrate are for -backend postgres"}
	case c.store == "" || strings.ContainsAny(c.store, "\x00"):
		return usageError{"-store needs a name"}
	}
	for _, d := range []struct{ flag, dir string }{{"root", c.root}, {"lower", c.lower}} {
		if err := checkStorageDir(d.flag, d.dir, c.anyRoot); err != nil {
			return err
		}
	}
	switch {
	case c.expireAfter < 0:
		return usageError{"-expire-after must not be negative"}
	case c.expireDryRun && c.expireAfter == 0:
		return usageError{"-expire-dry-run needs -expire-after"}
	case c.callTimeout <= 0:
		return usageError{"-call-timeout must be positive"}
	case c.sessionIdle <= 0, c.maxSessions <= 0, c.maxSessionsPerTenant <= 0, c.maxInflight <= 0, c.maxInflightBytes <= 0, c.maxQueue <= 0, c.queueWait <= 0:
		return usageError{"-session-idle, -max-sessions, -max-sessions-per-tenant, -max-inflight, -max-inflight-bytes, -max-queue and -queue-wait must be positive"}
	}
	switch {
	case len(rest) == 0:
	case rest[0] == "exec" && len(rest) == 2:
	case rest[0] == "exec":
		return usageError{"exec takes one argument: a memory_20250818 input as JSON, or - to read it from stdin"}
	case rest[0] == "token" && len(rest) <= 2:
		return nil
	case rest[0] == "migrate" && len(rest) == 1:
		return nil
	case rest[0] == "ui" && len(rest) > 1:
		return usageError{"ui takes no arguments: it prints the page's address"}
	case rest[0] == "ui" && c.backend == "memory":
		return usageError{"ui shows a memory kept on disk: use -backend os or overlay (a memory store lives only inside its own process)"}
	case rest[0] == "ui":
	case historyCommands[rest[0]]:
		if err := c.validateHistory(rest); err != nil {
			return err
		}
	case transferCommands[rest[0]]:
		if err := c.validateTransfer(rest); err != nil {
			return err
		}
	default:
		return usageError{fmt.Sprintf("unknown command %q: the commands are exec, ui, token, migrate, export, import, log, show, diff, restore, redact and help", rest[0])}
	}
	switch {
	case c.historyMaxAge < 0, c.historyMaxVersions < 0, c.historyMaxBytes < 0:
		return usageError{"-history-max-age, -history-max-versions and -history-max-bytes must not be negative"}
	case c.tenant != "" && (len(rest) == 0 || c.tenants == ""):
		return usageError{"-tenant picks a tenant's memory for exec, ui and the history subcommands, from -tenants FILE"}
	}
	if len(rest) > 0 {
		if c.tenants != "" && c.tenant == "" {
			return usageError{rest[0] + " works on one memory: give -tenant NAME with -tenants, or -root DIR"}
		}
		return nil
	}
	if c.transport == "stdio" {
		if c.tenants != "" {
			return usageError{"-tenants needs -transport http or sse: stdio has one client, started by its user"}
		}
		return nil
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return usageError{fmt.Sprintf("invalid value %q for -addr: use HOST:PORT, such as 127.0.0.1:8080", c.addr)}
	}
	if c.tenants == "" && !c.insecureNoAuth && !loopbackHost(host) {
		return usageError{fmt.Sprintf("refusing to serve %s on %s without authentication: give -tenants FILE (memory-mcp token makes the entries), or -insecure-no-auth if something in front of it authenticates", c.transport, c.addr)}
	}
	return nil
}

// checkStorageDir refuses a storage directory that is not one: a file, and (unless anyRoot)
// a filesystem's root or a directory of a pseudo-filesystem, where the server would read
// or change what is not memory at all.
func checkStorageDir(flag, dir string, anyRoot bool) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return usageError{fmt.Sprintf("-%s %s is a file: give a directory (it is made if it does not exist)", flag, dir)}
	}
	if anyRoot {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil // the store's opening says what is wrong
	}
	for _, p := range []string{abs, evalSymlinks(abs)} {
		if filepath.Dir(p) == p {
			return usageError{fmt.Sprintf("-%s %s is the root of a filesystem: give a directory of its own (or -allow-any-root if you mean it)", flag, dir)}
		}
		for _, pseudo := range []string{"/proc", "/sys", "/dev"} {
			if runtime.GOOS != "windows" && (p == pseudo || strings.HasPrefix(p, pseudo+"/")) {
				return usageError{fmt.Sprintf("-%s %s is in %s, a pseudo-filesystem: give a directory of your own (or -allow-any-root if you mean it)", flag, dir, pseudo)}
			}
		}
	}
	return nil
}

// evalSymlinks is p with its symbolic links resolved, or p where that fails.
func evalSymlinks(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// loopbackHost reports whether a listen host is this machine only; "" and 0.0.0.0 mean
// every interface, and a host name is taken as reachable from elsewhere.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	log := newLogger(c, stderr)

	var specs []server.TenantSpec
	if c.tenants != "" {
		data, err := os.ReadFile(c.tenants)
		if err == nil {
			specs, err = server.ParseTenants(data)
		}
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: -tenants: %v\n", err)
			return 2
		}
	}
	if c.backend == "postgres" {
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		c.pg, err = postgres.Open(octx, c.dsn, c.migrate && !c.readOnly)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot open the database: %v\n", err)
			return 1
		}
		defer c.pg.Close() // after the stores, which are closed by deferred calls made later
	}
	limits := handlers.Limits{MaxViewChars: c.maxViewChars, MaxFileBytes: c.maxFileBytes, MaxStoreBytes: c.maxStoreBytes}
	open := func(sub string, readOnly bool) (*handlers.Handlers, *vfs.Store, string, error) {
		readOnly = readOnly || c.readOnly
		store, where, err := openStore(c, sub, readOnly, getenv)
		if err != nil {
			return nil, nil, "", err
		}
		// Every process that uses the storage records access (a read-only one records
		// nothing), so that expiry, in whichever process runs it, counts them all. Memory
		// is this process's alone: there, only expiry needs the record.
		if c.backend != "memory" || c.expireAfter > 0 {
			if err := store.TrackAccess(time.Now); err != nil {
				store.Close()
				return nil, nil, "", err
			}
		}
		opts := []handlers.Option{handlers.Timeout(c.callTimeout)}
		if readOnly {
			opts = append(opts, handlers.ReadOnly())
		}
		if c.secrets == "reject" {
			opts = append(opts, handlers.RejectSecrets())
		}
		return handlers.New(store, limits, opts...), store, where, nil
	}
	// prepare readies a store opened for serving in the background, while the client starts
	// (see vfs.Store.Prepare), and logs how that went.
	prepare := func(store *vfs.Store, where string) {
		start := time.Now()
		store.Prepare(func(err error) {
			switch {
			case err == nil:
				log.Debug().Str("store", where).Dur("took", time.Since(start)).Msg("store prepared")
			case !errors.Is(err, context.Canceled):
				log.Warn().Err(err).Str("store", where).Msg("store not prepared; its first change will try again")
			}
		})
	}
	var (
		h      *handlers.Handlers
		where  string
		expiry []server.ExpiryTarget
	)
	if len(rest) > 0 {
		// A subcommand works on one memory: the server's, or the -tenant's.
		sub, readOnly := "", historyCommands[rest[0]] && rest[0] != "restore" && rest[0] != "redact" || rest[0] == "export"
		if c.tenant != "" {
			i := slices.IndexFunc(specs, func(s server.TenantSpec) bool { return s.Name == c.tenant })
			if i < 0 {
				fmt.Fprintf(stderr, "memory-mcp: no tenant %q in %s\n", c.tenant, c.tenants)
				return 2
			}
			sub, readOnly = specs[i].Dir, readOnly || specs[i].ReadOnly
		}
		var store *vfs.Store
		h, store, where, err = open(sub, readOnly)
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot open the memory store: %v\n", err)
			return 1
		}
		defer store.Close()
		if transferCommands[rest[0]] {
			return runTransfer(ctx, c, h, store, where, rest, stdin, stdout, stderr)
		}
		specs = nil
	} else if specs == nil {
		var store *vfs.Store
		var err error
		h, store, where, err = open("", false)
		if err != nil {
			fmt.Fprintf(stderr, "memory-mcp: cannot open the memory store: %v\n", err)
			return 1
		}
		defer store.Close()
		prepare(store, where)
		expiry = append(expiry, server.ExpiryTarget{Store: store})
	}
	ts := &tenantSet{open: open, prepare: prepare, stores: map[string]openedTenant{}}
	defer ts.close()
	if specs != nil {
		if err := ts.load(specs); err != nil {
			fmt.Fprintf(stderr, "memory-mcp: %v\n", err)
			return 1
		}
		where = fmt.Sprintf("%d tenants", len(specs))
	}
	expiryTargets := func() []server.ExpiryTarget { return append(expiry, ts.expiry()...) }

	if len(rest) > 0 && rest[0] == "exec" {
		return execOne(ctx, h, rest[1], stdin, stdout, stderr)
	}
	if len(rest) > 0 && rest[0] == "ui" {
		return serveUI(ctx, c, h, log, stdout, stderr)
	}
	if len(rest) > 0 {
		return runHistory(ctx, c, h, rest, stdout, stderr)
	}
	if c.expireAfter > 0 {
		// The loop must be over before the deferred Closes above run, also when the server
		// stops because stdin ended rather than on a signal.
		expiryCtx, stopExpiry := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			server.RunExpiry(expiryCtx, expiryTargets, c.expireAfter, c.expireDryRun, log)
		}()
		defer func() { stopExpiry(); <-done }()
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
	srv := server.New(h, server.Config{Tools: c.tools, Instructions: instructions, Version: buildVersion(), Logger: log, Tenants: ts.tenants()})
	if c.tenants != "" {
		// SIGHUP reloads the tenants file: new tenants are admitted, removed ones refused,
		// rotated tokens take effect; a file with a mistake changes nothing.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				data, err := os.ReadFile(c.tenants)
				var specs []server.TenantSpec
				if err == nil {
					specs, err = server.ParseTenants(data)
				}
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

	if c.transport == "stdio" {
		if f, ok := stdin.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			// A person started it in a terminal: what it waits for is not obvious.
			fmt.Fprintf(stderr, "memory-mcp is waiting for an MCP client on stdin (clients start it themselves: see the README); its memory is %s. Try memory-mcp -help for the flags and commands, or memory-mcp ui to see the memory in a browser. Ctrl+C stops it.\n", where)
		}
		err = srv.ServeStdio(ctx, stdin, stdout, c.maxLineBytes)
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
		limits := server.DefaultLimits()
		limits.Requests, limits.PerTenant, limits.RequestBytes = c.maxInflight, max(1, c.maxInflight/4), c.maxInflightBytes
		limits.Queue, limits.QueuePerTenant, limits.Wait = c.maxQueue, max(1, c.maxQueue/2), c.queueWait
		limits.SmallRequests = limits.Requests + limits.Queue + 64
		sessions := server.SessionLimits{Idle: c.sessionIdle, Max: c.maxSessions, MaxPerTenant: c.maxSessionsPerTenant}
		if c.pg != nil {
			// Replicas on one database share their sessions: no sticky routing needed.
			kctx, cancel := context.WithTimeout(ctx, time.Minute)
			sessions.Key, err = c.pg.Sessions().Key(kctx)
			cancel()
			if err != nil {
				ln.Close()
				fmt.Fprintf(stderr, "memory-mcp: cannot read the session key from the database: %v\n", err)
				return 1
			}
			sessions.Store = c.pg.Sessions()
		}
		err = srv.ServeHTTP(ctx, server.HTTPOptions{
			Transport: c.transport, Listener: ln, MaxRequestBytes: c.maxRequestBytes,
			Limits:         limits,
			Sessions:       sessions,
			AllowedOrigins: splitList(c.allowedOrigins, "/"),
			AllowedHosts:   splitList(c.allowedHosts, ""),
			UI:             c.ui,
		})
	}
	if err != nil {
		log.Error().Err(err).Msg("server stopped with an error")
		return 1
	}
	log.Info().Msg("memory-mcp stopped")
	return 0
}

// splitList splits a comma-separated flag value, trimming spaces and the suffix from each item.
func splitList(v, suffix string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, strings.TrimSuffix(item, suffix))
		}
	}
	return out
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

func buildVersion() string {
	v, _, _ := buildInfo()
	return v
}

// buildInfo returns the version, the commit and the date of the build: the stamped ones,
// or what Go recorded in the binary.
func buildInfo() (v, rev, at string) {
	v, rev, at = version, commit, date
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && rev == "":
				rev = s.Value
			case s.Key == "vcs.time" && at == "":
				at = s.Value
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if rev == "" {
		rev = "unknown"
	}
	if at == "" {
		at = "unknown"
	}
	return v, rev, at
}

// printVersion prints "memory-mcp VERSION (commit COMMIT, built DATE, GO)".
func printVersion(w io.Writer) {
	v, rev, at := buildInfo()
	fmt.Fprintf(w, "memory-mcp %s (commit %s, built %s, %s, %s)\n", v, rev, at, runtime.Version(), jsonBuild())
}

// jsonBuild says which encoding/json the binary has: the v2 implementation
// (GOEXPERIMENT=jsonv2, as the releases are built: large files are cheaper) or the v1.
func jsonBuild() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "GOEXPERIMENT" && slices.Contains(strings.Split(s.Value, ","), "jsonv2") {
				return "encoding/json v2 (GOEXPERIMENT=jsonv2)"
			}
		}
	}
	return "encoding/json v1"
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `memory-mcp: Anthropic's memory tool (memory_20250818) as an MCP server.

Usage:
  memory-mcp [flags]               serve (stdio by default)
  memory-mcp [flags] exec JSON|-   run one memory_20250818 input, print the result (exit 1 on an error result)
  memory-mcp [flags] ui            serve the web page on 127.0.0.1 (a free port); the first line
                                   printed is its address with a one-time login token
  memory-mcp token [NAME]          print a new bearer token and its tenants-file entry
  memory-mcp -backend postgres -dsn URL migrate
                                   bring the database's schema up to date
  memory-mcp [flags] export [-no-history] [FILE]
                                   write the store (files and history) as a tar stream to FILE or stdout
  memory-mcp [flags] import [FILE] read such a stream into an empty store (of any backend)
  memory-mcp [flags] log [-since T] [-until T] [-actor A] [-n N] [-json] [PATH]
                                   the history of changes, newest first
  memory-mcp [flags] show PATH@SEQ the content of PATH after version SEQ
  memory-mcp [flags] diff PATH [SEQ [SEQ]]
                                   unified diff of PATH's last change, of version SEQ, or between two
  memory-mcp [flags] restore PATH@SEQ | restore -at TIME [PATH]
                                   put PATH (a file or directory) back as it was; undo with restore too
  memory-mcp [flags] redact PATH@SEQ
                                   purge that version's content from the history
  memory-mcp help [COMMAND]        this help, or a command's own (also: memory-mcp COMMAND -help)

Flags (each also settable as MEMORY_MCP_<FLAG>, e.g. MEMORY_MCP_MAX_VIEW_CHARS):
`)
	fs := newFlags(&config{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// serveUI serves the web page over one memory on a free loopback port until ctx is done;
// the first line on stdout is the page's address with a one-time login token.
func serveUI(ctx context.Context, c *config, h *handlers.Handlers, log zerolog.Logger, stdout, stderr io.Writer) int {
	name := c.tenant
	ui := webui.New(webui.Config{
		Memory: func(memory string) *handlers.Handlers {
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
