package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// helpRequest asks for the usage of a subcommand ("" for the whole command).
type helpRequest struct{ topic string }

func (h helpRequest) Error() string { return "help requested" }

// subcommand is what the help of one subcommand says: its name, how to call it, what it
// does, and which of the global flags it takes (its own are those of subFlags). The
// overview (-help) lists them in this order.
type subcommand struct {
	name, usage, about string
	flags              []string
}

// storeFlags choose the memory a subcommand works on.
var storeFlags = []string{"root", "backend", "lower", "dsn", "store", "mount", "mount-ro", "tenants", "tenant", "read-only"}

var subcommands = []subcommand{
	{"exec", "exec JSON|-", "Runs one memory_20250818 input (JSON, or - to read it from stdin) on the memory and prints the result; the exit status is 1 for an error result.",
		append(slices.Clone(storeFlags), "max-view-chars", "max-file-bytes", "max-store-bytes", "secrets", "history")},
	{"ui", "ui", "Serves the web page on 127.0.0.1 (a free port). The first line printed is its address with a one-time login link; run it again for a new link.",
		append(slices.Clone(storeFlags), "max-file-bytes", "max-store-bytes", "secrets", "history", "log-level")},
	{"token", "token [NAME]", "Prints a new bearer token and the tenants-file entry that admits it (only the entry goes on the server).", nil},
	{"migrate", "migrate", "Brings a PostgreSQL database's schema up to date (the server does so at start unless -migrate=false).",
		[]string{"backend", "dsn"}},
	{"export", "export [-no-history] [-of MOUNT] [FILE]", "Writes the store (its files and, unless -no-history, its history) as a tar stream to FILE, or stdout.", storeFlags},
	{"import", "import [-of MOUNT] [FILE]", "Reads a stream that export wrote (from FILE, or stdin) into an empty store of any backend: all of it or nothing, held to the limits and the secret guard.",
		append(slices.Clone(storeFlags), "max-file-bytes", "max-store-bytes", "secrets")},
	{"log", "log [-since T] [-until T] [-actor A] [-n N] [-json] [PATH]", "Prints the history of changes, newest first, of the memory or of PATH (a file, followed back through renames, or a directory).", storeFlags},
	{"show", "show PATH@SEQ", "Prints the content PATH had after version SEQ (see log for the numbers).", storeFlags},
	{"diff", "diff PATH [SEQ [SEQ]]", "Prints a unified diff of PATH's last change, of the change version SEQ made to it, or between two versions.", storeFlags},
	{"restore", "restore PATH@SEQ | restore -at TIME [PATH]", "Puts PATH (a file or a directory; with -at and no PATH, the whole memory) back as it was after version SEQ or at TIME. The restore is a new version: undo it with restore too.",
		append(slices.Clone(storeFlags), "max-file-bytes", "max-store-bytes")},
	{"redact", "redact PATH@SEQ", "Purges the content PATH had after version SEQ from the history, wherever a version holds it (a file that still holds it must be changed first).", storeFlags},
}

// printHelp prints the usage of topic: a subcommand, or the whole command for "".
func printHelp(w io.Writer, topic string) error {
	if topic == "" || topic == "help" {
		printUsage(w)
		return nil
	}
	i := slices.IndexFunc(subcommands, func(sc subcommand) bool { return sc.name == topic })
	if i < 0 {
		var names []string
		for _, sc := range subcommands {
			names = append(names, sc.name)
		}
		slices.Sort(names)
		return usageError{fmt.Sprintf("no help on %q: the commands are %s", topic, strings.Join(names, ", "))}
	}
	sc := subcommands[i]
	fmt.Fprintf(w, "Usage: memory-mcp [flags] %s\n\n%s\n", sc.usage, sc.about)
	own := (&subFlags{}).flags(topic)
	global := newFlags(&config{})
	picked := flag.NewFlagSet(topic, flag.ContinueOnError)
	for _, name := range sc.flags {
		if f := global.Lookup(name); f != nil {
			picked.Var(f.Value, f.Name, f.Usage)
		}
	}
	for _, part := range []struct {
		title string
		fs    *flag.FlagSet
	}{{"Its flags", own}, {"Flags it takes from the command (also settable as MEMORY_MCP_<FLAG>)", picked}} {
		n := 0
		part.fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", part.title)
		part.fs.SetOutput(w)
		part.fs.PrintDefaults()
	}
	return nil
}

// wantsHelp reports whether args ask for help (-h, -help, --help).
func wantsHelp(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
}

// suggest adds to an unknown flag's error the flag of fs whose name is closest, when one
// is close: two edits at most.
func suggest(err error, fs *flag.FlagSet) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	best, dist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(strings.TrimPrefix(name, "-"), f.Name); d < dist {
			best, dist = f.Name, d
		}
	})
	if best == "" {
		return err
	}
	return fmt.Errorf("%v (did you mean -%s?)", err, best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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
  memory-mcp [flags]
        Serves the memory over -transport (stdio by default) until the client goes.
`)
	for _, sc := range subcommands {
		fmt.Fprintf(w, "  memory-mcp [flags] %s\n        %s\n", sc.usage, sc.about)
	}
	fmt.Fprint(w, `  memory-mcp help [COMMAND]
        This help, or a command's own (also: memory-mcp COMMAND -help).

Flags (each also settable as MEMORY_MCP_<FLAG>, e.g. MEMORY_MCP_MAX_VIEW_CHARS):
`)
	fs := newFlags(&config{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}
