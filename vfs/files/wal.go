package files

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// The write-ahead log of the os backend (DESIGN.md, "The write-ahead log"): a change
// appends one record (its versions and the contents they keep) to walName, writes the
// history and the files unflushed, releases the store's locks, and is acknowledged once a
// flush of the log covers its record (flushTo: changes made at the same time share one
// flush). Any transaction, a read too, waits likewise for the records this process had
// appended when it ended, so that nothing is answered from a change a crash could take back.
//
// A crash of the process loses nothing written: the history log's settle lines check a
// change cut short, as without the log. A crash of the machine may leave a change's files
// or history lines without its record (it was not acknowledged), so the log's header,
// flushed with the first record after a checkpoint, names the last group of versions the
// previous checkpoint covered (From); recovery (recoverWAL, for records of another boot)
// drops the later groups no record names, redoes what the records say and the disk lost,
// and records any other difference as a version of its own. The log is kept until a
// checkpoint flushes what its records name (flushLogged) and empties it.
//
// The log is written in advance (walChunk of zeros at a time) and records overwrite the
// zeros (locate finds their end), so flushing one changes no metadata and needs no journal
// commit. Without a known boot (bootID), and on the memory and overlay backends, it is off
// and every change flushes its own files.
const (
	walName        = historyDir + "/wal"
	walFormat      = 3 // 2: the header's From; 3: written in advance (zeros), the header's Cycle
	walMaxBytes    = 64 << 20
	walChunk       = 1 << 20 // the log grows by this much of zeros at a time
	walShrink      = 4 << 20 // and a checkpoint cuts it back to one chunk past this
	walCarryMax    = 8 << 20 // the contents one record carries at most (see Keep)
	walOutcomeRoom = 512     // the room past a record on a nearly full disk (see walAppend)
	// walMaxAge lets the system write the files back by itself first, so that the
	// checkpoint's flush finds little left to write and holds the store's lock briefly.
	walMaxAge = time.Minute
)

// durableFS is a filesystem on which the write-ahead log can run (OSFs).
type durableFS interface {
	// BootID names this boot of the machine ("" when unknown: no log).
	BootID() string
	// Reopened changes when the storage directory was replaced and the new one opened.
	Reopened() uint64
	// WriteFileUnsynced is WriteFileAtomic without its flushes.
	WriteFileUnsynced(name string, data []byte, noReplace bool) error
}

// walFS returns fsys as a durableFS when the write-ahead log can run on it.
func walFS(fsys FS) (durableFS, bool) {
	d, ok := fsys.(durableFS)
	if !ok || d.BootID() == "" {
		return nil, false
	}
	return d, true
}

// walLine is one line of the write-ahead log.
type walLine struct {
	WAL   int    `json:"wal,omitempty"`   // the header: the format,
	Boot  string `json:"boot,omitempty"`  // the boot it was written in,
	From  uint64 `json:"from,omitempty"`  // the last group the previous checkpoint covered,
	Cycle string `json:"cycle,omitempty"` // and this cycle of the log (from one checkpoint to the next)
	// A record: a group of versions (as in the history log) and the contents they name
	// that were kept for them.
	G uint64        `json:"g,omitempty"`
	V []vfs.Version `json:"v,omitempty"`
	C []walContent  `json:"c,omitempty"`
	// An outcome: the group's operation failed (Only empty) or did part of its work
	// (Only lists the versions that stand). A record without one succeeded.
	Settle uint64 `json:"settle,omitempty"`
	Only   []int  `json:"only,omitempty"`
}

type walContent struct {
	D vfs.Digest `json:"d"`
	B []byte     `json:"b"`
}

