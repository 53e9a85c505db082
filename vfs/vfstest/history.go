package vfstest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// TestHistory runs the history suite on storages made by open, which must return an empty,
// writable storage keeping history as cfg says (closed by the suite).
func TestHistory(t *testing.T, open func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage) {
	for _, c := range historyCases {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{}
			clock.t.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
			c.cfg.Now = clock.now
			st := open(t, c.cfg)
			t.Cleanup(func() { st.Close() })
			c.run(t, &hist{t: t, s: vfs.NewStore(st), clock: clock})
		})
	}
	t.Run("export-import", func(t *testing.T) { testTransfer(t, open) })
	t.Run("pruned-travels", func(t *testing.T) { testPrunedTravels(t, open) })
}

// testPrunedTravels prunes, and checks that the history keeps the highest number it
// dropped, and that an export carries it to the store it is imported into. The newest
// versions may be dropped too (a deleted file's, over the byte budget): their numbers are
// never used again, by the store or by the one it is imported into.
func testPrunedTravels(t *testing.T, open func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage) {
	ctx := context.Background()
	var stores [2]*hist
	for i := range stores {
		clock := &fakeClock{}
		clock.t.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		st := open(t, vfs.HistoryConfig{MaxVersions: 1, MaxBytes: 2 << 10, Now: clock.now})
		t.Cleanup(func() { st.Close() })
		stores[i] = &hist{t: t, s: vfs.NewStore(st), clock: clock}
	}
	a, b := stores[0], stores[1]
	pruned := func(h *hist) (n uint64) {
		t.Helper()
		if err := h.s.View(ctx, func(tx *vfs.Tx) (err error) { n, err = tx.Pruned(); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := pruned(a); n != 0 {
		t.Errorf("a new history says versions up to %d were pruned", n)
	}
	a.create("/memories/f", "1")
	a.write("/memories/f", "2")
	a.write("/memories/f", "3")
	a.create("/memories/g", "g")
	if n := pruned(a); n != 2 {
		t.Errorf("pruned up to %d, want 2 (versions: %+v)", n, a.brief(a.versions()))
	}
	a.create("/memories/big", strings.Repeat("x", 4<<10))
	a.remove("/memories/big")
	if n := pruned(a); n != 6 {
		t.Errorf("after a big file's delete, pruned up to %d, want 6 (versions: %+v)", n, a.brief(a.versions()))
	}
	var stream bytes.Buffer
	if err := a.s.Export(ctx, &stream, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Import(ctx, bytes.NewReader(stream.Bytes()), vfs.ImportLimits{}); err != nil {
		t.Fatal(err)
	}
	if n := pruned(b); n != 6 {
		t.Errorf("after import, pruned up to %d, want 6", n)
	}
	for name, h := range map[string]*hist{"the store": a, "the store imported into": b} {
		if v := h.create("/memories/next", "n").Version; v != 7 {
			t.Errorf("%s numbers the next change %d, want 7: a pruned number is used again", name, v)
		}
	}
}

// testTransfer exports a store with history (times with nanoseconds, a redaction, a
// rename, a delete, a hidden file) and imports it into a new store of the same backend:
// files, versions and contents come back exactly, the stream is the same bytes again, the
// history goes on from the last number, and a stream that is wrong is refused.
func testTransfer(t *testing.T, open func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage) {
	ctx := context.Background()
	stores := [2]*hist{}
	for i := range stores {
		clock := &fakeClock{}
		clock.t.Store(time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC).UnixNano())
		st := open(t, vfs.HistoryConfig{Now: clock.now})
		t.Cleanup(func() { st.Close() })
		stores[i] = &hist{t: t, s: vfs.NewStore(st), clock: clock}
	}
	a, b := stores[0], stores[1]
	a.create("/memories/notes.md", "alpha\n")
	a.write("/memories/notes.md", "alpha\nbeta\n")
	a.create("/memories/deep/er/plan.md", "plan\n")
	a.create("/memories/.hidden.md", "hidden\n")
	a.create("/memories/leak.md", "secret\n")
	a.write("/memories/leak.md", "gone\n")
	a.rename("/memories/deep", "/memories/archive")
	a.create("/memories/tmp.md", "tmp\n")
	a.remove("/memories/tmp.md")
	a.apply("a", "redact", func(tx *vfs.Tx) error { _, err := tx.Redact(vfs.DigestOf([]byte("secret\n"))); return err })
	// A change through Update (no command), by an actor and a client whose names hold what
	// a label may not, that touches a file more than once: recorded as labels and as
	// steps from one state to the next, so that it imports again.
	a.clock.advance(time.Hour)
	odd := vfs.WithClient(vfs.WithActor(ctx, "line\u2028break\x1b"), vfs.Client{Name: "para\u2029graph", Version: string([]byte{0xff})})
	if err := a.s.Update(odd, func(tx *vfs.Tx) error {
		for _, step := range []func() error{
			func() error { return tx.CreateFile(vfs.MustResolve("/memories/odd.md"), []byte("odd\n")) },
			func() error { return tx.WriteFile(vfs.MustResolve("/memories/odd.md"), []byte("odder\n")) },
			func() error { return tx.Rename(vfs.MustResolve("/memories/odd.md"), vfs.MustResolve("/memories/o.md")) },
			func() error { return tx.RemoveAll(vfs.MustResolve("/memories/o.md")) },
			func() error { return tx.CreateFile(vfs.MustResolve("/memories/odd.md"), []byte("oddest\n")) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v := a.versions()[len(a.versions())-1]; v.Actor != "linebreak" || v.Command != "update" || v.Client == nil || v.Client.Name != "paragraph" || v.Client.Version != "" {
		t.Errorf("the odd change is recorded as %q, %q, %+v", v.Actor, v.Command, v.Client)
	}

	var first bytes.Buffer
	if err := a.s.Export(ctx, &first, true); err != nil {
		t.Fatal(err)
	}
	got, err := b.s.Import(ctx, bytes.NewReader(first.Bytes()), vfs.ImportLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != 5 || got.Versions != len(a.versions()) {
		t.Errorf("imported %+v, want 5 files and %d versions", got, len(a.versions()))
	}
	var again bytes.Buffer
	if err := b.s.Export(ctx, &again, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), again.Bytes()) {
		t.Error("the imported store does not export the same bytes")
	}
	if av, bv := a.versions(), b.versions(); !reflect.DeepEqual(av, bv) {
		t.Errorf("versions differ:\n%+v\n%+v", av, bv)
	}
	if text, err := b.content(vfs.DigestOf([]byte("alpha\n"))); err != nil || text != "alpha\n" {
		t.Errorf("an old content after import: %q, %v", text, err)
	}
	next := b.create("/memories/after.md", "after\n")
	if last := a.versions()[len(a.versions())-1].Seq; next.Version != last+1 {
		t.Errorf("the first change after import is version %d, want %d", next.Version, last+1)
	}

	// Refused: a store that is not empty, a content that does not match its digest, a
	// path out of the memory, and a stream that is no export.
	if _, err := b.s.Import(ctx, bytes.NewReader(first.Bytes()), vfs.ImportLimits{}); err == nil {
		t.Error("import into a store with files")
	}
	// "tmp\n" is a content of the history only (its file was deleted).
	tampered := bytes.Replace(first.Bytes(), []byte("tmp\n"), []byte("TMP\n"), 1)
	if bytes.Equal(tampered, first.Bytes()) {
		t.Fatal("the history's content of tmp.md is not in the stream")
	}
	for name, stream := range map[string][]byte{"a content changed": tampered, "not a tar": []byte("hello"), "empty": nil} {
		st := open(t, vfs.HistoryConfig{})
		t.Cleanup(func() { st.Close() })
		if _, err := vfs.NewStore(st).Import(ctx, bytes.NewReader(stream), vfs.ImportLimits{}); err == nil {
			t.Errorf("%s: imported", name)
		}
	}
	testHostileImports(t, open, first.Bytes())
}

// testHostileImports feeds crafted streams to new stores: each is refused whole, leaves
// the store empty, and the good stream then imports into that same store.
func testHostileImports(t *testing.T, open func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage, good []byte) {
	ctx := context.Background()
	ok := vfs.Version{Seq: 1, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Actor: "local", Command: "create",
		Kind: vfs.Created, Path: "/memories/ok.md", Size: 3, SHA256: vfs.DigestOf([]byte("ok\n"))}
	stream := func(files map[string]string, vs []vfs.Version, after ...string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		put := func(name, data string) {
			tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg})
			tw.Write([]byte(data))
		}
		put("memory-mcp-export.json", `{"format":1,"history":true}`+"\n")
		for _, name := range slices.Sorted(maps.Keys(files)) {
			put("memories/"+name, files[name])
		}
		var lines bytes.Buffer
		for _, v := range vs {
			data, _ := json.Marshal(v)
			lines.Write(append(data, '\n'))
		}
		put("history/versions.jsonl", lines.String())
		for _, name := range after {
			put(name, "x")
		}
		tw.Close()
		return buf.Bytes()
	}
	with := func(change func(v *vfs.Version)) []vfs.Version {
		v := ok
		change(&v)
		return []vfs.Version{ok, v}
	}
	files := map[string]string{"ok.md": "ok\n", "dir/b.md": "b\n"}
	for _, c := range []struct {
		name   string
		stream []byte
		lim    vfs.ImportLimits
		want   string
	}{
		{"a version's path leaves the memory", stream(files, with(func(v *vfs.Version) { v.Seq, v.Path = 2, "/memories/../../etc/x" })), vfs.ImportLimits{}, "not a memory file's path"},
		{"a version's path not clean", stream(files, with(func(v *vfs.Version) { v.Seq, v.Path = 2, "/memories/a/../ok.md" })), vfs.ImportLimits{}, "not a memory file's path"},
		{"a version's path in the bookkeeping", stream(files, with(func(v *vfs.Version) { v.Seq, v.Path = 2, "/memories/.memory-mcp-history/log" })), vfs.ImportLimits{}, "not a memory file's path"},
		{"a move without a new path", stream(files, with(func(v *vfs.Version) { v.Seq, v.Kind = 2, vfs.Moved })), vfs.ImportLimits{}, "new_path"},
		{"seq about to wrap", stream(files, with(func(v *vfs.Version) { v.Seq = 1<<64 - 1 })), vfs.ImportLimits{}, "seq must be from 1 to"},
		{"seq zero", stream(files, []vfs.Version{{Seq: 0, Time: ok.Time, Actor: "a", Command: "create", Kind: vfs.Created, Path: "/memories/ok.md"}}), vfs.ImportLimits{}, "seq must be from 1 to"},
		{"seqs going down", stream(files, append(with(func(v *vfs.Version) { v.Seq = 5 }), ok)), vfs.ImportLimits{}, "must not go down"},
		{"an actor with escape codes", stream(files, with(func(v *vfs.Version) { v.Seq, v.Actor = 2, "evil\n\x1b[31mred" })), vfs.ImportLimits{}, "printable text"},
		{"a command too long", stream(files, with(func(v *vfs.Version) { v.Seq, v.Command = 2, strings.Repeat("c", 300) })), vfs.ImportLimits{}, "printable text"},
		{"a kind made up", stream(files, with(func(v *vfs.Version) { v.Seq, v.Kind = 2, "exploded" })), vfs.ImportLimits{}, "kind"},
		{"no time", stream(files, with(func(v *vfs.Version) { v.Seq, v.Time = 2, time.Time{} })), vfs.ImportLimits{}, "time"},
		{"an entry after the history", stream(files, []vfs.Version{ok}, "stray"), vfs.ImportLimits{}, "not part of a memory-mcp export"},
		{"a file given twice", stream(files, []vfs.Version{ok}, "memories/ok.md"), vfs.ImportLimits{}, "/memories/ok.md: given twice"},
		{"a file below a file", stream(files, []vfs.Version{ok}, "memories/ok.md/x.md"), vfs.ImportLimits{}, "/memories/ok.md/x.md: the stream has /memories/ok.md as a file and as a directory"},
		{"a file where a directory is", stream(files, []vfs.Version{ok}, "memories/dir"), vfs.ImportLimits{}, "/memories/dir: the stream has it as a file and as a directory"},
		{"a file over the per-file limit", stream(map[string]string{"ok.md": "ok\n", "z.md": strings.Repeat("z", 101)}, nil), vfs.ImportLimits{MaxFileBytes: 100}, "over the limit of 100 bytes per memory file"},
		{"files over the store's limit", stream(map[string]string{"a.md": strings.Repeat("a", 60), "b.md": strings.Repeat("b", 60)}, nil), vfs.ImportLimits{MaxStoreBytes: 100}, "over the store's limit of 100 bytes"},
		{"a file the check refuses", stream(map[string]string{"a.md": "fine\n", "b.md": "KEY\n"}, nil), vfs.ImportLimits{Check: func(p string, data []byte) error {
			if strings.Contains(string(data), "KEY") {
				return errors.New(p + " holds a key")
			}
			return nil
		}}, "/memories/b.md holds a key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := open(t, vfs.HistoryConfig{})
			t.Cleanup(func() { st.Close() })
			s := vfs.NewStore(st)
			if _, err := s.Import(ctx, bytes.NewReader(c.stream), c.lim); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("import: %v, want an error saying %q", err, c.want)
			}
			err := s.View(ctx, func(tx *vfs.Tx) error {
				entries, err := tx.List(vfs.MustResolve(vfs.Root))
				if err != nil || len(entries) > 0 {
					return fmt.Errorf("entries left: %v, %v", entries, err)
				}
				if vs, err := tx.Versions(); err != nil || len(vs) > 0 {
					return fmt.Errorf("versions left: %v, %v", vs, err)
				}
				return nil
			})
			if err != nil {
				t.Errorf("after the refused import: %v", err)
			}
			if _, err := s.Import(ctx, bytes.NewReader(good), vfs.ImportLimits{}); err != nil {
				t.Errorf("the good stream after the refused one: %v", err)
			}
		})
	}
	// Builds before the command was always recorded wrote versions without one, from
	// Store.Update: they import, as "update".
	st := open(t, vfs.HistoryConfig{})
	t.Cleanup(func() { st.Close() })
	s := vfs.NewStore(st)
	noCommand := ok
	noCommand.Command = ""
	if _, err := s.Import(ctx, bytes.NewReader(stream(map[string]string{"ok.md": "ok\n"}, []vfs.Version{noCommand})), vfs.ImportLimits{}); err != nil {
		t.Fatalf("a version without a command: %v", err)
	}
	if err := s.View(ctx, func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		if err == nil && (len(vs) != 1 || vs[0].Command != "update") {
			err = fmt.Errorf("imported %+v, want one version of command update", vs)
		}
		return err
	}); err != nil {
		t.Error(err)
	}
}

var historyCases = []struct {
	name string
	cfg  vfs.HistoryConfig
	run  func(t *testing.T, h *hist)
}{
	{"commands", vfs.HistoryConfig{}, testHistoryCommands},
	{"directories", vfs.HistoryConfig{}, testHistoryDirectories},
	{"renames-and-deletes", vfs.HistoryConfig{}, testHistoryFollows},
	{"failed-changes", vfs.HistoryConfig{}, testHistoryFailures},
	{"prune-versions", vfs.HistoryConfig{MaxVersions: 2}, testPruneVersions},
	{"prune-age", vfs.HistoryConfig{MaxAge: 24 * time.Hour}, testPruneAge},
	{"prune-bytes", vfs.HistoryConfig{MaxBytes: 10 << 10}, testPruneBytes},
	{"redact", vfs.HistoryConfig{}, testRedact},
}

type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.t.Load()).UTC() }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(int64(d)) }

