package files_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/memorytest"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// caseInsensitiveDir returns a new directory on a filesystem that ignores case and keeps the
// case it is given: on macOS and Windows the temporary directory, as they usually format
// theirs; on Linux exFAT, made on a loop device and mounted through FUSE, as root or
// through sudo without a password (fuzzing workers use their coordinator's). Where a piece
// is missing the test is skipped, naming it; with CI=true it fails.
//
// forget drops the names the Linux kernel caches: it does not know that FUSE's names ignore
// case, so for up to a second after a move or delete it still finds the name in another
// spelling it looked up before (macOS and Windows have no such cache). A test calls it
// between calls that may meet that.
func caseInsensitiveDir(t testing.TB) (dir string, forget func()) {
	t.Helper()
	if runtime.GOOS != "linux" {
		dir = t.TempDir()
		if !ignoresCase(t, dir) {
			skipUnlessCI(t, "the temporary directory tells case apart")
		}
		return dir, func() {}
	}
	missing := ""
	for _, tool := range []string{"losetup", "mkfs.exfat", "mount.exfat-fuse", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = tool + " (Debian: apt-get install exfatprogs exfat-fuse)"
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing = "/dev/fuse"
	}
	if missing != "" {
		skipUnlessCI(t, "a filesystem that ignores case (exFAT through FUSE) needs %s", missing)
	}
	sudo := asRoot(t)
	forget = func() {
		if _, err := run(append(sudo, "sh", "-c", "echo 2 > /proc/sys/vm/drop_caches")...); err != nil {
			t.Error(err)
		}
	}
	if mnt := os.Getenv(sharedMount); mnt != "" {
		return mnt, forget
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	img := filepath.Join(t.TempDir(), "exfat.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	must("mkfs.exfat", img)
	dev := must(append(sudo, "losetup", "--find", "--show", img)...)
	t.Cleanup(func() { run(append(sudo, "losetup", "--detach", dev)...) })
	mnt := t.TempDir()
	closeOnExec() // the FUSE server lives on: it must hold none of this process's pipes
	must(append(sudo, "mount.exfat-fuse", dev, mnt)...)
	t.Cleanup(func() {
		if _, err := run(append(sudo, "umount", mnt)...); err != nil {
			t.Error(err)
		}
	})
	if !ignoresCase(t, mnt) {
		t.Fatal("exFAT does not ignore case here")
	}
	return mnt, forget
}

// skipUnlessCI skips the test for want of what it names; with CI=true it fails instead.
func skipUnlessCI(t testing.TB, format string, a ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+"; CI must run this test", a...)
	}
	t.Skipf(format, a...)
}

// asRoot returns what runs a command as root: nothing when this process is root, else sudo
// without a password. Without either the test is skipped (see skipUnlessCI).
func asRoot(t testing.TB) []string {
	t.Helper()
	if os.Geteuid() == 0 {
		return nil
	}
	if exec.Command("sudo", "-n", "true").Run() != nil {
		skipUnlessCI(t, "mounting a filesystem needs root, or sudo without a password")
	}
	return []string{"sudo", "-n"}
}

// run runs a command, and returns its output or an error that has the output.
func run(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), err
}

// openTrackedOS opens the os store at dir, with history and access tracked by now.
func openTrackedOS(t testing.TB, dir string, now func() time.Time) *vfs.Store {
	t.Helper()
	store, err := files.OpenOSStore(dir, vfs.WithHistory(vfs.HistoryConfig{Now: now}))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.TrackAccess(now); err != nil {
		store.Close()
		t.Fatal(err)
	}
	return store
}

// trackedMemory opens dir as an os store that records views, on a clock the test moves.
func trackedMemory(t *testing.T, dir string) (store *vfs.Store, h *handlers.Memory, clock *time.Time) {
	clock = new(time.Time)
	*clock = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store = openTrackedOS(t, dir, func() time.Time { return *clock })
	t.Cleanup(func() { store.Close() })
	return store, handlers.New(store, handlers.DefaultLimits()), clock
}

// sharedMount names the mount a fuzzing coordinator made, for its workers.
const sharedMount = "MEMORY_MCP_TEST_CASEFOLD_DIR"

// ignoresCase reports whether dir finds a file it holds by another spelling.
func ignoresCase(t testing.TB, dir string) bool {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "Probe"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := os.Stat(filepath.Join(dir, "PROBE"))
	return err == nil
}

