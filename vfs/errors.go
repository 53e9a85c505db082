package vfs

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
)

// ErrEscape marks an operation refused because it would leave the storage root through a
// symbolic link (docs/behaviour.md §1, rule P4).
var ErrEscape = errors.New("path escapes from the storage root")

// ErrNotRegular is returned when a file that should be read turns out, once open, to be
// something else (a fifo, socket or device swapped in by another program).
var ErrNotRegular = errors.New("not a regular file")

// ErrStorageGone is returned while the storage directory itself is missing (removed or
// unmounted); the store serves again as soon as it is back.
var ErrStorageGone = errors.New("the storage directory is missing")

// The neutral reasons of docs/behaviour.md §4, the only words about a storage failure the model sees.
const (
	ReasonPermission = "permission denied"
	ReasonNoSpace    = "no space left on storage"
	ReasonReadOnly   = "storage is read-only"
	ReasonIO         = "input/output error"
	ReasonInternal   = "internal error"
	// ReasonTimeout: the call ran past its deadline (a slow disk, or another process
	// holding the storage lock); trying again later may work.
	ReasonTimeout = "the storage did not answer in time, try again"
	// ReasonGone: the storage directory was removed or unmounted.
	ReasonGone = "the storage directory is missing"
)

// Reason maps a storage error to one of the neutral reasons of docs/behaviour.md §4. The error itself,
// which may name host paths, belongs in the operator's log only.
func Reason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, ErrStorageGone):
		return ReasonGone
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return ReasonNoSpace
	case errors.Is(err, syscall.EROFS):
		return ReasonReadOnly
	case errors.Is(err, fs.ErrPermission):
		return ReasonPermission
	case errors.Is(err, syscall.EIO):
		return ReasonIO
	default:
		return ReasonInternal
	}
}

// IsNotExist reports whether err says a path does not exist, including "not a directory"
// for a path that runs through a file: for the model both mean the path is not there.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
