package vfs

import (
	"context"
	"errors"
	"path"
	"slices"
	"time"
)

// maxDepth is deeper than any tree a path of MaxPathBytes can name.
const maxDepth = MaxPathBytes

// Expired is a file, or a directory left empty, that Expire deleted (or, in a dry run,
// would delete).
type Expired struct {
	Path string // virtual path
	Size int64  // bytes of the file; 0 for a directory
	Dir  bool
}

// ErrNotTracked is returned by Expire on a store that does not record access.
var ErrNotTracked = errors.New("vfs: Expire needs TrackAccess")

// Expire deletes every file not viewed or changed for longer than maxAge, and the
// directories that become empty with them (never /memories itself). A file the record does
// not know yet (created by hand, or before tracking was turned on) starts its grace period
// now. With dryRun it deletes nothing and reports what it would delete. A read-only store,
// and one that does not track access, is never touched. The deletions reach the change
// feed with actor ActorExpiry.
func (s *Store) Expire(ctx context.Context, maxAge time.Duration, dryRun bool) ([]Expired, error) {
	if s.st.ReadOnly() {
		return nil, ErrReadOnlyStore
	}
	if s.now == nil {
		return nil, ErrNotTracked
	}
	var out []Expired
	ctx = WithActor(ctx, ActorExpiry)
	_, err := s.Apply(ctx, "expire", func(tx *Tx) error {
		out = out[:0]
		rec, err := tx.t.LastAccess(ctx)
		if err != nil {
			return err
		}
		now := s.now().Unix()
		var old []string
		for name, t := range rec {
			if now-t > int64(maxAge/time.Second) {
				old = append(old, name)
			}
		}
		slices.Sort(old)
		gone := map[string]bool{}
		for _, name := range old {
			p := Path{clean: Root + "/" + name}
			e, err := tx.Stat(p)
			if err != nil {
				return err
			}
			out = append(out, Expired{Path: p.clean, Size: e.Size})
			gone[name] = true
			if !dryRun {
				if err := tx.RemoveAll(p); err != nil {
					return err
				}
			}
		}
		// Directories left empty go too, deepest first; a dry run works out which would.
		for _, name := range old {
			for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
				if gone[dir] {
					continue
				}
				p := Path{clean: Root + "/" + dir}
				empty, err := tx.emptyAfter(p, dir, gone)
				if err != nil || !empty {
					break
				}
				if !dryRun && tx.t.RemoveDir(ctx, p) != nil {
					break // something the listing does not show is in it: keep it
				}
				gone[dir] = true
				out = append(out, Expired{Path: p.clean, Dir: true})
			}
		}
		return nil
	})
	return out, err
}

// emptyAfter reports whether directory p (storage name dir) holds nothing once the names
// in gone are gone.
func (tx *Tx) emptyAfter(p Path, dir string, gone map[string]bool) (bool, error) {
	entries, err := tx.List(p)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !gone[path.Join(dir, e.Name)] {
			return false, nil
		}
	}
	return true, nil
}
