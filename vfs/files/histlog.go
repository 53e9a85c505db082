package files

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/spf13/afero"
)

// logLine is one line of the log.
type logLine struct {
	History int          `json:"history,omitempty"`
	Epoch   string       `json:"epoch,omitempty"`
	Pruned  uint64       `json:"pruned,omitempty"` // in the header: see vfs.History.Pruned
	G       uint64       `json:"g,omitempty"`
	V       *vfs.Version `json:"v,omitempty"`
	Settle  uint64       `json:"settle,omitempty"`
	Partial bool         `json:"partial,omitempty"`
	Only    []int        `json:"only,omitempty"`
}

// load reads what the log holds beyond what h knows (all of it, the first time or after a
// rewrite), drops a torn last line, and settles a group a crash left open.
func (ht *historyTx) load(h *fileHistory) error {
	if h.wal != nil && !h.loaded && walNeedsRecovery(ht.fs(), h.wal.fs) {
		if err := ht.recoverWAL(h); err != nil {
			return err
		}
	}
	// What another process appended is read from where this one stopped, with the header
	// to tell whether the log is still the copy this process read (one open for both).
	var from int64
	var data []byte
	if h.loaded && h.offset > 0 {
		head, tail, err := readHeadAndTail(ht.fs(), historyLogName, h.offset, h.offset)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		var s logScan
		s.scan(head, 0, true)
		if err == nil && s.epoch == h.epoch && tail != nil {
			from, data = h.offset, tail
		}
	}
	if from == 0 {
		var err error
		data, err = readAll(ht.fs(), historyLogName)
		if errors.Is(err, fs.ErrNotExist) {
			h.reset()
			h.loaded = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	var s logScan
	if from == 0 {
		s.scan(data, 0, true)
		epoch, pruned := s.epoch, s.pruned
		h.reset()
		h.epoch, h.pruned = epoch, pruned
		s = logScan{}
		s.scan(data, 0, false)
	} else {
		s = logScan{epoch: h.epoch, lastSeq: h.lastSeq, lastGroup: h.lastGroup}
		s.scan(data, from, false)
	}
	h.offset, h.lastSeq, h.lastGroup = s.end, s.lastSeq, s.lastGroup
	h.fold(s.versions)
	if s.end < from+int64(len(data)) {
		// A torn last line (a crash during an append): cut it off before appending more.
		if err := truncate(ht.fs(), historyLogName, s.end); err != nil {
			return err
		}
	}
	if len(s.pending) > 0 {
		only, known := ht.standing(h, s.pendingG, s.pending)
		if h.wal != nil && !known && len(only) < len(s.pending) {
			// The write-ahead log must know too, or a crash of the machine would have it
			// redo the change.
			if err := ht.walAppend(h, walLine{Settle: s.pendingG, Only: only}, h.lastGroup, true); err != nil {
				return err
			}
		}
		if err := ht.appendLines(h, false, logLine{Settle: s.pendingG, Partial: len(only) < len(s.pending), Only: only}); err != nil {
			return err
		}
		kept := make([]vfs.Version, 0, len(only))
		for _, i := range only {
			kept = append(kept, s.pending[i])
		}
		h.fold(kept)
		if len(kept) > 0 {
			h.lastSeq = max(h.lastSeq, kept[0].Seq)
		}
	}
	h.loaded, h.stale = true, false
	return nil
}

// logScan is what a scan of the log found.
type logScan struct {
	epoch     string
	pruned    uint64
	versions  []vfs.Version // settled, oldest first
	pending   []vfs.Version // a group without its settle line, at the end
	pendingG  uint64
	lastSeq   uint64
	lastGroup uint64
	end       int64           // offset just past the last whole line
	groups    map[uint64]bool // when not nil: the groups settled (recoverWAL),
	vgroups   []uint64        // and the group of each version
}

// scan reads the lines of data (which starts at offset base in the log); with headerOnly it
// stops after the first line.
func (s *logScan) scan(data []byte, base int64, headerOnly bool) {
	s.end = base
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return // torn
		}
		line := data[:i]
		data = data[i+1:]
		s.end += int64(i + 1)
		var l logLine
		if json.Unmarshal(line, &l) != nil {
			continue // unreadable (never written by this code): skipped
		}
		switch {
		case l.History != 0:
			s.epoch, s.pruned = l.Epoch, l.Pruned
			if headerOnly {
				return
			}
		case l.V != nil:
			if len(s.pending) > 0 && l.G != s.pendingG {
				// A group whose settle line is missing although others follow: its
				// settle line failed to be written after the operation succeeded.
				s.keep(s.pendingG, s.pending...)
				s.lastSeq = max(s.lastSeq, s.pending[0].Seq)
				s.settled(s.pendingG)
				s.pending = nil
			}
			s.pending, s.pendingG = append(s.pending, *l.V), l.G
			s.lastGroup = max(s.lastGroup, l.G)
		case l.Settle != 0:
			n := len(s.versions)
			if l.Settle == s.pendingG {
				s.settled(l.Settle)
				if l.Partial {
					for _, i := range l.Only {
						if i >= 0 && i < len(s.pending) {
							s.keep(l.Settle, s.pending[i])
						}
					}
					if len(l.Only) < len(s.pending) {
						s.interrupted(n, s.pending[0].Seq)
					}
				} else {
					s.keep(l.Settle, s.pending...)
				}
			}
			if len(s.versions) > n {
				// A number is taken by a change that happened: a failed one leaves it free.
				s.lastSeq = max(s.lastSeq, s.versions[len(s.versions)-1].Seq)
			}
			s.pending, s.pendingG = nil, 0
			s.lastGroup = max(s.lastGroup, l.Settle)
		}
	}
}

