package vfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The os backend never reads a file's times (statMask): each way it reads a status gives
// zero times, and the rest as lstat(2) has it. With a time read, a change after it moves
// the kernel's coarse clock on (Linux 6.13 and later) and the next log flush writes the
// log's inode too.
func TestOSStatusLeavesTimesOut(t *testing.T) {
	for _, withStatx := range []bool{true, false} {
		name := map[bool]string{true: "statx", false: "without statx"}[withStatx]
		t.Run(name, func(t *testing.T) {
			if !withStatx {
				was := noStatx.Load()
				noStatx.Store(true)
				t.Cleanup(func() { noStatx.Store(was) })
			}
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("hello"), 0o600); err != nil {
				t.Fatal(err)
			}
			osfs := lockedOSFs(t, dir, true)

			check := func(what, host string, fi os.FileInfo, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				var want unix.Stat_t
				if err := unix.Lstat(host, &want); err != nil {
					t.Fatal(err)
				}
				st, ok := fi.Sys().(*unix.Stat_t)
				if !ok {
					t.Fatalf("%s: status is a %T, want a *unix.Stat_t (read by statAtNoTimes)", what, fi.Sys())
				}
				if st.Size != want.Size || st.Mode != want.Mode || st.Ino != want.Ino || st.Dev != want.Dev || st.Nlink != want.Nlink {
					t.Errorf("%s: size %d mode %o ino %d dev %d links %d, want %d %o %d %d %d", what,
						st.Size, st.Mode, st.Ino, st.Dev, st.Nlink, want.Size, want.Mode, want.Ino, want.Dev, want.Nlink)
				}
				if zero := (st.Mtim == unix.Timespec{} && st.Ctim == unix.Timespec{} && st.Atim == unix.Timespec{}); zero != withStatx {
					t.Errorf("%s: times %v %v %v; zero %v, want %v", what, st.Mtim, st.Ctim, st.Atim, zero, withStatx)
				}
			}

			fi, _, err := osfs.LstatIfPossible("/a.md")
			check("Lstat of a file", filepath.Join(dir, "a.md"), fi, err)
			fi, _, err = osfs.LstatIfPossible("/")
			check("Lstat of the root", dir, fi, err)
			fi, err = statPath(dir)
			check("the root's check", dir, fi, err)

			f, err := osfs.OpenFile("/a.md", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, err = f.Stat()
			check("an opened file, as opened", filepath.Join(dir, "a.md"), fi, err)
			if _, err := f.WriteAt([]byte(", world"), 5); err != nil {
				t.Fatal(err)
			}
			fi, err = f.Stat()
			check("an opened file, written", filepath.Join(dir, "a.md"), fi, err)
			if fi.Size() != 12 {
				t.Errorf("size after the write %d, want 12", fi.Size())
			}

			d, err := osfs.Open("/d")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			fi, err = d.Stat()
			check("an opened directory", filepath.Join(dir, "d"), fi, err)

			// The listing describes each entry with entryStats, one buffer for every name: a
			// shorter name after a longer one is read as itself.
			h, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			var stats entryStats
			for _, name := range []string{"a.md", "d"} {
				var st unix.Stat_t
				err = stats.stat(int(h.Fd()), name, unix.AT_SYMLINK_NOFOLLOW, &st)
				check("an entry of a listing", filepath.Join(dir, name), &statInfo{name: name, st: st}, err)
			}
			var st unix.Stat_t
			if err := stats.stat(int(h.Fd()), "absent", unix.AT_SYMLINK_NOFOLLOW, &st); err != unix.ENOENT {
				t.Errorf("an absent entry: %v, want ENOENT", err)
			}
		})
	}
}
