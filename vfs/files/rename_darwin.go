package files

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// renameExcl is renameatx_np(RENAME_EXCL).
func renameExcl(oldfd int, oldname string, newfd int, newname string) error {
	return unix.RenameatxNp(oldfd, oldname, newfd, newname, unix.RENAME_EXCL)
}

func unsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP)
}
