package vfs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
// last line, which is skipped. Replaying the journal onto the snapshot gives the record;
// Expire, and any change once the journal is over accessJournalMax, fold the journal into
// a new snapshot (written atomically) and then remove it, so both stay bounded by the
// number of files in the store.
const (
	accessName        = bookkeepingPrefix + "-access"
	accessJournalName = bookkeepingPrefix + "-access.log"
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
}

// TrackAccess makes the store record when each file is viewed or changed, for Expire; now is
// the clock (time.Now, or a fake one in tests). Every process that serves or edits the
// storage should track, so that Expire counts all uses. A read-only store records nothing.
func (s *Store) TrackAccess(now func() time.Time) error {
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
func (tx *Tx) touch(name string) {
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
func (tx *Tx) move(name, newName string) {
	if a := tx.s.access; a != nil {
		tx.journal = append(tx.journal, accessMove+"\t"+strconv.FormatInt(a.now().Unix(), 10)+"\t"+name+"\t"+newName+"\n")
	}
}

// forget records that name, and everything below it, is gone.
func (tx *Tx) forget(name string) {
	if a := tx.s.access; a != nil {
		tx.journal = append(tx.journal, accessForget+"\t"+strconv.FormatInt(a.now().Unix(), 10)+"\t"+name+"\n")
	}
}

// flushAccess appends the transaction's events to the journal, in one write, while the
// storage lock is still held. A failure to record is not the caller's failure: the call
// itself succeeded, and the worst outcome is a file kept longer. It reports whether the
// journal has grown past accessJournalMax; a change folds it into the snapshot at once,
// a View leaves that to compactAccess, which needs the exclusive lock.
func (tx *Tx) flushAccess() (full bool) {
	a := tx.s.access
	if len(tx.journal) == 0 || a == nil {
		return false
	}
	a.appendMu.Lock()
	defer a.appendMu.Unlock()
	f, err := tx.s.fs.OpenFile(accessJournalName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	_, err = f.Write([]byte(strings.Join(tx.journal, "")))
	fi, serr := f.Stat()
	f.Close()
	tx.journal = tx.journal[:0]
	if err != nil || serr != nil || fi.Size() <= accessJournalMax {
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

// compactAccess folds a journal that grew past its bound into the snapshot.
func (s *Store) compactAccess(ctx context.Context) {
	s.Update(ctx, func(tx *Tx) error {
		rec, err := readAccess(s.fs)
		if err != nil {
			return err
		}
		return writeAccess(s.fs, rec)
	})
}

// readAccess returns the record: the snapshot with the journal replayed onto it.
func readAccess(fsys afero.Fs) (map[string]int64, error) {
	rec := map[string]int64{}
	data, err := afero.ReadFile(fsys, accessName)
	switch {
	case err == nil:
		if json.Unmarshal(data, &rec) != nil {
			rec = map[string]int64{} // a damaged record is rebuilt: every file starts a new grace period
		}
	case !IsNotExist(err):
		return nil, err
	}
	f, err := fsys.Open(accessJournalName)
	if IsNotExist(err) {
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
func writeAccess(fsys afero.Fs, rec map[string]int64) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := writeAtomic(fsys, accessName, data, fsys.Rename); err != nil {
		return err
	}
	if err := fsys.Remove(accessJournalName); err != nil && !IsNotExist(err) {
		return err
	}
	return nil
}

// Expired is a file, or a directory left empty, that Expire deleted (or, in a dry run,
// would delete).
type Expired struct {
	Path string // virtual path
	Size int64  // bytes of the file; 0 for a directory
	Dir  bool
}

// ErrNotTracked is returned by Expire on a store that does not record access.
var ErrNotTracked = errors.New("vfs: Expire needs TrackAccess")

// Expire deletes every file not viewed or changed for longer than maxAge, and the
// directories that become empty with them (never /memories itself). A file the record does
// not know yet (created by hand, or before tracking was turned on) starts its grace period
// now. With dryRun it deletes nothing and reports what it would delete. A read-only store,
// and one that does not track access, is never touched.
func (s *Store) Expire(ctx context.Context, maxAge time.Duration, dryRun bool) ([]Expired, error) {
	if s.readOnly {
		return nil, ErrReadOnlyStore
	}
	a := s.access
	if a == nil {
		return nil, ErrNotTracked
	}
	var out []Expired
	err := s.Update(ctx, func(tx *Tx) error {
		rec, err := readAccess(s.fs)
		if err != nil {
			return err
		}
		now := a.now().Unix()
		files := map[string]int64{}
		if err := tx.walkFiles("", false, func(name string, size int64) { files[name] = size }); err != nil {
			return err
		}
		for name := range rec {
			if _, ok := files[name]; !ok {
				delete(rec, name)
			}
		}
		var old []string
		for name := range files {
			t, ok := rec[name]
			switch {
			case !ok:
				rec[name] = now
			case now-t > int64(maxAge/time.Second):
				old = append(old, name)
			}
		}
		slices.Sort(old)

		gone := map[string]bool{}
		for _, name := range old {
			out = append(out, Expired{Path: Root + "/" + name, Size: files[name]})
			gone[name] = true
			if !dryRun {
				if _, err := tx.RemoveAll(Path{clean: Root + "/" + name}); err != nil {
					return err
				}
				delete(rec, name)
			}
		}
		tx.journal = nil // the deletions are in rec already
		// Directories left empty go too, deepest first; a dry run works out which would.
		for _, name := range old {
			for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
				if gone[dir] {
					continue
				}
				empty, err := tx.emptyAfter(dir, gone)
				if err != nil || !empty {
					break
				}
				if !dryRun && s.fs.Remove(dir) != nil {
					break // something the listing does not show is in it: keep it
				}
				gone[dir] = true
				out = append(out, Expired{Path: Root + "/" + dir, Dir: true})
			}
		}
		return writeAccess(s.fs, rec)
	})
	return out, err
}

// emptyAfter reports whether directory dir holds nothing once the names in gone are gone.
func (tx *Tx) emptyAfter(dir string, gone map[string]bool) (bool, error) {
	entries, err := tx.list(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !gone[path.Join(dir, e.Name)] {
			return false, nil
		}
	}
	return true, nil
}