// hist drives a store with history.
type hist struct {
	t     *testing.T
	s     *vfs.Store
	clock *fakeClock
}

// apply runs fn as command by actor, advancing the clock an hour first.
func (h *hist) apply(actor, command string, fn func(tx *vfs.Tx) error) *vfs.Batch {
	h.t.Helper()
	h.clock.advance(time.Hour)
	b, err := h.s.Apply(vfs.WithActor(context.Background(), actor), command, fn)
	if err != nil {
		h.t.Fatalf("%s: %v", command, err)
	}
	return b
}

func (h *hist) create(path, text string) *vfs.Batch {
	h.t.Helper()
	return h.apply("a", "create", func(tx *vfs.Tx) error { return tx.CreateFile(p(path), []byte(text)) })
}

func (h *hist) write(path, text string) *vfs.Batch {
	h.t.Helper()
	return h.apply("a", "str_replace", func(tx *vfs.Tx) error {
		if _, err := tx.ReadFile(p(path)); err != nil {
			return err
		}
		return tx.WriteFile(p(path), []byte(text))
	})
}

func (h *hist) rename(from, to string) *vfs.Batch {
	h.t.Helper()
	return h.apply("b", "rename", func(tx *vfs.Tx) error { return tx.Rename(p(from), p(to)) })
}