// walState is what the storage knows of the write-ahead log.
type walState struct {
	fs      durableFS
	records atomic.Int64 // appended since the last checkpoint, by this process
	since   time.Time    // when this process saw the log start (or first appended to it)
	due     bool

	// Group commit (see flushTo). Positions count the bytes this process ever appended to
	// the log (checkpoints do not reset them).
	mu         sync.Mutex
	cond       sync.Cond
	appended   uint64       // up to where this process appended
	durable    uint64       // up to where a flush (or checkpoint) covered
	flushing   bool         // a writer is flushing for the others
	broken     error        // a flush failed: no flush acknowledges a record until a checkpoint
	file       afero.File   // the log, as the flushing writer keeps it open between flushes
	fileRoot   uint64       // fs.Reopened() when file was opened
	logFlushes atomic.Int64 // flushes of the log (tests read them)

	// reopen tells the flushing writer to open the log by its name again before its next
	// flush: a change opened it anew, so the descriptor kept may be of another file (one
	// moved away with the history's directory).
	reopen atomic.Bool

	// Where records go (only touched under the store's exclusive lock; stale also by a
	// read that notices another process, under cacheMu, never beside a change).
	end   int64  // the next record's offset; -1: unknown (see locate)
	last  int64  // where this process's last line began (see walCut)
	size  int64  // the log's size, zeros past end
	cycle string // the header's Cycle
	torn  bool   // the byte before end is not a newline
	stale bool   // another process changed the storage since: locate the end again
	// A checkpoint's flush failed: the next writes the files again rather than flush them,
	// since the kernel may have dropped what it failed to write and report no error twice.
	rewrite bool

	// The descriptors changes write through, kept from one change to the next (only
	// touched under the store's exclusive lock, or by close).
	rec keptFile // this log
	log keptFile // the history's log (historyLogName)
}

// keptFile is a bookkeeping file of the history kept open from one change to the next
// while the write-ahead log runs, rather than opened and closed by every change.
//
// A descriptor is dropped, and the file opened again by its name, when the storage
// directory was replaced (Reopened), when the history's directory at its name is another
// than the one the file was opened in (moved away by hand, or removed, and made again by
// the next change), or when the file lost its last name (the history's log replaced by a
// rewrite, ours or another process's; the write-ahead log itself is only ever emptied in
// place).
type keptFile struct {
	f    afero.File
	root uint64      // the storage directory's Reopened count when f was opened
	dir  os.FileInfo // the history directory's status then
}

// use returns the kept descriptor of the history's file name, or one opened anew (with
// flag, creating the file) as keptFile says; fresh reports that, fi is the file's status.
func (k *keptFile) use(ht *historyTx, h *fileHistory, name string, flag int) (f afero.File, fi os.FileInfo, fresh bool, err error) {
	root := h.wal.fs.Reopened() // read first: a replacement meanwhile opens the file again
	if k.f != nil && k.root == root {
		if dir, err := ht.dirStatus(); err == nil && os.SameFile(dir, k.dir) {
			if fi, err = k.f.Stat(); err == nil && !unlinked(k.f, fi) {
				return k.f, fi, false, nil
			}
		}
	}
	k.drop()
	if f, err = ht.openBookkeeping(h, name, flag); err != nil {
		return nil, nil, false, err
	}
	ht.dirRead = false // the open may have made the directory anew
	var dir os.FileInfo
	if fi, err = f.Stat(); err == nil {
		dir, err = ht.dirStatus()
	}
	if err != nil {
		f.Close()
		return nil, nil, false, err
	}
	k.f, k.root, k.dir = f, root, dir
	return f, fi, true, nil
}

// drop closes the kept descriptor, if any.
func (k *keptFile) drop() {
	if k.f != nil {
		k.f.Close()
		k.f = nil
	}
}

func newWALState(d durableFS) *walState {
	w := &walState{fs: d, end: -1}
	w.cond.L = &w.mu
	return w
}

// pending returns the position up to which a transaction must wait, after releasing its
// locks, before it answers: everything this process appended so far, which it may have
// seen. With sawOther (it saw another process's change, whose record that process may not
// have flushed yet) the position is one past it, which only a flush started from now on
// reaches.
func (w *walState) pending(sawOther bool) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sawOther {
		w.appended++
	}
	return w.appended
}

// flushTo returns once a flush of the log covers position pos. One caller flushes at a
// time, for everything appended when it starts; the others wait for it, and those it
// did not cover flush next, together.
func (w *walState) flushTo(fsys FS, pos uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.durable < pos {
		if w.broken != nil {
			return w.broken
		}
		if w.flushing {
			w.cond.Wait()
			continue
		}
		if err := w.flushLocked(fsys); err != nil {
			return err
		}
	}
	return nil
}

