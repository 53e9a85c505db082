package vfs

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// accessName is the store's record of when each file was last viewed or changed, kept in
// the storage root as a bookkeeping file (so no virtual path reaches it). The operating
// system's access times are no use for this: most filesystems are mounted relatime or
// noatime, and copying or backing up a directory resets them.
const accessName = bookkeepingPrefix + "-access"

type accessLog struct {
	mu    sync.Mutex
	now   func() time.Time
	last  map[string]int64 // storage name → Unix seconds of the last view or change
	dirty bool
}

// TrackAccess makes the store remember when each file was last viewed or changed, for
// Expire; now is the clock (time.Now, or a fake one in tests). The record is loaded from
// the storage, so it survives restarts; FlushAccess, Expire and Close write it back.
func (s *Store) TrackAccess(now func() time.Time) error {
	a := &accessLog{now: now, last: map[string]int64{}}
	err := s.View(func(tx *Tx) error { return a.merge(tx.s.fs) })
	if err != nil {
		return err
	}
	s.access = a
	return nil
}

// merge adds the record kept in the storage, keeping the later time for every name.
func (a *accessLog) merge(fsys afero.Fs) error {
	data, err := afero.ReadFile(fsys, accessName)
	if IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var stored map[string]int64
	if err := json.Unmarshal(data, &stored); err != nil {
		return nil // a damaged record is rebuilt: every file starts a new grace period
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, t := range stored {
		if t > a.last[name] {
			a.last[name] = t
		}
	}
	return nil
}

func (a *accessLog) touch(name string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.last[name] = a.now().Unix()
	a.dirty = true
	a.mu.Unlock()
}

// move carries the records of name and everything below it to newName.
func (a *accessLog) move(name, newName string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, t := range a.last {
		if k == name || strings.HasPrefix(k, name+"/") {
			delete(a.last, k)
			a.last[newName+k[len(name):]] = t
		}
	}
	a.dirty = true
}

// forget drops the records of name and everything below it.
func (a *accessLog) forget(name string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.last {
		if k == name || strings.HasPrefix(k, name+"/") {
			delete(a.last, k)
		}
	}
	a.dirty = true
}

// write stores the record; callers hold the exclusive lock and have merged what other
// processes stored since.
func (a *accessLog) write(fsys afero.Fs) error {
	a.mu.Lock()
	data, err := json.Marshal(a.last)
	a.dirty = false
	a.mu.Unlock()
	if err != nil {
		return err
	}
	return writeAtomic(fsys, accessName, data, fsys.Rename)
}

// FlushAccess writes the access record to the storage if it changed since the last write.
func (s *Store) FlushAccess() error {
	if s.access == nil {
		return nil
	}
	s.access.mu.Lock()
	dirty := s.access.dirty
	s.access.mu.Unlock()
	if !dirty {
		return nil
	}
	return s.Update(func(tx *Tx) error {
		if err := s.access.merge(tx.s.fs); err != nil {
			return err
		}
		return s.access.write(tx.s.fs)
	})
}

// Expired is a file, or a directory left empty, that Expire deleted (or, in a dry run,
// would delete).
type Expired struct {
	Path string // virtual path
	Size int64  // bytes of the file; 0 for a directory
	Dir  bool
}

// Expire deletes every file not viewed or changed for longer than maxAge, and the
// directories that become empty with them (never /memories itself). A file the record does
// not know yet (created by hand, or before tracking was turned on) starts its grace period
// now. With dryRun it deletes nothing and reports what it would delete. TrackAccess must
// have been called.
func (s *Store) Expire(maxAge time.Duration, dryRun bool) ([]Expired, error) {
	var out []Expired
	err := s.Update(func(tx *Tx) error {
		a := s.access
		if err := a.merge(s.fs); err != nil {
			return err
		}
		now := a.now().Unix()
		files := map[string]int64{}
		if err := tx.walkFiles("", false, func(name string, size int64) { files[name] = size }); err != nil {
			return err
		}
		var old []string
		a.mu.Lock()
		for name := range a.last {
			if _, ok := files[name]; !ok {
				delete(a.last, name)
			}
		}
		for name := range files {
			t, ok := a.last[name]
			switch {
			case !ok:
				a.last[name] = now
			case now-t > int64(maxAge/time.Second):
				old = append(old, name)
			}
		}
		a.dirty = true
		a.mu.Unlock()
		slices.Sort(old)

		gone := map[string]bool{}
		for _, name := range old {
			out = append(out, Expired{Path: Root + "/" + name, Size: files[name]})
			gone[name] = true
			if !dryRun {
				if _, err := tx.RemoveAll(Path{clean: Root + "/" + name}); err != nil {
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
				empty, err := tx.emptyAfter(dir, gone)
				if err != nil || !empty {
					break
				}
				if !dryRun && s.fs.Remove(dir) != nil {
					break // something the listing does not show is in it: keep it
				}
				gone[dir] = true
				out = append(out, Expired{Path: Root + "/" + dir, Dir: true})
			}
		}
		return a.write(s.fs)
	})
	return out, err
}

// emptyAfter reports whether directory dir holds nothing once the names in gone are gone.
func (tx *Tx) emptyAfter(dir string, gone map[string]bool) (bool, error) {
	infos, err := tx.readDir(dir)
	if err != nil {
		return false, err
	}
	for _, fi := range infos {
		if !gone[path.Join(dir, fi.Name())] {
			return false, nil
		}
	}
	return true, nil
}
