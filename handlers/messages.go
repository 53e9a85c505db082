package handlers

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// This file holds the words of the messages that are not one command's own: refused paths,
// storage failures, and how an argument is repeated back.

// The neutral reasons of docs/behaviour.md §4, the only words about a storage failure the
// model sees.
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
	// ReasonUnavailable: the database is down, restarting or out of reach; the server
	// reconnects by itself, so trying again later works.
	ReasonUnavailable = "storage unavailable"
)

// reason maps a storage error to one of the neutral reasons. The error itself, which may
// name host paths, belongs in the operator's log only.
func reason(err error) string {
	switch vfs.FailureOf(err) {
	case vfs.FailTimeout:
		return ReasonTimeout
	case vfs.FailGone:
		return ReasonGone
	case vfs.FailUnavailable:
		return ReasonUnavailable
	case vfs.FailNoSpace:
		return ReasonNoSpace
	case vfs.FailReadOnly:
		return ReasonReadOnly
	case vfs.FailPermission:
		return ReasonPermission
	case vfs.FailIO:
		return ReasonIO
	default:
		return ReasonInternal
	}
}

// pathRefused is the message for a virtual path that vfs.Resolve refused (docs/behaviour.md §1).
func pathRefused(err error) Result {
	var pe *vfs.PathError
	if !errors.As(err, &pe) {
		return fail(CodeInternal, "Error: %s", ReasonInternal)
	}
	sent := Echo(pe.Path)
	switch pe.Kind {
	case vfs.BadCharacters:
		return fail(CodeInvalidPath, "Error: Path %s contains characters that are not allowed", strconv.Quote(sent))
	case vfs.NotUnderRoot:
		return fail(CodeInvalidPath, "Error: Path must be %s or start with %s/, got: %s", vfs.Root, vfs.Root, sent)
	case vfs.WindowsName:
		return fail(CodeInvalidPath, "Error: Path %s cannot be stored on Windows: %s. Choose another name.", sent, pe.Detail)
	case vfs.TooLong:
		return fail(CodeInvalidPath, "Error: Path %s is too long: each name may have at most %d bytes and the whole path at most %d bytes", sent, vfs.MaxNameBytes, vfs.MaxPathBytes)
	default:
		return escapes(pe.Path)
	}
}

// escapes is the message for a path that leaves /memories (rules P3 and P4).
func escapes(sent string) Result {
	return fail(CodeEscape, "Error: Path %s would escape %s directory", Echo(sent), vfs.Root)
}

// Echo returns an argument as a message may repeat it: whole when it is at most
// vfs.MaxPathBytes long (every path that could be valid), otherwise its first 200
// characters followed by "… ({n} characters in all)", so that an error never sends a huge
// argument back.
func Echo(s string) string {
	if len(s) <= vfs.MaxPathBytes {
		return s
	}
	return Abbreviate(s, 200)
}

// Abbreviate returns s whole when it has at most limit characters (code points), otherwise
// its first limit characters followed by "… ({n} characters in all)".
func Abbreviate(s string, limit int) string {
	n := 0
	for i := range s {
		if n == limit {
			return s[:i] + fmt.Sprintf("… (%d characters in all)", utf8.RuneCountInString(s))
		}
		n++
	}
	return s
}

// NoMemory is the result of a call that reached no memory: over HTTP with tenants, a call
// without a tenant (the gate authenticates every request first, so this is a defect, told
// as a refusal rather than served from another memory).
func NoMemory(command string) Result {
	return Result{Text: fmt.Sprintf("Error: Could not %s: %s", command, ReasonPermission), IsError: true, Err: errors.New("tool call without a tenant"), Code: CodeInternal}
}
