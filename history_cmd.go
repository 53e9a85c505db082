package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// historyCommands are the subcommands over the store's history.
var historyCommands = map[string]bool{"log": true, "show": true, "diff": true, "restore": true, "redact": true}

// subFlags are the history subcommands' own flags.
type subFlags struct {
	since, until, actor, at string
	n                       int
	json                    bool
	noHistory               bool
	mount                   string // export and import: the mount whose store, not the main one
}

// flags returns the flag set of subcommand cmd, bound to f.
func (f *subFlags) flags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("memory-mcp "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch cmd {
	case "log":
		fs.StringVar(&f.since, "since", "", "only versions at or after this time: RFC 3339 (2026-11-01T00:00:00Z) or a duration ago (24h)")
		fs.StringVar(&f.until, "until", "", "only versions at or before this time (as -since)")
		fs.StringVar(&f.actor, "actor", "", "only versions by this actor (a tenant's name, local, exec, expiry or web)")
		fs.IntVar(&f.n, "n", 0, "only the newest N versions")
		fs.BoolVar(&f.json, "json", false, "one JSON object per line")
	case "restore":
		fs.StringVar(&f.at, "at", "", "restore as it was at this time, rather than PATH@SEQ: RFC 3339 (2026-11-22T09:00:00Z) or a duration ago (10m)")
	case "export":
		fs.BoolVar(&f.noHistory, "no-history", false, "leave the history out: only the files")
	}
	if cmd == "export" || cmd == "import" {
		fs.StringVar(&f.mount, "of", "", "the store mounted at /memories/MOUNT (see -mount), rather than the main store")
	}
	return fs
}

func (c *config) validateHistory(rest []string) error {
	args := rest[1:]
	bad := func(format string) error { return usageError{rest[0] + " takes " + format} }
	switch rest[0] {
	case "log":
		if len(args) > 1 {
			return bad("at most one path")
		}
	case "show", "redact":
		if len(args) != 1 || !strings.Contains(args[0], "@") {
			return bad("one PATH@SEQ, such as /memories/notes.md@12 (see memory-mcp log)")
		}
	case "diff":
		if len(args) < 1 || len(args) > 3 {
			return bad("a path and at most two version numbers")
		}
	case "restore":
		if c.sub.at == "" && (len(args) != 1 || !strings.Contains(args[0], "@")) {
			return bad("PATH@SEQ, or -at TIME and an optional path")
		}
		if c.sub.at != "" && len(args) > 1 {
			return bad("with -at, at most one path")
		}
	}
	if c.backend == "memory" {
		return usageError{rest[0] + " reads the history that a store on disk keeps: use -backend os or overlay (a memory store's history ends with its process)"}
	}
	return nil
}

// runHistory runs a history subcommand; the status is 1 when it fails.
func runHistory(ctx context.Context, c *config, h *handlers.Memory, rest []string, stdout, stderr io.Writer) int {
	err := historyCommand(ctx, c, h, rest[0], rest[1:], stdout)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "memory-mcp: %v (see memory-mcp -help)\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "memory-mcp: %s: %v\n", rest[0], err)
		return 1
	}
	return 0
}

