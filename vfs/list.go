package vfs

import (
	"io/fs"
	"slices"
	"strings"
)

// Entry is a directory entry as a listing needs it: no more than its name, type and size.
type Entry struct {
	Name string
	Mode fs.FileMode // type bits only for special files; fs.ModeDir for directories; 0 for regular files
	Size int64       // bytes, for regular files
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Mode.IsDir() }

// IsRegular reports whether the entry is a regular file.
func (e Entry) IsRegular() bool { return e.Mode.IsRegular() }

// lister is storage that lists a directory more cheaply than Readdir's full FileInfo per
// entry (OSFs: one getdents and an fstatat per regular file into a stack buffer).
type lister interface {
	list(name string) ([]Entry, error)
}

// List is ReadDir for listings: the entries of the directory at p, sorted by name in byte
// order, without the server's bookkeeping files, described without following links.
func (tx *Tx) List(p Path) ([]Entry, error) {
	var entries []Entry
	if l, ok := tx.s.fs.(lister); ok {
		var err error
		if entries, err = l.list(p.Name()); err != nil {
			return nil, err
		}
		entries = slices.DeleteFunc(entries, func(e Entry) bool { return IsBookkeeping(e.Name) })
		slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
		return entries, nil
	}
	infos, err := tx.readDir(p.Name())
	if err != nil {
		return nil, err
	}
	entries = make([]Entry, len(infos))
	for i, fi := range infos {
		entries[i] = Entry{Name: fi.Name(), Mode: fi.Mode().Type(), Size: fi.Size()}
	}
	return entries, nil
}
