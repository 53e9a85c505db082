package vfs

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"slices"
	"strings"
)

// Tx is one transaction of a Store, as the commands use it: the storage's transaction, bound
// to the call's context, recording what it changes for the feed. Its methods take
// validated virtual paths.
type Tx struct {
	t       Txn
	ctx     context.Context
	write   bool
	digests bool // compute the changes' digests (someone subscribes)
	changes []Change
	first   [1]Change // most transactions change one file: no allocation for it
	batch   Batch

	hist           History // nil when the store keeps no history
	actor, command string  // who and what makes the changes, for their versions

	// The file this transaction read last, whose digest a change of it needs (str_replace
	// and insert read the file they then write).
	readPath string
	readData []byte

	spelling map[string]string // where the storage ignores case: a path in lower case → its spelling (see Versions)
}

// Stat describes the entry at p without following a final symbolic link. A symbolic link
// anywhere on the way that leads outside the storage gives ErrEscape; so does a final link
// that points outside. A path that runs through a file reports IsNotExist.
func (tx *Tx) Stat(p Path) (Entry, error) { return tx.t.Stat(tx.ctx, tx.Canonical(p)) }

// ReadFile returns the content of the file at p.
func (tx *Tx) ReadFile(p Path) ([]byte, error) {
	p = tx.Canonical(p)
	data, err := tx.t.ReadFile(tx.ctx, p)
	if err == nil && tx.write {
		tx.readPath, tx.readData = p.clean, data
	}
	return data, err
}