func (h *hist) remove(path string) *vfs.Batch {
	h.t.Helper()
	return h.apply("b", "delete", func(tx *vfs.Tx) error { return tx.RemoveAll(p(path)) })
}

func (h *hist) versions() []vfs.Version {
	h.t.Helper()
	var vs []vfs.Version
	if err := h.s.View(context.Background(), func(tx *vfs.Tx) (err error) {
		vs, err = tx.Versions()
		return err
	}); err != nil {
		h.t.Fatalf("versions: %v", err)
	}
	return vs
}

func (h *hist) content(d vfs.Digest) (string, error) {
	var data []byte
	err := h.s.View(context.Background(), func(tx *vfs.Tx) (err error) {
		data, err = tx.Content(d)
		return err
	})
	return string(data), err
}

// brief is a version without its time, digests spelled as their contents' text.
type brief struct {
	Seq            uint64
	Actor, Command string
	Kind           vfs.ChangeKind
	Path, NewPath  string
	Size, PrevSize int64
	Content, Prev  string
}

func (h *hist) brief(vs []vfs.Version) []brief {
	h.t.Helper()
	out := make([]brief, len(vs))
	for i, v := range vs {
		b := brief{Seq: v.Seq, Actor: v.Actor, Command: v.Command, Kind: v.Kind, Path: v.Path, NewPath: v.NewPath, Size: v.Size, PrevSize: v.PrevSize}
		for _, d := range []struct {
			sum vfs.Digest
			out *string
		}{{v.SHA256, &b.Content}, {v.Prev, &b.Prev}} {
			if d.sum.IsZero() {
				continue
			}
			text, err := h.content(d.sum)
			if err != nil {
				h.t.Fatalf("version %d of %s: content %s: %v", v.Seq, v.Path, d.sum, err)
			}
			if vfs.DigestOf([]byte(text)) != d.sum {
				h.t.Fatalf("content %s does not match its digest", d.sum)
			}
			*d.out = text
		}
		out[i] = b
	}
	return out
}

