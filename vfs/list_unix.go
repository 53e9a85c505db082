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
	return fdDir{d}, nil
}

// fdDir is an open directory of an OSFs. A child is opened relative to it with one openat
// that refuses symbolic links and anything but a directory, so a walk costs one open per
// directory whatever its depth, and never leaves the directory it started in.
type fdDir struct{ d *os.File }

func (h fdDir) Close() { h.d.Close() }

func (h fdDir) Child(name string) (DirHandle, error) {
	fd, err := unix.Openat(int(h.d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	for err == unix.EINTR {
		fd, err = unix.Openat(int(h.d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return fdDir{os.NewFile(uintptr(fd), name)}, nil
}

// entries reads the names, then describes each with one fstatat on the directory's
// descriptor: one system call per entry, no path walk, and no FileInfo. (os.File.ReadDir
// would stat every entry itself wherever the filesystem does not report types in getdents.)
func (h fdDir) Entries() ([]Entry, error) {
	names, err := h.d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(names))
	fd := int(h.d.Fd())
	var st unix.Stat_t
	var stats entryStats
	for _, n := range names {
		if err := stats.stat(fd, n, unix.AT_SYMLINK_NOFOLLOW, &st); err != nil {
			continue // gone since the names were read
		}
		e := Entry{Name: n}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Size = st.Size
		case unix.S_IFDIR:
			e.Kind = KindDir
		case unix.S_IFLNK:
			e.Kind = KindLink
		default:
			e.Kind = KindOther
		}
		entries = append(entries, e)
	}
	return entries, nil
}
