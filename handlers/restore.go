package handlers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

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
