package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// The reference model: each edit command written the plainest way, from docs/behaviour.md §3, with no
// concern for speed. The fuzz targets check the handlers against it on every backend.

func refLines(s string) []string { return strings.Split(s, "\n") }

// refShow is how view shows text: each byte that is not part of valid UTF-8 as U+FFFD.
func refShow(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size <= 1 {
			b.WriteRune(utf8.RuneError)
			s = s[1:]
			continue
		}
		b.WriteString(s[:size])
		s = s[size:]
	}
	return b.String()
}

func refNumbered(lines []string, first, last int) string {
	var out []string
	for n := first; n <= last; n++ {
		out = append(out, fmt.Sprintf("%6d\t%s", n, lines[n-1]))
	}
	return strings.Join(out, "\n")
}

func refView(path, content string, vr []int) (string, bool) {
	lines := refLines(refShow(content))
	first, last := 1, len(lines)
	if vr != nil {
		start, end := vr[0], vr[1]
		first = max(start, 1)
		if end != -1 {
			last = min(end, len(lines))
		}
		if first > len(lines) {
			return fmt.Sprintf("Error: Invalid `view_range`: [%d, %d]. Its first element `%d` should be within the range of lines of the file: [1, %d]", start, end, start, len(lines)), true
		}
		if end != -1 && last < first {
			return fmt.Sprintf("Error: Invalid `view_range`: [%d, %d]. Its second element `%d` should be larger or equal than its first `%d`", start, end, end, start), true
		}
	}
	return "Here's the content of " + path + " with line numbers:\n" + refNumbered(lines, first, last), false
}

