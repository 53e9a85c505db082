package vfs

import (
	"errors"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// renameNoReplace uses renameat2(RENAME_NOREPLACE) on directory descriptors opened through
// the root: the kernel checks and moves in one step, and names the final elements only, so
// no symbolic link is followed. Filesystems without the flag fall back to check-then-rename,
// which the Store's lock still makes safe against other memory-mcp processes.
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
	err = unix.Renameat2(int(oldDir.Fd()), path.Base(oldname), int(newDir.Fd()), path.Base(newname), unix.RENAME_NOREPLACE)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) {
		return f.renameCheckFirst(oldname, newname)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}
