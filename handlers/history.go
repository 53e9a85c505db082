package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// The history operations are for people (the command line, the web page), not the model:
// their errors are Go errors whose text says what to do, and they take the actor from ctx
// (vfs.WithActor), so a restore made on the web page is recorded as such.

// Refusal is a refusal of an operation for people (the history operations, and those of
// people.go), worded for the person who asked.
type Refusal struct {
	Msg string
	// Stale says the file is no longer as the person last saw it (changed, created or
	// deleted meanwhile): loading it again is the way on.
	Stale bool
}

func (e *Refusal) Error() string { return e.Msg }

func refuse(format string, a ...any) error { return &Refusal{Msg: fmt.Sprintf(format, a...)} }

// LogQuery selects versions.
type LogQuery struct {
	// Path limits the log to one file, following it back through renames, or to the files
	// below a directory ("" or /memories: every file).
	Path string
	// Since and Until bound the versions' times (zero: no bound).
	Since, Until time.Time
	// Actor keeps only the versions made by this actor ("": all).
	Actor string
	// N keeps the newest N versions (0: all).
	N int
}

// Log returns the versions q selects, newest first. The log of the whole memory has its
// mounts' versions too (each store numbers its own); a mount whose store fails is left
// out, as from the tree, and the error is then a *MountsLeftOut that comes with the rest.
func (h *Memory) Log(ctx context.Context, q LogQuery) ([]vfs.Version, error) {
	if m := h.mountOf(q.Path); m != nil {
		vs, err := m.Log(ctx, q)
		return m.shownVersions(vs), m.shownErr(err)
	}
	out, err := h.log(ctx, q)
	if err != nil || !wholeMemory(q.Path) || len(h.mounts) == 0 {
		return out, err
	}
	var left *MountsLeftOut
	for _, m := range h.mounts {
		vs, err := m.Memory.log(ctx, LogQuery{Since: q.Since, Until: q.Until, Actor: q.Actor, N: q.N})
		if err != nil {
			left = left.add(m.Memory.top, err)
			continue
		}
		out = append(out, m.Memory.shownVersions(vs)...)
	}
	slices.SortStableFunc(out, func(a, b vfs.Version) int { return b.Time.Compare(a.Time) })
	if q.N > 0 && len(out) > q.N {
		out = out[:q.N]
	}
	if left != nil {
		return out, left
	}
	return out, nil
}

// wholeMemory reports whether a path given to a person's operation is /memories itself.
func wholeMemory(path string) bool {
	p, err := vfs.Resolve(path)
	return path == "" || err == nil && p.IsRoot()
}

