package files

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// renameExcl is renameat2(RENAME_NOREPLACE).
func renameExcl(oldfd int, oldname string, newfd int, newname string) error {
	return unix.Renameat2(oldfd, oldname, newfd, newname, unix.RENAME_NOREPLACE)
}

func unsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS)
}
