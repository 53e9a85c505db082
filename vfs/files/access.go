package files

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// The store's record of when each file was last viewed or changed, kept in the storage root
// as bookkeeping files (no virtual path reaches them), so that every memory-mcp process on
// the same storage (servers, exec) contributes to it and Expire sees them all. The operating
// system's access times are no use for this: most filesystems are mounted relatime or
// noatime, and copying or backing up a directory resets them.
//
// The record is a snapshot (accessName, a JSON object of name → Unix seconds) plus a journal
// (accessJournalName) that transactions append to: one line per event, written with one
// append after the transaction, under the storage lock. A crash can at worst leave a torn
// line, which is skipped or names a file the record then keeps a while longer: never one
// that goes sooner. Replaying the journal onto the snapshot gives the record;
// Expire, and any change once the journal is over accessJournalMax, fold the journal into
// a new snapshot (written atomically) and then remove it, so both stay bounded by the
// number of files in the store.
const (
	accessName        = vfs.BookkeepingPrefix + "-access"
	accessJournalName = vfs.BookkeepingPrefix + "-access.log"
	accessJournalMax  = 1 << 20
	// accessRecentMax bounds the names a process remembers having journaled this second.
	accessRecentMax = 4096
)

type accessLog struct {
	now func() time.Time

	mu        sync.Mutex
	recentSec int64           // the second recent describes
	recent    map[string]bool // names journaled as viewed during recentSec by this process

	// appendMu makes this process's appends one at a time: concurrent Views share the
	// storage lock, and not every backend appends atomically (MemFs seeks, then writes).
	appendMu sync.Mutex
	// lost is when an append last failed (Unix seconds; 0: none since the record was last
	// folded): its views are missing, so no file counts as unused from before it. The
	// storage lock keeps it too (Counters.Lost), for the other processes.
	lost int64
}

// TrackAccess makes the store record when each file is viewed or changed, for Expire; now is
// the clock (time.Now, or a fake one in tests). Every process that serves or edits the
// storage should track, so that Expire counts all uses. A read-only store records nothing.
func (s *AferoStorage) TrackAccess(now func() time.Time) error {
	if s.readOnly {
		return nil
	}
	s.access = &accessLog{now: now, recent: map[string]bool{}}
	return nil
}

// Access event kinds, the first field of a journal line.
const (
	accessTouch  = "t" // t <sec> <name>: viewed or changed
	accessMove   = "m" // m <sec> <old> <new>: renamed (a change of everything moved)
	accessForget = "d" // d <sec> <name>: deleted, with everything below it
)

// touch records that the file name was viewed or changed. Repeated views of one file in
// the same second are recorded once.
func (tx *aferoTx) touch(name string) {
	a := tx.s.access
	if a == nil {
		return
	}
	now := a.now().Unix()
	if !tx.write {
		a.mu.Lock()
		if a.recentSec != now || len(a.recent) > accessRecentMax {
			a.recentSec, a.recent = now, map[string]bool{}
		}
		seen := a.recent[name]
		a.recent[name] = true
		a.mu.Unlock()
		if seen {
			return
		}
	}
	tx.journal = append(tx.journal, accessTouch+"\t"+strconv.FormatInt(now, 10)+"\t"+name+"\n")
}

// move records a rename of name, and everything below it, to newName: a change of each.
func (tx *aferoTx) move(name, newName string) {
	if a := tx.s.access; a != nil {
		tx.journal = append(tx.journal, accessMove+"\t"+strconv.FormatInt(a.now().Unix(), 10)+"\t"+name+"\t"+newName+"\n")
	}
}

// forget records that name, and everything below it, is gone.
func (tx *aferoTx) forget(name string) {
	if a := tx.s.access; a != nil {
		tx.journal = append(tx.journal, accessForget+"\t"+strconv.FormatInt(a.now().Unix(), 10)+"\t"+name+"\n")
	}
}

// flushAccess appends the transaction's events to the journal, in one write, while the
// storage lock is still held. A failure to record is not the caller's failure: the call
// itself succeeded, and lost makes expiry allow for the events missed (see LastAccess).
// It reports whether the journal has grown past accessJournalMax; a change folds it into
// the snapshot at once, a View leaves that to compactAccess, which needs the exclusive lock.
func (tx *aferoTx) flushAccess() (full bool) {
	a := tx.s.access
	if a == nil {
		return false
	}
	if tx.compact {
		// LastAccess read the record for expiry: fold everything into a new snapshot.
		if rec, err := readAccess(tx.s.fs); err == nil {
			for _, line := range tx.journal {
				replay(rec, strings.Split(strings.TrimSuffix(line, "\n"), "\t"))
			}
			if writeAccess(tx.s.fs, rec) == nil {
				a.appendMu.Lock()
				if a.lost <= tx.lost {
					a.lost = 0 // in the snapshot now, for every file
				}
				a.appendMu.Unlock()
			}
		}
		tx.journal = tx.journal[:0]
		return false
	}
	if len(tx.journal) == 0 {
		return false
	}
	a.appendMu.Lock()
	defer a.appendMu.Unlock()
	fi, err := a.append(tx.s.fs, []byte(strings.Join(tx.journal, "")))
	tx.journal = tx.journal[:0]
	if err != nil {
		// Kept where every process reads it too: this one may end before its next sweep.
		a.lost = a.now().Unix()
		tx.s.fs.SetLost(a.lost)
	}
	if err != nil || fi.Size() <= accessJournalMax {
		return false
	}
	if !tx.write {
		return true
	}
	if rec, err := readAccess(tx.s.fs); err == nil {
		writeAccess(tx.s.fs, rec)
	}
	return false
}