// log is Log of this memory's own store.
func (h *Memory) log(ctx context.Context, q LogQuery) ([]vfs.Version, error) {
	p := vfs.MustResolve(vfs.Root)
	if q.Path != "" {
		var err error
		if p, err = h.resolveArg(q.Path); err != nil {
			return nil, err
		}
	}
	var out []vfs.Version
	err := h.history(ctx, func(tx *vfs.Tx, vs []vfs.Version) error {
		dir := tx.Canonical(p).String()
		name := dir // the file's name as the walk back through its renames finds it
		for i := len(vs) - 1; i >= 0 && (q.N <= 0 || len(out) < q.N); i-- {
			v := vs[i]
			if !v.Touches(name) && !v.Under(dir) {
				continue
			}
			if v.Kind == vfs.Moved && v.NewPath == name {
				name = v.Path // older versions are under the old name
			}
			switch {
			case !q.Since.IsZero() && v.Time.Before(q.Since),
				!q.Until.IsZero() && v.Time.After(q.Until),
				q.Actor != "" && v.Actor != q.Actor:
				continue
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// Show returns the content of the file at path as it was after version seq.
func (h *Memory) Show(ctx context.Context, path string, seq uint64) ([]byte, error) {
	if m := h.mountOf(path); m != nil {
		data, err := m.Show(ctx, path, seq)
		return data, m.shownErr(err)
	}
	p, err := h.resolveArg(path)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = h.history(ctx, func(tx *vfs.Tx, vs []vfs.Version) error {
		p := tx.Canonical(p)
		if err := checkSeq(vs, seq); err != nil {
			return err
		}
		pruned, err := tx.Pruned()
		if err != nil {
			return err
		}
		st, known, err := stateAt(vs, pruned, p.String(), seq)
		if err != nil {
			return err
		}
		if !known {
			return refuse("the history has no version of %s (see memory-mcp log)", p)
		}
		data, err = content(tx, st, p.String(), seq)
		return err
	})
	return data, err
}

// content returns the content of a file state, or a refusal saying why there is none.
func content(tx *vfs.Tx, st vfs.FileState, p string, seq uint64) ([]byte, error) {
	switch {
	case !st.Exists:
		return nil, refuse("%s did not exist after version %d", p, seq)
	case st.Redacted:
		return nil, refuse("the content of %s after version %d was redacted", p, seq)
	}
	data, err := tx.Content(st.SHA256)
	if errors.Is(err, vfs.ErrNoContent) {
		return nil, refuse("the content of %s after version %d is no longer kept (pruned or redacted)", p, seq)
	}
	return data, err
}

// Diff returns a unified diff of the file at path: with no seqs, of its last change; with
// one, of the change version seqs[0] made to it; with two, between its states after those
// versions. It is empty when the contents are equal.
func (h *Memory) Diff(ctx context.Context, path string, seqs ...uint64) (string, error) {
	if m := h.mountOf(path); m != nil {
		d, err := m.Diff(ctx, path, seqs...)
		return d, m.shownErr(err)
	}
	p, err := h.resolveArg(path)
	if err != nil {
		return "", err
	}
	if len(seqs) > 2 {
		return "", refuse("diff takes a path and at most two version numbers")
	}
	var out string
	err = h.history(ctx, func(tx *vfs.Tx, vs []vfs.Version) error {
		p := tx.Canonical(p)
		for _, seq := range seqs {
			if err := checkSeq(vs, seq); err != nil {
				return err
			}
		}
		type side struct {
			label string
			st    vfs.FileState
			seq   uint64
			path  string
		}
		var a, b side
		if len(seqs) == 2 {
			// A file no version touched is absent on its side.
			pruned, err := tx.Pruned()
			if err != nil {
				return err
			}
			for i, s := range []*side{&a, &b} {
				st, _, err := stateAt(vs, pruned, p.String(), seqs[i])
				if err != nil {
					return err
				}
				*s = side{fmt.Sprintf("%s@%d", h.Shown(p.String()), seqs[i]), st, seqs[i], p.String()}
			}
		} else {
			// The change: the last one to the file, or the one version seqs[0] made to it.
			i := len(vs) - 1
			for ; i >= 0; i-- {
				if vs[i].Touches(p.String()) && (len(seqs) == 0 || vs[i].Seq == seqs[0]) {
					break
				}
			}
			if i < 0 && len(seqs) == 0 {
				return refuse("the history has no version of %s (see memory-mcp log)", p)
			}
			if i < 0 {
				return refuse("version %d did not change %s: to compare two versions, give both numbers", seqs[0], p)
			}
			v := vs[i]
			to := v.Path
			if v.NewPath != "" {
				to = v.NewPath
			}
			// A change may touch a file twice (create, then write; rename, then write):
			// the side before is the file before the change's first version of it.
			first := i
			for j := i - 1; j >= 0 && vs[j].Seq == v.Seq; j-- {
				if from := vs[first].Path; vs[j].NewPath == from || vs[j].NewPath == "" && vs[j].Path == from {
					first = j
				}
			}
			from := vs[first].Path
			// It is labelled with the file's own version before, by its number (the
			// numbers of the log, the page and restore): none for a file the history saw
			// created here, or that predates it.
			// The labels name the files as the model and people see them; the contents
			// are shown as they are.
			a = side{fmt.Sprintf("%s (before @%d)", h.Shown(from), v.Seq), vs[first].Before(from), v.Seq - 1, from}
			for j := first - 1; j >= 0; j-- {
				if vs[j].Touches(from) {
					a.label, a.seq = fmt.Sprintf("%s@%d", h.Shown(from), vs[j].Seq), vs[j].Seq
					break
				}
			}
			b = side{fmt.Sprintf("%s@%d", h.Shown(to), v.Seq), v.After(to), v.Seq, to}
		}
		var texts [2]string
		for i, s := range []*side{&a, &b} {
			if !s.st.Exists {
				continue // an absent file diffs as empty
			}
			if s.st.Redacted {
				s.label += " (redacted)" // its content is gone: shown as nothing
				continue
			}
			data, err := content(tx, s.st, s.path, s.seq)
			if err != nil {
				return err
			}
			texts[i] = string(data)
		}
		out = udiff.Unified(a.label, b.label, texts[0], texts[1])
		if out == "" && a.path != b.path {
			out = fmt.Sprintf("--- %s\n+++ %s\n", a.label, b.label) // a rename: same content
		}
		return nil
	})
	return out, err
}

// stateAt is vfs.StateAt for the file at p after version seq, refused where pruning
// (up to version pruned) dropped what it would need; known is false when no version
// touched p.
func stateAt(vs []vfs.Version, pruned uint64, p string, seq uint64) (st vfs.FileState, known bool, err error) {
	st, known = vfs.StateAt(vs, p, seq, pruned)
	if !known && pruned > 0 && (seq <= pruned || slices.ContainsFunc(vs, func(v vfs.Version) bool { return v.Touches(p) })) {
		return st, false, prunedAway(pruned)
	}
	return st, known, nil
}

// prunedAway refuses to tell a state that versions pruned up to version pruned may have
// changed.
func prunedAway(pruned uint64) error {
	return refuse("the history was pruned up to version %d by its limits (-history-max-age, -history-max-bytes, -history-max-versions) and no longer knows that state: choose a later version", pruned)
}

// Redact purges the content that version seq gave the file at path from the history: the
// version stays, marked redacted (by the actor of ctx, now), and so does every version that
// had the same content. It refuses while a file still holds that content: change or
// delete the file first. It returns how many versions it marked.
func (h *Memory) Redact(ctx context.Context, path string, seq uint64) (int, error) {
	if m := h.mountOf(path); m != nil {
		n, err := m.Redact(ctx, path, seq)
		return n, m.shownErr(err)
	}
	if h.readOnly {
		return 0, refuse("the memory store is read-only: nothing can be redacted")
	}
	p, err := h.resolveArg(path)
	if err != nil {
		return 0, err
	}
	n := 0
	_, err = h.store.Apply(ctx, "redact", func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		if err != nil {
			return noHistory(err)
		}
		p := tx.Canonical(p) // as the history spells it
		i := slices.IndexFunc(vs, func(v vfs.Version) bool { return v.Seq == seq && v.Touches(p.String()) })
		if i < 0 {
			return refuse("version %d did not change %s (see memory-mcp log %s)", seq, p, p)
		}
		v := vs[i]
		st := v.After(p.String())
		if v.Kind == vfs.Moved && v.Path == p.String() {
			st = v.After(v.NewPath)
		}
		switch {
		case !st.Exists:
			return refuse("version %d deleted %s: it has no content; redact the version that wrote the content", seq, p)
		case st.Redacted:
			return refuse("version %d of %s is redacted already", seq, p)
		}
		// The files that, as far as the history knows, hold the content now.
		holders := map[string]bool{}
		for _, v := range vs {
			for _, q := range []string{v.Path, v.NewPath} {
				if q != "" && v.Touches(q) {
					holders[q] = v.After(q).Exists && v.After(q).SHA256 == st.SHA256
				}
			}
		}
		for _, q := range slices.Sorted(maps.Keys(holders)) { // the first by name, every time
			if !holders[q] {
				continue
			}
			vq, err := vfs.Resolve(q)
			if err != nil {
				continue // not a path any file can be at
			}
			data, err := tx.ReadFile(vq)
			if err == nil && vfs.DigestOf(data) == st.SHA256 {
				return refuse("%s still holds this content: change or delete it first, then redact", q)
			}
		}
		n, err = tx.Redact(st.SHA256)
		return err
	})
	return n, err
}

// fileAncestor returns the virtual path of the ancestor of p that is a file, or "".
func fileAncestor(tx *vfs.Tx, p vfs.Path) (string, error) {
	for q := p.Parent(); !q.IsRoot(); q = q.Parent() {
		e, err := tx.Stat(q)
		if vfs.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		if !e.IsDir() && !e.IsLink() {
			return q.String(), nil
		}
		return "", nil // the nearest existing ancestor is a directory
	}
	return "", nil
}

// history runs fn with the versions, oldest first, in a read transaction.
func (h *Memory) history(ctx context.Context, fn func(tx *vfs.Tx, vs []vfs.Version) error) error {
	return h.store.View(ctx, func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		if err != nil {
			return noHistory(err)
		}
		return fn(tx, vs)
	})
}

func noHistory(err error) error {
	if errors.Is(err, vfs.ErrNoHistory) {
		return refuse("this memory store keeps no history (it was opened with -history=false)")
	}
	return err
}

// checkSeq refuses a version number the history does not have.
func checkSeq(vs []vfs.Version, seq uint64) error {
	last := uint64(0)
	if len(vs) > 0 {
		last = vs[len(vs)-1].Seq
	}
	if seq == 0 || seq > last {
		if last == 0 {
			return refuse("there is no version %d: the history is empty", seq)
		}
		return refuse("there is no version %d: the versions go up to %d", seq, last)
	}
	return nil
}

// resolveArg validates a virtual path given by a person.
func resolveArg(path string) (vfs.Path, error) {
	p, err := vfs.Resolve(path)
	if err != nil {
		if !strings.HasPrefix(path, vfs.Root) {
			return p, refuse("%q is not a memory path: paths start with %s", path, vfs.Root)
		}
		return p, refuse("%q is not a valid memory path", path)
	}
	return p, nil
}

// ImportLimits holds an import to what these handlers hold the model to: the per-file and
// store limits, and the secret guard when it is on (for files and the history's contents
// alike, which a restore would bring back).
func (h *Memory) ImportLimits() vfs.ImportLimits {
	lim := vfs.ImportLimits{MaxFileBytes: h.limits.MaxFileBytes, MaxStoreBytes: h.limits.MaxStoreBytes}
	if h.rejectSecrets {
		lim.Check = func(path string, data []byte) error {
			if kind, line, found := findSecret(data, 0, len(data)); found {
				return fmt.Errorf("%s holds what looks like %s on line %d; memory files must not store credentials (import with -secrets off to take it anyway)", path, article(kind), line)
			}
			if kind, _, found := findSecret([]byte(path), 0, len(path)); found {
				return fmt.Errorf("the path %s holds what looks like %s (import with -secrets off to take it anyway)", path, article(kind))
			}
			return nil
		}
	}
	return lim
}

// article puts "a" or "an" before a noun phrase.
func article(s string) string {
	if s != "" && strings.ContainsRune("AEIOUaeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
