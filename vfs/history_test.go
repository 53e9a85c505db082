package vfs

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// simulate turns ops into the versions a store records for them: each op changes one of
// three files (create, write, delete, or rename to another), a zero op ends a change. It
// returns the versions and the files after each change (by its number, from 1).
func simulate(ops []byte) ([]Version, []map[string]FileState) {
	names := []string{"/memories/a", "/memories/b", "/memories/c"}
	files := map[string]FileState{}
	var vs []Version
	seq := uint64(1)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []map[string]FileState{{}}
	for i, op := range ops {
		if op == 0 {
			states = append(states, maps.Clone(files))
			seq++
			continue
		}
		p, q := names[int(op)%3], names[int(op/3)%3]
		content := []byte(fmt.Sprint(i))
		st := FileState{Exists: true, Size: int64(len(content)), SHA256: DigestOf(content)}
		before := files[p]
		v := Version{Seq: seq, Time: start.Add(time.Duration(seq)*time.Hour + time.Duration(i)*time.Millisecond),
			Actor: "a", Command: "c", Path: p, PrevSize: before.Size, Prev: before.SHA256}
		switch kind := op / 9 % 3; {
		case !before.Exists:
			v.Kind, v.PrevSize, v.Size, v.SHA256 = Created, 0, st.Size, st.SHA256
			files[p] = st
		case kind == 0 && p != q && !files[q].Exists:
			v.Kind, v.NewPath, v.Size, v.SHA256 = Moved, q, before.Size, before.SHA256
			files[q] = before
			delete(files, p)
		case kind == 1:
			v.Kind, v.PrevSize, v.Prev = Deleted, before.Size, before.SHA256
			delete(files, p)
		default:
			v.Kind, v.Size, v.SHA256 = Modified, st.Size, st.SHA256
			files[p] = st
		}
		vs = append(vs, v)
	}
	return vs, append(states, files)
}

// Whatever the limits drop, a pruned history still reads as the store wrote it (an export
// of it imports), it still knows every file's current content, and what it says of any
// file after any change is true: where pruning took what it would need, it says nothing.
func FuzzPrune(f *testing.F) {
	f.Add([]byte{1, 10, 0, 2, 11, 20, 0, 4, 5, 0, 19}, uint8(1), uint16(20), uint8(3))
	f.Add([]byte{1, 9, 4, 13, 0, 2, 1, 0, 3, 19, 28, 1}, uint8(0), uint16(5), uint8(0))
	f.Fuzz(func(t *testing.T, ops []byte, maxVersions uint8, maxBytes uint16, maxAgeHours uint8) {
		if len(ops) > 200 {
			return
		}
		vs, states := simulate(ops)
		if err := checkVersions(vs); err != nil {
			t.Fatalf("the simulation wrote a history the store would not: %v", err)
		}
		c := HistoryConfig{MaxVersions: int(maxVersions % 4), MaxBytes: int64(maxBytes % 64),
			MaxAge: time.Duration(maxAgeHours%8) * time.Hour}
		last := uint64(1)
		if len(vs) > 0 {
			last = vs[len(vs)-1].Seq
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(last) * time.Hour)
		kept, _, dropped := c.Prune(append([]Version(nil), vs...), now)
		if err := checkVersions(kept); err != nil {
			t.Errorf("pruned with %+v, the history no longer imports: %v", c, err)
		}
		for p, want := range states[last] {
			if st, known := StateAt(kept, p, last, dropped); !known || st != want {
				t.Errorf("pruned with %+v, %s is %+v, known %v; want %+v", c, p, st, known, want)
			}
		}
		for seq := uint64(1); seq <= last; seq++ {
			for _, p := range []string{"/memories/a", "/memories/b", "/memories/c"} {
				st, known := StateAt(kept, p, seq, dropped)
				if want := states[seq][p]; known && st != want {
					t.Errorf("pruned with %+v (up to %d), %s after %d is %+v; want %+v", c, dropped, p, seq, st, want)
				}
				touched := slices.ContainsFunc(vs, func(v Version) bool { return v.Touches(p) })
				if !known && dropped == 0 && touched {
					t.Errorf("nothing pruned, yet the state of %s after %d is not known", p, seq)
				}
			}
		}
	})
}

// When a pruning pass is due, by the one rule every backend follows.
func TestPruneDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recent, old := now.Add(-time.Minute), now.Add(-time.Hour)
	limits := HistoryConfig{MaxAge: 24 * time.Hour, MaxBytes: 100, Now: func() time.Time { return now }}
	versions := HistoryConfig{MaxVersions: 3, Now: func() time.Time { return now }}
	for _, c := range []struct {
		name   string
		cfg    HistoryConfig
		last   time.Time
		since  int
		bytes  int64
		oldest time.Time
		want   bool
	}{
		{"the process's first change", limits, time.Time{}, 1, 0, time.Time{}, true},
		{"an hour after the last pass", limits, old, 1, 0, time.Time{}, true},
		{"within the hour, all within the limits", limits, recent, PruneEvery, 50, now.Add(-time.Hour), false},
		{"within the hour, over the bytes, 9 versions since", limits, recent, PruneEvery/100 - 1, 101, time.Time{}, false},
		{"within the hour, over the bytes, 10 versions since", limits, recent, PruneEvery / 100, 101, time.Time{}, true},
		{"within the hour, a version too old, 999 since", limits, recent, PruneEvery - 1, 0, now.Add(-25 * time.Hour), false},
		{"within the hour, a version too old, 1000 since", limits, recent, PruneEvery, 0, now.Add(-25 * time.Hour), true},
		{"a limit of versions, 1000 since", versions, recent, PruneEvery, 0, time.Time{}, true},
		{"no limits, 1000 since", HistoryConfig{Now: limits.Now}, recent, PruneEvery, 0, time.Time{}, false},
	} {
		if got := c.cfg.PruneDue(c.last, c.since, c.bytes, c.oldest); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}
