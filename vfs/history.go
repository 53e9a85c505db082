package vfs

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The store's history: every change a transaction makes to a file is a Version, written in
// the same transaction as the change (see History), so that the files and their history
// always agree, after a crash too. Versions of one transaction share its sequence number,
// which is store-wide and grows with every transaction that changes a file. Contents are
// kept once per distinct content, by digest.

// Version is what one change did to one file.
type Version struct {
	Seq     uint64     `json:"seq"`              // the transaction's number, store-wide, from 1
	Time    time.Time  `json:"time"`             // when the transaction wrote it
	Actor   string     `json:"actor"`            // see WithActor
	Command string     `json:"command"`          // the command that made the change
	Client  *Client    `json:"client,omitempty"` // the MCP client it came through (see WithClient)
	Kind    ChangeKind `json:"kind"`             // Created, Modified, Deleted or Moved
	// Path is the file's virtual path; for a move, where it was before.
	Path string `json:"path"`
	// NewPath is, for a move, where the file went.
	NewPath string `json:"new_path,omitempty"`
	// Size and SHA256 describe the content after the change (none after a delete).
	Size   int64  `json:"size"`
	SHA256 Digest `json:"sha256,omitzero"`
	// PrevSize and Prev describe the content just before the change (none before a
	// create): usually the previous version's, but a file edited outside memory-mcp, or
	// one that predates the history, has its content kept here so that it can be restored.
	PrevSize int64  `json:"prev_size,omitempty"`
	Prev     Digest `json:"prev_sha256,omitzero"`
	// Redacted is set when the content after the change was purged (see Tx.Redact); the
	// digest is then cleared too. PrevRedacted says the same of the content before.
	Redacted     *Redaction `json:"redacted,omitempty"`
	PrevRedacted bool       `json:"prev_redacted,omitempty"`
	// Interrupted is set when the change this version is part of was cut short (the
	// process killed, or a failure half-way): the files show this version, not the rest of
	// the change.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Redaction records who purged a version's content, and when.
type Redaction struct {
	By   string    `json:"by"`
	Time time.Time `json:"time"`
}

// content is a content a version names: its digest and size.
type content struct {
	sum  Digest
	size int64
}

// contents returns the contents after and before the version (zero digests where none).
func (v *Version) contents() [2]content {
	return [2]content{{v.SHA256, v.Size}, {v.Prev, v.PrevSize}}
}

// Touches reports whether the version changed the file at path p (its old or new path).
func (v *Version) Touches(p string) bool { return v.Path == p || v.NewPath == p }

// Under reports whether the version changed a file at or below the virtual path dir.
func (v *Version) Under(dir string) bool {
	return under(v.Path, dir) || (v.NewPath != "" && under(v.NewPath, dir))
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// A FileState is a file's content as history knows it: its digest and size, or absence.
type FileState struct {
	Exists bool
	Size   int64
	SHA256 Digest // zero when the content was redacted
	// Redacted says the content existed but was purged.
	Redacted bool
}

// After returns the state of the file at p right after v (v must touch p).
func (v *Version) After(p string) FileState {
	switch {
	case v.Kind == Deleted, v.Kind == Moved && v.Path == p && v.NewPath != p:
		return FileState{}
	}
	return FileState{Exists: true, Size: v.Size, SHA256: v.SHA256, Redacted: v.Redacted != nil}
}

// Before returns the state of the file at p right before v (v must touch p).
func (v *Version) Before(p string) FileState {
	switch {
	case v.Kind == Created, v.Kind == Moved && v.NewPath == p:
		return FileState{} // create and rename never replace: nothing was there
	}
	return FileState{Exists: true, Size: v.PrevSize, SHA256: v.Prev, Redacted: v.PrevRedacted}
}

// StateAt returns the state of the file at p as it was after transaction seq, from the
// versions (oldest first) of a history that pruning left with versions up to pruned
// (0: none) dropped. The latest version at or before seq that touched p says, unless a
// dropped one may have come after it; else, when none can have been dropped after seq, the
// first later one says what came before it (a file older than the history). known is
// false when no version says: none touches p, or what did was pruned.
func StateAt(vs []Version, p string, seq, pruned uint64) (st FileState, known bool) {
	i := firstAfter(vs, seq)
	last := true // whether vs[j] is the last version that touches p
	for j := len(vs) - 1; j >= 0; j-- {
		if !vs[j].Touches(p) {
			continue
		}
		if j < i {
			// Pruning drops a file's oldest versions first, never its current one.
			if st := vs[j].After(p); vs[j].Seq > pruned || last && st.Exists {
				return st, true
			}
			break
		}
		last = false
	}
	if seq >= pruned {
		for j := i; j < len(vs); j++ {
			if vs[j].Touches(p) {
				return vs[j].Before(p), true
			}
		}
	}
	return FileState{}, false
}

// firstAfter returns the index of the first version after transaction seq.
func firstAfter(vs []Version, seq uint64) int {
	i, _ := slices.BinarySearchFunc(vs, seq+1, func(v Version, s uint64) int { return cmp.Compare(v.Seq, s) })
	return i
}

// ChangedSince returns, for every file at or below dir that a version after seq changed,
// its state as it was after transaction seq (absent when it did not exist then): what a
// restore of dir to seq must make true. Files no later version touched are not listed: they
// are as they were.
func ChangedSince(vs []Version, dir string, seq uint64) map[string]FileState {
	out := map[string]FileState{}
	for _, v := range vs[firstAfter(vs, seq):] {
		for _, p := range []string{v.Path, v.NewPath} {
			if p == "" || !under(p, dir) {
				continue
			}
			if _, seen := out[p]; !seen {
				out[p] = v.Before(p)
			}
		}
	}
	return out
}

// SeqAt returns the number of the last transaction at or before t (0 if none).
func SeqAt(vs []Version, t time.Time) uint64 {
	var seq uint64
	for _, v := range vs {
		if v.Time.After(t) {
			break
		}
		seq = v.Seq
	}
	return seq
}

// HistoryConfig says how much history a store keeps. Pruning removes the oldest versions
// first, and never a file's current version (the one whose content the file holds).
type HistoryConfig struct {
	Off bool // keep no history
	// MaxAge prunes versions older than this (0: no limit by age).
	MaxAge time.Duration
	// MaxVersions keeps at most this many versions per file path (0: no limit).
	MaxVersions int
	// MaxBytes bounds the bytes of the contents history keeps (0: no limit); it is the
	// history's own budget, apart from the store's size limit.
	MaxBytes int64
	// Now is the clock of the versions' times and of pruning (default time.Now).
	Now func() time.Time
}

// Pruning runs in passes, since a pass reads every version: at a process's first change, at
// least every PruneInterval while the store changes, and in between every PruneEvery
// versions when something may be over a limit (every PruneEvery/100 while the contents are
// over budget).
const (
	PruneEvery    = 1000
	PruneInterval = time.Hour
)

// PruneDue reports whether a pruning pass is due after a change, by the rule above: last is
// when this process's last pass ran (zero: none yet), since the versions recorded after it,
// bytes and oldest the history's contents and its oldest version's time now (needed only
// once since is PruneEvery/100 or more).
func (c HistoryConfig) PruneDue(last time.Time, since int, bytes int64, oldest time.Time) bool {
	now := c.Clock()
	overBudget := c.MaxBytes > 0 && bytes > c.MaxBytes
	mayPrune := overBudget || c.MaxVersions > 0 || c.MaxAge > 0 && !oldest.IsZero() && now.Sub(oldest) > c.MaxAge
	return last.IsZero() || now.Sub(last) >= PruneInterval ||
		mayPrune && since >= PruneEvery || overBudget && since >= PruneEvery/100
}

// DefaultHistory is the history a store keeps unless told otherwise: half a year, and at
// most 256 MiB of contents.
var DefaultHistory = HistoryConfig{MaxAge: 180 * 24 * time.Hour, MaxBytes: 256 << 20}

// Clock returns the time now by the config's clock.
func (c HistoryConfig) Clock() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Prune returns the versions (oldest first) that the limits keep, the bytes of the
// distinct contents they name, and the highest number of a version it dropped (0: none),
// which a history keeps as the point before which it no longer knows every change (see
// StateAt). A file's current version is always kept, and with it the content before the
// oldest kept version of each file.
func (c HistoryConfig) Prune(vs []Version, now time.Time) (kept []Version, bytes int64, dropped uint64) {
	// The current version of each existing file: the last version that leaves it existing.
	current := map[string]int{}
	for i := range vs {
		v := &vs[i]
		switch v.Kind {
		case Deleted:
			delete(current, v.Path)
		case Moved:
			delete(current, v.Path)
			current[v.NewPath] = i
		default:
			current[v.Path] = i
		}
	}
	protected := make([]bool, len(vs))
	for _, i := range current {
		protected[i] = true
	}
	drop := make([]bool, len(vs))
	perPath := map[string]int{}
	for i := len(vs) - 1; i >= 0; i-- {
		v := &vs[i]
		// A move counts for both its paths, and stays while either keeps it: so that the
		// versions kept of any path are its newest (StateAt relies on it).
		over := c.MaxVersions > 0
		for _, p := range []string{v.Path, v.NewPath} {
			if p != "" {
				perPath[p]++
				over = over && perPath[p] > c.MaxVersions
			}
		}
		if !protected[i] && (c.MaxAge > 0 && now.Sub(v.Time) > c.MaxAge || over) {
			drop[i] = true
		}
	}
	// Then, oldest first, whatever takes the contents over the budget.
	refs := map[Digest]int{}
	sizes := map[Digest]int64{}
	ref := func(v *Version, delta int) {
		for _, d := range v.contents() {
			if d.sum.IsZero() {
				continue
			}
			refs[d.sum] += delta
			switch {
			case refs[d.sum] == 0:
				bytes -= sizes[d.sum]
				delete(refs, d.sum)
			case refs[d.sum] == delta && delta > 0:
				sizes[d.sum] = d.size
				bytes += d.size
			}
		}
	}
	for i := range vs {
		if !drop[i] {
			ref(&vs[i], 1)
		}
	}
	if c.MaxBytes > 0 {
		for i := 0; i < len(vs) && bytes > c.MaxBytes; i++ {
			if !drop[i] && !protected[i] {
				drop[i] = true
				ref(&vs[i], -1)
			}
		}
	}
	for i := range vs {
		if !drop[i] {
			kept = append(kept, vs[i])
		} else {
			dropped = max(dropped, vs[i].Seq)
		}
	}
	return kept, bytes, dropped
}

// History is a storage's record of versions, used inside its transactions (Txn.History).
// A change is announced with Record before the storage makes it, and ended with Settle
// after, so that a crash in between leaves a record the next transaction checks against
// the files: the history never shows a change the files do not have, and a change the files
// have always has its version.
type History interface {
	// Keep stores content under its digest, unless it is stored already, durably.
	Keep(ctx context.Context, d Digest, data []byte) error
	// Record writes, durably, the versions the next operation of the transaction is about
	// to make, filling in their Seq (the transaction's) and Time.
	Record(ctx context.Context, vs []Version) error
	// Settle ends the operation Record announced, as it ended.
	Settle(ctx context.Context, outcome Outcome) error
	// Seq returns the transaction's number once it recorded a version, else 0.
	Seq() uint64

	// Versions returns every version the history holds, oldest first.
	Versions(ctx context.Context) ([]Version, error)
	// Pruned returns the highest number of a version pruning dropped (0: none), durably
	// kept from one pass to the next (the highest of them).
	Pruned(ctx context.Context) (uint64, error)
	// Content returns the content with digest d (ErrNoContent if it is not kept).
	Content(ctx context.Context, d Digest) ([]byte, error)
	// Redact purges the content with digest d, marking every version that named it as
	// redacted by the actor by, at the history's clock's now; it returns how many versions
	// it marked.
	Redact(ctx context.Context, d Digest, by string) (int, error)
	// Import gives a history that has no versions the versions vs (oldest first) as they
	// are: numbers, times and redactions included, and pruned as Pruned returns it. The
	// contents they name are Kept first.
	Import(ctx context.Context, vs []Version, pruned uint64) error
}

// Outcome is how an operation announced to the history ended.
type Outcome int

const (
	// Succeeded: its versions stand.
	Succeeded Outcome = iota
	// Failed: the operation failed and changed nothing (one file's create, write or
	// rename, and a directory's rename, happen whole or not at all).
	Failed
	// Partial: the operation failed and may have changed some files (a directory's
	// delete): the versions whose effect the files show stand.
	Partial
)

// Errors of the history.
var (
	ErrNoHistory = errors.New("vfs: the store keeps no history")
	ErrNoContent = errors.New("vfs: the content is not in the history (pruned or redacted)")
)

// UnmarshalText reads a digest in hexadecimal.
func (d *Digest) UnmarshalText(text []byte) error {
	if len(text) != 2*len(d) {
		return fmt.Errorf("vfs: a digest has %d hexadecimal digits, not %d", 2*len(d), len(text))
	}
	_, err := hex.Decode(d[:], text)
	return err
}