// On a filesystem that ignores case, a path the model spells in another case acts on the
// file that is there, and the history and the access record name that file as the
// directory does: show gives what the file held, undo restores it, a rename into the
// directory itself in another spelling is refused as such, and expiry keeps a file viewed
// in another spelling, also when a release before recorded that spelling.
func TestCaseInsensitiveDirectory(t *testing.T) {
	mnt, forget := caseInsensitiveDir(t)
	dir := filepath.Join(mnt, "m")
	ctx := context.Background()
	store, h, clock := trackedMemory(t, dir)
	for _, c := range []struct{ in, want string }{
		{`{"command":"create","path":"/memories/Notes.md","file_text":"one\n"}`, "File created successfully at: /memories/Notes.md"},
		{`{"command":"create","path":"/memories/Dir/a.md","file_text":"a"}`, "File created successfully at: /memories/Dir/a.md"},
		{`{"command":"create","path":"/memories/Old.md","file_text":"old"}`, "File created successfully at: /memories/Old.md"},
		{`{"command":"str_replace","path":"/memories/notes.md","old_str":"one","new_str":"two"}`, "The memory file has been edited."},
		{`{"command":"rename","old_path":"/memories/dir/A.md","new_path":"/memories/DIR/b.md"}`, "Successfully renamed /memories/dir/A.md to /memories/DIR/b.md"},
		{`{"command":"rename","old_path":"/memories/Dir","new_path":"/memories/dir/x"}`, "Error: Cannot move /memories/Dir into itself (/memories/dir/x)"},
		{`{"command":"delete","path":"/memories/NOTES.md"}`, "Successfully deleted /memories/NOTES.md"},
	} {
		res := execJSON(t, h, c.in)
		if !strings.HasPrefix(res.Text, c.want) {
			t.Fatalf("%s: %q, want %q", c.in, res.Text, c.want)
		}
		forget()
	}
	vs, err := h.Log(ctx, handlers.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]bool{"": true, "/memories/Notes.md": true, "/memories/Dir/a.md": true, "/memories/Dir/b.md": true, "/memories/Old.md": true}
	for _, v := range vs {
		if !onDisk[v.Path] || !onDisk[v.NewPath] {
			t.Errorf("version %d names %q → %q, not as the directory spells it", v.Seq, v.Path, v.NewPath)
		}
	}
	if got, err := h.Show(ctx, "/memories/Notes.md", 4); string(got) != "two\n" || err != nil {
		t.Errorf("show Notes.md@4 = %q, %v; want what str_replace left", got, err)
	}
	// A person's history commands take the path in any spelling too, while the file is there.
	if vs, err := h.Log(ctx, handlers.LogQuery{Path: "/memories/DIR"}); len(vs) != 2 || err != nil {
		t.Errorf("log /memories/DIR: %d versions, %v; want 2", len(vs), err)
	}
	if got, err := h.Show(ctx, "/memories/dir/B.md", 5); string(got) != "a" || err != nil {
		t.Errorf("show dir/B.md@5 = %q, %v; want %q", got, err, "a")
	}
	if _, err := h.Restore(ctx, "/memories", 5); err != nil {
		t.Fatal(err)
	}
	forget()
	if got, _, err := h.Read(ctx, "/memories/Notes.md"); string(got) != "two\n" || err != nil {
		t.Errorf("after undoing the delete, Notes.md = %q, %v; want %q", got, err, "two\n")
	}

	*clock = clock.Add(2 * time.Hour)
	if res := execJSON(t, h, `{"command":"view","path":"/memories/NOTES.md"}`); res.IsError {
		t.Fatal(res.Text)
	}
	// What a release that recorded names as the model spelled them wrote for a view of
	// /memories/dir/B.MD.
	journal, err := os.OpenFile(filepath.Join(dir, ".memory-mcp-access.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(journal, "t\t%d\tdir/B.MD\n", clock.Unix())
	journal.Close()
	got, err := store.Expire(ctx, time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []vfs.Expired{{Path: "/memories/Old.md", Size: 3}}; !cmp.Equal(got, want) {
		t.Errorf("expired %+v, want only the file nobody viewed: %+v", got, want)
	}

	// Files whose names differ only in case, from a store that tells them apart, cannot
	// all come in: the import says why and leaves nothing.
	linux := files.NewMemoryStore()
	for _, p := range []string{"/memories/Notes.md", "/memories/notes.md"} {
		if err := linux.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve(p), []byte(p)) }); err != nil {
			t.Fatal(err)
		}
	}
	var stream bytes.Buffer
	if err := linux.Export(ctx, &stream, false); err != nil {
		t.Fatal(err)
	}
	into, err := files.OpenOSStore(filepath.Join(mnt, "import"))
	if err != nil {
		t.Fatal(err)
	}
	defer into.Close()
	if _, err := into.Import(ctx, &stream, vfs.ImportLimits{}); err == nil || !strings.Contains(err.Error(), "/memories/notes.md: given twice, or in two spellings") {
		t.Errorf("import of two spellings: %v", err)
	}
}