func (h *hist) expect(what string, got []vfs.Version, want []brief) {
	h.t.Helper()
	if b := h.brief(got); !reflect.DeepEqual(b, want) {
		h.t.Errorf("%s:\n got %+v\nwant %+v", what, b, want)
	}
}

// Each change is one version, numbered by its transaction, with who, what and the
// contents before and after.
func testHistoryCommands(t *testing.T, h *hist) {
	if vs := h.versions(); len(vs) != 0 {
		t.Fatalf("a new store has versions: %+v", vs)
	}
	b := h.create("/memories/a.md", "one\n")
	if b.Version != 1 {
		t.Errorf("the batch's version is %d, want 1", b.Version)
	}
	h.write("/memories/a.md", "one\ntwo\n")
	h.rename("/memories/a.md", "/memories/b.md")
	h.remove("/memories/b.md")
	h.create("/memories/b.md", "one\n") // the same content as version 1: kept once
	want := []brief{
		{1, "a", "create", vfs.Created, "/memories/a.md", "", 4, 0, "one\n", ""},
		{2, "a", "str_replace", vfs.Modified, "/memories/a.md", "", 8, 4, "one\ntwo\n", "one\n"},
		{3, "b", "rename", vfs.Moved, "/memories/a.md", "/memories/b.md", 8, 8, "one\ntwo\n", "one\ntwo\n"},
		{4, "b", "delete", vfs.Deleted, "/memories/b.md", "", 0, 8, "", "one\ntwo\n"},
		{5, "a", "create", vfs.Created, "/memories/b.md", "", 4, 0, "one\n", ""},
	}
	vs := h.versions()
	h.expect("versions", vs, want)
	for i := 1; i < len(vs); i++ {
		if !vs[i].Time.After(vs[i-1].Time) {
			t.Errorf("version %d's time %v is not after %v", vs[i].Seq, vs[i].Time, vs[i-1].Time)
		}
	}
	if vs[0].Time != time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC) {
		t.Errorf("version 1's time is %v, want the store's clock", vs[0].Time)
	}
	// A read-only transaction sees the history but cannot add to it.
	err := h.s.View(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(p("/memories/c"), nil) })
	if err == nil {
		t.Error("a change inside a read transaction succeeded")
	}
	if len(h.versions()) != len(want) {
		t.Error("a refused change added a version")
	}
}

