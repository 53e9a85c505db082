package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
// out, as from the tree.
func (h *Memory) Log(ctx context.Context, q LogQuery) ([]vfs.Version, error) {
	if m := h.mountOf(q.Path); m != nil {
		vs, err := m.Log(ctx, q)
		return m.shownVersions(vs), m.shownErr(err)
	}
	out, err := h.log(ctx, q)
	if err != nil || !wholeMemory(q.Path) || len(h.mounts) == 0 {
		return out, err
	}
	for _, m := range h.mounts {
		if vs, err := m.Memory.log(ctx, LogQuery{Since: q.Since, Until: q.Until, Actor: q.Actor, N: q.N}); err == nil {
			out = append(out, m.Memory.shownVersions(vs)...)
		}
	}
	slices.SortStableFunc(out, func(a, b vfs.Version) int { return b.Time.Compare(a.Time) })
	if q.N > 0 && len(out) > q.N {
		out = out[:q.N]
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

// Restored says what a restore did.
type Restored struct {
	Version                    uint64 // the restore's own version (0 if nothing differed)
	Created, Modified, Deleted []string
	// Mounts are the restores of the mounts that a restore of the whole memory to a time
	// made too, each a version of its own store, at Top.
	Mounts []Restored `json:",omitempty"`
	Top    string     `json:",omitempty"`
}

// NotRestored is a mount that a restore of the whole memory left as it was, for Err (a
// Refusal or a storage failure), after the rest of the memory was restored.
type NotRestored struct {
	Top string
	Err error
}

func (e *NotRestored) Error() string { return e.Because(e.Err.Error()) }

// Because says what the restore did, with reason for the mount it left.
func (e *NotRestored) Because(reason string) string {
	return "the rest of the memory was restored, but " + e.Top + " was not: " + reason
}

func (e *NotRestored) Unwrap() error { return e.Err }

// Restore makes the file or directory at path as it was after version seq: every file
// below it that a later version changed gets the content it had then, or is deleted if it
// did not exist; files that did not differ are not touched. The restore is itself a new
// version (command "restore"), so it can be undone the same way. It respects the size
// limits: a restore that would break one changes nothing.
func (h *Memory) Restore(ctx context.Context, path string, seq uint64) (Restored, error) {
	return h.restore(ctx, path, func(vs []vfs.Version) (uint64, error) { return seq, checkSeq(vs, seq) })
}

// RestoreAt is Restore to the state at time t: after the last version at or before t. For
// the whole memory, each mount that is not read-only goes back to t too, in a restore of its
// own; one that cannot is a NotRestored of the error, after the others are done.
func (h *Memory) RestoreAt(ctx context.Context, path string, t time.Time) (Restored, error) {
	target := func(vs []vfs.Version) (uint64, error) { return vfs.SeqAt(vs, t), nil }
	res, err := h.restore(ctx, path, target)
	if err != nil || !wholeMemory(path) {
		return res, err
	}
	var errs []error
	for _, m := range h.mounts {
		if m.Memory.readOnly {
			continue
		}
		r, err := h.restore(ctx, m.Memory.top, target)
		if err != nil {
			errs = append(errs, &NotRestored{Top: m.Memory.top, Err: err})
			continue
		}
		r.Top = m.Memory.top
		res.Mounts = append(res.Mounts, r)
	}
	return res, errors.Join(errs...)
}

func (h *Memory) restore(ctx context.Context, path string, target func([]vfs.Version) (uint64, error)) (Restored, error) {
	if m := h.mountOf(path); m != nil {
		res, err := m.restore(ctx, path, target)
		for _, l := range [][]string{res.Created, res.Modified, res.Deleted} {
			for i := range l {
				l[i] = m.Shown(l[i])
			}
		}
		return res, m.shownErr(err)
	}
	var res Restored
	if h.readOnly {
		return res, refuse("the memory store is read-only: nothing can be restored")
	}
	p, err := h.resolveArg(path)
	if err != nil {
		return res, err
	}
	batch, err := h.store.Apply(ctx, "restore", func(tx *vfs.Tx) error {
		res = Restored{}
		vs, err := tx.Versions()
		if err != nil {
			return noHistory(err)
		}
		p := tx.Canonical(p) // as the history spells it
		seq, err := target(vs)
		if err != nil {
			return err
		}
		// Every version after seq must be kept, or the restore would miss a change.
		pruned, err := tx.Pruned()
		if err != nil {
			return err
		}
		if seq < pruned {
			return prunedAway(pruned)
		}
		deletes, writes, err := h.planRestore(tx, p, seq, vfs.ChangedSince(vs, p.String(), seq))
		if err != nil || len(deletes)+len(writes) == 0 {
			return err
		}
		for _, s := range deletes {
			if err := tx.RemoveAll(s.p); err != nil {
				return err
			}
			res.Deleted = append(res.Deleted, s.p.String())
			// Directories the deletes leave empty go too, up to the restored one.
			for d := s.p.Parent(); !d.IsRoot() && (d == p || p.Contains(d)); d = d.Parent() {
				if entries, err := tx.List(d); err != nil || len(entries) > 0 || tx.RemoveDir(d) != nil {
					break
				}
			}
		}
		for _, s := range writes {
			if s.now {
				err = tx.WriteFile(s.p, s.data)
				res.Modified = append(res.Modified, s.p.String())
			} else {
				if s.dir {
					// Only directories are left in it, unless the deletes took them.
					if err := tx.RemoveAll(s.p); err != nil && !vfs.IsNotExist(err) {
						return err
					}
				}
				err = tx.CreateFile(s.p, s.data)
				res.Created = append(res.Created, s.p.String())
			}
			if vfs.IsExist(err) {
				return refuse("%s cannot be restored: something else is in its place now", s.p)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if batch != nil {
		res.Version = batch.Version
	}
	return res, err
}

// restoreStep is one file a restore deletes or writes.
type restoreStep struct {
	p    vfs.Path
	data []byte
	old  int64 // size now (0: absent)
	now  bool  // exists now
	dir  bool  // a directory is in its place now, which the deletes leave holding only directories
}

// emptiedBy reports whether the files below the directory dir are all deleted by a restore
// to want, and nothing else is there but directories.
func emptiedBy(tx *vfs.Tx, dir vfs.Path, want map[string]vfs.FileState) (bool, error) {
	entries, err := tx.List(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		q := dir.Join(e.Name)
		switch w, listed := want[q.String()]; {
		case e.IsDir():
			if ok, err := emptiedBy(tx, q, want); !ok || err != nil {
				return false, err
			}
		case !e.IsRegular() || !listed || w.Exists:
			return false, nil
		}
	}
	return true, nil
}

// planRestore returns what bringing the files of want (below p) back to their states after
// version seq deletes and writes, in path order, or the refusal that keeps it from
// changing anything: a path in the way, or a limit it would break.
func (h *Memory) planRestore(tx *vfs.Tx, p vfs.Path, seq uint64, want map[string]vfs.FileState) (deletes, writes []restoreStep, err error) {
	for _, q := range slices.Sorted(maps.Keys(want)) {
		vp, err := vfs.Resolve(q)
		if err != nil || vp.String() != q {
			// Only a history written by hand or by an older import holds one.
			return nil, nil, refuse("the history names %s, which is not a valid memory path: nothing was restored", strconv.Quote(q))
		}
		w := want[q]
		cur, err := tx.Stat(vp)
		exists := err == nil
		if err != nil && !vfs.IsNotExist(err) {
			return nil, nil, err
		}
		dirInTheWay := false
		if exists && !cur.IsRegular() {
			if !w.Exists && cur.IsDir() {
				continue // a directory now where a file was deleted: its files are listed too
			}
			// A directory now where the file was goes if the restore deletes all its files
			// (the undo of a restore that put it there).
			if cur.IsDir() {
				dirInTheWay, err = emptiedBy(tx, vp, want)
				if err != nil {
					return nil, nil, err
				}
			}
			if !dirInTheWay {
				return nil, nil, refuse("%s is not a regular file now: move it away, then restore", q)
			}
			exists = false
		}
		var data []byte
		if exists {
			if data, err = tx.ReadFile(vp); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case !w.Exists && exists:
			deletes = append(deletes, restoreStep{p: vp, old: int64(len(data)), now: true})
		case w.Exists && exists && !w.Redacted && vfs.DigestOf(data) == w.SHA256:
			// Already as it was: not touched.
		case w.Exists:
			old, err := content(tx, w, q, seq)
			if err != nil {
				return nil, nil, err
			}
			if int64(len(old)) > h.limits.MaxFileBytes && len(old) > len(data) {
				return nil, nil, refuse("%s would be %d bytes, over the limit of %d bytes per memory file", q, len(old), h.limits.MaxFileBytes)
			}
			if !exists {
				// A file where one of its directories must be is in the way, unless the
				// restore deletes it.
				blocker, err := fileAncestor(tx, vp)
				if err != nil {
					return nil, nil, err
				}
				if w, listed := want[blocker]; blocker != "" && !(listed && !w.Exists) {
					return nil, nil, refuse("%s cannot be restored: %s is a file now, where its directory was", q, blocker)
				}
			}
			writes = append(writes, restoreStep{p: vp, data: old, old: int64(len(data)), now: exists, dir: dirInTheWay})
		}
	}
	// Two files the history has at once, one where the other's directory must be: edits by
	// hand it never saw (a directory made where a file had been) leave it so. Nothing is
	// restored, rather than the first of them.
	for _, s := range writes {
		for d := s.p.Parent(); !d.IsRoot(); d = d.Parent() {
			if w := want[d.String()]; w.Exists {
				return nil, nil, refuse("%s cannot be restored: the history has %s as a file after version %d too, where its directory must be (an edit made outside memory-mcp that the history did not see)", s.p, d, seq)
			}
		}
	}
	if len(deletes)+len(writes) == 0 {
		return nil, nil, nil
	}
	usage, err := tx.Usage()
	if err != nil {
		return nil, nil, err
	}
	total := usage
	for _, s := range deletes {
		total -= s.old
	}
	for _, s := range writes {
		total += int64(len(s.data)) - s.old
	}
	if total > h.limits.MaxStoreBytes && total > usage {
		return nil, nil, refuse("the restore would bring the memory store to %d bytes, over its limit of %d bytes", total, h.limits.MaxStoreBytes)
	}
	return deletes, writes, nil
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
