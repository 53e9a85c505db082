//go:build unix

package vfs

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// OpenDir opens the directory name through the root, as a handle whose children open
// relative to it.
func (f *OSFs) OpenDir(name string) (DirHandle, error) {
	var d *os.File
	err := f.follow(name, true, func(n string) (err error) {
		d, err = f.root.OpenFile(n, openDir, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	c, dev := f.statCache()
	return fdDir{d, c, dev}, nil
}

// fdDir is an open directory of an OSFs. A child is opened relative to it with one openat
// that refuses symbolic links and anything but a directory, so a walk costs one open per
// directory whatever its depth, and never leaves the directory it started in.
type fdDir struct {
	d   *os.File
	c   *statCache // nil: none
	dev uint64     // the store's root's device, for c
}

func (h fdDir) Close() { h.d.Close() }

func (h fdDir) Child(name string) (DirHandle, error) {
	fd, err := unix.Openat(int(h.d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	for err == unix.EINTR {
		fd, err = unix.Openat(int(h.d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return fdDir{os.NewFile(uintptr(fd), name), h.c, h.dev}, nil
}

// Entries reads the names, then describes each with one statx on the directory's
// descriptor (no path walk, no FileInfo), unless the storage's statCache remembers them.
// (os.File.ReadDir would stat every entry itself wherever the filesystem does not report
// types in getdents.) Bookkeeping entries are reported by name only: every caller leaves
// them out or goes by their names, and some of them change at every call.
func (h fdDir) Entries() ([]Entry, error) {
	fd := int(h.d.Fd())
	var st unix.Stat_t
	var stats entryStats
	readNames := func() ([]string, error) { return h.d.Readdirnames(-1) }
	return h.c.entries(fd, h.dev, readNames, func(n string) (Entry, bool, bool) {
		e := Entry{Name: n, Kind: KindOther}
		if IsBookkeeping(n) {
			return e, true, false
		}
		if err := stats.stat(fd, n, unix.AT_SYMLINK_NOFOLLOW, &st); err != nil {
			return e, false, false // gone since the names were read
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Kind, e.Size = KindFile, st.Size
			// A file with other links can be written through a name in a directory
			// that is not watched.
			return e, true, st.Nlink == 1
		case unix.S_IFDIR:
			e.Kind = KindDir
		case unix.S_IFLNK:
			e.Kind = KindLink
		}
		return e, true, true
	})
}
