package handlers

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// maxLines is the documentation's line limit for view.
const maxLines = 999_999

// View shows a directory listing (two levels deep, with sizes) or a file with line numbers.
func (h *Handlers) View(a ViewArgs) Result {
	p, err := vfs.Resolve(a.Path)
	if err != nil {
		return errorf("%s", err.Error())
	}
	if a.ViewRange != nil && len(a.ViewRange) != 2 {
		return errorf("%s", badViewRange)
	}
	return h.read("view", a.Path, func(tx *vfs.Tx) (Result, error) {
		fi, err := tx.Stat(p)
		switch {
		case vfs.IsNotExist(err):
			return errorf("The path %s does not exist. Please provide a valid path.", a.Path), nil
		case err != nil:
			return Result{}, err
		case fi.IsDir():
			return h.listDir(tx, p, a.Path)
		case !fi.Mode().IsRegular():
			return errorf("Error: The path %s is not a regular file or directory", a.Path), nil
		}
		content, err := tx.ReadFile(p)
		if err != nil {
			return Result{}, err
		}
		return h.viewFile(a.Path, content, a.ViewRange), nil
	})
}

func (h *Handlers) viewFile(sent string, content []byte, viewRange []int) Result {
	text := validUTF8(content)
	nLines := countLines(text)
	if nLines > maxLines {
		return errorf("File %s exceeds maximum line limit of 999,999 lines.", sent)
	}
	first, last := 1, nLines
	if viewRange != nil {
		start, end := viewRange[0], viewRange[1]
		first = max(start, 1)
		if end != -1 {
			last = min(end, nLines)
		}
		if first > nLines {
			return errorf("Error: Invalid `view_range`: [%d, %d]. Its first element `%d` should be within the range of lines of the file: [1, %d]", start, end, start, nLines)
		}
		if end != -1 && last < first {
			return errorf("Error: Invalid `view_range`: [%d, %d]. Its second element `%d` should be larger or equal than its first `%d`", start, end, end, start)
		}
	}

	header := "Here's the content of " + sent + " with line numbers:\n"
	limit := h.limits.MaxViewChars
	used := utf8.RuneCountInString(header)
	rest := text[lineOffset(text, first):]
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

// listEntry is one line of a listing. The path is parent + "/" + name; it is put together
// only for the lines that are printed (a listing is usually cut short by the output cap).
type listEntry struct {
	parent, name string // the directory itself: parent is the path as sent, name ""
	dir          bool
	size         int64
}

// listDir lists p two levels deep. One walk of the whole subtree gives both the entries and
// every directory's total size.
func (h *Handlers) listDir(tx *vfs.Tx, p vfs.Path, sent string) (Result, error) {
	w := walker{tx: tx, slots: make(chan struct{}, 2*runtime.GOMAXPROCS(0))}
	entries, total, err := w.walk(p, 0, true, 1)
	if err != nil {
		return Result{}, err
	}
	entries[0] = listEntry{parent: sent, dir: true, size: total}

	header := "Here're the files and directories up to 2 levels deep in " + sent + ", excluding hidden items and node_modules:\n"
	limit := h.limits.MaxViewChars
	used := utf8.RuneCountInString(header)
	out := make([]byte, 0, min(len(header)+len(entries)*48, 4*limit+64))
	out = append(out, header...)
	var line []byte
	for i, e := range entries {
		line = append(line[:0], formatSize(e.size)...)
		line = append(line, '\t')
		line = append(line, e.parent...)
		if e.name != "" {
			line = append(append(line, '/'), e.name...)
			if e.dir {
				line = append(line, '/')
			}
		}
		cost := utf8.RuneCount(line)
		if i > 0 {
			cost++
		}
		if used+cost > limit {
			out = fmt.Appendf(out, "\n[Listing truncated at %d characters: %d more entries not shown. View a subdirectory to see more.]", limit, len(entries)-i)
			break
		}
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, line...)
		used += cost
	}
	return Result{Text: string(out)}, nil
}

// walker walks a directory tree for a listing. Reading a large tree is bound by one stat
// per file (its size counts in every directory total), so subdirectories are read
// concurrently, at most len(slots) at a time; a walk that finds no free slot reads inline,
// which keeps nested waits from deadlocking.
type walker struct {
	tx    *vfs.Tx
	slots chan struct{}
}

// subtree is the outcome of walking one subdirectory.
type subtree struct {
	entries []listEntry
	total   int64
	err     error
	done    chan struct{}
}

// walk returns the entries below dir (pre-order, each directory followed by its own
// entries, when list is set; only depths 1 and 2 are listed), after lead empty slots, and
// the total size of the files below dir at any depth. Hidden entries, node_modules,
// symbolic links and special files are neither listed nor counted.
func (w walker) walk(dir vfs.Path, depth int, list bool, lead int) ([]listEntry, int64, error) {
	infos, err := w.tx.List(dir)
	if err != nil {
		return nil, 0, err
	}
	subs := make([]*subtree, len(infos))
	for i, fi := range infos {
		if !fi.IsDir() || !shown(fi.Name) {
			continue
		}
		sub := &subtree{done: make(chan struct{})}
		subs[i] = sub
		child, listChild := dir.Join(fi.Name), list && depth+1 < 2
		run := func() {
			defer close(sub.done)
			defer func() {
				// A panic on another goroutine would escape Call's recover and end the server.
				if r := recover(); r != nil {
					sub.err = fmt.Errorf("panic while listing %s: %v\n%s", child, r, debug.Stack())
				}
			}()
			sub.entries, sub.total, sub.err = w.walk(child, depth+1, listChild, 0)
		}
		select {
		case w.slots <- struct{}{}:
			go func() { defer func() { <-w.slots }(); run() }()
		default:
			run()
		}
	}
	// Wait for the subtrees first, so that the entries can be put in one slice of the right size.
	n := lead
	for i, fi := range infos {
		switch {
		case subs[i] != nil:
			<-subs[i].done
			n += 1 + len(subs[i].entries)
		case list && fi.IsRegular() && shown(fi.Name):
			n++
		}
	}
	var entries []listEntry
	if list || lead > 0 {
		entries = make([]listEntry, lead, n)
	}
	parent := dir.String()
	var total int64
	for i, fi := range infos {
		switch {
		case !shown(fi.Name):
		case subs[i] != nil:
			sub := subs[i]
			if sub.err != nil {
				err = sub.err
				continue
			}
			if list {
				entries = append(entries, listEntry{parent: parent, name: fi.Name, dir: true, size: sub.total})
				entries = append(entries, sub.entries...)
			}
			total += sub.total
		case fi.IsRegular():
			if list {
				entries = append(entries, listEntry{parent: parent, name: fi.Name, size: fi.Size})
			}
			total += fi.Size
		}
	}
	return entries, total, err
}

func shown(name string) bool { return name != "" && name[0] != '.' && name != "node_modules" }
