package handlers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// maxLines is the documentation's line limit for view.
const maxLines = 999_999

// view shows a directory listing (two levels deep, with sizes) or a file with line numbers.
func (h *Memory) view(ctx context.Context, a ViewArgs) Result {
	p, err := h.resolve(a.Path)
	if err != nil {
		return pathRefused(err)
	}
	if a.ViewRange != nil && len(a.ViewRange) != 2 {
		return fail(CodeInvalid, "%s", badViewRange)
	}
	return h.read(ctx, "view", a.Path, func(tx *vfs.Tx) (Result, error) {
		fi, err := tx.Stat(p)
		switch {
		case vfs.IsNotExist(err):
			return fail(CodeNotFound, "The path %s does not exist. Please provide a valid path.", a.Path), nil
		case err != nil:
			return Result{}, err
		case fi.IsDir():
			return h.listDir(ctx, tx, p, a.Path)
		case !fi.IsRegular():
			return notRegular(a.Path), nil
		}
		if fi.Size > h.windowBytes() {
			return h.viewLarge(tx, p, a.Path, a.ViewRange)
		}
		content, err := tx.ReadFile(p)
		if err != nil {
			return Result{}, err
		}
		return h.viewFile(a.Path, content, a.ViewRange), nil
	})
}

// windowBytes is how many bytes from the first line shown can hold everything one answer
// shows: a character takes at most 4 bytes, and the 8 more make a line that runs past them
// too long to show whole.
func (h *Memory) windowBytes() int64 { return 4*int64(h.limits.MaxViewChars) + 8 }

// viewFile is view of a file's content.
func (h *Memory) viewFile(sent string, content []byte, viewRange []int) Result {
	nLines := countLines(content)
	var window []byte
	if first := firstLine(viewRange); first <= nLines {
		window = content[lineOffset(content, first):]
	}
	return h.viewWindow(sent, window, nLines, viewRange)
}

// firstLine is the first line a view shows.
func firstLine(viewRange []int) int {
	if viewRange == nil {
		return 1
	}
	return max(viewRange[0], 1)
}

// viewLarge is view of a file larger than one answer can show: it reads the file once, in
// pieces, counting its lines and keeping only the window that the answer is made from, so
// a huge file placed in the storage by hand costs neither its size in memory nor more time
// than one pass.
func (h *Memory) viewLarge(tx *vfs.Tx, p vfs.Path, sent string, viewRange []int) (Result, error) {
	r, err := tx.Open(p)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	first, want := firstLine(viewRange), int(h.windowBytes())
	var window []byte
	line := 1 // the line the next byte read belongs to
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		for line < first && len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				chunk = nil
				break
			}
			line++
			chunk = chunk[i+1:]
		}
		if line >= first {
			if room := want - len(window); room > 0 {
				window = append(window, chunk[:min(room, len(chunk))]...)
			}
			line += bytes.Count(chunk, []byte{'\n'})
		}
		if line > maxLines {
			return fail(CodeLimit, "File %s exceeds maximum line limit of 999,999 lines.", sent), nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{}, err
		}
	}
	return h.viewWindow(sent, window, line, viewRange), nil
}

