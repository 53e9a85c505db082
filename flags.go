package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
)

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

	mounts []mountSpec // -mount and -mount-ro

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
	fs.Var(mountFlag{&c.mounts, false}, "mount", mountUsage)
	fs.Var(mountFlag{&c.mounts, true}, "mount-ro", "as -mount, read-only: the model can view the store but never change it")
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
	for i := range c.mounts {
		if kind, arg := c.mounts[i].kind(); kind == "dir" {
			c.mounts[i].source = expandHome(arg, getenv)
		}
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
	case c.backend != "postgres" && !c.postgresMount() && (c.dsn != "" || len(rest) > 0 && rest[0] == "migrate"):
		return usageError{"-dsn and migrate are for -backend postgres or a postgres: mount"}
	case c.store == "" || strings.ContainsAny(c.store, "\x00"):
		return usageError{"-store needs a name"}
	}
	if err := checkMounts(c, c.mounts); err != nil {
		return err
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

// postgresMount reports whether a mount is a store in the -dsn database.
func (c *config) postgresMount() bool {
	for _, m := range c.mounts {
		if kind, _ := m.kind(); kind == "postgres" {
			return true
		}
	}
	return false
}