// interrupted marks the versions of transaction seq (those from index from on, and the
// ones before it that carry the same number) as part of a change cut short.
func (s *logScan) interrupted(from int, seq uint64) {
	for i := len(s.versions) - 1; i >= 0 && (i >= from || s.versions[i].Seq == seq); i-- {
		if s.versions[i].Seq == seq {
			s.versions[i].Interrupted = true
		}
	}
}

// keep adds settled versions of group g.
func (s *logScan) keep(g uint64, vs ...vfs.Version) {
	s.versions = append(s.versions, vs...)
	if s.groups != nil {
		for range vs {
			s.vgroups = append(s.vgroups, g)
		}
	}
}

func (s *logScan) settled(g uint64) {
	if s.groups != nil {
		s.groups[g] = true
	}
}

// standing returns the indexes of the versions of group g, whose settle line the history's
// log lacks, that stand, as a crash of the machine would have them (recoverVersions): with
// the write-ahead log, none when its record was taken off (the change failed with no room
// to say so), and those its outcome lists when it has one (the change failed, and there
// was no room for the settle line); else those whose effect the files show (known is
// false). The files alone cannot tell a failed write from one of the content the file held
// already.
func (ht *historyTx) standing(h *fileHistory, g uint64, vs []vfs.Version) (only []int, known bool) {
	if h.wal != nil {
		if data, err := readAll(ht.fs(), walName); err == nil {
			w := scanWAL(data)
			i := len(w.records) - 1
			for i >= 0 && w.records[i].G != g {
				i--
			}
			switch {
			case i < 0 && w.format >= 2 && g > w.from:
				return []int{}, true // after the last checkpoint, and no record: never acknowledged
			case i >= 0 && w.outcome[i] != nil:
				only = []int{}
				for _, j := range w.outcome[i].Only {
					if j >= 0 && j < len(vs) {
						only = append(only, j)
					}
				}
				return only, true
			}
		}
	}
	return ht.shown(vs), false
}

// shown returns the indexes of the versions whose effect the files show.
func (ht *historyTx) shown(vs []vfs.Version) []int {
	only := []int{}
	for i, v := range vs {
		if ht.shows(v) {
			only = append(only, i)
		}
	}
	return only
}

func (ht *historyTx) shows(v vfs.Version) bool {
	switch v.Kind {
	case vfs.Created, vfs.Modified:
		return ht.holds(v.Path, v.SHA256)
	case vfs.Deleted:
		return !ht.exists(v.Path)
	case vfs.Moved:
		return !ht.exists(v.Path) && ht.holds(v.NewPath, v.SHA256)
	}
	return false
}

