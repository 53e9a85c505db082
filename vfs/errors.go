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

// ErrReadOnlyTx is returned by a change attempted inside a read-only transaction.
var ErrReadOnlyTx = errors.New("vfs: change inside a read-only transaction")

// ErrReadOnlyStore is returned when a change is asked of a store opened read-only.
var ErrReadOnlyStore = errors.New("vfs: the store is read-only")

// ErrUnavailable marks a failure to reach a storage over the network (a database that is
// down, restarting, or out of reach). The call fails with a neutral reason, and a later one
// works as soon as the storage is back.
var ErrUnavailable = errors.New("the database is unavailable")

// ErrStorageGone is returned while the storage directory itself is missing (removed or
// unmounted); the store serves again as soon as it is back.
var ErrStorageGone = errors.New("the storage directory is missing")

// IsNotExist reports whether err says a path does not exist, including "not a directory"
// for a path that runs through a file: for the model both mean the path is not there.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// IsExist reports whether err says the destination of a create or rename exists (they
// never replace anything).
func IsExist(err error) bool { return errors.Is(err, fs.ErrExist) }

// Failure is the kind of a storage failure, for the neutral reason the model is told
// (docs/behaviour.md §4); package handlers words it.
type Failure int

// The kinds of storage failures.
const (
	FailInternal    Failure = iota // anything else
	FailTimeout                    // the call ran past its deadline
	FailGone                       // the storage directory is missing
	FailNoSpace                    // no space, quota exceeded, file too large
	FailReadOnly                   // read-only filesystem
	FailPermission                 // permission denied
	FailIO                         // input/output error
	FailUnavailable                // the database cannot be reached
)

// FailureOf classifies a storage error. The error itself, which may name host paths,
// belongs in the operator's log only.
func FailureOf(err error) Failure {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return FailTimeout
	case errors.Is(err, ErrStorageGone):
		return FailGone
	case errors.Is(err, ErrUnavailable):
		return FailUnavailable
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return FailNoSpace
	case errors.Is(err, syscall.EROFS):
		return FailReadOnly
	case errors.Is(err, fs.ErrPermission):
		return FailPermission
	case errors.Is(err, syscall.EIO):
		return FailIO
	default:
		return FailInternal
	}
}
