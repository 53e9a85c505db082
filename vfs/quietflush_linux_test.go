package vfs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// needQuietFlush skips the test unless dir is on ext4 without a journal whose disk counts
// its cache flushes (this project's CI machines), and fails it there under CI=true.
func needQuietFlush(t *testing.T, dir string) uint64 {
	t.Helper()
	var sfs unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	dev := uint64(st.Dev)
	_, _, counted := diskFlushes(dev)
	if sfs.Type != unix.EXT4_SUPER_MAGIC || !ext4WithoutJournal(dev) || !counted {
		msg := "needs TMPDIR on ext4 without a journal, on a disk whose flushes /sys counts"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dev
}

// On ext4 without a journal each change's flush goes through the store's quiet file, one
// whole inode block of empty files, and still reaches the disk: the disk's count of cache
// flushes grows by at least one per change.
func TestQuietFlushReachesTheDisk(t *testing.T) {
	needWAL(t)
	dir, w, create := openWALStore(t)
	dev := needQuietFlush(t, filepath.Dir(dir))
	create("/memories/first.md") // the log is made (it grows): flushed with fdatasync
	if w.quiet == nil {
		t.Fatal("no quiet file set up:", w.quietWhy)
	}
	checkQuietBlock(t, filepath.Join(dir, quietDir), dev)

	const changes = 20
	self0, disk0, _ := diskFlushes(dev)
	quiet0, log0 := w.quietFlushes.Load(), w.logFlushes.Load()
	for i := range changes {
		create("/memories/f" + strconv.Itoa(i) + ".md")
	}
	self1, disk1, _ := diskFlushes(dev)
	if q := w.quietFlushes.Load() - quiet0; q != changes {
		t.Errorf("%d of %d changes flushed through the quiet file (%d with fdatasync)", q, changes, w.logFlushes.Load()-log0)
	}
	if self1 < self0+changes && disk1 < disk0+changes {
		t.Errorf("the disk flushed its cache %d times (its disk %d) for %d changes", self1-self0, disk1-disk0, changes)
	}
}

// A change whose record makes the log grow is flushed with fdatasync of the log, which
// makes its new size and blocks durable too; the quiet file's flush would not.
func TestQuietFlushNotForAGrownLog(t *testing.T) {
	needWAL(t)
	dir, w, create := openWALStore(t)
	needQuietFlush(t, filepath.Dir(dir))
	create("/memories/first.md")
	if w.quiet == nil {
		t.Fatal("no quiet file set up:", w.quietWhy)
	}
	size := w.size
	log0 := w.logFlushes.Load()
	for i := 0; w.size == size; i++ { // records of about 300 bytes until the log grows
		create("/memories/g" + strconv.Itoa(i) + ".md")
	}
	if w.logFlushes.Load() != log0+1 {
		t.Errorf("the log grew from %d to %d bytes with %d flushes of the log itself, want 1", size, w.size, w.logFlushes.Load()-log0)
	}
}

// A quiet directory that is not one whole block of empty files (a copy of the store, a
// file added or written to) is made again.
func TestQuietBlockMadeAgain(t *testing.T) {
	needWAL(t)
	spoil := map[string]func(t *testing.T, q string){
		"file-added": func(t *testing.T, q string) {
			if err := os.WriteFile(filepath.Join(q, "extra"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"file-written": func(t *testing.T, q string) {
			ents, err := os.ReadDir(q)
			if err != nil || len(ents) == 0 {
				t.Fatal(err, len(ents))
			}
			if err := os.WriteFile(filepath.Join(q, ents[0].Name()), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"copied": func(t *testing.T, q string) { // new inodes, one per file, wherever they land
			ents, err := os.ReadDir(q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				p := filepath.Join(q, e.Name())
				if err := os.Rename(p, p+".old"); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p + ".old"); err != nil {
					t.Fatal(err)
				}
				// A file made between them takes the next inode, so the copies are spread.
				if err := os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(q)), "spacer-"+e.Name()), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
	for name, do := range spoil {
		t.Run(name, func(t *testing.T) {
			dir, w, create := openWALStore(t)
			dev := needQuietFlush(t, filepath.Dir(dir))
			create("/memories/first.md")
			if w.quiet == nil {
				t.Fatal("no quiet file set up:", w.quietWhy)
			}
			q := filepath.Join(dir, quietDir)
			do(t, q)
			if name != "copied" && checkQuietBlockErr(q, dev) == nil {
				t.Fatal("the spoiled directory still passes as a quiet block")
			}
			fsys, err := NewOSFs(dir)
			if err != nil {
				t.Fatal(err)
			}
			f, err := openQuietFile(fsys, dev)
			if err != nil {
				t.Fatal("no quiet file made again:", err)
			}
			f.Close()
			checkQuietBlock(t, q, dev)
		})
	}
}

// checkQuietBlock fails the test unless q holds exactly one whole inode block of empty
// files on dev.
func checkQuietBlock(t *testing.T, q string, dev uint64) {
	t.Helper()
	if err := checkQuietBlockErr(q, dev); err != nil {
		t.Fatal(err)
	}
}

func checkQuietBlockErr(q string, dev uint64) error {
	ents, err := os.ReadDir(q)
	if err != nil {
		return err
	}
	blocks := map[uint64]bool{}
	for _, e := range ents {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(q, e.Name()), &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 || uint64(st.Dev) != dev {
			return &os.PathError{Op: "quiet", Path: e.Name(), Err: os.ErrInvalid}
		}
		blocks[(st.Ino-1)/quietPerBlock] = true
	}
	if len(ents) != quietPerBlock || len(blocks) != 1 {
		return &os.PathError{Op: "quiet", Path: q, Err: os.ErrInvalid}
	}
	return nil
}

// Two stores on one filesystem making their quiet blocks at the same time (two processes
// started together, or two test suites) are placed in the same block group by the spreading
// allocator and take every other inode while both go on: each must still end with a whole
// block of its own.
func TestQuietBlocksMadeSideBySide(t *testing.T) {
	needWAL(t)
	const makers, rounds = 2, 10
	var stores [makers]FS
	var dev uint64
	for i := range stores {
		dir := filepath.Join(t.TempDir(), "m")
		if err := os.MkdirAll(filepath.Join(dir, historyDir), 0o700); err != nil {
			t.Fatal(err)
		}
		dev = needQuietFlush(t, dir)
		fsys, err := NewOSFs(dir)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = fsys
	}
	for r := range rounds {
		start := make(chan struct{})
		errs := make(chan error, makers)
		for _, fsys := range stores {
			go func() {
				<-start
				errs <- makeQuietBlock(fsys, quietDir+".r"+strconv.Itoa(r), dev)
			}()
		}
		close(start)
		for range makers {
			if err := <-errs; err != nil {
				t.Errorf("round %d: %v", r, err)
			}
		}
		for i, fsys := range stores {
			q := filepath.Join(fsys.(*OSFs).dir, quietDir+".r"+strconv.Itoa(r))
			if err := checkQuietBlockErr(q, dev); err != nil && !t.Failed() {
				t.Errorf("round %d, store %d: %v", r, i, err)
			}
		}
	}
}
