package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// The operations of this file serve the web page: a person looks at the memory, edits or
// deletes a file and searches it. Like the history operations they take the actor from ctx
// and refuse with a *Refusal worded for a person; unlike the model's commands they work on
// whole files and never number lines, and a change can be made conditional on the content
// the person saw, so that an agent's change made meanwhile is never overwritten unseen.

// FileNode is a file or directory of the memory, as a person browses it.
type FileNode struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	// Size is a file's bytes, or the total of the files below a directory.
	Size int64 `json:"size"`
	// Changed is when the history last saw a change to the file, or to any file below
	// the directory (zero when it saw none: history off, or the change is older than it).
	Changed  time.Time  `json:"changed,omitzero"`
	Children []FileNode `json:"children,omitempty"`
}

// MaxTreeEntries bounds the entries Files returns; a memory with more is cut off, and
// says so.
const MaxTreeEntries = 20000

// Files returns every file and directory of the memory, hidden ones included (a person
// sees what the model can reach), with sizes and the time of each one's last change.
// truncated reports that the memory holds more than MaxTreeEntries entries.
// A mount whose store fails is left out, as from the model's listing: the rest is shown.
func (h *Memory) Files(ctx context.Context) (root FileNode, truncated bool, err error) {
	root, truncated, _, err = h.filesWithMounts(ctx, showAll, MaxTreeEntries)
	return root, truncated, err
}

// filesWithMounts is files with each mount's tree as a directory at its mount point. A
// mount whose store fails is left out, and named in left.
func (h *Memory) filesWithMounts(ctx context.Context, skip func(string) bool, budget int) (root FileNode, truncated bool, left *MountsLeftOut, err error) {
	root, truncated, err = h.files(ctx, skip, budget)
	if err != nil {
		return root, truncated, nil, err
	}
	for _, m := range h.mounts {
		n, more, err := m.Memory.files(ctx, skip, budget)
		if err != nil {
			left = left.add(m.Memory.top, err)
			continue
		}
		n.Name, truncated = m.Name, truncated || more
		if i := slices.IndexFunc(root.Children, func(c FileNode) bool { return c.Name == m.Name }); i >= 0 {
			root.Size -= root.Children[i].Size // made behind the mount's back: hidden by it
			root.Children = slices.Delete(root.Children, i, i+1)
		}
		root.Children = append(root.Children, n)
		root.Size += n.Size
		if n.Changed.After(root.Changed) {
			root.Changed = n.Changed
		}
	}
	slices.SortFunc(root.Children, func(a, b FileNode) int { return strings.Compare(a.Name, b.Name) })
	return root, truncated, left, nil
}

// MountsLeftOut is the error of a listing that left out the mounts whose stores failed
// (Tops), for Errs.
type MountsLeftOut struct {
	Tops []string
	Errs []error
}

func (e *MountsLeftOut) Error() string {
	return fmt.Sprintf("left out %s: %v", strings.Join(e.Tops, ", "), errors.Join(e.Errs...))
}

// add names the mount at top, left out for err (e may be nil: the first).
func (e *MountsLeftOut) add(top string, err error) *MountsLeftOut {
	if e == nil {
		e = &MountsLeftOut{}
	}
	e.Tops, e.Errs = append(e.Tops, top), append(e.Errs, err)
	return e
}

