package files

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"path"
	"slices"

	"github.com/spf13/afero"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// walScan reads the log: its header's boot, and its records with their outcomes.
type walScan struct {
	boot    string
	cycle   string
	format  int
	from    uint64
	records []walLine
	outcome []*walLine // each record's outcome line; nil: it succeeded
}

func scanWAL(data []byte) walScan {
	var s walScan
	for len(data) > 0 && data[0] != 0 { // zeros: past the records
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn: never flushed, so never acknowledged
		}
		var l walLine
		if json.Unmarshal(data[:i], &l) == nil {
			switch {
			case l.WAL != 0:
				s.boot, s.format, s.from, s.cycle = l.Boot, l.WAL, l.From, l.Cycle
			case l.G != 0:
				s.records, s.outcome = append(s.records, l), append(s.outcome, nil)
			case l.Settle != 0:
				// The outcome of the group's last record: a number is taken again by the
				// next change after one refused before the history's log knew of it.
				for j := len(s.records) - 1; j >= 0; j-- {
					if s.records[j].G == l.Settle {
						s.outcome[j] = &l
						break
					}
				}
			}
		}
		data = data[i+1:]
	}
	return s
}

// stands returns the versions of record i that stand, given its outcome.
func (s *walScan) stands(i int) []vfs.Version {
	o := s.outcome[i]
	if o == nil {
		return s.records[i].V
	}
	var vs []vfs.Version
	for _, j := range o.Only {
		if j >= 0 && j < len(s.records[i].V) {
			vs = append(vs, s.records[i].V[j])
		}
	}
	return vs
}

// walNeedsRecovery reports whether the log holds records of another boot.
func walNeedsRecovery(fsys FS, d durableFS) bool {
	head, _, err := readHeadAndTail(fsys, walName, 4096, -1)
	if err != nil || len(head) == 0 {
		return false
	}
	s := scanWAL(head)
	return s.format != 0 && s.boot != d.BootID()
}