// append writes data at the journal's end and returns the journal's status after; the
// caller holds appendMu. Each append starts a new line: a line a crash of the machine tore
// ends there, rather than taking the first line after it along when it is read.
func (a *accessLog) append(fsys FS, data []byte) (os.FileInfo, error) {
	f, err := fsys.OpenFile(accessJournalName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(append([]byte{'\n'}, data...)); err != nil {
		return nil, err
	}
	return f.Stat()
}

// compactAccess folds a journal that grew past its bound into the snapshot.
func (s *AferoStorage) compactAccess() {
	ctx, cancel := context.WithTimeout(context.Background(), compactTimeout)
	defer cancel()
	t, err := s.Begin(ctx, true)
	if err != nil {
		return
	}
	tx := t.(*aferoTx)
	tx.compact = true
	tx.Commit()
}

// compactTimeout bounds how long a compaction waits for the exclusive lock; one that
// cannot have it is left to the next change.
const compactTimeout = 5 * time.Second

// readAccess returns the record: the snapshot with the journal replayed onto it.
func readAccess(fsys FS) (map[string]int64, error) {
	rec := map[string]int64{}
	data, err := afero.ReadFile(fsys, accessName)
	switch {
	case err == nil:
		if json.Unmarshal(data, &rec) != nil {
			rec = map[string]int64{} // a damaged record is rebuilt: every file starts a new grace period
		}
	case !vfs.IsNotExist(err):
		return nil, err
	}
	f, err := fsys.Open(accessJournalName)
	if vfs.IsNotExist(err) {
		return rec, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return rec, nil // a last line without its newline was torn by a crash
		}
		if err != nil {
			return nil, err
		}
		replay(rec, strings.Split(strings.TrimSuffix(line, "\n"), "\t"))
	}
}

// replay applies one journal line to the record.
func replay(rec map[string]int64, f []string) {
	if len(f) < 3 {
		return
	}
	sec, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return
	}
	under := func(k, name string) bool { return k == name || strings.HasPrefix(k, name+"/") }
	switch {
	case f[0] == accessTouch && len(f) == 3:
		rec[f[2]] = max(rec[f[2]], sec)
	case f[0] == accessMove && len(f) == 4:
		for k := range rec {
			if under(k, f[2]) {
				delete(rec, k)
				rec[f[3]+k[len(f[2]):]] = sec
			}
		}
		rec[f[3]] = max(rec[f[3]], sec) // a moved file the record did not know yet
	case f[0] == accessForget && len(f) == 3:
		for k := range rec {
			if under(k, f[2]) {
				delete(rec, k)
			}
		}
	}
}

// writeAccess stores rec as the new snapshot and then drops the journal it contains.
func writeAccess(fsys FS, rec map[string]int64) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := fsys.WriteFileAtomic(accessName, data, false); err != nil {
		return err
	}
	if err := fsys.Remove(accessJournalName); err != nil && !vfs.IsNotExist(err) {
		return err
	}
	return nil
}

// LastAccess returns the record for the files that exist now (see Txn): a name the record
// has but no file does is dropped; a file the record does not know yet (created by hand,
// or before tracking was turned on) starts now; and every file counts as used when a
// process last failed to record its events (lost, this one's or the storage lock's),
// which it journals.
func (tx *aferoTx) LastAccess(ctx context.Context) (map[string]int64, error) {
	a := tx.s.access
	if a == nil {
		return nil, vfs.ErrNotTracked
	}
	rec, err := readAccess(tx.s.fs)
	if err != nil {
		return nil, err
	}
	files := map[string]bool{}
	err = tx.walkFiles(ctx, "", false, func(name string, _ int64) {
		// A name made outside memory-mcp that no path may hold is not tracked: expiry
		// could not record its deletion, and a newline in it would forge journal lines.
		if _, err := vfs.Resolve(vfs.Root + "/" + name); err == nil {
			files[name] = true
		}
	})
	if err != nil {
		return nil, err
	}
	now := a.now().Unix()
	var forgotten []string
	for name, sec := range rec {
		if files[name] {
			continue
		}
		delete(rec, name)
		tx.forget(name)
		forgotten = append(forgotten, name)
		// Where the filesystem ignores case, a file recorded in another spelling (as the
		// model spelled it, before names were made canonical) keeps that time.
		if c := tx.canonicalName(name); files[c] && sec > rec[c] {
			rec[c] = sec
			tx.journal = append(tx.journal, accessTouch+"\t"+strconv.FormatInt(sec, 10)+"\t"+c+"\n")
		}
	}
	// A forget takes everything below its name: a file below one (a name that is a
	// directory now, after a rename of one or an edit by hand) is recorded again, as it was.
	for name, sec := range rec {
		if slices.ContainsFunc(forgotten, func(f string) bool { return strings.HasPrefix(name, f+"/") }) {
			tx.journal = append(tx.journal, accessTouch+"\t"+strconv.FormatInt(sec, 10)+"\t"+name+"\n")
		}
	}
	a.appendMu.Lock()
	lost := max(a.lost, tx.sharedLost)
	a.appendMu.Unlock()
	tx.lost = lost
	for name := range files {
		sec, ok := rec[name]
		switch {
		case !ok:
			sec = now
		case sec < lost: // it may have been viewed then
			sec = lost
		default:
			continue
		}
		rec[name] = sec
		tx.journal = append(tx.journal, accessTouch+"\t"+strconv.FormatInt(sec, 10)+"\t"+name+"\n")
	}
	if tx.write {
		tx.compact = true
	}
	return rec, nil
}
