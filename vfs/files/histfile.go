package files

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// The history of the afero backends lives in the storage as bookkeeping (no virtual path
// reaches it): in the directory itself on the os backend, in the upper layer of an overlay,
// in memory for the memory backend.
//
//   - historyObjects holds each distinct content once, in a file named by its SHA-256,
//     written atomically and flushed before any version names it.
//   - historyLogName is the versions, one JSON object per line. Before an operation changes
//     the files, its versions are appended as one group ({"g":G,"v":{…}} lines) and the
//     log is flushed; after the operation, a line {"settle":G} says they stand (or, after a
//     failure, {"settle":G,"partial":true,"only":[…]} lists those the files show). A group
//     a crash (or a full disk) left without its settle line is settled by the next
//     transaction: as the write-ahead log's record of it says, if it has one, else as the
//     files show (see standing). So the files never show a change whose version is
//     missing, and a version never names a change that did not happen.
//   - The first line, {"history":1,"epoch":"…"}, names this copy of the log: pruning and
//     redaction rewrite the log whole (atomically) under a new epoch, which tells other
//     processes to read it again from the start rather than from where they stopped.
const (
	historyDir     = vfs.BookkeepingPrefix + "-history"
	historyLogName = historyDir + "/log"
	historyObjects = historyDir + "/objects"
	historyFormat  = 1
)

// fileHistory is what an AferoStorage knows of its history between write transactions,
// which run one at a time (so it needs no lock of its own; a read that notices another
// process sets stale under cacheMu, and never runs beside a change).
type fileHistory struct {
	cfg vfs.HistoryConfig

	loaded    bool
	epoch     string
	offset    int64 // bytes of the log read so far: up to the end of its last whole line
	lastSeq   uint64
	lastGroup uint64
	pruned    uint64               // see vfs.History.Pruned (kept in the log's header)
	sizes     map[vfs.Digest]int64 // contents the versions name (kept in historyObjects) → size
	bytes     int64                // their total
	oldest    time.Time            // the time of the oldest version
	dirsMade  bool
	appended  int // versions appended since the last pruning pass
	lastPrune time.Time
	wal       *walState // nil when the write-ahead log is off (see wal.go)
	stale     bool      // another process changed the storage since: read the log's tail
}

func (h *fileHistory) reset() {
	*h = fileHistory{cfg: h.cfg, dirsMade: h.dirsMade, lastPrune: h.lastPrune, appended: h.appended, wal: h.wal}
	h.sizes = map[vfs.Digest]int64{}
}

// fold adds settled versions to what h knows.
func (h *fileHistory) fold(vs []vfs.Version) {
	for i := range vs {
		v := &vs[i]
		if h.oldest.IsZero() || v.Time.Before(h.oldest) {
			h.oldest = v.Time
		}
		for _, c := range contentsOf(v) {
			if _, ok := h.sizes[c.sum]; !ok && !c.sum.IsZero() {
				h.sizes[c.sum] = c.size
				h.bytes += c.size
			}
		}
	}
}

// History returns the transaction's access to the store's history (nil when it keeps none).
func (tx *aferoTx) History() vfs.History {
	if tx.s.history == nil {
		return nil
	}
	if tx.hist == nil {
		tx.hist = &historyTx{tx: tx}
	}
	return tx.hist
}

// historyTx is the history as one transaction of an AferoStorage uses it.
type historyTx struct {
	tx        *aferoTx
	seq       uint64
	time      time.Time
	group     []vfs.Version // announced by Record, until Settle
	groupID   uint64
	created   []vfs.Digest // contents Keep wrote (see dropUnnamed)
	kept      []walContent // contents Keep wrote since the last Record, for its log record,
	keptBytes int64        // and their bytes together
	wrote     bool         // something was appended: pruning may be due at commit
	log       afero.File   // the log, as the transaction's first append opened it (see appendLines)
	logKept   *keptFile    // what keeps log between changes (nil: closed at the end)
	dir       os.FileInfo  // the history directory's status, read once (see dirStatus)
	dirErr    error
	dirRead   bool
}

// dirStatus returns the status of the history's directory, read at the transaction's
// first call (see keptFile).
func (ht *historyTx) dirStatus() (os.FileInfo, error) {
	if !ht.dirRead {
		ht.dir, _, ht.dirErr = ht.fs().LstatIfPossible(historyDir)
		ht.dirRead = true
	}
	return ht.dir, ht.dirErr
}