// recoverWAL brings the history, the kept contents and the files to what the log's records
// of another boot say (see the top of this file), then checkpoints. It runs under the
// exclusive lock, before the history is loaded.
func (ht *historyTx) recoverWAL(h *fileHistory) error {
	data, err := readAll(ht.fs(), walName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	w := scanWAL(data)
	if w.boot == h.wal.fs.BootID() {
		return nil
	}
	contents, err := ht.recoverContents(h, &w)
	if err != nil {
		return err
	}
	logData, err := readAll(ht.fs(), historyLogName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	ls := logScan{groups: map[uint64]bool{}}
	ls.scan(logData, 0, false)
	vs, missing := ht.recoverVersions(&w, &ls)
	if err := ht.recoverFiles(h, &w, contents); err != nil {
		return err
	}
	h.pruned = ls.pruned
	// What the records do not account for: the files of changes never acknowledged, and
	// edits by hand.
	recovered, err := ht.reconcile(h, vs)
	if err != nil {
		return err
	}
	if missing || len(recovered) > 0 {
		if err := ht.rewriteLog(h, append(vs, recovered...)); err != nil {
			return err
		}
	}
	return ht.checkpointLog(h, true)
}

// recoverContents writes again the contents the records kept that the disk lost, and
// returns them all.
func (ht *historyTx) recoverContents(h *fileHistory, w *walScan) (map[vfs.Digest][]byte, error) {
	contents := map[vfs.Digest][]byte{}
	for _, r := range w.records {
		for _, c := range r.C {
			contents[c.D] = c.B
			if old, err := readAll(ht.fs(), objectName(c.D)); err == nil && vfs.DigestOf(old) == c.D {
				continue
			}
			if err := ht.makeDirs(h); err != nil {
				return nil, err
			}
			if err := h.wal.fs.WriteFileUnsynced(objectName(c.D), c.B, false); err != nil {
				return nil, err
			}
		}
	}
	return contents, nil
}

// recoverVersions returns the history as the log ls and the records of w tell it: the
// log's versions, and the records' that it lost, by number; missing reports that the log
// must be written again.
func (ht *historyTx) recoverVersions(w *walScan, ls *logScan) (vs []vfs.Version, missing bool) {
	inWAL := map[uint64]bool{}
	for _, r := range w.records {
		inWAL[r.G] = true
	}
	// A group after the checkpoint that no record names was never acknowledged: its record
	// was lost, and what it wrote may be too. (A log of format 1 does not say where the
	// checkpoint was: everything stays.)
	acked := func(g uint64) bool { return w.format < 2 || g <= w.from || inWAL[g] }
	// A change an operation of which failed, or did part of its work, was cut short: the
	// versions of its operations up to that one say so, as when the history log is read
	// (logScan.interrupted).
	cut := make([]bool, len(w.records))
	for i, r := range w.records {
		if w.outcome[i] == nil || len(r.V) == 0 {
			continue
		}
		for j := i; j >= 0 && len(w.records[j].V) > 0 && w.records[j].V[0].Seq == r.V[0].Seq; j-- {
			cut[j] = true
		}
	}
	cutGroup := map[uint64]bool{} // as its last record says (see scanWAL)
	for i, r := range w.records {
		cutGroup[r.G] = cut[i]
	}
	missing = len(ls.pending) > 0
	for i, v := range ls.versions {
		if acked(ls.vgroups[i]) {
			v.Interrupted = v.Interrupted || cutGroup[ls.vgroups[i]]
			vs = append(vs, v)
		} else {
			missing = true
		}
	}
	for i, r := range w.records {
		if !ls.groups[r.G] {
			missing = true
			for _, v := range w.stands(i) {
				v.Interrupted = cut[i]
				vs = append(vs, v)
			}
		}
	}
	if len(ls.pending) > 0 && !inWAL[ls.pendingG] && acked(ls.pendingG) {
		// A group the log has not settled and the records do not know: as without the
		// log, the files tell.
		for _, i := range ht.shown(ls.pending) {
			vs = append(vs, ls.pending[i])
		}
	}
	slices.SortStableFunc(vs, func(a, b vfs.Version) int { return cmp.Compare(a.Seq, b.Seq) })
	return vs, missing
}

// recoverFiles sets the files the records touched to what they say. Each path passes
// through states (absent, or a contentRef); a file that shows one of them, but not the
// last, is set to the last. So is a file whose content the disk did not keep: the files are
// written without flushes, and a crash before the checkpoint can leave a name whose data
// never reached the disk: empty with delayed allocation, zeros on some filesystems. (An
// absent file is not taken for one: a change that was never acknowledged may have removed
// it.) A file that shows anything else was edited by hand since and is left alone.
func (ht *historyTx) recoverFiles(h *fileHistory, w *walScan, contents map[vfs.Digest][]byte) error {
	fsys := ht.fs()
	paths := map[string][]recoveryState{}
	var order []string
	step := func(p string, before, after recoveryState) {
		if _, ok := paths[p]; !ok {
			paths[p] = []recoveryState{before}
			order = append(order, p)
		}
		paths[p] = append(paths[p], after)
	}
	for i := range w.records {
		for _, v := range w.stands(i) {
			switch v.Kind {
			case vfs.Created:
				step(v.Path, recoveryState{}, recoveryState{true, v.SHA256})
			case vfs.Modified:
				step(v.Path, recoveryState{true, v.Prev}, recoveryState{true, v.SHA256})
			case vfs.Deleted:
				step(v.Path, recoveryState{true, v.Prev}, recoveryState{})
			case vfs.Moved:
				step(v.Path, recoveryState{true, v.Prev}, recoveryState{})
				step(v.NewPath, recoveryState{}, recoveryState{true, v.SHA256})
			}
		}
	}
	// Removals first: a file to be written may need the place of one removed.
	writes := func(p string) int {
		if paths[p][len(paths[p])-1].exists {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(writes(a), writes(b)) })
	for _, p := range order {
		states := paths[p]
		name := nameOf(p)
		var now recoveryState
		lost := false     // empty or zeros
		emptyDir := false // a directory with no file below it: its removal was lost
		if d, err := readAll(fsys, name); err == nil {
			now = recoveryState{true, vfs.DigestOf(d)}
			lost = allZero(d)
		} else if emptyDir = holdsNoFile(fsys, name); !emptyDir && !errors.Is(err, fs.ErrNotExist) {
			continue // not a file (a directory made since, say): left alone
		}
		last := states[len(states)-1]
		if now == last || !slices.Contains(states, now) && !lost {
			continue
		}
		if !last.exists {
			fsys.Remove(name)
			continue
		}
		content, ok := contentOf(fsys, contents, last.sum)
		if !ok {
			continue // nothing to set it to
		}
		if emptyDir {
			if err := fsys.RemoveAll(name); err != nil {
				return err
			}
		}
		if err := fsys.MkdirAll(nameOf(path.Dir(p)), 0o700); err != nil {
			return err
		}
		if err := h.wal.fs.WriteFileUnsynced(name, content, false); err != nil {
			return err
		}
	}
	return nil
}

// contentOf returns the content of digest d: one the log's records carried, or the
// history's kept copy.
func contentOf(fsys FS, carried map[vfs.Digest][]byte, d vfs.Digest) ([]byte, bool) {
	if c, ok := carried[d]; ok {
		return c, true
	}
	c, err := readAll(fsys, objectName(d))
	return c, err == nil && vfs.DigestOf(c) == d
}

// holdsNoFile reports whether name is a directory with nothing but directories below it.
func holdsNoFile(fsys FS, name string) bool {
	fi, err := fsys.Stat(name)
	if err != nil || !fi.IsDir() {
		return false
	}
	err = afero.Walk(fsys, name, func(_ string, fi fs.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			err = fs.ErrExist
		}
		return err
	})
	return err == nil
}

// allZero reports whether b holds nothing but zeros: what a file written but not flushed
// may hold after a crash of the machine.
func allZero(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

// recoveryState is a file's state in recovery: absent, or a content.
type recoveryState struct {
	exists bool
	sum    vfs.Digest
}

// reconcile compares every file with the state the versions vs leave it in and returns,
// for each that differs, a version that records what the file holds (command "recover",
// one number after the last of vs), its content kept. A path whose content was redacted
// is not compared, and a name no path may hold is not recorded.
func (ht *historyTx) reconcile(h *fileHistory, vs []vfs.Version) ([]vfs.Version, error) {
	state := map[string]contentRef{}
	seq := h.pruned // a pruned number is never used again
	for _, v := range vs {
		seq = max(seq, v.Seq)
		switch v.Kind {
		case vfs.Created, vfs.Modified:
			state[v.Path] = contentRef{v.SHA256, v.Size}
		case vfs.Deleted:
			delete(state, v.Path)
		case vfs.Moved:
			delete(state, v.Path)
			state[v.NewPath] = contentRef{v.SHA256, v.Size}
		}
	}
	var names []string
	err := ht.tx.walkFiles(context.Background(), "", false, func(name string, _ int64) { names = append(names, name) })
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	slices.Sort(names)
	now := h.cfg.Clock().UTC()
	version := func(kind vfs.ChangeKind, p string, was contentRef) vfs.Version {
		return vfs.Version{Seq: seq + 1, Time: now, Actor: vfs.ActorLocal, Command: "recover", Kind: kind, Path: p, PrevSize: was.size, Prev: was.sum}
	}
	var out []vfs.Version
	seen := map[string]bool{}
	for _, name := range names {
		p := vfs.Root + "/" + name
		if _, err := vfs.Resolve(p); err != nil {
			// A name made outside memory-mcp that no path may hold: a version of it could
			// be neither undone nor imported, so it is left alone, as every command does.
			continue
		}
		data, err := readAll(ht.fs(), name)
		if err != nil {
			continue // gone or not a regular file since the walk
		}
		seen[p] = true
		was, ok := state[p]
		d := vfs.DigestOf(data)
		if ok && (was.sum == d || was.sum.IsZero()) {
			continue
		}
		if err := ht.makeDirs(h); err != nil {
			return nil, err
		}
		// Flushed now: no record names this content, so the checkpoint would not.
		if err := ht.fs().WriteFileAtomic(objectName(d), data, true); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		v := version(vfs.Modified, p, was)
		if !ok {
			v.Kind = vfs.Created
		}
		v.Size, v.SHA256 = int64(len(data)), d
		out = append(out, v)
	}
	for _, p := range slices.Sorted(maps.Keys(state)) {
		if !seen[p] && !state[p].sum.IsZero() {
			out = append(out, version(vfs.Deleted, p, state[p]))
		}
	}
	return out, nil
}