func (ht *historyTx) exists(p string) bool {
	_, _, err := ht.fs().LstatIfPossible(nameOf(p))
	return !errors.Is(err, fs.ErrNotExist)
}

func (ht *historyTx) holds(p string, d vfs.Digest) bool {
	data, err := readAll(ht.fs(), nameOf(p))
	return err == nil && vfs.DigestOf(data) == d
}

// appendLines appends lines to the log (creating it with its header), flushing it with
// sync. The transaction's appends (a change's versions, then its outcome) share one
// descriptor, closed when the transaction ends (or the log is written anew). A failure
// leaves h to be loaded again, which cuts off a torn line.
func (ht *historyTx) appendLines(h *fileHistory, sync bool, lines ...logLine) (err error) {
	defer func() {
		if err != nil {
			h.loaded = false
			ht.closeLog(true)
		}
	}()
	newFile := false
	if ht.log == nil {
		var f afero.File
		var fi os.FileInfo
		if h.wal != nil {
			f, fi, _, err = h.wal.log.use(ht, h, historyLogName, os.O_WRONLY|os.O_APPEND)
			if err != nil {
				return err
			}
			ht.logKept = &h.wal.log
		} else {
			if f, err = ht.openBookkeeping(h, historyLogName, os.O_WRONLY|os.O_APPEND); err != nil {
				return err
			}
			if fi, err = f.Stat(); err != nil {
				f.Close()
				return err
			}
		}
		ht.log = f
		newFile = fi.Size() == 0
	}
	var buf bytes.Buffer
	if newFile {
		h.offset, h.epoch = 0, newEpoch()
		lines = append([]logLine{{History: historyFormat, Epoch: h.epoch, Pruned: h.pruned}}, lines...)
	}
	for i := range lines {
		if err := writeLogLine(&buf, &lines[i]); err != nil {
			return err
		}
	}
	if _, err := ht.log.Write(buf.Bytes()); err != nil {
		return err
	}
	if sync {
		if err := ht.log.Sync(); err != nil {
			return err
		}
	}
	if newFile {
		// A new file: its directory entry must last too.
		if err := ht.fs().SyncDir(historyDir); err != nil {
			return err
		}
	}
	h.offset += int64(buf.Len())
	ht.wrote = true
	return nil
}

// openBookkeeping opens (creating it) the history's file name with flag, making the
// history's directories first: again should they have gone (with the storage directory,
// which was then made again), and the history then starts anew.
func (ht *historyTx) openBookkeeping(h *fileHistory, name string, flag int) (afero.File, error) {
	if err := ht.makeDirs(h); err != nil {
		return nil, err
	}
	f, err := ht.fs().OpenFile(name, flag|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		h.dirsMade = false
		if err = ht.makeDirs(h); err == nil {
			f, err = ht.fs().OpenFile(name, flag|os.O_CREATE, 0o600)
		}
	}
	return f, err
}

func newEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// makeDirs creates the history's directories the first time, flushing their parents.
func (ht *historyTx) makeDirs(h *fileHistory) error {
	if h.dirsMade {
		return nil
	}
	fsys := ht.fs()
	if _, err := fsys.Stat(historyObjects); err != nil {
		if err := fsys.MkdirAll(historyObjects, 0o700); err != nil {
			return err
		}
		for _, dir := range []string{historyDir, ""} {
			if err := fsys.SyncDir(dir); err != nil {
				return err
			}
		}
	}
	h.dirsMade = true
	return nil
}

// readHeadAndTail reads, with one open of the regular file name, its first line (at most
// limit bytes, and never more than 4 KiB) and, unless from is negative, all from offset
// from on (nil when the file is shorter than that).
func readHeadAndTail(fsys FS, name string, limit, from int64) (head, tail []byte, err error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	head = make([]byte, min(limit, 4096, fi.Size()))
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	if from < 0 || fi.Size() < from {
		return head, nil, nil
	}
	tail = make([]byte, fi.Size()-from)
	if _, err := f.ReadAt(tail, from); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	return head, tail, nil
}

// readAll reads the whole regular file name.
func readAll(fsys FS, name string) ([]byte, error) { return readRegular(fsys, name, name) }

func truncate(fsys FS, name string, size int64) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