// Open returns a reader of the regular file at p, valid until the transaction ends: the
// file read in pieces where the storage can (a file on disk may be larger than anything
// the server should hold), else its content read whole.
func (tx *Tx) Open(p Path) (io.ReadCloser, error) {
	p = tx.Canonical(p)
	if o, ok := tx.t.(interface {
		OpenFile(context.Context, Path) (io.ReadCloser, error)
	}); ok {
		return o.OpenFile(tx.ctx, p)
	}
	data, err := tx.t.ReadFile(tx.ctx, p)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// List returns the entries of the directory at p, sorted by name in byte order, without
// the server's bookkeeping files, described without following links.
func (tx *Tx) List(p Path) ([]Entry, error) { return tx.t.List(tx.ctx, tx.Canonical(p)) }

// Tree describes the directory at p and everything below it: its entries down to depth
// levels (1: the children only), and the total size of every directory at any depth. An
// entry for which skip reports true is neither listed nor counted, nor descended into;
// symbolic links and special files never are. It gives up when the call's context is done.
func (tx *Tx) Tree(p Path, depth int, skip func(name string) bool) (Node, error) {
	return tx.t.Tree(tx.ctx, tx.Canonical(p), depth, skip)
}

// Usage returns the bytes of all files at virtual paths (hidden files included, the
// server's bookkeeping not).
func (tx *Tx) Usage() (int64, error) { return tx.t.Usage(tx.ctx) }

// WriteFile replaces the content of the existing file at p, atomically: a crash leaves the
// old or the new content, never a mix.
func (tx *Tx) WriteFile(p Path, data []byte) error {
	p = tx.Canonical(p)
	before, err := tx.state(p)
	if err != nil {
		return err
	}
	c := Change{Kind: Modified, Path: p.clean, SizeBefore: before.size, SHA256Before: before.sum, SizeAfter: int64(len(data))}
	if tx.digests {
		c.SHA256After = DigestOf(data)
	}
	if tx.hist != nil {
		if err := tx.hist.Keep(tx.ctx, c.SHA256After, data); err != nil {
			return err
		}
		v := Version{Kind: Modified, Path: p.clean, Size: c.SizeAfter, SHA256: c.SHA256After, PrevSize: before.size, Prev: before.sum}
		if err := tx.record(v); err != nil {
			return err
		}
	}
	if err := tx.settle(tx.t.WriteFile(tx.ctx, p, data)); err != nil {
		return err
	}
	tx.readPath, tx.readData = "", nil
	tx.changes = append(tx.changes, c)
	return nil
}

// CreateFile creates a new file at p with data as its content, creating missing parent
// directories; it fails with fs.ErrExist if p exists, and never replaces anything.
func (tx *Tx) CreateFile(p Path, data []byte) error {
	p = tx.Canonical(p)
	c := Change{Kind: Created, Path: p.clean, SizeAfter: int64(len(data))}
	if tx.digests {
		c.SHA256After = DigestOf(data)
	}
	if tx.hist != nil {
		if err := tx.taken("create", p); err != nil {
			return err
		}
		if err := tx.hist.Keep(tx.ctx, c.SHA256After, data); err != nil {
			return err
		}
		if err := tx.record(Version{Kind: Created, Path: p.clean, Size: c.SizeAfter, SHA256: c.SHA256After}); err != nil {
			return err
		}
	}
	if err := tx.settle(tx.t.CreateFile(tx.ctx, p, data)); err != nil {
		return err
	}
	tx.changes = append(tx.changes, c)
	return nil
}

// taken fails with fs.ErrExist when p exists: a create or a move there fails anyway, but
// once the history was told of it, only the files could tell it failed, and they cannot
// when they show what it would have made.
func (tx *Tx) taken(op string, p Path) error {
	if _, err := tx.t.Stat(tx.ctx, p); err == nil {
		return &fs.PathError{Op: op, Path: p.clean, Err: fs.ErrExist}
	}
	return nil
}

// record announces to the history the versions the next operation makes.
func (tx *Tx) record(vs ...Version) error {
	for i := range vs {
		vs[i].Actor, vs[i].Command, vs[i].Client = tx.actor, tx.command, ClientOf(tx.ctx)
	}
	return tx.hist.Record(tx.ctx, vs)
}

// settle tells the history how the operation it was told of ended, and returns the
// operation's error. (A failure to write that down is no failure of the operation: the next
// transaction checks an unsettled operation against the files.)
func (tx *Tx) settle(opErr error) error {
	return tx.settleAs(opErr, Failed)
}

// settleAs is settle for an operation that ends as failure when it fails.
func (tx *Tx) settleAs(opErr error, failure Outcome) error {
	if tx.hist != nil {
		outcome := Succeeded
		if opErr != nil {
			outcome = failure
		}
		tx.hist.Settle(tx.ctx, outcome)
	}
	return opErr
}

// version returns the transaction's version number in the history (0 if none).
func (tx *Tx) version() uint64 {
	if tx.hist == nil {
		return 0
	}
	return tx.hist.Seq()
}

// RemoveAll deletes the file or directory at p with everything below it.
func (tx *Tx) RemoveAll(p Path) error {
	p = tx.Canonical(p)
	files, err := tx.files(p)
	if err != nil {
		return err
	}
	if tx.hist != nil && len(files) > 0 {
		vs := make([]Version, len(files))
		for i, f := range files {
			vs[i] = Version{Kind: Deleted, Path: f.path, PrevSize: f.size, Prev: f.sum}
		}
		if err := tx.record(vs...); err != nil {
			return err
		}
	}
	if err := tx.settleAs(tx.t.RemoveAll(tx.ctx, p), Partial); err != nil {
		return err
	}
	for _, f := range files {
		tx.changes = append(tx.changes, Change{Kind: Deleted, Path: f.path, SizeBefore: f.size, SHA256Before: f.sum})
	}
	return nil
}

// Rename moves oldp to newp, creating missing parents of newp. It fails with fs.ErrExist if
// newp exists; the check and the move are one step, so a concurrent create is never
// overwritten.
func (tx *Tx) Rename(oldp, newp Path) error {
	oldp, newp = tx.Canonical(oldp), tx.Canonical(newp)
	files, err := tx.files(oldp)
	if err != nil {
		return err
	}
	// A directory moved deeper must not take a file past the length a path may have: it
	// could no longer be named, nor imported again.
	for _, f := range files {
		if to := newp.clean + f.path[len(oldp.clean):]; len(to) > MaxPathBytes {
			return &PathError{Path: to, Kind: TooLong}
		}
	}
	if tx.hist != nil && len(files) > 0 {
		if oldp != newp {
			if err := tx.taken("rename", newp); err != nil {
				return err
			}
		}
		vs := make([]Version, len(files))
		for i, f := range files {
			vs[i] = Version{Kind: Moved, Path: f.path, NewPath: newp.clean + f.path[len(oldp.clean):],
				Size: f.size, SHA256: f.sum, PrevSize: f.size, Prev: f.sum}
		}
		if err := tx.record(vs...); err != nil {
			return err
		}
	}
	if err := tx.settle(tx.t.Rename(tx.ctx, oldp, newp)); err != nil {
		return err
	}
	for _, f := range files {
		to := newp.clean + f.path[len(oldp.clean):]
		tx.changes = append(tx.changes, Change{
			Kind: Moved, From: f.path, Path: to,
			SizeBefore: f.size, SHA256Before: f.sum, SizeAfter: f.size, SHA256After: f.sum,
		})
	}
	return nil
}

type fileState struct {
	path string
	size int64
	sum  Digest // zero unless tx.digests
}

// state describes the file at p as it is before a change of it: its size, and its digest
// when the transaction computes digests (reading the file unless it was just read).
func (tx *Tx) state(p Path) (fileState, error) {
	f := fileState{path: p.clean}
	switch {
	case tx.readPath == p.clean:
		f.size = int64(len(tx.readData))
		if tx.digests {
			f.sum = DigestOf(tx.readData)
		}
		if tx.hist != nil {
			// The content before the change must be restorable: usually the history
			// has it already (as the previous version's), else it is kept now.
			return f, tx.hist.Keep(tx.ctx, f.sum, tx.readData)
		}
	case tx.digests:
		data, err := tx.t.ReadFile(tx.ctx, p)
		if err != nil {
			return f, err
		}
		f.size, f.sum = int64(len(data)), DigestOf(data)
		if tx.hist != nil {
			return f, tx.hist.Keep(tx.ctx, f.sum, data)
		}
	default:
		e, err := tx.t.Stat(tx.ctx, p)
		if err != nil {
			return f, err
		}
		f.size = e.Size
	}
	return f, nil
}

// files describes the regular file at p, or every regular file below the directory at p,
// as a delete or rename of p is about to change them. A name below p that no path may
// hold fails with its *PathError.
func (tx *Tx) files(p Path) ([]fileState, error) {
	e, err := tx.t.Stat(tx.ctx, p)
	if err != nil {
		return nil, err
	}
	var out []fileState
	add := func(q Path, size int64) error {
		if !tx.digests {
			out = append(out, fileState{path: q.clean, size: size})
			return nil
		}
		f, err := tx.state(q)
		out = append(out, f)
		return err
	}
	switch e.Kind {
	case KindFile:
		return out, add(p, e.Size)
	case KindDir:
		tree, err := tx.t.Tree(tx.ctx, p, maxDepth, func(string) bool { return false })
		if err != nil {
			return nil, err
		}
		var walk func(dir Path, nodes []Node) error
		walk = func(dir Path, nodes []Node) error {
			for _, n := range nodes {
				q := dir.Join(n.Name)
				// A name made outside memory-mcp that no path may hold: its change could
				// be neither recorded, nor undone, nor exported, so none is made.
				if _, err := Resolve(q.clean); err != nil {
					return err
				}
				if n.Dir {
					if err := walk(q, n.Children); err != nil {
						return err
					}
				} else if err := add(q, n.Size); err != nil {
					return err
				}
			}
			return nil
		}
		return out, walk(p, tree.Children)
	}
	return nil, nil // a link or special file: removing it changes no file
}

// Versions returns every version in the store's history, oldest first (ErrNoHistory when
// the store keeps none).
func (tx *Tx) Versions() ([]Version, error) {
	if tx.hist == nil {
		return nil, ErrNoHistory
	}
	vs, err := tx.hist.Versions(tx.ctx)
	if err != nil || !tx.foldsCase() {
		return vs, err
	}
	// Where the storage ignores case, the history may spell one name in several cases (a
	// file deleted and made again in another case, or recorded by a release that kept the
	// model's spelling). Each name gets one spelling, for this and the transaction's paths:
	// as the storage spells it now, else as the newest version does.
	if tx.spelling == nil {
		tx.spelling = map[string]string{}
	}
	vs = slices.Clone(vs)
	for i := len(vs) - 1; i >= 0; i-- {
		vs[i].Path, vs[i].NewPath = tx.respell(vs[i].Path), tx.respell(vs[i].NewPath)
	}
	return vs, nil
}

// respell spells the virtual path p as tx.spelling does, giving the names it does not
// know yet the storage's spelling, else p's.
func (tx *Tx) respell(p string) string {
	if p == "" {
		return p
	}
	if s, ok := tx.spelling[strings.ToLower(p)]; ok {
		return s
	}
	if vp, err := Resolve(p); err == nil && vp.String() == p {
		p = tx.t.(caseFolder).Canonical(tx.ctx, vp).String()
	}
	out := ""
	for e := range strings.SplitSeq(strings.TrimPrefix(p, "/"), "/") {
		key := strings.ToLower(out + "/" + e)
		s, ok := tx.spelling[key]
		if !ok {
			s = out + "/" + e
			tx.spelling[key] = s
		}
		out = s
	}
	return out
}

// Pruned returns the highest number of a version that pruning dropped from the history (0:
// none): what the history says of earlier versions may be incomplete (see StateAt).
func (tx *Tx) Pruned() (uint64, error) {
	if tx.hist == nil {
		return 0, ErrNoHistory
	}
	return tx.hist.Pruned(tx.ctx)
}

// Content returns a content the history keeps, by digest (ErrNoContent when it was pruned or
// redacted).
func (tx *Tx) Content(d Digest) ([]byte, error) {
	if tx.hist == nil {
		return nil, ErrNoHistory
	}
	return tx.hist.Content(tx.ctx, d)
}

// Redact purges a content from the history, marking the versions that named it as redacted
// by the transaction's actor; it returns how many versions it marked.
func (tx *Tx) Redact(d Digest) (int, error) {
	if tx.hist == nil {
		return 0, ErrNoHistory
	}
	return tx.hist.Redact(tx.ctx, d, tx.actor)
}

// RemoveDir deletes the directory at p if it is empty.
func (tx *Tx) RemoveDir(p Path) error { return tx.t.RemoveDir(tx.ctx, tx.Canonical(p)) }

// Canonical spells p as a storage that ignores case spells it (see caseFolder), so that one
// file has one name in the history, the feed and the access record.
func (tx *Tx) Canonical(p Path) Path {
	if !tx.foldsCase() {
		return p
	}
	p = tx.t.(caseFolder).Canonical(tx.ctx, p)
	if tx.spelling != nil { // as the history read in this transaction spells it
		if q, err := Resolve(tx.respell(p.String())); err == nil {
			p = q
		}
	}
	return p
}

func (tx *Tx) foldsCase() bool {
	c, ok := tx.t.(caseFolder)
	return ok && c.FoldsCase()
}
