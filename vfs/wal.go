package vfs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spf13/afero"
)

// The write-ahead log of the os backend: one flush per change.
//
// Without it, a change with history flushes five times: the kept content (file and
// directory), the history log, and the file itself (file and directory). With it, a
// change's versions and the contents they need are appended to walName as one record, and
// that one append is flushed (fdatasync) before anything else is touched; then the history
// log, the kept contents and the files are written as before but not flushed. The
// directory stays plain files that editors and other processes read as always.
//
// What a crash of the process leaves is what the page cache holds, which is everything
// written: the history log's own settle lines check a change cut short, as without the
// log. What a crash of the machine leaves may lack any unflushed write, so the log is kept
// until a checkpoint flushes the whole filesystem (syncfs) and empties it: when the log
// is older than walMaxAge or grows past walMaxBytes, before the history is rewritten (pruning,
// redaction, import: a redacted content must not survive in the log), and when the store
// is closed. The log's first line names the boot it was written in; a process that finds
// records of another boot recovers (recoverWAL): the history regains the versions it
// lost, the kept contents are written again, and every file the records touched is set to
// the state they leave it in, where it still shows a state they passed through (a file
// edited by hand since is left alone). Then it checkpoints.
//
// The log needs to know the machine's boot (Linux: /proc/sys/kernel/random/boot_id) and to
// flush a filesystem at once (syncfs); elsewhere, and on the memory and overlay backends,
// it is off and every change flushes its own files.
const (
	walName     = historyDir + "/wal"
	walFormat   = 1
	walMaxBytes = 64 << 20
	// walMaxAge lets the kernel write the files back by itself first (Linux does within
	// about 30 s), so that the checkpoint's flush finds little left to write and holds the
	// store's lock only briefly.
	walMaxAge = time.Minute
)

// durableFS is a filesystem on which the write-ahead log can run (OSFs on Linux).
type durableFS interface {
	// BootID names this boot of the machine ("" when unknown: no log).
	BootID() string
	// SyncAll flushes everything written to the filesystem.
	SyncAll() error
	// WriteFileUnsynced is WriteFileAtomic without its flushes.
	WriteFileUnsynced(name string, data []byte, noReplace bool) error
}

// walFS returns fsys as a durableFS when the write-ahead log can run on it.
func walFS(fsys FS) (durableFS, bool) {
	d, ok := fsys.(durableFS)
	if !ok || d.BootID() == "" {
		return nil, false
	}
	return d, true
}

// walLine is one line of the write-ahead log.
type walLine struct {
	WAL  int    `json:"wal,omitempty"`  // the header: the format
	Boot string `json:"boot,omitempty"` // and the boot it was written in
	// A record: a group of versions (as in the history log) and the contents they name
	// that were kept for them.
	G uint64       `json:"g,omitempty"`
	V []Version    `json:"v,omitempty"`
	C []walContent `json:"c,omitempty"`
	// An outcome: the group's operation failed (Only empty) or did part of its work
	// (Only lists the versions that stand). A record without one succeeded.
	Settle uint64 `json:"settle,omitempty"`
	Only   []int  `json:"only,omitempty"`
}

type walContent struct {
	D Digest `json:"d"`
	B []byte `json:"b"`
}

// walState is what the storage knows of the write-ahead log.
type walState struct {
	fs      durableFS
	records atomic.Int64 // appended since the last checkpoint, by this process
	since   time.Time    // when this process saw the log start (or first appended to it)
	due     bool
}

// walAppend appends one line to the log and flushes it.
func (ht *historyTx) walAppend(h *fileHistory, line walLine) error {
	header := func() any { return walLine{WAL: walFormat, Boot: h.wal.fs.BootID()} }
	before, written, err := ht.appendJSON(h, walName, syncFile, header, &line)
	if err != nil {
		return err
	}
	h.wal.records.Add(1)
	if before == 0 || h.wal.since.IsZero() {
		h.wal.since = time.Now()
	}
	if before+written > walMaxBytes || time.Since(h.wal.since) >= walMaxAge {
		h.wal.due = true
	}
	return nil
}

// syncFile flushes a file's data.
func syncFile(f afero.File) error {
	if of, ok := f.(osFile); ok {
		return datasync(of.File)
	}
	return f.Sync()
}

