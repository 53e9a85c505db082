package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/memory-mcp/memory-mcp/vfs"
)

func (h *Memory) create(ctx context.Context, a CreateArgs) Result {
	p, err := h.resolve(a.Path)
	if err != nil {
		return pathRefused(err)
	}
	data := []byte(a.FileText)
	if res, found := h.secretIn([]string{a.Path}, data, 0, len(data)); found {
		return res
	}
	exists := fail(CodeExists, "Error: File %s already exists", a.Path)
	return h.update(ctx, "create", a.Path, func(tx *vfs.Tx) (Result, error) {
		_, err := tx.Stat(p)
		if err == nil {
			return exists, nil
		}
		if !vfs.IsNotExist(err) {
			return Result{}, err
		}
		if isFile, err := parentIsFile(tx, p); err != nil || isFile {
			return fail(CodeNotDirectory, "Error: A parent of %s is a file, not a directory", a.Path), err
		}
		if res, ok, err := h.checkSize(tx, a.Path, 0, int64(len(a.FileText))); !ok {
			return res, err
		}
		if err := tx.CreateFile(p, data); err != nil {
			if vfs.IsExist(err) {
				return exists, nil // created by someone outside memory-mcp since the check
			}
			return Result{}, err
		}
		return ok("File created successfully at: " + a.Path), nil
	})
}

// editable loads the regular file at p for str_replace and insert; res is set when the
// path is not an editable file.
func editable(tx *vfs.Tx, p vfs.Path, sent, missingText string) (content []byte, res *Result, err error) {
	fi, err := tx.Stat(p)
	switch {
	case vfs.IsNotExist(err):
		r := fail(CodeNotFound, "%s", missingText)
		return nil, &r, nil
	case err != nil:
		return nil, nil, err
	case fi.IsDir():
		r := fail(CodeNotFound, "%s", missingText)
		return nil, &r, nil
	case !fi.IsRegular():
		r := notRegular(sent)
		return nil, &r, nil
	}
	content, err = tx.ReadFile(p)
	if errors.Is(err, vfs.ErrNotRegular) {
		r := notRegular(sent)
		return nil, &r, nil
	}
	return content, nil, err
}

// maxOccurrences is how many lines the multiple-occurrences message lists.
const maxOccurrences = 50

func (h *Memory) strReplace(ctx context.Context, a StrReplaceArgs) Result {
	if a.OldStr == "" {
		return fail(CodeInvalid, "Error: Parameter `old_str` must not be empty")
	}
	p, err := h.resolve(a.Path)
	if err != nil {
		return pathRefused(err)
	}
	return h.update(ctx, "str_replace", a.Path, func(tx *vfs.Tx) (Result, error) {
		content, res, err := editable(tx, p, a.Path, "Error: The path "+a.Path+" does not exist. Please provide a valid path.")
		if res != nil || err != nil {
			return deref(res), err
		}
		old := []byte(a.OldStr)
		var starts []int // line of the start of the first occurrences
		n, pos, line, scanned := 0, -1, 1, 0
		for off := 0; ; {
			i := bytes.Index(content[off:], old)
			if i < 0 {
				break
			}
			at := off + i
			if n < maxOccurrences {
				line += bytes.Count(content[scanned:at], []byte{'\n'})
				scanned = at
				starts = append(starts, line)
			}
			n++
			pos = at
			off = at + len(old)
		}
		switch {
		case n == 0:
			return fail(CodeNoMatch, "No replacement was performed, old_str `%s` did not appear verbatim in %s.", Abbreviate(a.OldStr, 200), a.Path), nil
		case n > 1:
			lines := make([]string, len(starts))
			for i, l := range starts {
				lines[i] = strconv.Itoa(l)
			}
			list := strings.Join(lines, ", ")
			if n > maxOccurrences {
				list += fmt.Sprintf(", … (%d occurrences in all)", n)
			}
			return fail(CodeAmbiguous, "No replacement was performed. Multiple occurrences of old_str `%s` in lines: %s. Please ensure it is unique", Abbreviate(a.OldStr, 200), list), nil
		}
		updated := make([]byte, 0, len(content)-len(old)+len(a.NewStr))
		updated = append(updated, content[:pos]...)
		updated = append(updated, a.NewStr...)
		updated = append(updated, content[pos+len(old):]...)
		if res, found := h.secretIn(nil, updated, pos, pos+len(a.NewStr)); found {
			return res, nil
		}
		if res, ok, err := h.checkSize(tx, a.Path, int64(len(content)), int64(len(updated))); !ok {
			return res, err
		}
		if err := tx.WriteFile(p, updated); err != nil {
			return Result{}, err
		}

		// The snippet: lines L-2 .. L+2+k of the new content, L the line where the
		// replacement starts, k the number of newlines in new_str.
		at := starts[0]
		k := strings.Count(a.NewStr, "\n")
		text := validUTF8(updated)
		first, last := max(1, at-2), min(countLines(text), at+2+k)
		out := []byte("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n")
		out = numberLines(out, text[lineOffset(text, first):], first, last)
		return ok(string(out)), nil
	})
}

