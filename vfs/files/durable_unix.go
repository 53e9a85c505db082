//go:build unix

package files

import (
	"os"
	"syscall"

	"github.com/spf13/afero"
)

// unlinked reports whether f, whose status is fi, lost its last name (removed, or replaced
// by a rename).
func unlinked(_ afero.File, fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}

// heldOpen: only Windows keeps a file that another program has open from being renamed or
// removed (see retryWhile).
func heldOpen(error) bool { return false }