// refEcho cuts s after 200 characters; a byte that is not valid UTF-8 counts as one
// character and is echoed as it is (JSON shows it as U+FFFD).
func refEcho(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= 200 {
		return s
	}
	cut := 0
	for range 200 {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	return s[:cut] + fmt.Sprintf("… (%d characters in all)", n)
}

func refStrReplace(path, content, old, new string) (text, after string, isErr bool) {
	if old == "" {
		return "Error: Parameter `old_str` must not be empty", content, true
	}
	var starts []int
	for i := 0; i+len(old) <= len(content); {
		if content[i:i+len(old)] == old {
			starts = append(starts, i)
			i += len(old)
			continue
		}
		i++
	}
	switch {
	case len(starts) == 0:
		return fmt.Sprintf("No replacement was performed, old_str `%s` did not appear verbatim in %s.", refEcho(old), path), content, true
	case len(starts) > 1:
		var lines []string
		for i, at := range starts {
			if i == 50 {
				lines = append(lines, fmt.Sprintf("… (%d occurrences in all)", len(starts)))
				break
			}
			lines = append(lines, strconv.Itoa(strings.Count(content[:at], "\n")+1))
		}
		return fmt.Sprintf("No replacement was performed. Multiple occurrences of old_str `%s` in lines: %s. Please ensure it is unique", refEcho(old), strings.Join(lines, ", ")), content, true
	}
	after = content[:starts[0]] + new + content[starts[0]+len(old):]
	l := strings.Count(content[:starts[0]], "\n") + 1
	lines := refLines(refShow(after))
	first, last := max(1, l-2), min(len(lines), l+2+strings.Count(new, "\n"))
	return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + refNumbered(lines, first, last), after, false
}

func refInsert(path, content string, line int, text string) (string, string, bool) {
	lines := refLines(content)
	if line < 0 || line > len(lines) {
		return fmt.Sprintf("Error: Invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", line, len(lines)), content, true
	}
	text = strings.TrimSuffix(text, "\n")
	out := append(append(append([]string{}, lines[:line]...), refLines(text)...), lines[line:]...)
	return "The file " + path + " has been edited.", strings.Join(out, "\n"), false
}

// fuzzEdit runs one edit on every backend, seeded with content, and compares the result and
// the file afterwards with the model.
func fuzzEdit(t *testing.T, content string, edit func(h *handlers.Memory) handlers.Result, want func() (string, string, bool)) {
	wantText, wantAfter, wantErr := want()
	for _, b := range backends() {
		fx := b.open(t, map[string][]byte{"f.txt": []byte(content)}, noWrap)
		h := handlers.New(fx.store, handlers.Limits{MaxViewChars: 1 << 30, MaxFileBytes: 1 << 30, MaxStoreBytes: 1 << 40})
		res := edit(h)
		if res.Text != wantText || res.IsError != wantErr {
			t.Fatalf("%s: got %q (isError %v)\nwant %q (isError %v)", b.name, res.Text, res.IsError, wantText, wantErr)
		}
		var after []byte
		err := fx.store.View(context.Background(), func(tx *vfs.Tx) (err error) {
			after, err = tx.ReadFile(vfs.MustResolve("/memories/f.txt"))
			return err
		})
		if err != nil || string(after) != wantAfter {
			t.Fatalf("%s: file afterwards %q (%v), want %q", b.name, after, err, wantAfter)
		}
	}
}

func FuzzStrReplace(f *testing.F) {
	f.Add("line 1\nline 2\nline 3\n", "line 2", "two\nlines")
	f.Add("cat cat\ndog\ncat", "cat", "")
	f.Add("aaaa", "aa", "b")
	f.Add("a\r\nb\r\n", "\r\n", "\n")
	f.Add("\xff\xfe ok\n\xc3", "ok", "$1 ${x}")
	f.Add(strings.Repeat("x\n", 60), "x", "y")
	f.Add("", "a", "b")
	f.Fuzz(func(t *testing.T, content, old, new string) {
		const path = "/memories/f.txt"
		fuzzEdit(t, content,
			func(h *handlers.Memory) handlers.Result {
				return h.StrReplace(context.Background(), handlers.StrReplaceArgs{Path: path, OldStr: old, NewStr: new})
			},
			func() (string, string, bool) { return refStrReplace(path, content, old, new) })
	})
}

func FuzzInsert(f *testing.F) {
	f.Add("Line 1\nLine 2", 1, "Inserted Line")
	f.Add("a\nb\n", 2, "X\n")
	f.Add("", 0, "first")
	f.Add("a\nb", 3, "out of range")
	f.Add("a", -1, "negative")
	f.Add("a\r\nb", 1, "\n\n")
	f.Fuzz(func(t *testing.T, content string, line int, text string) {
		const path = "/memories/f.txt"
		fuzzEdit(t, content,
			func(h *handlers.Memory) handlers.Result {
				return h.Insert(context.Background(), handlers.InsertArgs{Path: path, InsertLine: line, InsertText: text})
			},
			func() (string, string, bool) { return refInsert(path, content, line, text) })
	})
}

func FuzzViewRange(f *testing.F) {
	f.Add("a\nb\nc\n", 2, 3, true)
	f.Add("a\nb\nc", 0, -1, true)
	f.Add("a\nb", 5, -1, true)
	f.Add("a\nb\nc", 3, 2, true)
	f.Add("\xe2\x82 bad utf-8\n", 1, 1, true)
	f.Add("no range", 0, 0, false)
	f.Fuzz(func(t *testing.T, content string, start, end int, ranged bool) {
		const path = "/memories/f.txt"
		var vr []int
		if ranged {
			vr = []int{start, end}
		}
		fuzzEdit(t, content,
			func(h *handlers.Memory) handlers.Result {
				return h.View(context.Background(), handlers.ViewArgs{Path: path, ViewRange: vr})
			},
			func() (string, string, bool) {
				text, isErr := refView(path, content, vr)
				return text, content, isErr
			})
	})
}

// Whatever path is sent, the memory it routes to acts on a path that is shown as the
// path sent (resolved): a mount never reaches past its own directory, and a path that
// is not under a mount stays in the main store.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{"/memories/team/a.md", "/memories/team", "/memories/teamwork/a", "/memories/me/../team/x",
		"/memories/team/../../etc", "/memories//team//a", "/memories/Team/a", "/memories/team/.memory-mcp-history/log", "/memories"} {
		f.Add(s)
	}
	team := handlers.New(files.NewMemoryStore(), handlers.Limits{})
	main := handlers.New(files.NewMemoryStore(), handlers.Limits{}, handlers.WithMounts(
		handlers.Mount{Name: "team", Memory: team}, handlers.Mount{Name: "me", Memory: handlers.New(files.NewMemoryStore(), handlers.Limits{})}))
	f.Fuzz(func(t *testing.T, sent string) {
		mem, p, at, err := main.Route(sent)
		want, rerr := vfs.Resolve(sent)
		if rerr != nil {
			if err == nil {
				t.Fatalf("%q: routed, though it does not resolve (%v)", sent, rerr)
			}
			return
		}
		if err != nil {
			if mem == main {
				t.Fatalf("%q resolves to %s, but routing it in the main store fails: %v", sent, want, err)
			}
			return // a mount's own rules refused it
		}
		if got := mem.Shown(p.String()); got != want.String() {
			t.Fatalf("%q: acts on %s in its store, shown as %s, want %s", sent, p, got, want)
		}
		under := func(name string) bool {
			return want.String() == vfs.Root+"/"+name || strings.HasPrefix(want.String(), vfs.Root+"/"+name+"/")
		}
		if inMount := mem != main; inMount != (under("team") || under("me")) || at != (inMount && p.IsRoot()) {
			t.Fatalf("%q (%s): routed to a mount %v, at its top %v", sent, want, inMount, at)
		}
	})
}