// viewWindow makes view's answer from window, the file from the first line shown on (at
// least windowBytes of it, or all), and nLines, the number of lines of the whole file.
func (h *Memory) viewWindow(sent string, window []byte, nLines int, viewRange []int) Result {
	text := validUTF8(window) // a line's start is a character's start, in the file as here
	if nLines > maxLines {
		return fail(CodeLimit, "File %s exceeds maximum line limit of 999,999 lines.", sent)
	}
	first, last := 1, nLines
	if viewRange != nil {
		start, end := viewRange[0], viewRange[1]
		first = max(start, 1)
		if end != -1 {
			last = min(end, nLines)
		}
		if first > nLines {
			return fail(CodeInvalid, "Error: Invalid `view_range`: [%d, %d]. Its first element `%d` should be within the range of lines of the file: [1, %d]", start, end, start, nLines)
		}
		if end != -1 && last < first {
			return fail(CodeInvalid, "Error: Invalid `view_range`: [%d, %d]. Its second element `%d` should be larger or equal than its first `%d`", start, end, end, start)
		}
	}

	header := "Here's the content of " + sent + " with line numbers:\n"
	limit := h.limits.MaxViewChars
	used := utf8.RuneCountInString(header)
	rest := text
	out := make([]byte, 0, min(len(header)+len(rest)+8*(last-first+1), 4*limit+64))
	out = append(out, header...)
	for n := first; n <= last; n++ {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		}
		cost := 7 + utf8.RuneCount(line) // "%6d\t" is 7 characters for every line number up to 999,999
		if n > first {
			cost++
		}
		if used+cost <= limit {
			if n > first {
				out = append(out, '\n')
			}
			out = appendLineNumber(out, n)
			out = append(out, line...)
			used += cost
			continue
		}
		if n > first {
			next := min(nLines, n+(n-1-first))
			out = fmt.Appendf(out, "\n[Output truncated at %d characters: showing lines %d-%d of %d. Use view_range [%d, %d] to see more.]", limit, first, n-1, nLines, n, next)
			return Result{Text: string(out)}
		}
		numbered := append(appendLineNumber(nil, n), line...)
		out = append(out, prefixRunes(numbered, limit-used)...)
		out = fmt.Appendf(out, "\n[Output truncated at %d characters: line %d alone is longer than that; only its beginning is shown.", limit, n)
		if n < nLines {
			out = fmt.Appendf(out, " Use view_range [%d, -1] to see the lines after it.", n+1)
		}
		out = append(out, ']')
		return Result{Text: string(out)}
	}
	return Result{Text: string(out)}
}

// listDir lists p two levels deep, with the sizes of every directory counted at any depth.
func (h *Memory) listDir(ctx context.Context, tx *vfs.Tx, p vfs.Path, sent string) (Result, error) {
	tree, err := tx.Tree(p, 2, hidden)
	if err != nil {
		return Result{}, err
	}
	if p.IsRoot() {
		h.mountNodes(ctx, &tree, 1)
	}
	header := "Here're the files and directories up to 2 levels deep in " + sent + ", excluding hidden items and node_modules:\n"
	limit := h.limits.MaxViewChars
	used := utf8.RuneCountInString(header)
	// A Builder: its text becomes the result without a copy.
	var out strings.Builder
	out.Grow(min(len(header)+64*len(tree.Children), 4*limit+64))
	out.WriteString(header)
	// The lines in order: the directory itself, then each child followed by its own children.
	total := 1
	for _, c := range tree.Children {
		total += 1 + len(c.Children)
	}
	var line []byte
	i := 0
	emit := func(parent, name string, n vfs.Node) bool {
		line = appendSize(line[:0], n.Size)
		line = append(line, '\t')
		line = append(line, parent...)
		if name != "" {
			line = append(append(line, '/'), name...)
			if n.Dir {
				line = append(line, '/')
			}
		}
		cost := utf8.RuneCount(line)
		if i > 0 {
			cost++
		}
		if used+cost > limit {
			fmt.Fprintf(&out, "\n[Listing truncated at %d characters: %d more entries not shown. View a subdirectory to see more.]", limit, total-i)
			return false
		}
		if i > 0 {
			out.WriteByte('\n')
		}
		out.Write(line)
		used += cost
		i++
		return true
	}
	if !emit(sent, "", tree) {
		return Result{Text: out.String()}, nil
	}
	base := h.Shown(p.String())
	for _, c := range tree.Children {
		if !emit(base, c.Name, c) {
			return Result{Text: out.String()}, nil
		}
		sub := base + "/" + c.Name
		for _, g := range c.Children {
			if !emit(sub, g.Name, g) {
				return Result{Text: out.String()}, nil
			}
		}
	}
	return Result{Text: out.String()}, nil
}

// hidden reports whether a listing leaves an entry out: hidden entries, node_modules, and
// names no path may end in (made outside memory-mcp: a newline in one would forge a line).
func hidden(name string) bool {
	return name == "" || name[0] == '.' || name == "node_modules" || !vfs.ValidName(name)
}

// Listed reports whether a listing shows the file at path p: no element of it is hidden
// (starts with a dot, or is node_modules).
func Listed(p string) bool {
	for _, name := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, vfs.Root), "/"), "/") {
		if hidden(name) {
			return false
		}
	}
	return true
}