func (h *Memory) insert(ctx context.Context, a InsertArgs) Result {
	p, err := h.resolve(a.Path)
	if err != nil {
		return pathRefused(err)
	}
	return h.update(ctx, "insert", a.Path, func(tx *vfs.Tx) (Result, error) {
		content, res, err := editable(tx, p, a.Path, "Error: The path "+a.Path+" does not exist")
		if res != nil || err != nil {
			return deref(res), err
		}
		nLines := countLines(content)
		if a.InsertLine < 0 || a.InsertLine > nLines {
			return fail(CodeInvalid, "Error: Invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", a.InsertLine, nLines), nil
		}
		// One trailing newline of the text is dropped; the text then goes in as whole lines.
		text := strings.TrimSuffix(a.InsertText, "\n")
		updated := make([]byte, 0, len(content)+len(text)+1)
		var at int // where the text goes in the new content
		switch {
		case a.InsertLine == 0:
			updated = append(append(append(updated, text...), '\n'), content...)
		case a.InsertLine == nLines:
			updated = append(append(updated, content...), '\n')
			at = len(updated)
			updated = append(updated, text...)
		default:
			end := lineOffset(content, a.InsertLine+1) - 1 // the newline that ends line InsertLine
			updated = append(updated, content[:end]...)
			updated = append(updated, '\n')
			at = len(updated)
			updated = append(updated, text...)
			updated = append(updated, content[end:]...)
		}
		if res, found := h.secretIn(nil, updated, at, at+len(text)); found {
			return res, nil
		}
		if res, ok, err := h.checkSize(tx, a.Path, int64(len(content)), int64(len(updated))); !ok {
			return res, err
		}
		if err := tx.WriteFile(p, updated); err != nil {
			return Result{}, err
		}
		return ok("The file " + a.Path + " has been edited."), nil
	})
}

func (h *Memory) delete(ctx context.Context, a DeleteArgs) Result {
	p, err := h.resolve(a.Path)
	if err != nil {
		return pathRefused(err)
	}
	if p.IsRoot() {
		return fail(CodeInvalid, "Error: Cannot delete the %s directory itself", vfs.Root)
	}
	return h.update(ctx, "delete", a.Path, func(tx *vfs.Tx) (Result, error) {
		if _, err := tx.Stat(p); vfs.IsNotExist(err) {
			return fail(CodeNotFound, "Error: The path %s does not exist", a.Path), nil
		} else if err != nil {
			return Result{}, err
		}
		if err := tx.RemoveAll(p); err != nil {
			if r, refused := h.refusedBelow(err); refused {
				return r, nil
			}
			return Result{}, err
		}
		return ok("Successfully deleted " + a.Path), nil
	})
}

func (h *Memory) rename(ctx context.Context, a RenameArgs) Result {
	oldp, err := h.resolve(a.OldPath)
	if err != nil {
		return pathRefused(err)
	}
	newp, err := h.resolve(a.NewPath)
	if err != nil {
		return pathRefused(err)
	}
	if oldp.IsRoot() || newp.IsRoot() {
		return fail(CodeInvalid, "Error: Cannot rename the %s directory itself", vfs.Root)
	}
	if res, found := h.secretIn([]string{a.NewPath}, nil, 0, 0); found {
		return res
	}
	destExists := fail(CodeExists, "Error: The destination %s already exists", a.NewPath)
	return h.update(ctx, "rename", a.OldPath, func(tx *vfs.Tx) (Result, error) {
		_, err := tx.Stat(oldp)
		switch {
		case errors.Is(err, vfs.ErrEscape):
			return escapes(a.OldPath), nil
		case vfs.IsNotExist(err):
			return fail(CodeNotFound, "Error: The path %s does not exist", a.OldPath), nil
		case err != nil:
			return Result{}, err
		}
		_, err = tx.Stat(newp)
		switch {
		case errors.Is(err, vfs.ErrEscape):
			return escapes(a.NewPath), nil
		case err == nil:
			return destExists, nil
		case !vfs.IsNotExist(err):
			return Result{}, err
		}
		if tx.Canonical(oldp).Contains(tx.Canonical(newp)) { // in any spelling, where case is ignored
			return fail(CodeInvalid, "Error: Cannot move %s into itself (%s)", a.OldPath, a.NewPath), nil
		}
		if isFile, err := parentIsFile(tx, newp); errors.Is(err, vfs.ErrEscape) {
			return escapes(a.NewPath), nil
		} else if err != nil || isFile {
			return fail(CodeNotDirectory, "Error: A parent of %s is a file, not a directory", a.NewPath), err
		}
		if err := tx.Rename(oldp, newp); err != nil {
			if vfs.IsExist(err) {
				return destExists, nil
			}
			if r, refused := h.refusedBelow(err); refused {
				return r, nil
			}
			if errors.Is(err, vfs.ErrEscape) {
				return escapes(a.NewPath), nil
			}
			return Result{}, err
		}
		return ok("Successfully renamed " + a.OldPath + " to " + a.NewPath), nil
	})
}

// refusedBelow words the refusal of a delete or rename for a file below the directory it
// changes: one whose name no path may hold (made outside memory-mcp), or one a rename
// would take past the length a path may have.
func (h *Memory) refusedBelow(err error) (Result, bool) {
	var pe *vfs.PathError
	if !errors.As(err, &pe) {
		return Result{}, false
	}
	shown := *pe
	shown.Path = h.Shown(pe.Path)
	return pathRefused(&shown), true
}

func deref(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}