// FileList returns the memory's files, without the hidden ones (as the model's listings),
// sorted by path: what MCP clients get as resources, a page at a time, so all of them,
// however many. Directories are left out. When a mount's store fails, the rest is listed
// and err is a *MountsLeftOut.
func (h *Memory) FileList(ctx context.Context) ([]FileNode, error) {
	root, _, left, err := h.filesWithMounts(ctx, hidden, math.MaxInt)
	if err == nil && left != nil {
		err = left
	}
	var out []FileNode
	var walk func(n FileNode)
	walk = func(n FileNode) {
		if !n.Dir {
			out = append(out, n)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	return out, err
}

// files returns the memory's tree without the entries skip names, cut after budget entries.
func (h *Memory) files(ctx context.Context, skip func(string) bool, budget int) (root FileNode, truncated bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	err = h.store.View(ctx, func(tx *vfs.Tx) error {
		tree, err := tx.Tree(vfs.MustResolve(vfs.Root), 1<<20, skip)
		if err != nil {
			return err
		}
		changed := map[string]time.Time{}
		if vs, err := tx.Versions(); err == nil {
			for _, v := range vs {
				changed[v.Path] = v.Time
				if v.Kind == vfs.Moved {
					changed[v.NewPath] = v.Time
				}
			}
		} else if !errors.Is(err, vfs.ErrNoHistory) {
			return err
		}
		root = fileNode(tree, vfs.Root, changed, &budget)
		h.shownNode(&root)
		truncated = budget < 0
		return nil
	})
	return root, truncated, err
}

// showAll skips only the entries no path can name: a person sees hidden files too.
func showAll(name string) bool { return !vfs.ValidName(name) }

// fileNode converts a tree node, spending one unit of budget per entry.
func fileNode(n vfs.Node, p string, changed map[string]time.Time, budget *int) FileNode {
	f := FileNode{Name: n.Name, Path: p, Dir: n.Dir, Size: n.Size, Changed: changed[p]}
	if p == vfs.Root {
		f.Name = strings.TrimPrefix(vfs.Root, "/")
	}
	for _, c := range n.Children {
		if *budget--; *budget < 0 {
			break
		}
		child := fileNode(c, p+"/"+c.Name, changed, budget)
		if child.Changed.After(f.Changed) {
			f.Changed = child.Changed
		}
		f.Children = append(f.Children, child)
	}
	return f
}

// Read returns the content of the file at path and its digest, for Write and Remove to
// check against. A file over the per-file limit (only one placed in the storage by other
// means can be) is refused rather than read: neither a resource nor the page can show it.
func (h *Memory) Read(ctx context.Context, path string) ([]byte, vfs.Digest, error) {
	if m := h.mountOf(path); m != nil {
		data, d, err := m.Read(ctx, path)
		return data, d, m.shownErr(err)
	}
	p, err := h.resolveArg(path)
	if err != nil {
		return nil, vfs.Digest{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var data []byte
	err = h.store.View(ctx, func(tx *vfs.Tx) error {
		if e, err := tx.Stat(p); err == nil && e.IsRegular() && e.Size > h.limits.MaxFileBytes {
			return refuse("%s is %d bytes, over the limit of %d bytes per memory file: view it in parts (memory_view with view_range)", p, e.Size, h.limits.MaxFileBytes)
		}
		var exists bool
		data, exists, err = current(tx, p)
		if err == nil && !exists {
			err = refuse("%s does not exist (any more)", p)
		}
		return err
	})
	return data, vfs.DigestOf(data), err
}

// current reads the regular file at p; exists is false when there is nothing at p, and
// anything else there (a directory, a special file) is refused.
func current(tx *vfs.Tx, p vfs.Path) (data []byte, exists bool, err error) {
	e, err := tx.Stat(p)
	switch {
	case vfs.IsNotExist(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case e.IsDir():
		return nil, true, refuse("%s is a directory", p)
	case !e.IsRegular():
		return nil, true, refuse("%s is not a regular file", p)
	}
	data, err = tx.ReadFile(p)
	if errors.Is(err, vfs.ErrNotRegular) {
		err = refuse("%s is not a regular file", p)
	}
	return data, true, err
}

// Write makes data the content of the file at path, creating it (and its directories) if
// it does not exist. When expect is not nil, the file must still be as the person last saw
// it: *expect is the digest Read returned, or the zero digest for a file that did not
// exist; otherwise Write refuses and changes nothing. The limits and the credential guard
// apply as to the model's changes. The history records the change as command "edit".
func (h *Memory) Write(ctx context.Context, path string, data []byte, expect *vfs.Digest) (*vfs.Batch, error) {
	if m := h.mountOf(path); m != nil {
		b, err := m.Write(ctx, path, data, expect)
		return m.shownBatchPtr(b), m.shownErr(err)
	}
	p, err := h.changeable(path)
	if err != nil {
		return nil, err
	}
	if res, found := h.secretIn([]string{p.String()}, data, 0, len(data)); found {
		return nil, refuse("%s", strings.TrimPrefix(res.Text, "Error: "))
	}
	return h.apply(ctx, "edit", func(tx *vfs.Tx) error {
		old, exists, err := current(tx, p)
		if err != nil {
			return err
		}
		if err := unchanged(p, exists, old, expect); err != nil || (exists && bytes.Equal(old, data)) {
			return err
		}
		if !exists {
			if f, err := fileAncestor(tx, p); err != nil || f != "" {
				if err == nil {
					err = refuse("%s is a file, so %s cannot be created below it", f, p)
				}
				return err
			}
		}
		if res, ok, err := h.checkSize(tx, p.String(), int64(len(old)), int64(len(data))); !ok {
			if err == nil {
				err = refuse("%s", strings.TrimPrefix(res.Text, "Error: "))
			}
			return err
		}
		if exists {
			return tx.WriteFile(p, data)
		}
		return tx.CreateFile(p, data)
	})
}

// Remove deletes the file or directory at path (a directory with everything below it).
// When expect is not nil, path must be a file still holding the content with that digest.
// The history records the change as command "delete".
func (h *Memory) Remove(ctx context.Context, path string, expect *vfs.Digest) (*vfs.Batch, error) {
	if m := h.mountOf(path); m != nil {
		b, err := m.Remove(ctx, path, expect)
		return m.shownBatchPtr(b), m.shownErr(err)
	}
	p, err := h.changeable(path)
	if err != nil {
		return nil, err
	}
	return h.apply(ctx, "delete", func(tx *vfs.Tx) error {
		if expect != nil {
			old, exists, err := current(tx, p)
			if err == nil {
				err = unchanged(p, exists, old, expect)
			}
			if err != nil {
				return err
			}
		} else if _, err := tx.Stat(p); vfs.IsNotExist(err) {
			return refuse("%s does not exist (any more)", p)
		} else if err != nil {
			return err
		}
		err := tx.RemoveAll(p)
		if below := (*vfs.PathError)(nil); errors.As(err, &below) {
			return refuse("%s holds %q, a name no memory path may hold: remove or rename it outside memory-mcp first", p, below.Path)
		}
		return err
	})
}

// changeable checks that the memory takes changes and that path names something below the
// root.
func (h *Memory) changeable(path string) (vfs.Path, error) {
	if h.readOnly {
		return vfs.Path{}, refuse("this memory is read-only: it can be looked at, not changed")
	}
	p, err := h.resolveArg(path)
	if err == nil && p.IsRoot() {
		err = refuse("%s itself cannot be changed: choose a file in it", vfs.Root)
	}
	return p, err
}

// apply runs a change as a person's command within the call timeout.
func (h *Memory) apply(ctx context.Context, command string, fn func(tx *vfs.Tx) error) (*vfs.Batch, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	return h.store.Apply(ctx, command, fn)
}

// unchanged refuses when the file is not as the person last saw it.
func unchanged(p vfs.Path, exists bool, old []byte, expect *vfs.Digest) error {
	var msg string
	switch {
	case expect == nil:
		return nil
	case expect.IsZero() && exists:
		msg = "%s was created by someone else meanwhile: reload it, then make your change again"
	case !expect.IsZero() && !exists:
		msg = "%s was deleted meanwhile: reload, then make your change again"
	case exists && vfs.DigestOf(old) != *expect:
		msg = "%s was changed by someone else since you opened it: reload it, then make your change again"
	default:
		return nil
	}
	return &Refusal{Msg: fmt.Sprintf(msg, p), Stale: true}
}

// Match is a place where a search found its text: in a file's name (Line 0) or on one of
// its lines.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
	// Text is the line (or the name), cut to about MaxMatchText bytes around the match.
	Text string `json:"text"`
}

// Search limits.
const (
	MaxSearchBytes = 256  // the longest text searched for
	MaxMatches     = 200  // matches returned; Search says when there were more
	MaxMatchText   = 240  // bytes of a matching line shown
	searchFileCap  = 1000 // matches counted in one file before moving on
)

// Search finds text, ignoring case, in the names and lines of every file of the memory:
// the main store's in path order, then each mount's (one whose store fails left out).
// more reports that there were more than MaxMatches matches.
func (h *Memory) Search(ctx context.Context, text string) (matches []Match, more bool, err error) {
	if matches, more, err = h.search(ctx, text); err != nil || more {
		return matches, more, err
	}
	for _, m := range h.mounts {
		ms, mmore, err := m.Memory.search(ctx, text)
		if err != nil {
			continue
		}
		for i := range ms {
			ms[i].Path = m.Memory.Shown(ms[i].Path)
		}
		matches = append(matches, ms...)
		if len(matches) > MaxMatches || mmore {
			return matches[:min(len(matches), MaxMatches)], true, nil
		}
	}
	return matches, false, nil
}

func (h *Memory) search(ctx context.Context, text string) (matches []Match, more bool, err error) {
	switch {
	case strings.TrimSpace(text) == "":
		return nil, false, refuse("type something to search for")
	case len(text) > MaxSearchBytes:
		return nil, false, refuse("search for at most %d bytes of text", MaxSearchBytes)
	}
	needle := strings.ToLower(text)
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	err = h.store.View(ctx, func(tx *vfs.Tx) error {
		tree, err := tx.Tree(vfs.MustResolve(vfs.Root), 1<<20, showAll)
		if err != nil {
			return err
		}
		var walk func(n vfs.Node, p string) error
		walk = func(n vfs.Node, p string) error {
			if more {
				return nil
			}
			if n.Dir {
				for _, c := range n.Children {
					if err := walk(c, p+"/"+c.Name); err != nil {
						return err
					}
				}
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			q, err := vfs.Resolve(p)
			if err != nil {
				return nil // a name made outside memory-mcp that no path can hold
			}
			add := func(m Match) bool {
				if len(matches) == MaxMatches {
					more = true
					return false
				}
				matches = append(matches, m)
				return true
			}
			if strings.Contains(strings.ToLower(n.Name), needle) && !add(Match{Path: p, Text: n.Name}) {
				return nil
			}
			data, err := tx.ReadFile(q)
			if errors.Is(err, vfs.ErrNotRegular) || vfs.IsNotExist(err) {
				return nil
			}
			if err != nil {
				return err
			}
			found := 0
			for i, line := range strings.Split(string(data), "\n") {
				at := strings.Index(strings.ToLower(line), needle)
				if at < 0 {
					continue
				}
				if found++; found > searchFileCap || !add(Match{Path: p, Line: i + 1, Text: excerpt(line, at)}) {
					return nil
				}
			}
			return nil
		}
		return walk(tree, vfs.Root)
	})
	return matches, more, err
}

// excerpt cuts line to about MaxMatchText bytes around byte offset at, on rune
// boundaries, marking what it cut with "…". (The offset is in the lower-cased line,
// which is close enough to place a window.)
func excerpt(line string, at int) string {
	line = strings.ToValidUTF8(strings.TrimRight(line, "\r"), "\uFFFD")
	if len(line) <= MaxMatchText {
		return line
	}
	from := max(0, min(at-MaxMatchText/3, len(line)-MaxMatchText))
	to := min(len(line), from+MaxMatchText)
	for from > 0 && !utf8.RuneStart(line[from]) {
		from--
	}
	for to < len(line) && !utf8.RuneStart(line[to]) {
		to++
	}
	out := line[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(line) {
		out += "…"
	}
	return out
}

// Subscription receives the changes of a memory and of its mounts (see vfs.Subscription),
// with the paths the model sees.
type Subscription struct {
	C      <-chan vfs.Batch
	subs   []*vfs.Subscription
	missed atomic.Uint64
}

// Missed returns how many batches the subscriber missed because its buffer was full.
func (s *Subscription) Missed() uint64 { return s.missed.Load() }

// Close unregisters the subscriber (see vfs.Subscription.Close).
func (s *Subscription) Close() {
	for _, sub := range s.subs {
		sub.Close()
	}
}

// Subscribe registers a subscriber whose channel holds up to buffer batches.
func (h *Memory) Subscribe(buffer int) *Subscription {
	c := make(chan vfs.Batch, buffer)
	s := &Subscription{C: c}
	for _, m := range h.memories() {
		s.subs = append(s.subs, m.store.SubscribeFunc(func(b vfs.Batch) {
			select {
			case c <- m.shownBatch(b):
			default:
				s.missed.Add(1)
			}
		}))
	}
	return s
}

// SubscribeFunc registers fn for the memory's changes, called as each is published (see
// vfs.Store.SubscribeFunc: fn must return at once and must not use the memory).
func (h *Memory) SubscribeFunc(fn func(vfs.Batch)) *Subscription {
	s := &Subscription{}
	for _, m := range h.memories() {
		s.subs = append(s.subs, m.store.SubscribeFunc(func(b vfs.Batch) { fn(m.shownBatch(b)) }))
	}
	return s
}

// Watch notices changes other processes make to the memory and its mounts until ctx is
// done, so that subscribers hear of them (see vfs.Store.Watch).
func (h *Memory) Watch(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	for _, m := range h.memories() {
		wg.Go(func() { m.store.Watch(ctx, interval) })
	}
	wg.Wait()
}

// KeepsHistory reports whether the memory keeps a history of its changes.
func (h *Memory) KeepsHistory(ctx context.Context) bool { return h.store.KeepsHistory(ctx) }

// MaxFileBytes is the largest a file may grow to.
func (h *Memory) MaxFileBytes() int64 { return h.limits.MaxFileBytes }