// closeLog closes the log's descriptor that the transaction's appends share; with drop,
// one kept for the next changes too (see keptFile), which opens the log again.
func (ht *historyTx) closeLog(drop bool) {
	if ht.log == nil {
		return
	}
	switch {
	case ht.logKept == nil:
		ht.log.Close()
	case drop:
		ht.logKept.drop()
	}
	ht.log, ht.logKept = nil, nil
}

func (ht *historyTx) Seq() uint64 { return ht.seq }

func (ht *historyTx) fs() FS { return ht.tx.s.fs }

// writer returns the storage's history state for a change, loaded and current, or an error
// in a read transaction.
func (ht *historyTx) writer() (*fileHistory, error) {
	if !ht.tx.write {
		return nil, vfs.ErrReadOnlyTx
	}
	if err := ht.tx.beforeChange(); err != nil {
		return nil, err
	}
	h := ht.tx.s.history
	if h.loaded && !h.stale {
		return h, nil
	}
	if err := ht.load(h); err != nil {
		h.loaded = false
		return nil, err
	}
	return h, nil
}

func objectName(d vfs.Digest) string { return historyObjects + "/" + d.String() }

// Keep stores content under its digest unless it is there already.
func (ht *historyTx) Keep(ctx context.Context, d vfs.Digest, data []byte) (err error) {
	defer func() { err = bookkeepingFault(err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := ht.writer()
	if err != nil {
		return err
	}
	// The disk, not what the versions name, says whether it is there: a redaction that
	// failed after it removed the content leaves versions that still name it.
	if _, err := ht.fs().Stat(objectName(d)); err == nil {
		return nil
	}
	// Not flushed when the next record carries the content, up to walCarryMax bytes of
	// them: beyond (a large delete, an import), each is flushed on its own.
	carry := h.wal != nil && ht.keptBytes+int64(len(data)) <= walCarryMax
	write := func() error {
		if err := ht.makeDirs(h); err != nil {
			return err
		}
		if carry {
			return h.wal.fs.WriteFileUnsynced(objectName(d), data, true)
		}
		return ht.fs().WriteFileAtomic(objectName(d), data, true)
	}
	err = write()
	if errors.Is(err, fs.ErrNotExist) {
		h.dirsMade = false // the history's directory went away: make it again
		err = write()
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err == nil {
		ht.created = append(ht.created, d)
	}
	if carry && err == nil {
		ht.kept = append(ht.kept, walContent{D: d, B: data})
		ht.keptBytes += int64(len(data))
	}
	return nil
}

// dropUnnamed removes, after a failed transaction, the contents it wrote that no version
// names: a change refused for want of room must not leave its content holding the room
// that is left until the next pruning pass. After a failure to append to the log, which is
// then read again, they wait for that pass.
func (ht *historyTx) dropUnnamed() {
	h := ht.tx.s.history
	if !h.loaded {
		return
	}
	for _, d := range ht.created {
		if _, named := h.sizes[d]; !named {
			ht.fs().Remove(objectName(d))
		}
	}
}

// Record appends the versions of the next operation and flushes the log.
func (ht *historyTx) Record(ctx context.Context, vs []vfs.Version) (err error) {
	defer func() { err = bookkeepingFault(err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ht.group) > 0 {
		return errors.New("vfs: history: Record before the previous operation was settled")
	}
	h, err := ht.writer()
	if err != nil {
		return err
	}
	if ht.seq == 0 {
		// After the last version, and after any pruned: the newest may have been.
		ht.seq, ht.time = max(h.lastSeq, h.pruned)+1, h.cfg.Clock().UTC()
	}
	h.lastGroup++
	ht.groupID = h.lastGroup
	lines := make([]logLine, len(vs))
	for i := range vs {
		vs[i].Seq, vs[i].Time = ht.seq, ht.time
		lines[i] = logLine{G: ht.groupID, V: &vs[i]}
	}
	if h.wal != nil {
		// The change's record in the write-ahead log, flushed once the locks are released.
		if err := ht.walAppend(h, walLine{G: ht.groupID, V: vs, C: ht.kept}, ht.groupID-1, false); err != nil {
			h.loaded = false
			return err
		}
		ht.kept, ht.keptBytes = nil, 0
	}
	if err := ht.appendLines(h, h.wal == nil, lines...); err != nil {
		if h.wal != nil {
			// Refused before the history's log knew of it: the record goes too or, failing
			// that, says it failed.
			if ht.walCut(h, h.wal.last) != nil {
				ht.walRefused(h)
			}
		}
		return err
	}
	ht.group = vs
	return nil
}

// Settle ends the operation announced by Record.
func (ht *historyTx) Settle(ctx context.Context, outcome vfs.Outcome) (err error) {
	defer func() { err = bookkeepingFault(err) }()
	if len(ht.group) == 0 {
		return nil
	}
	h := ht.tx.s.history
	vs := ht.group
	ht.group = nil
	line := logLine{Settle: ht.groupID}
	switch outcome {
	case vfs.Failed:
		line.Partial, line.Only, vs = true, []int{}, nil
	case vfs.Partial:
		line.Only = ht.shown(vs)
		line.Partial = len(line.Only) < len(vs)
		kept := make([]vfs.Version, 0, len(line.Only))
		for _, i := range line.Only {
			kept = append(kept, vs[i])
		}
		vs = kept
		if !line.Partial {
			line.Only = nil
		}
	}
	if h.wal != nil && line.Partial {
		// A change that failed, or did part of its work, says so in the write-ahead log,
		// flushed: a crash of the machine must not have it redone.
		var err error
		if outcome == vfs.Failed {
			err = ht.walRefused(h)
		} else {
			err = ht.walAppend(h, walLine{Settle: ht.groupID, Only: line.Only}, h.lastGroup, true)
		}
		if err != nil {
			h.loaded = false // the next change reads the log again, and settles the group then
			return err
		}
	}
	// Not flushed: should the line be lost, the group is checked against the files.
	if err := ht.appendLines(h, false, line); err != nil {
		return err
	}
	h.fold(vs)
	h.appended += len(vs)
	if len(vs) > 0 {
		h.lastSeq = ht.seq
	}
	return nil
}

// Versions returns the history's versions, oldest first. A group a crash left open counts
// as the next change will settle it (see standing).
func (ht *historyTx) Versions(ctx context.Context) (_ []vfs.Version, err error) {
	defer func() { err = bookkeepingFault(err) }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ht.group) > 0 {
		return nil, errors.New("vfs: history: Versions while an operation is being recorded")
	}
	data, err := readAll(ht.fs(), historyLogName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s logScan
	s.scan(data, 0, false)
	n, only := len(s.versions), []int(nil)
	if len(s.pending) > 0 {
		only, _ = ht.standing(ht.tx.s.history, s.pendingG, s.pending)
	}
	for _, i := range only {
		s.versions = append(s.versions, s.pending[i])
	}
	if len(only) < len(s.pending) {
		s.interrupted(n, s.pending[0].Seq)
	}
	return s.versions, nil
}

// Pruned reads the highest number of a version pruning dropped from the log's header.
func (ht *historyTx) Pruned(ctx context.Context) (_ uint64, err error) {
	defer func() { err = bookkeepingFault(err) }()
	head, _, err := readHeadAndTail(ht.fs(), historyLogName, 4096, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var s logScan
	s.scan(head, 0, true)
	return s.pruned, nil
}

// Content returns the content with digest d, checked against it.
func (ht *historyTx) Content(ctx context.Context, d vfs.Digest) (_ []byte, err error) {
	defer func() { err = bookkeepingFault(err) }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.IsZero() {
		return nil, vfs.ErrNoContent
	}
	data, err := readAll(ht.fs(), objectName(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, vfs.ErrNoContent
	}
	if err != nil {
		return nil, err
	}
	if vfs.DigestOf(data) != d {
		return nil, errors.New("vfs: history: a kept content does not match its digest")
	}
	return data, nil
}

// Redact purges the content with digest d and marks the versions that named it.
func (ht *historyTx) Redact(ctx context.Context, d vfs.Digest, by string) (_ int, err error) {
	defer func() { err = bookkeepingFault(err) }()
	h, err := ht.writer()
	if err != nil {
		return 0, err
	}
	r := vfs.Redaction{By: by, Time: h.cfg.Clock().UTC()}
	vs, err := ht.Versions(ctx)
	if err != nil {
		return 0, err
	}
	n, found := 0, false
	for i := range vs {
		v := &vs[i]
		if v.SHA256 == d {
			v.SHA256, v.Redacted, n = vfs.Digest{}, &r, n+1
		}
		if v.Prev == d {
			v.Prev, v.PrevRedacted, found = vfs.Digest{}, true, true
		}
	}
	if n == 0 && !found {
		return 0, vfs.ErrNoContent
	}
	// The content goes first, the write-ahead log's copy with the checkpoint: a crash
	// before the log is rewritten leaves the versions naming a content that is gone, as
	// after pruning (redact marks them when run again), never a log that says redacted
	// beside the content still on disk.
	if h.wal != nil {
		if err := ht.checkpoint(h); err != nil {
			return 0, err
		}
	}
	if err := ht.fs().Remove(objectName(d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if err := ht.fs().SyncDir(historyObjects); err != nil {
		return 0, err
	}
	if err := ht.rewriteLog(h, vs); err != nil {
		return 0, err
	}
	return n, nil
}

// Import writes vs as the history of a store whose history has no versions.
func (ht *historyTx) Import(ctx context.Context, vs []vfs.Version, pruned uint64) (err error) {
	defer func() { err = bookkeepingFault(err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := ht.writer()
	if err != nil {
		return err
	}
	if h.lastSeq != 0 || len(ht.group) > 0 {
		return errors.New("vfs: history: import into a history that has versions")
	}
	h.pruned = pruned
	// The rewrite's checkpoint flushes the contents Keep left unflushed for a record: an
	// import makes none.
	return ht.rewrite(h, vs)
}

// rewrite replaces the log, atomically, with one holding vs under a new epoch. The
// write-ahead log is emptied first: its records must not bring back what a rewrite leaves
// out (a redacted content above all).
func (ht *historyTx) rewrite(h *fileHistory, vs []vfs.Version) error {
	if h.wal != nil {
		if err := ht.checkpoint(h); err != nil {
			return err
		}
	}
	return ht.rewriteLog(h, vs)
}

// rewriteLog is rewrite without the checkpoint.
func (ht *historyTx) rewriteLog(h *fileHistory, vs []vfs.Version) error {
	ht.closeLog(true) // the log is replaced
	if err := ht.makeDirs(h); err != nil {
		return err
	}
	h.loaded = false // whatever happens, read the log again
	var buf bytes.Buffer
	g := h.lastGroup + 1
	lines := []logLine{{History: historyFormat, Epoch: newEpoch(), Pruned: h.pruned}}
	for i := range vs {
		lines = append(lines, logLine{G: g, V: &vs[i]})
	}
	lines = append(lines, logLine{Settle: g})
	for i := range lines {
		if err := writeLogLine(&buf, &lines[i]); err != nil {
			return err
		}
	}
	if err := ht.fs().WriteFileAtomic(historyLogName, buf.Bytes(), false); err != nil {
		return err
	}
	ht.wrote = true
	return nil
}

// afterCommit prunes the history when a pass is due (vfs.HistoryConfig.PruneDue). Failing
// to prune is no failure of the change: the next pass tries again.
func (ht *historyTx) afterCommit() {
	h := ht.tx.s.history
	if !ht.wrote || !h.loaded {
		return
	}
	if h.wal != nil && h.wal.due {
		ht.checkpoint(h) // failing, it stays due
	}
	if !h.cfg.PruneDue(h.lastPrune, h.appended, h.bytes, h.oldest) {
		return
	}
	now := h.cfg.Clock()
	h.lastPrune, h.appended = now, 0
	ctx := context.Background()
	vs, err := ht.Versions(ctx)
	if err != nil {
		return
	}
	kept, bytes, dropped := h.cfg.Prune(vs, now)
	if len(kept) < len(vs) {
		h.pruned = max(h.pruned, dropped)
		if ht.rewrite(h, kept) != nil {
			return
		}
	}
	// Remove the contents no version names any more, and temporary files a crash left.
	names := map[string]bool{}
	for i := range kept {
		names[kept[i].SHA256.String()] = true
		names[kept[i].Prev.String()] = true
	}
	d, err := ht.fs().OpenDir(historyObjects)
	if err != nil {
		return
	}
	entries, err := d.Entries()
	d.Close()
	if err != nil {
		return
	}
	removed := false
	for _, e := range entries {
		if !names[e.Name] {
			removed = ht.fs().Remove(historyObjects+"/"+e.Name) == nil || removed
		}
	}
	if removed {
		ht.fs().SyncDir(historyObjects)
	}
	if h.loaded {
		h.bytes = bytes
	}
}

// bookkeepingFault keeps a failure of the history's own files from reading as the model's
// path: the log turned into a directory must not tell the model that its file "is not a
// regular file", nor that it "does not exist". Such errors become internal storage
// failures (docs/behaviour.md §4); the others (no space, permission, the package's own
// sentinels) stay as they are.
func bookkeepingFault(err error) error {
	if err == nil || !(errors.Is(err, vfs.ErrNotRegular) || errors.Is(err, vfs.ErrEscape) || vfs.IsNotExist(err) || vfs.IsExist(err) || errors.Is(err, syscall.EISDIR)) {
		return err
	}
	return &historyFault{msg: err.Error()}
}

// historyFault is a failure of the history's files, with the text of what went wrong for
// the operator's log and nothing for errors.Is to find.
type historyFault struct{ msg string }

func (e *historyFault) Error() string { return "history files: " + e.msg }