// flushLocked flushes everything appended so far as the flushing writer, with w.mu held
// on entry and on return (released during the flush), when no other writer flushes.
func (w *walState) flushLocked(fsys FS) error {
	w.flushing = true
	target := w.appended
	w.mu.Unlock()
	err := w.flushLog(fsys, true)
	w.mu.Lock()
	w.flushing = false
	if err == nil {
		w.durable = max(w.durable, target)
	} else {
		// The kernel may have dropped the pages it failed to write, and a later flush
		// would not say so: a record after them would be flushed after a hole of zeros,
		// where recovery stops reading. Only a checkpoint, which flushes the files the
		// records name, settles them (see aferoTx.Durable).
		w.broken = err
	}
	w.cond.Broadcast()
	return err
}

// flushLog flushes the log's data through a descriptor kept open between flushes (the
// kernel flushes whatever any descriptor wrote); only the flushing writer calls it. A
// descriptor of a log removed since (with the history's directory, made again by the
// next change) is dropped, and the log at its name flushed instead.
func (w *walState) flushLog(fsys FS, retry bool) error {
	if reopen := w.reopen.Swap(false); w.file != nil && (reopen || w.fs.Reopened() != w.fileRoot) {
		// The storage directory was replaced since, or a change opened the log anew: the
		// records appended to the log the descriptor is of are flushed first, then the
		// log at its name.
		err := syncFile(w.file)
		w.file.Close()
		w.file = nil
		if err != nil {
			return err
		}
	}
	if w.file == nil {
		root := w.fs.Reopened() // read first: a replacement meanwhile opens the log again
		f, err := fsys.OpenFile(walName, os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed with the storage directory: nothing to flush
		}
		if err != nil {
			return err
		}
		w.file, w.fileRoot = f, root
	}
	err := w.flushFile()
	var fi os.FileInfo
	if err == nil {
		fi, err = w.file.Stat()
	}
	if err != nil || unlinked(w.file, fi) {
		w.file.Close()
		w.file = nil
		if err == nil && retry {
			return w.flushLog(fsys, false)
		}
	}
	return err
}

// flushFile makes the records written to w.file durable (fdatasync of the log).
func (w *walState) flushFile() error {
	w.logFlushes.Add(1)
	return syncFile(w.file)
}

// close closes the descriptor flushLog keeps, once no writer is flushing.
func (w *walState) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.flushing {
		w.cond.Wait()
	}
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
	w.rec.drop()
	w.log.drop()
}

// walAppend appends one line to the log, not flushed unless now is set: the transaction
// waits for a flush after it releases its locks (see pending and flushTo). The first line
// after a checkpoint is flushed at once with the log's header, which recovery needs
// before any change it covers touches the files (see the top of this file); from is the
// last group that checkpoint covered.
func (ht *historyTx) walAppend(h *fileHistory, line walLine, from uint64, now bool) (err error) {
	w := h.wal
	w.mu.Lock()
	broken := w.broken != nil
	w.mu.Unlock()
	if broken { // a checkpoint settles the records a failed flush left in doubt first
		if err := ht.checkpoint(h); err != nil {
			return err
		}
	}
	f, err := ht.openWAL(h)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.rec.drop() // opened anew by the next change
		}
	}()
	var buf bytes.Buffer
	if w.torn {
		buf.WriteByte('\n') // ends a line a killed process left half-written: never read
	}
	first := w.end == 0
	if first {
		w.cycle = newEpoch()
		if err := writeWALLine(&buf, &walLine{WAL: walFormat, Boot: w.fs.BootID(), From: from, Cycle: w.cycle}); err != nil {
			return err
		}
	}
	if err := writeWALLine(&buf, &line); err != nil {
		return err
	}
	newFile := w.size == 0
	grew := false
	if need := w.end + int64(buf.Len()); need > w.size {
		// Zeros written in advance: a record then overwrites them, and its flush changes no
		// metadata (neither the size nor the blocks), so it needs no journal commit.
		size := (need + walChunk - 1) / walChunk * walChunk
		err := writeZeros(f, w.size, size-w.size)
		if err != nil && vfs.FailureOf(err) == vfs.FailNoSpace {
			// A nearly full disk: the zeros go back to it, and only the record and room for
			// the outcome line of a change that then fails (Settle) are claimed, so that a
			// change that fits is made, and one that fails can say so (else a crash of the
			// machine would have it redone).
			size = need + walOutcomeRoom
			if err = f.Truncate(w.size); err == nil {
				err = writeZeros(f, w.size, size-w.size)
			}
		}
		if err != nil {
			w.end = -1
			return err
		}
		w.size, grew = size, true
	}
	off := w.end
	if _, err := f.WriteAt(buf.Bytes(), off); err != nil {
		// The disk may have taken some or all of the line: cut it off, or a later flush
		// would make it a record that recovery redoes.
		ht.walCut(h, off)
		return err
	}
	w.last, w.end = off, off+int64(buf.Len())
	w.torn = false
	w.mu.Lock()
	w.appended += uint64(buf.Len())
	pos := w.appended
	w.mu.Unlock()
	if now || first || grew {
		if err := w.flushTo(ht.fs(), pos); err != nil {
			return err
		}
		if newFile {
			if err := ht.fs().SyncDir(historyDir); err != nil { // its directory entry too
				return err
			}
		}
	}
	w.records.Add(1)
	if first || w.since.IsZero() {
		w.since = time.Now()
	}
	if w.end > walMaxBytes || time.Since(w.since) >= walMaxAge {
		w.due = true
	}
	return nil
}