// A directory's delete and rename are one transaction with a version per file below it.
func testHistoryDirectories(t *testing.T, h *hist) {
	h.apply("a", "create", func(tx *vfs.Tx) error {
		for _, n := range []string{"/memories/d/x", "/memories/d/sub/y", "/memories/d/sub/z"} {
			if err := tx.CreateFile(p(n), []byte(n)); err != nil {
				return err
			}
		}
		return nil
	})
	h.rename("/memories/d", "/memories/e")
	h.remove("/memories/e")
	vs := h.versions()
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%d %s %s %s", v.Seq, v.Kind, v.Path, v.NewPath))
	}
	want := []string{
		"1 created /memories/d/x ", "1 created /memories/d/sub/y ", "1 created /memories/d/sub/z ",
		"2 moved /memories/d/sub/y /memories/e/sub/y", "2 moved /memories/d/sub/z /memories/e/sub/z", "2 moved /memories/d/x /memories/e/x",
		"3 deleted /memories/e/sub/y ", "3 deleted /memories/e/sub/z ", "3 deleted /memories/e/x ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("versions:\n got %q\nwant %q", got, want)
	}
	// Restoring the directory as it was after version 2 brings every file back.
	want2 := map[string]vfs.FileState{}
	for _, n := range []string{"/memories/e/x", "/memories/e/sub/y", "/memories/e/sub/z"} {
		orig := strings.Replace(n, "/e/", "/d/", 1)
		want2[n] = vfs.FileState{Exists: true, Size: int64(len(orig)), SHA256: vfs.DigestOf([]byte(orig))}
	}
	if got := vfs.ChangedSince(vs, "/memories/e", 2); !reflect.DeepEqual(got, want2) {
		t.Errorf("ChangedSince(/memories/e, 2) = %+v, want %+v", got, want2)
	}
}