// filesOf returns every file of the memory (mounts included), by path, with its content.
func filesOf(t *testing.T, h *handlers.Memory) map[string]string {
	t.Helper()
	ctx := context.Background()
	list, err := h.FileList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range list {
		data, _, err := h.Read(ctx, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		out[f.Path] = string(data)
	}
	return out
}

// Show and restore are true to the past: after any changes, show gives each file as it was
// after each version, and a restore of the memory or of a directory to a version
// makes every file below it as it was then, leaves the rest as it is, and is undone by a
// restore to the version before it. Each op writes, deletes or renames one of a few paths
// (files and directories that may take each other's place), through a person's commands
// and the model's, in the main store or in a mount.
func FuzzRestore(f *testing.F) {
	f.Add([]byte{0, 1, 3, 130, 4, 192, 5, 2, 137, 8, 194}, uint8(2), false, false, uint8(0))
	f.Add([]byte{3, 1, 5, 139, 192, 0, 161, 2, 196, 3}, uint8(1), true, true, uint8(0))
	f.Add([]byte{0, 0, 0, 1, 128, 8, 0, 65, 192, 2}, uint8(1), false, false, uint8(1))
	names := []string{"a.md", "d/b.md", "d", "d/e/c.md", "e.md", "d/e"}
	f.Fuzz(func(t *testing.T, ops []byte, to uint8, dirOnly, mounted bool, keep uint8) {
		if len(ops) > 40 {
			return
		}
		ctx := context.Background()
		// With keep set, the history keeps that many versions a file, pruning at each
		// change (an hour apart); what it can no longer tell, it must refuse.
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		cfg := vfs.HistoryConfig{MaxVersions: int(keep % 3), Now: func() time.Time { return clock }}
		pruning := cfg.MaxVersions > 0
		refusedAsPruned := func(err error) bool {
			return pruning && err != nil && strings.Contains(err.Error(), "was pruned up to")
		}
		top := "/memories"
		var opts []handlers.Option
		if mounted {
			top = "/memories/m"
			opts = append(opts, handlers.WithMounts(handlers.Mount{Name: "m", Memory: handlers.New(files.NewMemoryStore(vfs.WithHistory(cfg)), handlers.DefaultLimits())}))
		}
		var paths []string
		for _, n := range names {
			paths = append(paths, top+"/"+n)
		}
		h := handlers.New(files.NewMemoryStore(vfs.WithHistory(cfg)), handlers.DefaultLimits(), opts...)
		snapshot := func() map[string]string { return filesOf(t, h) }
		var versions []uint64
		states := map[uint64]map[string]string{}
		for i, op := range ops {
			clock = clock.Add(time.Hour)
			p, q := paths[int(op)%len(paths)], paths[int(op/8)%len(paths)]
			var version uint64
			switch op / 64 {
			case 0, 1:
				b, err := h.Write(ctx, p, []byte(strconv.Itoa(i)+"\n"), nil)
				if err == nil && b != nil {
					version = b.Version
				}
			case 2:
				if res := h.Exec(ctx, map[string]any{"command": "rename", "old_path": p, "new_path": q}); res.Batch != nil {
					version = res.Batch.Version
				}
			default:
				if res := h.Exec(ctx, map[string]any{"command": "delete", "path": p}); res.Batch != nil {
					version = res.Batch.Version // nil for an empty directory: no file changed
				}
			}
			if version != 0 {
				versions = append(versions, version)
				states[version] = snapshot()
			}
		}
		if len(versions) == 0 {
			return
		}
		// show gives every file's content after every version, and nothing for a path
		// that had no file then.
		for _, v := range versions {
			for _, p := range paths {
				data, err := h.Show(ctx, p, v)
				if refusedAsPruned(err) {
					continue
				}
				if want, ok := states[v][p]; ok != (err == nil) || string(data) != want {
					t.Fatalf("show %s@%d: %q, %v; want %q (exists: %v)", p, v, data, err, want, ok)
				}
			}
		}
		target := versions[int(to)%len(versions)]
		dir := top
		if dirOnly {
			dir = top + "/d"
		}
		under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
		before := snapshot()
		want := map[string]string{}
		for p, data := range before {
			if !under(p) {
				want[p] = data
			}
		}
		for p, data := range states[target] {
			if under(p) {
				want[p] = data
			}
		}
		res, err := h.Restore(ctx, dir, target)
		if err != nil {
			// A file outside dir where the restore needs a directory refuses it; in a
			// restore of the whole memory, nothing can be in the way.
			if !dirOnly && !refusedAsPruned(err) {
				t.Fatalf("restore of the memory to %d: %v", target, err)
			}
			if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a refused restore (%v) changed the memory", err)
			}
			return
		}
		if got := snapshot(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("restore of %s to %d:\n got %v\nwant %v", dir, target, got, want)
		}
		if res.Version == 0 {
			return
		}
		if _, err := h.Restore(ctx, dir, versions[len(versions)-1]); err != nil {
			t.Fatalf("undo of the restore: %v", err)
		}
		if got := snapshot(); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("undo of the restore:\n got %v\nwant %v", got, before)
		}
	})
}

