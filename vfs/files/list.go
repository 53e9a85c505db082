package files

import (
	"context"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/spf13/afero"
)

// namedDir walks storage that has no directory handles of its own: each directory is
// opened by its full name. (MemFs finds a name in one map lookup; the overlay asks each
// layer.)
type namedDir struct {
	fs   afero.Fs
	name string
}

// openNamedDir opens the directory name of fsys for a walk by names.
func openNamedDir(fsys afero.Fs, name string) (DirHandle, error) {
	fi, err := fsys.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	return namedDir{fs: fsys, name: name}, nil
}

func (d namedDir) Entries() ([]vfs.Entry, error) {
	f, err := d.fs.Open(d.name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	infos, err := f.Readdir(-1)
	if err != nil {
		return nil, err
	}
	entries := make([]vfs.Entry, len(infos))
	for i, fi := range infos {
		entries[i] = vfs.Entry{Name: fi.Name(), Kind: vfs.KindOf(fi.Mode())}
		if entries[i].Kind == vfs.KindFile {
			entries[i].Size = fi.Size()
		}
	}
	return entries, nil
}

func (d namedDir) Child(name string) (DirHandle, error) {
	return namedDir{fs: d.fs, name: path.Join(d.name, name)}, nil
}

func (d namedDir) Close() {}

// sorted drops the bookkeeping files and sorts by name in byte order.
func sorted(entries []vfs.Entry) []vfs.Entry {
	entries = slices.DeleteFunc(entries, func(e vfs.Entry) bool { return vfs.IsBookkeeping(e.Name) })
	slices.SortFunc(entries, func(a, b vfs.Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries
}

// Tree describes the directory at p and everything below it: its entries down to depth
// levels (1: the children only), and the total size of every directory at any depth. An
// entry for which skip reports true is neither listed nor counted, nor descended into;
// symbolic links, special files and entries deeper than any path may name (a tree made
// outside memory-mcp) never are. The walk costs one directory open per
// directory, whatever the depth, and gives up when the transaction's context is done.
func (tx *aferoTx) Tree(ctx context.Context, p vfs.Path, depth int, skip func(name string) bool) (vfs.Node, error) {
	if err := tx.enter(ctx, true, p); err != nil {
		return vfs.Node{}, err
	}
	d, err := tx.s.fs.OpenDir(p.Name())
	if err != nil {
		return vfs.Node{}, err
	}
	children, total, err := walk(ctx, d, depth, vfs.MaxPathBytes-len(p.String()), skip)
	return vfs.Node{Name: path.Base(p.String()), Dir: true, Size: total, Children: children}, err
}

// walk returns the counted entries of the open directory d (listed to depth levels) and
// the total size of the files below it; it closes d. room is what a path may still add to
// d's.
func walk(ctx context.Context, d DirHandle, depth, room int, skip func(string) bool) ([]vfs.Node, int64, error) {
	defer d.Close()
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	raw, err := d.Entries()
	if err != nil {
		return nil, 0, err
	}
	var nodes []vfs.Node
	var total int64
	for _, e := range sorted(raw) {
		if skip(e.Name) || 1+len(e.Name) > room {
			continue
		}
		n := vfs.Node{Name: e.Name, Size: e.Size}
		switch {
		case e.IsDir():
			child, err := d.Child(e.Name)
			if err != nil {
				continue // replaced by something else since the listing: not a directory any more
			}
			var children []vfs.Node
			if children, n.Size, err = walk(ctx, child, depth-1, room-1-len(e.Name), skip); err != nil {
				return nil, 0, err
			}
			n.Dir = true
			if depth > 1 {
				n.Children = children
			}
		case !e.IsRegular():
			continue
		}
		if depth > 0 {
			nodes = append(nodes, n)
		}
		total += n.Size
	}
	return nodes, total, nil
}
