package vfs

import (
	"io/fs"
)

// Entry is a directory entry as a listing needs it: no more than its name, kind and size.
type Entry struct {
	Name string
	Kind EntryKind
	Size int64 // bytes, for regular files
}

// EntryKind is what an entry is.
type EntryKind uint8

// The kinds of entries. Links exist on the host-directory backends only; a listing shows
// neither links nor other special files, and no command reads through them.
const (
	KindFile  EntryKind = iota // a regular file
	KindDir                    // a directory
	KindLink                   // a symbolic link
	KindOther                  // anything else (fifo, socket, device)
)

// KindOf gives the kind of a file mode.
func KindOf(m fs.FileMode) EntryKind {
	switch {
	case m.IsRegular():
		return KindFile
	case m.IsDir():
		return KindDir
	case m&fs.ModeSymlink != 0:
		return KindLink
	}
	return KindOther
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Kind == KindDir }

// IsRegular reports whether the entry is a regular file.
func (e Entry) IsRegular() bool { return e.Kind == KindFile }

// IsLink reports whether the entry is a symbolic link (Stat does not follow a final one).
func (e Entry) IsLink() bool { return e.Kind == KindLink }

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