// A directory deleted and made again in another spelling is one directory to the history:
// log, show and restore in any spelling find the versions under both, and a restore brings
// the old files back into the directory as it is spelled now.
func TestCaseInsensitiveHistory(t *testing.T) {
	mnt, forget := caseInsensitiveDir(t)
	ctx := context.Background()
	store := openTrackedOS(t, filepath.Join(mnt, "m"), time.Now)
	defer store.Close()
	h := handlers.New(store, handlers.DefaultLimits())
	for _, in := range []string{
		`{"command":"create","path":"/memories/Dir/a.md","file_text":"a"}`,
		`{"command":"create","path":"/memories/Dir/b.md","file_text":"b"}`,
		`{"command":"delete","path":"/memories/dir"}`,
		`{"command":"create","path":"/memories/dir/c.md","file_text":"c"}`,
	} {
		if res := execJSON(t, h, in); res.IsError {
			t.Fatalf("%s: %s", in, res.Text)
		}
		forget()
	}
	vs, err := h.Log(ctx, handlers.LogQuery{Path: "/memories/DIR"})
	if err != nil || len(vs) != 5 {
		t.Fatalf("log /memories/DIR: %+v, %v; want the 5 versions under both spellings", vs, err)
	}
	for _, v := range vs {
		if !strings.HasPrefix(v.Path, "/memories/dir/") || v.NewPath != "" {
			t.Errorf("version %d names %s, not as the directory is spelled now", v.Seq, v.Path)
		}
	}
	if got, err := h.Show(ctx, "/memories/DIR/A.md", 2); string(got) != "a" || err != nil {
		t.Errorf("show DIR/A.md@2 = %q, %v; want %q", got, err, "a")
	}
	res, err := h.Restore(ctx, "/memories/DIR", 2)
	if err != nil {
		t.Fatal(err)
	}
	forget()
	want := handlers.Restored{Version: 5, Created: []string{"/memories/dir/a.md", "/memories/dir/b.md"}, Deleted: []string{"/memories/dir/c.md"}}
	if !cmp.Equal(res, want) {
		t.Errorf("restore: %+v, want %+v", res, want)
	}
	names, err := os.ReadDir(filepath.Join(mnt, "m", "dir"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0].Name() != "a.md" || names[1].Name() != "b.md" {
		t.Errorf("after the restore the directory holds %v, want a.md and b.md", names)
	}
}

// A name another program wrote in another Unicode normal form ("e" and a combining accent,
// where the model sends "é") is the file's own name where the filesystem takes the two as
// one (macOS): the history and expiry's record name it as the directory does, so a file
// the model viewed is not expired. Where the filesystem tells them apart (Windows, and the
// exFAT these tests mount on Linux) they are two files, and memory-mcp keeps them apart.
func TestCaseInsensitiveNormalForms(t *testing.T) {
	mnt, _ := caseInsensitiveDir(t)
	dir := filepath.Join(mnt, "m")
	ctx := context.Background()
	store, h, clock := trackedMemory(t, dir)
	const decomposed, composed = "cafe\u0301.md", "caf\u00e9.md"
	if err := os.WriteFile(filepath.Join(dir, decomposed), []byte("by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Expire(ctx, 24*time.Hour, false); err != nil { // records the file, now
		t.Fatal(err)
	}
	*clock = clock.Add(2 * time.Hour)
	_, err := os.Stat(filepath.Join(dir, composed))
	if oneName := err == nil; oneName {
		res := execJSON(t, h, `{"command":"str_replace","path":"/memories/`+composed+`","old_str":"by hand","new_str":"by the model"}`)
		if res.IsError {
			t.Fatal(res.Text)
		}
		vs, err := h.Log(ctx, handlers.LogQuery{})
		if err != nil || len(vs) != 1 || vs[0].Path != "/memories/"+decomposed {
			t.Errorf("log: %+v, %v; want one version of /memories/%s, as the directory spells it", vs, err, decomposed)
		}
		if got, err := store.Expire(ctx, time.Hour, false); len(got) != 0 || err != nil {
			t.Errorf("expired %+v, %v: the file was changed a moment ago", got, err)
		}
		return
	}
	res := execJSON(t, h, `{"command":"create","path":"/memories/`+composed+`","file_text":"by the model\n"}`)
	if res.IsError {
		t.Fatalf("create /memories/%s beside /memories/%s: %s", composed, decomposed, res.Text)
	}
	for name, want := range map[string]string{decomposed: "by hand\n", composed: "by the model\n"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); string(got) != want || err != nil {
			t.Errorf("%s holds %q, %v; want %q", name, got, err, want)
		}
	}
	if vs, err := h.Log(ctx, handlers.LogQuery{}); err != nil || len(vs) != 1 || vs[0].Path != "/memories/"+composed {
		t.Errorf("log: %+v, %v; want one version of /memories/%s", vs, err, composed)
	}
}

// On a main store that ignores case, a mount's name in another spelling is the mount: a
// change lands in the mounted store, and the main store gets no entry of that name, which
// would hide the mount and keep the server from starting again; the mount point refuses a
// delete in any spelling.
func TestCaseInsensitiveMountNames(t *testing.T) {
	mnt, forget := caseInsensitiveDir(t)
	dir := filepath.Join(mnt, "m")
	ctx := context.Background()
	main, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	team := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	h := handlers.New(main, handlers.DefaultLimits(), handlers.WithMounts(handlers.Mount{Name: "team", Memory: team}))
	for _, c := range []struct{ in, want string }{
		{`{"command":"create","path":"/memories/TEAM/x.md","file_text":"x"}`, "File created successfully at: /memories/TEAM/x.md"},
		{`{"command":"view","path":"/memories/Team/x.md"}`, "Here's the content of /memories/Team/x.md with line numbers:\n     1\tx"},
		{`{"command":"delete","path":"/memories/Team"}`, "Error: /memories/team is a mounted memory store and cannot be deleted or moved"},
		{`{"command":"rename","old_path":"/memories/TEAM/x.md","new_path":"/memories/x.md"}`, "Error: Cannot move /memories/TEAM/x.md to /memories/x.md: they are in different memory stores."},
	} {
		if res := execJSON(t, h, c.in); !strings.HasPrefix(res.Text, c.want) {
			t.Errorf("%s: %q, want %q", c.in, res.Text, c.want)
		}
		forget()
	}
	if data, _, err := team.Read(ctx, "/memories/x.md"); string(data) != "x" || err != nil {
		t.Errorf("the mounted store holds %q, %v; want the file created as /memories/TEAM/x.md", data, err)
	}
	if entries, _ := os.ReadDir(dir); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.EqualFold(e.Name(), "team") }) {
		t.Errorf("the main store's directory holds %v: an entry a mount's name", entries)
	}
	if err := h.CheckMounts(ctx); err != nil {
		t.Errorf("the next start would be refused: %v", err)
	}
	// Two mounts whose names differ only in case are each found by their own spelling.
	other := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	h = handlers.New(main, handlers.DefaultLimits(), handlers.WithMounts(handlers.Mount{Name: "team", Memory: team}, handlers.Mount{Name: "Team", Memory: other}))
	if res := execJSON(t, h, `{"command":"create","path":"/memories/Team/y.md","file_text":"y"}`); res.IsError {
		t.Fatal(res.Text)
	}
	if _, _, err := other.Read(ctx, "/memories/y.md"); err != nil {
		t.Errorf("/memories/Team/y.md is not in the mount Team: %v", err)
	}
}