// checkpoint makes everything written so far durable and empties the log.
func (ht *historyTx) checkpoint(h *fileHistory) error {
	if err := h.wal.fs.SyncAll(); err != nil {
		return err
	}
	if err := truncate(ht.fs(), walName, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	h.wal.records.Store(0)
	h.wal.due, h.wal.since = false, time.Time{}
	return nil
}

// walScan reads the log: its header's boot, and its records with their outcomes.
type walScan struct {
	boot    string
	records []walLine
	settled map[uint64]walLine
}

func scanWAL(data []byte) walScan {
	s := walScan{settled: map[uint64]walLine{}}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn: never flushed, so never acknowledged
		}
		var l walLine
		if json.Unmarshal(data[:i], &l) == nil {
			switch {
			case l.WAL != 0:
				s.boot = l.Boot
			case l.G != 0:
				s.records = append(s.records, l)
			case l.Settle != 0:
				s.settled[l.Settle] = l
			}
		}
		data = data[i+1:]
	}
	return s
}

// stands returns the versions of record r that stand, given its outcome.
func (s *walScan) stands(r walLine) []Version {
	o, ok := s.settled[r.G]
	if !ok {
		return r.V
	}
	var vs []Version
	for _, i := range o.Only {
		if i >= 0 && i < len(r.V) {
			vs = append(vs, r.V[i])
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
	return s.boot != d.BootID()
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
	if len(w.records) == 0 {
		return ht.checkpoint(h) // nothing to redo, but the log must say this boot's
	}
	fsys := ht.fs()

	// The kept contents, written again where missing.
	contents := map[Digest][]byte{}
	for _, r := range w.records {
		for _, c := range r.C {
			contents[c.D] = c.B
			if old, err := readAll(fsys, objectName(c.D)); err == nil && DigestOf(old) == c.D {
				continue
			}
			if err := ht.makeDirs(h); err != nil {
				return err
			}
			if err := h.wal.fs.WriteFileUnsynced(objectName(c.D), c.B, false); err != nil {
				return err
			}
		}
	}

	// The history: the log's versions, and the records' that it lost, by number.
	logData, err := readAll(fsys, historyLogName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	ls := logScan{groups: map[uint64]bool{}}
	ls.scan(logData, 0, false)
	vs := ls.versions
	missing := len(ls.pending) > 0
	inWAL := map[uint64]bool{}
	for _, r := range w.records {
		inWAL[r.G] = true
		if !ls.groups[r.G] {
			missing = true
			vs = append(vs, w.stands(r)...)
		}
	}
	if len(ls.pending) > 0 && !inWAL[ls.pendingG] {
		// A group the log has not settled and the records do not know: as without the
		// log, the files tell.
		for _, i := range ht.shown(ls.pending) {
			vs = append(vs, ls.pending[i])
		}
	}
	if missing {
		slices.SortStableFunc(vs, func(a, b Version) int { return cmp.Compare(a.Seq, b.Seq) })
		if err := ht.rewriteLog(h, vs); err != nil {
			return err
		}
	}

	// The files: each path the records touched, in order, passes through states (absent,
	// or a content); a file that shows one of them, but not the last, is set to the last.
	type state struct {
		exists bool
		sum    Digest
	}
	paths := map[string][]state{}
	var order []string
	step := func(p string, before, after state) {
		if _, ok := paths[p]; !ok {
			paths[p] = []state{before}
			order = append(order, p)
		}
		paths[p] = append(paths[p], after)
	}
	for _, r := range w.records {
		for _, v := range w.stands(r) {
			switch v.Kind {
			case Created:
				step(v.Path, state{}, state{true, v.SHA256})
			case Modified:
				step(v.Path, state{true, v.Prev}, state{true, v.SHA256})
			case Deleted:
				step(v.Path, state{true, v.Prev}, state{})
			case Moved:
				step(v.Path, state{true, v.Prev}, state{})
				step(v.NewPath, state{}, state{true, v.SHA256})
			}
		}
	}
	for _, p := range order {
		states := paths[p]
		name := Path{clean: p}.Name()
		var now state
		if data, err := readAll(fsys, name); err == nil {
			now = state{true, DigestOf(data)}
		} else if !errors.Is(err, fs.ErrNotExist) {
			continue // not a file (a directory made since, say): left alone
		}
		last := states[len(states)-1]
		if now == last || !slices.Contains(states, now) {
			continue
		}
		if !last.exists {
			fsys.Remove(name)
			continue
		}
		content, ok := contents[last.sum]
		if !ok {
			c, err := readAll(fsys, objectName(last.sum))
			if err != nil || DigestOf(c) != last.sum {
				continue // nothing to set it to
			}
			content = c
		}
		if err := fsys.MkdirAll(Path{clean: p}.Parent().Name(), 0o700); err != nil {
			return err
		}
		if err := h.wal.fs.WriteFileUnsynced(name, content, false); err != nil {
			return err
		}
	}
	return ht.checkpoint(h)
}
