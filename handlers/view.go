package handlers

import (
	"bytes"
	"fmt"
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

type listEntry struct {
	path string // as shown: the directory itself as sent, children from the cleaned path
	dir  bool
	size int64
}

// listDir lists p two levels deep. One walk of the whole subtree gives both the entries and
// every directory's total size.
func (h *Handlers) listDir(tx *vfs.Tx, p vfs.Path, sent string) (Result, error) {
	entries := []listEntry{{path: sent, dir: true}}
	total, err := walkDir(tx, p, 0, &entries)
	if err != nil {
		return Result{}, err
	}
	entries[0].size = total

	header := "Here're the files and directories up to 2 levels deep in " + sent + ", excluding hidden items and node_modules:\n"
	limit := h.limits.MaxViewChars
	used := utf8.RuneCountInString(header)
	out := make([]byte, 0, min(len(header)+len(entries)*48, 4*limit+64))
	out = append(out, header...)
	var line []byte
	for i, e := range entries {
		line = append(line[:0], formatSize(e.size)...)
		line = append(line, '\t')
		line = append(line, e.path...)
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

// walkDir adds the entries below dir at depth+1 (and, through recursion, depth+2) to list,
// when list is not nil, and returns the total size of the files below dir at any depth.
// Hidden entries, node_modules, symbolic links and special files are neither listed nor
// counted.
func walkDir(tx *vfs.Tx, dir vfs.Path, depth int, list *[]listEntry) (int64, error) {
	infos, err := tx.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, fi := range infos {
		name := fi.Name()
		if name == "" || name[0] == '.' || name == "node_modules" {
			continue
		}
		child := dir.Join(name)
		switch {
		case fi.IsDir():
			idx := -1
			sub := list
			if list != nil {
				idx = len(*list)
				*list = append(*list, listEntry{path: child.String() + "/", dir: true})
				if depth+1 >= 2 {
					sub = nil
				}
			}
			size, err := walkDir(tx, child, depth+1, sub)
			if err != nil {
				return 0, err
			}
			if idx >= 0 {
				(*list)[idx].size = size
			}
			total += size
		case fi.Mode().IsRegular():
			if list != nil {
				*list = append(*list, listEntry{path: child.String(), size: fi.Size()})
			}
			total += fi.Size()
		}
	}
	return total, nil
}