func execJSON(t *testing.T, h *handlers.Memory, input string) handlers.Result {
	t.Helper()
	var in map[string]any
	if err := json.Unmarshal([]byte(input), &in); err != nil {
		t.Fatal(err)
	}
	return h.Exec(context.Background(), in)
}

// An overlay whose lower layer ignores case answers in any spelling as that layer does: a
// file changed in another spelling is copied up under its own name (listed once), a
// delete in another spelling hides the lower file for good, and the history names the
// file as the lower layer spells it; with the upper layer on disk or in memory.
func TestCaseInsensitiveOverlay(t *testing.T) {
	mnt, forget := caseInsensitiveDir(t)
	for _, upper := range []string{"disk", "memory"} {
		t.Run(upper, func(t *testing.T) {
			lower, up := filepath.Join(mnt, upper, "lower"), ""
			if upper == "disk" {
				up = filepath.Join(mnt, upper, "upper")
			}
			if err := os.MkdirAll(filepath.Join(lower, "Dir"), 0o700); err != nil {
				t.Fatal(err)
			}
			for name, text := range map[string]string{"Notes.md": "lower\n", "Dir/A.md": "a\n"} {
				if err := os.WriteFile(filepath.Join(lower, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			store, err := files.OpenOverlayStore(lower, up, vfs.WithHistory(vfs.HistoryConfig{}))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			h := handlers.New(store, handlers.DefaultLimits())
			listing := "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"
			for _, c := range []struct{ in, want string }{
				{`{"command":"str_replace","path":"/memories/notes.md","old_str":"lower","new_str":"upper"}`, "The memory file has been edited."},
				{`{"command":"view","path":"/memories"}`, listing + "8B\t/memories\n2B\t/memories/Dir/\n2B\t/memories/Dir/A.md\n6B\t/memories/Notes.md"},
				{`{"command":"delete","path":"/memories/dir/a.md"}`, "Successfully deleted /memories/dir/a.md"},
				{`{"command":"view","path":"/memories/Dir/A.md"}`, "The path /memories/Dir/A.md does not exist."},
				{`{"command":"delete","path":"/memories/NOTES.md"}`, "Successfully deleted /memories/NOTES.md"},
				{`{"command":"view","path":"/memories/notes.MD"}`, "The path /memories/notes.MD does not exist."},
				{`{"command":"view","path":"/memories"}`, listing + "0B\t/memories\n0B\t/memories/Dir/"},
			} {
				if res := execJSON(t, h, c.in); !strings.HasPrefix(res.Text, c.want) {
					t.Fatalf("%s: %q, want %q", c.in, res.Text, c.want)
				}
				forget()
			}
			vs, err := h.Log(context.Background(), handlers.LogQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, string(v.Kind)+" "+v.Path)
			}
			if want := []string{"deleted /memories/Notes.md", "deleted /memories/Dir/A.md", "modified /memories/Notes.md"}; !cmp.Equal(got, want) {
				t.Errorf("history %q, want %q", got, want)
			}
		})
	}
}

// A directory that tells case apart is never taken for one that ignores it, even when it
// holds several spellings of one name: another spelling names no file there.
func TestCaseSensitiveDirectoryWithManySpellings(t *testing.T) {
	lower := t.TempDir()
	for _, name := range []string{"Notes.md", "NOTES.MD", "notes.md"} {
		if err := os.WriteFile(filepath.Join(lower, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(lower); len(entries) != 3 {
		t.Skip("the temporary directory ignores case")
	}
	store, err := files.OpenOverlayStore(lower, "", vfs.WithHistory(vfs.HistoryConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := handlers.New(store, handlers.DefaultLimits())
	for _, c := range []struct{ in, want string }{
		{`{"command":"view","path":"/memories/nOTES.md"}`, "The path /memories/nOTES.md does not exist."},
		{`{"command":"create","path":"/memories/Notes.MD","file_text":"new"}`, "File created successfully at: /memories/Notes.MD"},
		{`{"command":"view","path":"/memories/NOTES.MD"}`, "Here's the content of /memories/NOTES.MD with line numbers:\n     1\tNOTES.MD"},
	} {
		if res := execJSON(t, h, c.in); !strings.HasPrefix(res.Text, c.want) {
			t.Fatalf("%s: %q, want %q", c.in, res.Text, c.want)
		}
	}
}

// Whatever the model does in whatever spellings on storage that ignores case (an os store,
// or an overlay over such a directory with its upper layer in memory), expiry keeps every
// file viewed or changed in the last minutes, in any spelling, and the history stays true
// to the files: restoring the last version changes nothing, and show of that version gives
// each file's content. Each op is a command on one of a few paths, each letter of which
// cases picks the case of, a minute after the one before; an os store may have a second
// process taking turns.
func FuzzCaseInsensitive(f *testing.F) {
	f.Add([]byte{0, 9, 1, 4, 10, 3, 7}, uint64(0b1011_0110))
	f.Add([]byte{8, 17, 2, 12, 4, 25, 7, 0, 3}, uint64(0x5a5a_5a5a))
	f.Add([]byte{1, 0, 36, 4, 11, 23, 6, 15, 7, 2}, uint64(0xf0f0_1234))
	f.Add([]byte{0, 0x80 | 9, 1, 0x80 | 6, 48, 0x80 | 30, 3, 0x80 | 8, 7}, uint64(0x5a5a_5a5c)) // two processes
	// A directory deleted, made again, restored.
	f.Add([]byte{8, 19, 24, 0x47}, uint64(0x0f0f_3c3c))
	// Changes in spellings of a mount's name.
	f.Add([]byte{6, 32, 33, 36, 46, 43, 87}, uint64(0x1_0000_0400))
	mnt, forget := caseInsensitiveDir(f)
	f.Setenv(sharedMount, mnt) // for the workers, which fuzzing starts in processes of their own
	names := []string{"a.md", "d/b.md", "d", "d/c.md", "e/a.md", "e"}
	f.Fuzz(func(t *testing.T, ops []byte, cases uint64) {
		if len(ops) > 30 {
			return
		}
		ctx := context.Background()
		dir, err := os.MkdirTemp(mnt, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir) // after the store closes: the filesystem is small
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		var store *vfs.Store
		if cases&1 == 0 {
			store, err = files.OpenOSStore(dir, vfs.WithHistory(vfs.HistoryConfig{Now: now}))
		} else {
			if err := os.MkdirAll(filepath.Join(dir, "D"), 0o700); err == nil {
				os.WriteFile(filepath.Join(dir, "A.md"), []byte("lower\n"), 0o600)
				os.WriteFile(filepath.Join(dir, "D", "B.md"), []byte("lower\n"), 0o600)
			}
			store, err = files.OpenOverlayStore(dir, "", vfs.WithHistory(vfs.HistoryConfig{Now: now}))
		}
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if err := store.TrackAccess(now); err != nil {
			t.Fatal(err)
		}
		touched := map[string]time.Time{} // by the path in lower case (the names are ASCII)
		h := handlers.New(store, handlers.DefaultLimits())
		mounted := cases&5 != 4 && cases>>32&1 != 0
		if mounted {
			// Another store at /memories/e: its name in any spelling is the mount.
			h = handlers.New(store, handlers.DefaultLimits(), handlers.WithMounts(handlers.Mount{Name: "e", Memory: handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())}))
		}
		hs := []*handlers.Memory{h}
		if cases&5 == 4 {
			// A second process on the os store's directory: the ops' top bits take turns.
			other := openTrackedOS(t, dir, now)
			defer other.Close()
			hs = append(hs, handlers.New(other, handlers.DefaultLimits()))
		}
		spell := func(name string) string {
			b := []byte(name)
			for i := range b {
				if cases = cases>>1 | cases<<63; cases&2 != 0 && 'a' <= b[i] && b[i] <= 'z' {
					b[i] -= 'a' - 'A'
				}
			}
			return "/memories/" + string(b)
		}
		for i, op := range ops {
			h := hs[int(op>>7)%len(hs)]
			clock = clock.Add(time.Minute)
			p, q := spell(names[int(op/8)%len(names)]), spell(names[int(op/48+op)%len(names)])
			var in map[string]any
			switch op % 8 {
			case 0:
				in = map[string]any{"command": "create", "path": p, "file_text": "v" + strconv.Itoa(i) + "\n"}
			case 1:
				in = map[string]any{"command": "str_replace", "path": p, "old_str": "v", "new_str": "w" + strconv.Itoa(i)}
			case 2:
				in = map[string]any{"command": "insert", "path": p, "insert_line": 0, "insert_text": "line " + strconv.Itoa(i)}
			case 3:
				in = map[string]any{"command": "delete", "path": p}
			case 4, 5:
				in = map[string]any{"command": "rename", "old_path": p, "new_path": q}
			case 6:
				in = map[string]any{"command": "view", "path": p}
			case 7:
				vs, _ := h.Log(ctx, handlers.LogQuery{}) // newest first
				if len(vs) > 0 {
					// The whole memory, or one file or directory in a random spelling, which
					// may refuse (something else in the way) but never fail.
					target, refusal := "/memories", new(handlers.Refusal)
					if op&0x40 != 0 {
						target = p
					}
					if _, err := h.Restore(ctx, target, vs[0].Seq-uint64(op/8)%vs[0].Seq); err != nil && (target == "/memories" || !errors.As(err, &refusal)) {
						t.Fatalf("op %d: restore %s: %v", i, target, err)
					}
					forget()
				}
				continue
			}
			res := h.Exec(ctx, in)
			t.Logf("%v: %.90q", in, res.Text)
			forget()
			if strings.Contains(res.Text, "Could not") {
				t.Fatalf("op %d %v: %s", i, in, res.Text)
			}
			if !res.IsError && in["command"] != "delete" {
				touched[strings.ToLower(p)] = clock
				if q, ok := in["new_path"].(string); ok {
					touched[strings.ToLower(q)] = clock
				}
			}
		}
		expired, err := store.Expire(ctx, 5*time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range expired {
			if at, ok := touched[strings.ToLower(e.Path)]; ok && !e.Dir && clock.Sub(at) < 4*time.Minute {
				t.Errorf("expiry deleted %s, viewed or changed %v ago", e.Path, clock.Sub(at))
			}
		}
		forget()
		// The main store's own versions: the whole memory's log has the mount's too.
		vs, err := h.Log(ctx, handlers.LogQuery{})
		vs = slices.DeleteFunc(vs, func(v vfs.Version) bool { return mounted && strings.HasPrefix(strings.ToLower(v.Path), "/memories/e/") })
		if err != nil || len(vs) == 0 {
			return
		}
		last := vs[0].Seq
		if r, err := h.Restore(ctx, "/memories", last); err != nil || r.Version != 0 {
			t.Fatalf("restoring the last version changed %+v (%v): the history differs from the files", r, err)
		}
		if entries, _ := os.ReadDir(dir); mounted && slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.EqualFold(e.Name(), "e") }) {
			t.Errorf("the main store holds %v: a change in another spelling of the mount missed it", entries)
		}
		list, err := h.FileList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range list {
			if mounted && strings.HasPrefix(file.Path, "/memories/e/") {
				continue // the mount's history has its own numbers
			}
			data, _, err := h.Read(ctx, file.Path)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := h.Show(ctx, file.Path, last); string(got) != string(data) && (err == nil || !strings.Contains(err.Error(), "no version")) {
				t.Errorf("show %s@%d = %q (%v), the file holds %q", file.Path, last, got, err, data)
			}
		}
	})
}

// A client subscribed to a file's URI in another spelling than the directory's hears of
// changes to that file, on storage that ignores case, and of a mounted file by a URI that
// spells the mount's name in another case.
func TestCaseInsensitiveSubscriptions(t *testing.T) {
	mnt, _ := caseInsensitiveDir(t)
	store, err := files.OpenOSStore(filepath.Join(mnt, "m"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the server's, which is registered later
	team := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits())
	updated := make(chan string, 100)
	env := memorytest.Start(t, memorytest.Config{
		Store:    store,
		Protocol: "2025-11-25", // whose resources/subscribe is answered once it holds
		Options:  []handlers.Option{handlers.WithMounts(handlers.Mount{Name: "team", Memory: team})},
		Client: &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		}},
	})
	for _, in := range []string{
		`{"command":"create","path":"/memories/Notes.md","file_text":"one\n"}`,
		`{"command":"create","path":"/memories/team/x.md","file_text":"x\n"}`,
	} {
		if res := execJSON(t, env.Memory, in); res.IsError {
			t.Fatal(res.Text)
		}
	}
	for _, c := range []struct{ uri, change string }{
		{"memory:///memories/notes.md", `{"command":"str_replace","path":"/memories/NOTES.md","old_str":"one","new_str":"two"}`},
		{"memory:///memories/TEAM/x.md", `{"command":"str_replace","path":"/memories/team/x.md","old_str":"x","new_str":"y"}`},
		{"memory:///memories/notes.md", `{"command":"delete","path":"/memories/Notes.md"}`},
	} {
		if err := env.Client.Subscribe(t.Context(), &mcp.SubscribeParams{URI: c.uri}); err != nil {
			t.Fatal(err)
		}
		if res := execJSON(t, env.Memory, c.change); res.IsError {
			t.Fatal(res.Text)
		}
		select {
		case got := <-updated:
			if got != c.uri {
				t.Errorf("after %s: updated %s, want %s", c.change, got, c.uri)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no notifications/resources/updated for %s after %s", c.uri, c.change)
		}
	}
}