func historyCommand(ctx context.Context, c *config, h *handlers.Memory, cmd string, args []string, w io.Writer) error {
	ctx = vfs.WithActor(ctx, vfs.ActorLocal)
	switch cmd {
	case "log":
		q := handlers.LogQuery{Actor: c.sub.actor, N: c.sub.n}
		if len(args) == 1 {
			q.Path = args[0]
		}
		var err error
		if q.Since, err = parseWhen("-since", c.sub.since); err != nil {
			return err
		}
		if q.Until, err = parseWhen("-until", c.sub.until); err != nil {
			return err
		}
		vs, err := h.Log(ctx, q)
		var left *handlers.MountsLeftOut
		if err != nil && !errors.As(err, &left) {
			return err
		}
		if c.sub.json {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			for i := range vs {
				if err := enc.Encode(&vs[i]); err != nil {
					return err
				}
			}
		} else {
			printLog(w, vs)
		}
		return err // the rest is printed; this says which mount it lacks
	case "show":
		p, seq, err := pathAtSeq(args[0])
		if err != nil {
			return err
		}
		data, err := h.Show(ctx, p, seq)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case "diff":
		var seqs []uint64
		for _, a := range args[1:] {
			seq, err := strconv.ParseUint(a, 10, 64)
			if err != nil {
				return usageError{fmt.Sprintf("diff: %q is not a version number", a)}
			}
			seqs = append(seqs, seq)
		}
		out, err := h.Diff(ctx, args[0], seqs...)
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, out)
		return err
	case "restore":
		var (
			res  handlers.Restored
			err  error
			p    string
			when string
		)
		if c.sub.at != "" {
			at, perr := parseWhen("restore: -at", c.sub.at)
			if perr != nil {
				return perr
			}
			p = vfs.Root
			if len(args) == 1 {
				p = args[0]
			}
			when = "at " + at.Format(time.RFC3339)
			res, err = h.RestoreAt(ctx, p, at)
		} else {
			var seq uint64
			if p, seq, err = pathAtSeq(args[0]); err != nil {
				return err
			}
			when = fmt.Sprintf("after version %d", seq)
			res, err = h.Restore(ctx, p, seq)
		}
		if res.Version != 0 || err == nil {
			printRestored(w, p, when, res)
		}
		for _, m := range res.Mounts { // a restore of the whole memory to a time
			printRestored(w, m.Top, when, m)
		}
		return err
	case "redact":
		p, seq, err := pathAtSeq(args[0])
		if err != nil {
			return err
		}
		n, err := h.Redact(ctx, p, seq)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Redacted the content of %s@%d from the history (%d %s had it).\n", p, seq, n, plural(n, "version", "versions"))
		return nil
	}
	return usageError{"unknown command " + cmd}
}

// printRestored says what a restore of path did, and how to undo it.
func printRestored(w io.Writer, path, when string, res handlers.Restored) {
	if res.Version == 0 {
		fmt.Fprintf(w, "Nothing to restore: %s is as it was %s already.\n", path, when)
		return
	}
	fmt.Fprintf(w, "Restored %s as it was %s, as version %d (undo: memory-mcp restore %s@%d).\n", path, when, res.Version, path, res.Version-1)
	for _, l := range []struct {
		verb  string
		paths []string
	}{{"created", res.Created}, {"modified", res.Modified}, {"deleted", res.Deleted}} {
		for _, p := range l.paths {
			fmt.Fprintf(w, "  %s %s\n", l.verb, shown(p))
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pathAtSeq splits PATH@SEQ at its last @ (a path may hold @ itself).
func pathAtSeq(arg string) (string, uint64, error) {
	i := strings.LastIndexByte(arg, '@')
	seq, err := strconv.ParseUint(arg[i+1:], 10, 64)
	if i < 0 || err != nil {
		return "", 0, usageError{fmt.Sprintf("%q is not PATH@SEQ, such as /memories/notes.md@12 (see memory-mcp log)", arg)}
	}
	return arg[:i], seq, nil
}

// parseWhen reads a time given as RFC 3339 or as a duration before now.
func parseWhen(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, usageError{fmt.Sprintf("%s %q: use an RFC 3339 time (2026-11-01T00:00:00Z) or a duration ago (24h)", name, v)}
}

// printLog prints versions as a table: sequence, time, actor, command, what changed.
func printLog(w io.Writer, vs []vfs.Version) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tACTOR\tCOMMAND\tCHANGE")
	for _, v := range vs {
		var change string
		switch v.Kind {
		case vfs.Deleted:
			change = "deleted " + shown(v.Path)
		case vfs.Moved:
			change = fmt.Sprintf("moved %s -> %s", shown(v.Path), shown(v.NewPath))
		default:
			change = fmt.Sprintf("%s %s (%d %s)", shown(string(v.Kind)), shown(v.Path), v.Size, plural(int(v.Size), "byte", "bytes"))
		}
		if v.Redacted != nil {
			change += fmt.Sprintf(" [redacted by %s at %s]", shown(v.Redacted.By), v.Redacted.Time.UTC().Format(time.RFC3339))
		}
		if v.Interrupted {
			change += " [interrupted: the rest of this change did not happen]"
		}
		if v.Client != nil {
			change += " [via " + shown(v.Client.String()) + "]"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.Seq, v.Time.UTC().Format(time.RFC3339), shown(v.Actor), shown(v.Command), change)
	}
	tw.Flush()
}

// shown is a stored string (a path, an actor's name) as the command line prints it: control
// and format characters, and bytes that are not UTF-8, are written as Go escapes, so that
// what a history holds cannot move an operator's cursor or colour their terminal.
func shown(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}