// The limits hold whatever the model and people do: after every change, no file is over
// the per-file limit and the files together are within the store's, and a change refused
// for a limit changes nothing.
func FuzzLimits(f *testing.F) {
	f.Add([]byte{0, 40, 1, 80, 2, 30, 3, 90, 4, 60, 5, 10, 6, 70, 7, 20})
	f.Add([]byte{8, 200, 9, 120, 10, 255, 11, 3})
	f.Add([]byte{0, 59, 2, 59, 1, 59, 17, 40}) // the third file is over the store's limit
	const maxFile, maxStore = 64, 160
	names := []string{"/memories/a.md", "/memories/d/b.md", "/memories/.hidden", "/memories/d"}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 60 {
			return
		}
		ctx := context.Background()
		store := files.NewMemoryStore()
		h := handlers.New(store, handlers.Limits{MaxViewChars: 1000, MaxFileBytes: maxFile, MaxStoreBytes: maxStore})
		state := func() (usage int64, biggest int64) {
			store.View(ctx, func(tx *vfs.Tx) error {
				var walk func(p vfs.Path) error
				walk = func(p vfs.Path) error {
					entries, err := tx.List(p)
					for _, e := range entries {
						if e.IsDir() {
							walk(p.Join(e.Name))
						} else {
							usage += e.Size
							biggest = max(biggest, e.Size)
						}
					}
					return err
				}
				return walk(vfs.MustResolve(vfs.Root))
			})
			return usage, biggest
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, n := ops[i], int(ops[i+1])
			p, q := names[int(op)%len(names)], names[int(op/4)%len(names)]
			text := strings.Repeat("x", n%100) + "\n"
			beforeUsage, beforeBiggest := state()
			var refused bool
			var res handlers.Result
			switch op / 16 % 6 {
			case 0:
				res = h.Exec(ctx, map[string]any{"command": "create", "path": p, "file_text": text})
			case 1:
				res = h.Exec(ctx, map[string]any{"command": "str_replace", "path": p, "old_str": "x\n", "new_str": text})
			case 2:
				res = h.Exec(ctx, map[string]any{"command": "insert", "path": p, "insert_line": 0, "insert_text": text})
			case 3:
				res = h.Exec(ctx, map[string]any{"command": "rename", "old_path": p, "new_path": q})
			case 4:
				_, err := h.Write(ctx, p, []byte(text), nil)
				refused = err != nil && strings.Contains(err.Error(), "limit")
			default:
				res = h.Exec(ctx, map[string]any{"command": "delete", "path": p})
			}
			refused = refused || res.IsError && strings.Contains(res.Text, "limit")
			usage, biggest := state()
			if biggest > maxFile && biggest > beforeBiggest || usage > maxStore && usage > beforeUsage {
				t.Fatalf("op %d: a file of %d bytes, %d in all (limits %d and %d): %s", i/2, biggest, usage, maxFile, maxStore, res.Text)
			}
			if refused && (usage != beforeUsage || biggest != beforeBiggest) {
				t.Fatalf("op %d: refused for a limit (%s), yet the files changed", i/2, res.Text)
			}
		}
	})
}