// A file's history follows it through renames and survives its deletion.
func testHistoryFollows(t *testing.T, h *hist) {
	h.create("/memories/a", "v1")          // 1
	h.write("/memories/a", "v2")           // 2
	h.rename("/memories/a", "/memories/b") // 3
	h.write("/memories/b", "v3")           // 4
	h.remove("/memories/b")                // 5
	vs := h.versions()
	for _, c := range []struct {
		path  string
		seq   uint64
		want  string // "" for absent
		known bool
	}{
		{"/memories/a", 1, "v1", true}, {"/memories/a", 2, "v2", true}, {"/memories/a", 3, "", true},
		{"/memories/b", 2, "", true}, {"/memories/b", 3, "v2", true}, {"/memories/b", 4, "v3", true},
		{"/memories/b", 5, "", true}, {"/memories/c", 5, "", false},
	} {
		st, known := vfs.StateAt(vs, c.path, c.seq, 0)
		got := ""
		if st.Exists {
			var err error
			if got, err = h.content(st.SHA256); err != nil {
				t.Fatalf("content: %v", err)
			}
		}
		if got != c.want || known != c.known || st.Exists != (c.want != "") {
			t.Errorf("StateAt(%s, %d) = %q (exists %v, known %v), want %q (known %v)", c.path, c.seq, got, st.Exists, known, c.want, c.known)
		}
	}
	if seq := vfs.SeqAt(vs, vs[2].Time); seq != 3 {
		t.Errorf("SeqAt(time of version 3) = %d", seq)
	}
	if seq := vfs.SeqAt(vs, vs[0].Time.Add(-time.Second)); seq != 0 {
		t.Errorf("SeqAt(before everything) = %d", seq)
	}
}

// A change that fails leaves no version, and takes no number.
func testHistoryFailures(t *testing.T, h *hist) {
	h.create("/memories/a", "same")
	ctx := context.Background()
	for name, fn := range map[string]func(tx *vfs.Tx) error{
		"create over a file with the same content": func(tx *vfs.Tx) error { return tx.CreateFile(p("/memories/a"), []byte("same")) },
		"rename onto a file":                       func(tx *vfs.Tx) error { return tx.Rename(p("/memories/a"), p("/memories/a")) },
		"delete of nothing":                        func(tx *vfs.Tx) error { return tx.RemoveAll(p("/memories/none")) },
	} {
		if _, err := h.s.Apply(ctx, "x", fn); err == nil {
			t.Errorf("%s succeeded", name)
		}
	}
	if vs := h.versions(); len(vs) != 1 {
		t.Errorf("versions after failed changes: %+v", vs)
	}
	if b := h.create("/memories/b", "b"); b.Version != 2 {
		t.Errorf("the next change is version %d, want 2", b.Version)
	}
}

