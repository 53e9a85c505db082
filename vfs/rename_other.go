//go:build unix && !linux

package vfs

import (
	"io/fs"
	"os"
)

// renameNoReplace checks, then renames. Without renameat2 the check and the move are two
// steps; the Store's storage lock keeps other memory-mcp processes out of that window.
func (f *OSFs) renameNoReplace(oldname, newname string) error {
	return f.renameCheckFirst(oldname, newname)
}

func (f *OSFs) renameCheckFirst(oldname, newname string) error {
	if _, err := f.root.Lstat(newname); err == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	return f.root.Rename(oldname, newname)
}
