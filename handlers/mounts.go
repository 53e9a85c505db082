package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// MaxMounts is how many mounts one memory may have.
const MaxMounts = 16

// A Mount places another memory at /memories/Name: every path at or below it acts on that
// memory's store, whose own top is /memories/Name (docs/behaviour.md §8). The memory keeps
// its own limits, read-only setting, history and locks.
type Mount struct {
	Name   string
	Memory *Memory
}

// ValidMountName reports why name cannot name a mount: it must be one path element that a
// path accepts as it is, and neither hidden nor node_modules (a listing would leave it out).
func ValidMountName(name string) error {
	p, err := vfs.Resolve(vfs.Root + "/" + name)
	switch {
	case name == "" || strings.ContainsAny(name, "/\\"):
		return fmt.Errorf("mount name %q: one path element, without slashes", name)
	case err != nil || p.Name() != name:
		return fmt.Errorf("mount name %q: not allowed in a memory path", name)
	case hidden(name) || vfs.IsBookkeeping(name):
		return fmt.Errorf("mount name %q: a listing would hide it (it starts with a dot, or is node_modules)", name)
	}
	return nil
}

// WithMounts places mounts in the memory: at most MaxMounts, each with a valid and distinct
// name. New panics on a mount it cannot place; check names with ValidMountName first.
func WithMounts(mounts ...Mount) Option {
	return func(h *Memory) {
		if len(h.mounts)+len(mounts) > MaxMounts {
			panic(fmt.Sprintf("handlers: more than %d mounts", MaxMounts))
		}
		for _, m := range mounts {
			if err := ValidMountName(m.Name); err != nil {
				panic("handlers: " + err.Error())
			}
			if slices.ContainsFunc(h.mounts, func(o Mount) bool { return o.Name == m.Name }) {
				panic(fmt.Sprintf("handlers: mount name %q given twice", m.Name))
			}
			sub := *m.Memory // its own top: the same store may be mounted elsewhere too
			sub.top, sub.mounts = vfs.Root+"/"+m.Name, nil
			h.mounts = append(h.mounts, Mount{Name: m.Name, Memory: &sub})
		}
		slices.SortFunc(h.mounts, func(a, b Mount) int { return strings.Compare(a.Name, b.Name) })
	}
}

// Mounts returns the memory's mounts, sorted by name; each Memory's paths are the ones the
// model sees (under /memories/Name).
func (h *Memory) Mounts() []Mount { return slices.Clone(h.mounts) }

// Top is the path at which the memory's store appears: /memories, or a mount's path.
func (h *Memory) Top() string {
	if h.top == "" {
		return vfs.Root
	}
	return h.top
}

// Store returns the memory's store.
func (h *Memory) Store() *vfs.Store { return h.store }

// CheckMounts refuses a main store that holds an entry where a mount is placed: it would be
// hidden behind the mount.
func (h *Memory) CheckMounts(ctx context.Context) error {
	if len(h.mounts) == 0 {
		return nil
	}
	return h.store.View(ctx, func(tx *vfs.Tx) error {
		for _, m := range h.mounts {
			_, err := tx.Stat(vfs.MustResolve(vfs.Root + "/" + m.Name))
			if err == nil {
				return fmt.Errorf("the main store already has /memories/%s, where a mount is placed: rename it, or mount the store under another name", m.Name)
			}
			if !vfs.IsNotExist(err) {
				return err
			}
		}
		return nil
	})
}

func (h *Memory) mount(name string) *Mount {
	i := slices.IndexFunc(h.mounts, func(m Mount) bool { return m.Name == name })
	if i < 0 && h.store.FoldsCase() {
		// Where the main store ignores case, /memories/TEAM is the mount /memories/team, to
		// the model as to any program: made in the main store, it would hide the mount
		// and keep the server from starting again (CheckMounts).
		i = slices.IndexFunc(h.mounts, func(m Mount) bool { return strings.EqualFold(m.Name, name) })
	}
	if i < 0 {
		return nil
	}
	return &h.mounts[i]
}

// Route returns the memory a path as sent acts on, and the path in that memory's store;
// at says the path is the mount point itself. A path the rules refuse is the main store's.
func (h *Memory) Route(sent string) (mem *Memory, p vfs.Path, at bool, err error) {
	p, err = vfs.Resolve(sent)
	if err != nil || len(h.mounts) == 0 {
		return h, p, false, err
	}
	name, rest, _ := strings.Cut(p.Name(), "/")
	m := h.mount(name)
	if m == nil {
		return h, p, false, nil
	}
	q, err := m.Memory.resolve(p.String())
	return m.Memory, q, rest == "", err
}

// resolve resolves a path as sent to the path in this memory's store: under a mount at
// /memories/NAME, /memories/NAME/x is the store's /memories/x.
func (h *Memory) resolve(sent string) (vfs.Path, error) {
	p, err := vfs.Resolve(sent)
	if err != nil || h.top == "" {
		return p, err
	}
	// The first element names the mount, in any spelling where the main store ignores case.
	if _, rest, _ := strings.Cut(p.Name(), "/"); rest != "" {
		return vfs.Resolve(vfs.Root + "/" + rest)
	}
	return vfs.MustResolve(vfs.Root), nil
}

// FileKey is the same for two paths as shown exactly when they name the same file: the
// path with a mount's name as the mount spells it, in lower case where its store ignores
// case.
func (h *Memory) FileKey(shown string) string {
	m, p, _, err := h.Route(shown)
	if err != nil {
		return shown
	}
	if m.store.FoldsCase() {
		return m.Shown(strings.ToLower(p.String()))
	}
	return m.Shown(p.String())
}

