package files

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// Checkpoints of the write-ahead log (see wal.go): what the records name is flushed, or
// written again after a failed flush, and the log is emptied.

// checkpoint makes everything written so far durable and empties the log.
func (ht *historyTx) checkpoint(h *fileHistory) error { return ht.checkpointLog(h, false) }

// checkpointLog is checkpoint; with cut the log is truncated rather than zeroed (see empty).
func (ht *historyTx) checkpointLog(h *fileHistory, cut bool) error {
	// Other processes learn of the emptied log through the change counter.
	if err := ht.tx.beforeChange(); err != nil {
		return err
	}
	w := h.wal
	w.mu.Lock()
	pos := w.appended // what the flush below covers
	w.mu.Unlock()
	if w.rewrite { // Windows does not replace a file open: the history's log is opened again
		ht.closeLog(true)
		w.log.drop()
	}
	if err := ht.flushLogged(w.rewrite); err != nil {
		w.rewrite = true
		return err
	}
	w.rewrite = false
	ht.kept, ht.keptBytes = nil, 0 // flushed: no record needs to carry them
	w.mu.Lock()
	w.durable = max(w.durable, pos)
	w.cond.Broadcast()
	w.mu.Unlock()
	if err := w.empty(ht.fs(), cut); err != nil {
		w.end = -1
		return err
	}
	w.mu.Lock()
	w.broken = nil
	w.mu.Unlock()
	w.records.Store(0)
	w.due, w.since = false, time.Time{}
	return nil
}

// flushLogged makes durable what the log's records cover: every file they name, with each
// directory from the file's up to the storage directory (for names made, moved or removed),
// the contents they kept (and those this transaction kept for no record yet), and the
// history's log. It reads the log as recovery does, so
// that it covers the records of every process. With rewrite, each regular file memory-mcp
// may write is written again, flushed, instead (see walState.rewrite).
func (ht *historyTx) flushLogged(rewrite bool) error {
	fsys := ht.fs()
	data, err := readAll(fsys, walName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	files := map[string]bool{historyLogName: true}
	dirs := map[string]bool{".": true, historyDir: true, historyObjects: true}
	for _, c := range ht.kept { // kept by this transaction for a record that has not come (an import)
		files[objectName(c.D)] = true
	}
	carried := map[vfs.Digest][]byte{} // with rewrite: the contents the records carry,
	want := map[string]vfs.Digest{}    // and each file's content after the records
	scan := scanWAL(data)
	for i, r := range scan.records {
		for _, c := range r.C {
			files[objectName(c.D)] = true
			if rewrite {
				carried[c.D], want[objectName(c.D)] = c.B, c.D
			}
		}
		for _, v := range r.V {
			for _, p := range []string{v.Path, v.NewPath} {
				if p == "" {
					continue
				}
				files[nameOf(p)] = true
				for d := path.Dir(p); strings.HasPrefix(d, vfs.Root+"/"); d = path.Dir(d) {
					dirs[nameOf(d)] = true
				}
			}
		}
		if !rewrite {
			continue
		}
		for _, v := range scan.stands(i) {
			for _, p := range []string{v.Path, v.NewPath} {
				if p != "" {
					want[nameOf(p)] = v.After(p).SHA256 // zero when gone or redacted
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if fi, _, err := fsys.LstatIfPossible(name); rewrite && err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o200 != 0 {
			data, err := readAll(fsys, name)
			if d := want[name]; err == nil && !d.IsZero() && allZero(data) && vfs.DigestOf(data) != d {
				// The kernel evicted the pages it had failed to write, and the disk's content
				// (zeros) came back: the records' content instead, as recovery would write.
				if b, ok := contentOf(fsys, carried, d); ok {
					data = b
				}
			}
			if err == nil {
				err = fsys.WriteFileAtomic(name, data, false)
			}
			if err != nil {
				return err
			}
			continue
		}
		f, err := fsys.OpenFile(name, os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrPermission) {
			f, err = fsys.OpenFile(name, os.O_RDONLY, 0) // a file made read-only by hand
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || isDirErr(fsys, name) {
				continue // removed or moved by a later change, a directory now, or below a file
			}
			return err
		}
		err = syncFile(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(dirs)) {
		if err := fsys.SyncDir(name); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
	}
	return nil
}

// isDirErr reports whether name is a directory (opening it for writing failed).
func isDirErr(fsys FS, name string) bool {
	fi, err := fsys.Stat(name)
	return err == nil && fi.IsDir()
}

// empty writes zeros over the log's records and flushes them, keeping its size: the
// next cycle's records overwrite only zeros, so no record of this cycle can be read as
// one of the next. With cut it truncates the log instead, for a log that a crash may have
// left with bytes past its first zero (a page written back before the one before it).
func (w *walState) empty(fsys FS, cut bool) error {
	if cut {
		if err := truncate(fsys, walName, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		w.end, w.size, w.cycle, w.torn = 0, 0, "", false
		return nil
	}
	f, err := fsys.OpenFile(walName, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		w.end, w.size, w.cycle, w.torn = 0, 0, "", false
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := w.locate(f); err != nil {
		return err
	}
	switch {
	case w.size > walShrink:
		// Grown by a burst (or a large contentRef): back to one chunk.
		if err := f.Truncate(0); err != nil {
			return err
		}
		if err := writeZeros(f, 0, walChunk); err != nil {
			return err
		}
		w.size = walChunk
	case w.end == 0:
		return nil
	default:
		if err := writeZeros(f, 0, w.end); err != nil {
			return err
		}
	}
	if err := syncFile(f); err != nil {
		return err
	}
	w.end, w.cycle, w.torn = 0, "", false
	return nil
}
