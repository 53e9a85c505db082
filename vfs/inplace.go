package vfs

import (
	"bytes"
	"context"
	"slices"
)

// Files written in place.
//
// Where the write-ahead log records every change first (wal.go), a change that keeps a
// file's length or makes it longer, and whose changed bytes all fall in one page of the
// file, writes them over the file (OSFs.WriteFileInPlace) instead of writing a temporary
// file and renaming it over the old one. On ext4 every replacing rename frees an inode, and
// every later create then reads the inode table to skip the recently freed ones
// (recently_deleted, on a filesystem without a journal): in the side-by-side measurement
// that was a quarter of the server's CPU. A large file also no longer costs a copy of all
// of it for a small change. The file keeps its inode, its mode and its other attributes.
//
// It is done only where it is as atomic as the rename for a crash of the process: one
// pwrite within one page (pageSize bytes, aligned) and no truncation. The kernel copies a
// page at a time and checks for a fatal signal only between pages, so a process killed
// during the call leaves the file all old or all new. The bytes that differ are known from
// the content the change read (Tx.ReadFile, as str_replace and insert do, through
// overWriter), checked against the file's size; a change that did not read the file writes
// all of it, so only a file of at most a page. (A reader outside memory-mcp that reads the
// file during the call may see it half copied; memory-mcp's own processes read under the
// storage's lock.) Anything else, and a file with a second name or a symbolic link, takes
// the rename.
//
// A crash of the machine can still leave the file half written back: the new data with the
// old length, or the old data with the new length (zeros after it). Recovery (recoverWAL)
// sets a file the records touched to their last state when it shows such a mix of their
// states (torn), as it does when it shows an earlier state or no data at all.

// overWriter is a transaction that can replace a file's content knowing what it held, which
// lets it write only what changed (see above).
type overWriter interface {
	WriteFileOver(ctx context.Context, p Path, old, data []byte) error
}

// pageSize is the page of the kernel's cache: a write in place stays within one, since the
// kernel copies a page at a time, and a crash of the machine leaves a file mixed page by
// page (the block size of common filesystems too).
const pageSize = 4096

// inPlaceRange returns the bytes of data, [off, end), that a write over a file holding old
// must write for the file to hold data, and whether that is one write within one page
// and data is not shorter than old (a truncation would be a second call).
func inPlaceRange(old, data []byte) (off, end int, ok bool) {
	if len(data) < len(old) {
		return 0, 0, false
	}
	for off < len(old) && old[off] == data[off] {
		off++
	}
	end = len(data)
	if len(data) == len(old) {
		for end > off && old[end-1] == data[end-1] {
			end--
		}
		if end == off {
			return off, end, true // nothing differs
		}
	}
	return off, end, off/pageSize == (end-1)/pageSize
}

// allZero reports whether b holds nothing but zeros (or nothing).
func allZero(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

// torn reports whether data is what a crash can leave of a file written in place whose
// contents were states: none of them, but each page of it is the same page of one of
// them, with zeros past that one's end, or zeros; and its length is one of theirs. (An
// edit by hand almost never looks like that.)
func torn(data []byte, states [][]byte) bool {
	lengthOK := false
	for _, s := range states {
		if bytes.Equal(data, s) {
			return false
		}
		lengthOK = lengthOK || len(data) == len(s)
	}
	if !lengthOK {
		return false
	}
	for off := 0; off < len(data); off += pageSize {
		blk := data[off:min(off+pageSize, len(data))]
		ok := allZero(blk)
		for _, s := range states {
			k := min(len(blk), max(0, len(s)-off))
			ok = ok || bytes.Equal(blk[:k], s[off:off+k]) && allZero(blk[k:])
		}
		if !ok {
			return false
		}
	}
	return true
}