// A redacted content is gone for good: after any changes and a redaction that succeeds,
// no show, export or restore gives it back, and a redaction is refused while a file holds
// the content.
func FuzzRedact(f *testing.F) {
	f.Add([]byte{0, 8, 1, 130, 2, 192, 3, 9}, uint8(0), uint8(0))
	f.Add([]byte{0, 7, 14, 129, 64, 200}, uint8(3), uint8(1))
	paths := []string{"/memories/a.md", "/memories/d/b.md", "/memories/c.md"}
	f.Fuzz(func(t *testing.T, ops []byte, pick uint8, which uint8) {
		if len(ops) > 30 {
			return
		}
		ctx := context.Background()
		store := files.NewMemoryStore()
		h := handlers.New(store, handlers.DefaultLimits())
		var versions []uint64
		for _, op := range ops {
			p, q := paths[int(op)%len(paths)], paths[int(op/4)%len(paths)]
			var b *vfs.Batch
			switch op / 64 {
			case 0, 1:
				b, _ = h.Write(ctx, p, fmt.Appendf(nil, "secret-%d\n", op%7), nil)
			case 2:
				b = h.Exec(ctx, map[string]any{"command": "rename", "old_path": p, "new_path": q}).Batch
			default:
				b = h.Exec(ctx, map[string]any{"command": "delete", "path": p}).Batch
			}
			if b != nil {
				versions = append(versions, b.Version)
			}
		}
		if len(versions) == 0 {
			return
		}
		v, p := versions[int(pick)%len(versions)], paths[int(which)%len(paths)]
		secret, err := h.Show(ctx, p, v)
		if err != nil {
			return
		}
		holder := ""
		for path, data := range filesOf(t, h) {
			if data == string(secret) {
				holder = path
			}
		}
		if _, err := h.Redact(ctx, p, v); err != nil {
			if holder == "" {
				t.Logf("redact %s@%d refused with no file holding it: %v", p, v, err)
			}
			return
		}
		if holder != "" {
			t.Fatalf("redacted %s@%d while %s holds the content", p, v, holder)
		}
		for _, vv := range versions {
			for _, pp := range paths {
				if data, err := h.Show(ctx, pp, vv); err == nil && string(data) == string(secret) {
					t.Fatalf("show %s@%d gives the redacted content back", pp, vv)
				}
			}
		}
		var stream bytes.Buffer
		if err := store.Export(ctx, &stream, true); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(stream.Bytes(), secret) {
			t.Fatal("the export holds the redacted content")
		}
		for _, vv := range versions {
			h.Restore(ctx, "/memories", vv)
			for path, data := range filesOf(t, h) {
				if data == string(secret) {
					t.Fatalf("the restore to %d brought the redacted content back in %s", vv, path)
				}
			}
		}
	})
}