// walRefused writes to the log that the operation whose record is its last line failed;
// with no room for that line, it takes the record off instead: either way, a crash of the
// machine does not have the operation redone.
func (ht *historyTx) walRefused(h *fileHistory) error {
	record := h.wal.last
	if err := ht.walAppend(h, walLine{Settle: ht.groupID, Only: []int{}}, h.lastGroup, true); err == nil {
		return nil
	}
	return ht.walCut(h, record)
}

// walCut takes the log's lines from offset at on away, flushed: this transaction's own
// lines, as nobody else writes meanwhile.
func (ht *historyTx) walCut(h *fileHistory, at int64) error {
	f, err := ht.openWAL(h)
	if err == nil {
		if err = f.Truncate(at); err == nil {
			err = syncFile(f)
		}
	}
	h.wal.end = -1 // located again by the next change
	return err
}

// openWAL returns the log's descriptor for this change, kept from the last one or opened
// anew, with end and size describing the log it is of (see locate). On an error the
// descriptor is dropped, and the next change opens the log again.
func (ht *historyTx) openWAL(h *fileHistory) (afero.File, error) {
	w := h.wal
	f, _, fresh, err := w.rec.use(ht, h, walName, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	// A log opened anew may be another file than the one end and size describe: one made
	// again after the history's directory was removed by hand. The flushing writer's
	// descriptor may be of the old one.
	if fresh {
		w.reopen.Store(true)
	}
	if w.end < 0 || w.stale || fresh {
		if err := w.locate(f); err != nil {
			w.end = -1
			w.rec.drop()
			return nil, err
		}
	}
	return f, nil
}

// locate finds where the log's records end (the first zero byte), from where this process
// last appended when the log is still in the same cycle (its header's Cycle), else from
// the start: another process may have appended or checkpointed since.
func (w *walState) locate(f afero.File) error {
	w.stale = false // on a failure, end is unknown
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w.size, w.torn = fi.Size(), false
	head := make([]byte, min(4096, w.size))
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if len(head) == 0 || head[0] == 0 {
		w.end, w.cycle = 0, ""
		return nil
	}
	hs := scanWAL(head)
	from := int64(0)
	if w.end > 0 && hs.cycle == w.cycle {
		from = w.end
	}
	w.cycle = hs.cycle
	buf := make([]byte, 4096) // the end is usually in the first page read
	for off := from; ; {
		n, err := f.ReadAt(buf, off)
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			w.end = off + int64(i)
			break
		}
		off += int64(n)
		if err != nil || n == 0 {
			if !errors.Is(err, io.EOF) && err != nil {
				return err
			}
			w.end = off // no zeros: a log written by appending (format 2)
			break
		}
	}
	if w.end > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], w.end-1); err != nil {
			return err
		}
		w.torn = last[0] != '\n'
	}
	return nil
}

// writeZeros writes n zero bytes at off.
func writeZeros(f afero.File, off, n int64) error {
	zeros := make([]byte, min(n, walChunk))
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// syncFile flushes a file's data.
func syncFile(f afero.File) error {
	if of, ok := f.(osFile); ok {
		return datasync(of.File)
	}
	if ds, ok := f.(interface{ DataSync() error }); ok {
		return ds.DataSync()
	}
	return f.Sync()
}
