package vfs

import (
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"runtime/debug"
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

// IsLink reports whether the entry is a symbolic link (Stat does not follow a final one).
func (e Entry) IsLink() bool { return e.Mode&fs.ModeSymlink != 0 }

// dirOpener is storage that can open a directory as a handle whose children open relative
// to it (OSFs). Other storage is walked by name.
type dirOpener interface {
	openDir(name string) (dirHandle, error)
}

// dirHandle is an open directory during a walk.
type dirHandle interface {
	entries() ([]Entry, error) // unsorted, bookkeeping included
	child(name string) (dirHandle, error)
	close()
}

// namedDir walks storage that has no directory handles: each directory is opened by its
// full name. (MemFs finds a name in one map lookup; the overlay asks each layer.)
type namedDir struct {
	fs   interface{ readDirInfos(string) ([]Entry, error) }
	name string
}

func (d namedDir) entries() ([]Entry, error) { return d.fs.readDirInfos(d.name) }
func (d namedDir) child(name string) (dirHandle, error) {
	return namedDir{fs: d.fs, name: path.Join(d.name, name)}, nil
}
func (d namedDir) close() {}

// readDirInfos lists a directory by name through the afero interface.
func (tx *Tx) readDirInfos(name string) ([]Entry, error) {
	d, err := tx.s.fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	infos, err := d.Readdir(-1)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, len(infos))
	for i, fi := range infos {
		entries[i] = Entry{Name: fi.Name(), Mode: fi.Mode().Type(), Size: fi.Size()}
	}
	return entries, nil
}

func (tx *Tx) openDir(name string) (dirHandle, error) {
	if o, ok := tx.s.fs.(dirOpener); ok {
		return o.openDir(name)
	}
	return namedDir{fs: tx, name: name}, nil
}

// sorted drops the bookkeeping files and sorts by name in byte order.
func sorted(entries []Entry) []Entry {
	entries = slices.DeleteFunc(entries, func(e Entry) bool { return IsBookkeeping(e.Name) })
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries
}

// list returns the entries of the directory name, sorted by name in byte order, without
// the server's bookkeeping files, described without following links.
func (tx *Tx) list(name string) ([]Entry, error) {
	d, err := tx.openDir(name)
	if err != nil {
		return nil, err
	}
	defer d.close()
	entries, err := d.entries()
	if err != nil {
		return nil, err
	}
	return sorted(entries), nil
}

// Node is one entry of a Tree.
type Node struct {
	Name string
	Dir  bool
	// Size is a file's bytes, or the total bytes of the files counted below a directory,
	// at any depth.
	Size int64
	// Children are a directory's counted entries, sorted by name in byte order, when it
	// lies within the depth asked for.
	Children []Node
}

// Tree describes the directory at p and everything below it: its entries down to depth
// levels (1: the children only), and the total size of every directory at any depth. An
// entry for which skip reports true is neither listed nor counted, nor descended into;
// symbolic links and special files never are. The walk costs one directory open per
// directory, whatever the depth, and gives up when the transaction's context is done.
func (tx *Tx) Tree(p Path, depth int, skip func(name string) bool) (Node, error) {
	d, err := tx.openDir(p.Name())
	if err != nil {
		return Node{}, err
	}
	w := walker{tx: tx, skip: skip, slots: make(chan struct{}, 2*runtime.GOMAXPROCS(0))}
	children, total, err := w.walk(d, depth)
	return Node{Name: path.Base(p.String()), Dir: true, Size: total, Children: children}, err
}

// walker walks a directory tree. Reading a large tree is bound by one stat per file (its
// size counts in every directory total), so subdirectories are read concurrently, at most
// len(slots) at a time; a walk that finds no free slot reads inline, which keeps nested
// waits from deadlocking.
type walker struct {
	tx    *Tx
	skip  func(string) bool
	slots chan struct{}
}

type subtree struct {
	children []Node
	total    int64
	err      error
	done     chan struct{}
}

// walk returns the counted entries of the open directory d (listed to depth levels) and
// the total size of the files below it; it closes d.
func (w walker) walk(d dirHandle, depth int) ([]Node, int64, error) {
	defer d.close()
	if err := w.tx.ctx.Err(); err != nil {
		return nil, 0, err
	}
	raw, err := d.entries()
	if err != nil {
		return nil, 0, err
	}
	entries := sorted(raw)
	subs := make([]*subtree, len(entries))
	for i, e := range entries {
		if !e.IsDir() || w.skip(e.Name) {
			continue
		}
		child, err := d.child(e.Name)
		if err != nil {
			continue // replaced by something else since the listing: not a directory any more
		}
		sub := &subtree{done: make(chan struct{})}
		subs[i] = sub
		run := func() {
			defer close(sub.done)
			defer func() {
				// A panic on another goroutine would escape the caller's recover and end the server.
				if r := recover(); r != nil {
					sub.err = fmt.Errorf("panic while listing %s: %v\n%s", e.Name, r, debug.Stack())
				}
			}()
			sub.children, sub.total, sub.err = w.walk(child, depth-1)
		}
		select {
		case w.slots <- struct{}{}:
			go func() { defer func() { <-w.slots }(); run() }()
		default:
			run()
		}
	}
	var nodes []Node
	if depth > 0 {
		nodes = make([]Node, 0, len(entries))
	}
	var total int64
	for i, e := range entries {
		switch {
		case subs[i] != nil:
			sub := subs[i]
			<-sub.done
			if sub.err != nil {
				err = sub.err
				continue
			}
			if depth > 0 {
				n := Node{Name: e.Name, Dir: true, Size: sub.total}
				if depth > 1 {
					n.Children = sub.children
				}
				nodes = append(nodes, n)
			}
			total += sub.total
		case e.IsRegular() && !w.skip(e.Name):
			if depth > 0 {
				nodes = append(nodes, Node{Name: e.Name, Size: e.Size})
			}
			total += e.Size
		}
	}
	return nodes, total, err
}