// The change feed tells the truth: each command's batch, applied to the files before it,
// gives the files after it, with the sizes and digests they have; a command that changed
// nothing has no batch.
func FuzzFeed(f *testing.F) {
	f.Add([]byte{0, 1, 130, 2, 192, 9, 137, 3, 200, 250}, false)
	f.Add([]byte{0, 1, 130, 2, 192, 9, 137, 3, 200, 250}, true)
	names := []string{"a.md", "d/b.md", "d", "d/e/c.md", "e.md", "d/e"}
	f.Fuzz(func(t *testing.T, ops []byte, mounted bool) {
		if len(ops) > 40 {
			return
		}
		ctx := context.Background()
		top := "/memories/"
		var opts []handlers.Option
		if mounted {
			top = "/memories/m/"
			opts = append(opts, handlers.WithMounts(handlers.Mount{Name: "m", Memory: handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())}))
		}
		h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), opts...)
		sub := h.Subscribe(1) // the stores compute digests for a subscriber
		defer sub.Close()
		snapshot := func() map[string]string { return filesOf(t, h) }
		var versions []uint64
		for i, op := range ops {
			p, q := top+names[int(op)%len(names)], top+names[int(op/8)%len(names)]
			before := snapshot()
			var b *vfs.Batch
			switch op / 64 {
			case 0, 1:
				b, _ = h.Write(ctx, p, []byte(strconv.Itoa(i)+"\n"), nil)
			case 2:
				b = h.Exec(ctx, map[string]any{"command": "rename", "old_path": p, "new_path": q}).Batch
			default:
				if op%2 == 0 || len(versions) == 0 {
					b = h.Exec(ctx, map[string]any{"command": "delete", "path": p}).Batch
				} else {
					_, _ = h.Restore(ctx, strings.TrimSuffix(top, "/"), versions[int(op)%len(versions)])
					b = nil // checked through the subscription below
				}
			}
			select {
			case got := <-sub.C:
				if b == nil {
					b = &got
				}
			default:
			}
			after := snapshot()
			if b == nil {
				if fmt.Sprint(before) != fmt.Sprint(after) {
					t.Fatalf("op %d changed the files without a batch", i)
				}
				continue
			}
			versions = append(versions, b.Version)
			want := maps.Clone(before)
			for _, c := range b.Changes {
				switch c.Kind {
				case vfs.Deleted:
					delete(want, c.Path)
				case vfs.Moved:
					want[c.Path] = want[c.From]
					delete(want, c.From)
				default:
					want[c.Path] = after[c.Path]
				}
				if c.Kind != vfs.Deleted && (c.SizeAfter != int64(len(after[c.Path])) || c.SHA256After != vfs.DigestOf([]byte(after[c.Path]))) {
					t.Fatalf("op %d: change %+v, but %s holds %q", i, c, c.Path, after[c.Path])
				}
			}
			if fmt.Sprint(want) != fmt.Sprint(after) {
				t.Fatalf("op %d: the batch %+v turns %v into %v, not %v", i, b.Changes, before, want, after)
			}
		}
	})
}
