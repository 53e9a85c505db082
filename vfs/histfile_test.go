package vfs

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// A crash between announcing an operation and settling it leaves a group without its settle
// line, perhaps with a torn line after it: readers check it against the files, and the next
// change settles it, keeping exactly the versions the files show.
func TestHistoryUnsettledGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		happened bool // the files show the announced change
		torn     bool
	}{
		{"happened", true, false},
		{"did-not-happen", false, false},
		{"happened-torn", true, true},
		{"did-not-happen-torn", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := NewMemFs()
			ctx := context.Background()
			s1 := NewStore(NewAferoStorage(fsys))
			if err := s1.Update(ctx, func(tx *Tx) error { return tx.CreateFile(MustResolve("/memories/a"), []byte("1")) }); err != nil {
				t.Fatal(err)
			}
			// What a crashed process left: the announced write of "2" to a (with its
			// content kept), and maybe the change itself.
			v := Version{Seq: 2, Kind: Modified, Path: "/memories/a", Size: 1, SHA256: DigestOf([]byte("2")), PrevSize: 1, Prev: DigestOf([]byte("1"))}
			line, _ := json.Marshal(logLine{G: 99, V: &v})
			extra := string(line) + "\n"
			if tc.torn {
				extra += `{"g":100,"v":{"seq":3,"ki`
			}
			f, err := fsys.OpenFile(historyLogName, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte(extra))
			f.Close()
			if err := fsys.WriteFileAtomic(objectName(v.SHA256), []byte("2"), true); err != nil {
				t.Fatal(err)
			}
			if tc.happened {
				if err := fsys.WriteFileAtomic("a", []byte("2"), false); err != nil {
					t.Fatal(err)
				}
			}
			want := 1
			if tc.happened {
				want = 2
			}
			// Another process reads, then changes.
			s2 := NewStore(NewAferoStorage(fsys))
			count := func() int {
				var n int
				s2.View(ctx, func(tx *Tx) error {
					vs, err := tx.Versions()
					n = len(vs)
					return err
				})
				return n
			}
			if n := count(); n != want {
				t.Errorf("a reader sees %d versions, want %d", n, want)
			}
			b, err := s2.Apply(ctx, "create", func(tx *Tx) error { return tx.CreateFile(MustResolve("/memories/b"), []byte("b")) })
			if err != nil {
				t.Fatal(err)
			}
			if b.Version != uint64(want+1) {
				t.Errorf("the next change is version %d, want %d", b.Version, want+1)
			}
			if n := count(); n != want+1 {
				t.Errorf("after the next change: %d versions, want %d", n, want+1)
			}
			data, _ := readAll(fsys, historyLogName)
			if strings.Contains(string(data), `"ki`+"\n") || !strings.HasSuffix(string(data), "\n") {
				t.Errorf("the torn line was not cut off:\n%s", data)
			}
			if !strings.Contains(string(data), `{"settle":99`) {
				t.Errorf("the open group was not settled:\n%s", data)
			}
		})
	}
}
