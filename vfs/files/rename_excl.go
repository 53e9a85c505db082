//go:build linux || darwin

package files

import (
	"os"
	"path"
)

// renameNoReplace renames through the kernel's no-replace rename (renameExcl) on directory
// descriptors opened through the root: the check and the move are one step, and only the
// final elements are named, so no symbolic link is followed. Filesystems without it fall
// back to check-then-rename, which the Store's lock still makes safe against other
// memory-mcp processes.
func (f *OSFs) renameNoReplace(oldname, newname string) error {
	oldDir, err := f.root.OpenFile(path.Dir(oldname), openDir, 0)
	if err != nil {
		return err
	}
	defer oldDir.Close()
	newDir, err := f.root.OpenFile(path.Dir(newname), openDir, 0)
	if err != nil {
		return err
	}
	defer newDir.Close()
	err = renameExcl(int(oldDir.Fd()), path.Base(oldname), int(newDir.Fd()), path.Base(newname))
	if unsupported(err) {
		return f.renameCheckFirst(oldname, newname)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}