// Shown is the path the model sees for a path in this memory's store.
func (h *Memory) Shown(p string) string {
	if h.top == "" {
		return p
	}
	return h.top + strings.TrimPrefix(p, vfs.Root)
}

func (h *Memory) readOnlyResult() Result {
	text := "Error: The memory store is read-only"
	if h.top != "" {
		text = "Error: The memory store at " + h.top + " is read-only"
	}
	return Result{Text: text, IsError: true, Code: CodeReadOnly}
}

// pick returns the memory that runs command c on paths (as sent: path, or old_path and
// new_path), or the refusal of docs/behaviour.md §8 (read-only, mount point, different
// stores, in that order). A path the rules refuse leaves the command to this memory, whose
// checks report it.
func (h *Memory) pick(c *command, paths ...string) (*Memory, *Result) {
	if len(h.mounts) == 0 {
		return h, nil
	}
	mems := make([]*Memory, len(paths))
	ats := make([]bool, len(paths))
	for i, sent := range paths {
		var err error
		if mems[i], _, ats[i], err = h.Route(sent); err != nil {
			return h, nil
		}
	}
	if c.changes {
		for _, m := range mems {
			if m.readOnly {
				r := m.readOnlyResult()
				return nil, &r
			}
		}
	}
	if c.name == "delete" || c.name == "rename" {
		for i, m := range mems {
			if ats[i] {
				r := fail(CodeMount, "Error: %s is a mounted memory store and cannot be deleted or moved", m.top)
				return nil, &r
			}
		}
	}
	if len(mems) == 2 && mems[0] != mems[1] {
		r := fail(CodeMount, "Error: Cannot move %s to %s: they are in different memory stores. Create it at %s and delete %s instead", paths[0], paths[1], paths[1], paths[0])
		return nil, &r
	}
	return mems[0], nil
}

// mountNodes adds each mount to the listing of /memories as a directory with its store's
// total size and its top-level entries; a mount whose store fails is left out (the call is
// the main store's, and the failure shows on a call under the mount).
func (h *Memory) mountNodes(ctx context.Context, tree *vfs.Node, depth int) (errs []error) {
	for _, m := range h.mounts {
		var n vfs.Node
		err := m.Memory.store.View(ctx, func(tx *vfs.Tx) (err error) {
			n, err = tx.Tree(vfs.MustResolve(vfs.Root), depth, hidden)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("mount %s: %w", m.Name, err))
			continue
		}
		n.Name, n.Dir = m.Name, true
		if i := slices.IndexFunc(tree.Children, func(c vfs.Node) bool { return c.Name == m.Name }); i >= 0 {
			tree.Size -= tree.Children[i].Size // made behind the mount's back: hidden by it
			tree.Children = slices.Delete(tree.Children, i, i+1)
		}
		tree.Children = append(tree.Children, n)
		tree.Size += n.Size
	}
	slices.SortFunc(tree.Children, func(a, b vfs.Node) int { return strings.Compare(a.Name, b.Name) })
	return errs
}

// mountOf returns the mount a path given to a person's operation lies in, or nil.
func (h *Memory) mountOf(path string) *Memory {
	if len(h.mounts) == 0 {
		return nil
	}
	if m, _, _, err := h.Route(path); err == nil && m != h {
		return m
	}
	return nil
}

// resolveArg is resolveArg for this memory's store (see resolve).
func (h *Memory) resolveArg(path string) (vfs.Path, error) {
	p, err := resolveArg(path)
	if err != nil || h.top == "" {
		return p, err
	}
	return h.resolve(path)
}

// shownText rewrites the store's paths in a text of a mounted memory (a refusal, a diff) to
// the paths the model and people see.
func (h *Memory) shownText(text string) string {
	if h.top == "" {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, vfs.Root)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		rest := text[i+len(vfs.Root):]
		if rest == "" || !isNameByte(rest[0]) {
			b.WriteString(h.top)
		} else {
			b.WriteString(vfs.Root)
		}
		text = rest
	}
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// shownErr is err with the paths of a refusal shown as shownText does.
func (h *Memory) shownErr(err error) error {
	var r *Refusal
	if h.top == "" || !errors.As(err, &r) {
		return err
	}
	return &Refusal{Msg: h.shownText(r.Msg), Stale: r.Stale}
}

// shownVersions rewrites the paths of a mounted memory's versions.
func (h *Memory) shownVersions(vs []vfs.Version) []vfs.Version {
	if h.top == "" {
		return vs
	}
	for i := range vs {
		vs[i].Path = h.Shown(vs[i].Path)
		if vs[i].NewPath != "" {
			vs[i].NewPath = h.Shown(vs[i].NewPath)
		}
	}
	return vs
}

// shownNode rewrites the paths of a mounted memory's file tree.
func (h *Memory) shownNode(n *FileNode) {
	n.Path = h.Shown(n.Path)
	for i := range n.Children {
		h.shownNode(&n.Children[i])
	}
}

// shownBatch is b with the paths of a mounted memory's changes shown (a copy: batches are
// shared by subscribers).
func (h *Memory) shownBatch(b vfs.Batch) vfs.Batch {
	if h.top == "" {
		return b
	}
	changes := make([]vfs.Change, len(b.Changes))
	for i, c := range b.Changes {
		c.Path = h.Shown(c.Path)
		if c.From != "" {
			c.From = h.Shown(c.From)
		}
		changes[i] = c
	}
	b.Changes = changes
	return b
}

// memories returns this memory and its mounts.
func (h *Memory) memories() []*Memory {
	all := []*Memory{h}
	for _, m := range h.mounts {
		all = append(all, m.Memory)
	}
	return all
}

func (h *Memory) shownBatchPtr(b *vfs.Batch) *vfs.Batch {
	if b == nil || h.top == "" {
		return b
	}
	c := h.shownBatch(*b)
	return &c
}