// MaxVersions keeps the newest versions of each file; the current one always stays.
func testPruneVersions(t *testing.T, h *hist) {
	h.create("/memories/a", "1")
	for i := 2; i <= 5; i++ {
		h.write("/memories/a", fmt.Sprint(i))
	}
	h.create("/memories/b", "b")
	vs := h.versions()
	h.expect("versions", vs, []brief{
		{4, "a", "str_replace", vfs.Modified, "/memories/a", "", 1, 1, "4", "3"},
		{5, "a", "str_replace", vfs.Modified, "/memories/a", "", 1, 1, "5", "4"},
		{6, "a", "create", vfs.Created, "/memories/b", "", 1, 0, "b", ""},
	})
	for _, pruned := range []string{"1", "2"} {
		if _, err := h.content(vfs.DigestOf([]byte(pruned))); !errors.Is(err, vfs.ErrNoContent) {
			t.Errorf("content %q of a pruned version: %v, want ErrNoContent", pruned, err)
		}
	}
}

// MaxAge prunes what is older, but never a file's current version.
func testPruneAge(t *testing.T, h *hist) {
	h.create("/memories/old", "old") // its current version, however old
	h.create("/memories/a", "1")
	h.write("/memories/a", "2")
	h.clock.advance(48 * time.Hour)
	h.write("/memories/a", "3")
	h.expect("versions", h.versions(), []brief{
		{1, "a", "create", vfs.Created, "/memories/old", "", 3, 0, "old", ""},
		{4, "a", "str_replace", vfs.Modified, "/memories/a", "", 1, 1, "3", "2"},
	})
}

// MaxBytes prunes the oldest versions until the contents fit.
func testPruneBytes(t *testing.T, h *hist) {
	big := func(c byte) string { return strings.Repeat(string(c), 4<<10) }
	h.create("/memories/a", big('1'))
	for _, c := range []byte("2345") {
		h.write("/memories/a", big(c))
	}
	vs := h.versions()
	if len(vs) != 1 || vs[0].Seq != 5 {
		t.Fatalf("versions after pruning to 10 KiB: %+v", h.brief(vs))
	}
	// The current version and the content before it: 8 KiB.
	if _, err := h.content(vs[0].Prev); err != nil {
		t.Errorf("the content before the oldest kept version: %v", err)
	}
}

// Redaction purges one content and marks every version that had it; the records stay.
func testRedact(t *testing.T, h *hist) {
	h.create("/memories/a", "secret")
	h.write("/memories/a", "clean")
	h.create("/memories/b", "secret")
	h.remove("/memories/b")
	d := vfs.DigestOf([]byte("secret"))
	var n int
	h.apply("person", "redact", func(tx *vfs.Tx) (err error) {
		n, err = tx.Redact(d)
		return err
	})
	if n != 2 {
		t.Errorf("redacted %d versions, want 2", n)
	}
	if _, err := h.content(d); !errors.Is(err, vfs.ErrNoContent) {
		t.Errorf("the redacted content is still there: %v", err)
	}
	vs := h.versions()
	if len(vs) != 4 {
		t.Fatalf("versions after redaction: %+v", vs)
	}
	for _, i := range []int{0, 2} {
		if vs[i].Redacted == nil || vs[i].Redacted.By != "person" || !vs[i].SHA256.IsZero() {
			t.Errorf("version %d not marked redacted: %+v", vs[i].Seq, vs[i])
		}
	}
	for _, i := range []int{1, 3} {
		if !vs[i].PrevRedacted || !vs[i].Prev.IsZero() || vs[i].Redacted != nil {
			t.Errorf("version %d: the content before it is not marked redacted: %+v", vs[i].Seq, vs[i])
		}
	}
	if st, _ := vfs.StateAt(vs, "/memories/a", 1, 0); !st.Redacted || !st.Exists {
		t.Errorf("StateAt of a redacted version: %+v", st)
	}
	if text, err := h.content(vs[1].SHA256); err != nil || text != "clean" {
		t.Errorf("other contents: %q, %v", text, err)
	}
}
