//go:build unix

package vfs

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

var _ lister = (*OSFs)(nil)

// list reads the names, then describes each with one fstatat on the directory's descriptor:
// one system call per entry, no path walk, and no FileInfo. (os.File.ReadDir would stat
// every entry itself wherever the filesystem does not report types in getdents.)
func (f *OSFs) list(name string) ([]Entry, error) {
	d, err := f.root.Open(rel(name))
	if err != nil {
		return nil, wrap(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(names))
	fd := int(d.Fd())
	var st unix.Stat_t
	for _, n := range names {
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since the names were read
		}
		e := Entry{Name: n}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Size = st.Size
		case unix.S_IFDIR:
			e.Mode = fs.ModeDir
		case unix.S_IFLNK:
			e.Mode = fs.ModeSymlink
		default:
			e.Mode = fs.ModeIrregular
		}
		entries = append(entries, e)
	}
	return entries, nil
}
