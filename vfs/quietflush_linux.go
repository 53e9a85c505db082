package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// quietFlush makes the write-ahead log durable, on ext4 without a journal, by waiting for
// the log's pages to be written and then flushing the disk's cache through a file that
// nothing ever writes, instead of fdatasync(2) on the log itself.
//
// Why: there, fdatasync writes the file's inode-table block to the disk before the cache
// flush whenever that block is dirty (ext4_fsync_nojournal calls ext4_write_inode, which
// writes the block and waits: seen in block traces on Linux 6.18), and it nearly always
// is for the log: the block holds 16
// inodes, the log's own modification time changes at every clock tick it is written in,
// and its neighbours are the store's other busy files (the storage directory itself,
// changed by every creation and rename, the history's log, the lock file). That is a third
// trip to the disk, waited for, on one flush in five to one in two (block tracing of the
// side-by-side mix: 222–709 such writes for 1,200 flushes), for nothing the log needs: its
// records overwrite blocks allocated and flushed when it grew, inside its size, so only
// their data and the cache flush matter. The quiet file's block holds only inodes of the
// store's own files that nothing writes (quietDir: a whole block of them is made once), so
// its fdatasync finds nothing to write and is the cache flush alone.
//
// Why it is safe: sync_file_range(2) with SYNC_FILE_RANGE_WAIT_BEFORE, _WRITE and
// _WAIT_AFTER over the whole log returns once every page of it dirty at the call has been
// written to the disk (and reports a failed write as fdatasync would); a cache flush sent
// after that makes those writes durable, whichever file's fdatasync sends it, since the
// disk flushes its whole cache. ext4 without a journal sends the flush at every fdatasync
// of a filesystem mounted with barriers, and setupQuietFlush checks that it does, on the
// disk's own count of flushes, before it is used; where anything is uncertain (another
// filesystem, a journal, no count to read, the log on another device than the quiet
// file) the log is flushed with fdatasync as before. The log's growth, its emptying at a
// checkpoint and recovery still use fdatasync or syncfs.
type quietFlush struct {
	f       afero.File
	fd      int // f's
	dev     uint64
	checked afero.File // the log descriptor last found on dev
}

const (
	quietDir = historyDir + "/quiet"
	// quietPerBlock is how many inodes share an inode-table block: 16 with ext4's
	// default 256-byte inodes in 4 KiB blocks. (With 128-byte inodes a block holds 32,
	// and the quiet block is then only half of one: still correct, just not quiet.)
	quietPerBlock = 16
	// quietMaxFiles bounds the files made to find a whole block of them (made once per
	// store): the allocator hands out the lowest free inodes of the directory's group,
	// around other files and the inodes freed in the last minute, which it skips, and
	// another process making files there at the same time takes some of them; after
	// every quietPauseEvery files that filled no block, the making pauses (see
	// makeQuietBlock).
	quietMaxFiles   = 4096
	quietPauseEvery = 512
)

// setupQuietFlush returns a quietFlush for the log wal, or nil and why not where the log
// must be flushed with fdatasync (see quietFlush).
func setupQuietFlush(fsys FS, wal afero.File) (*quietFlush, error) {
	walFd, ok := fdOf(wal)
	if !ok {
		return nil, errors.New("the log is no file of the host")
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(walFd, &sfs); err != nil {
		return nil, err
	}
	if sfs.Type != unix.EXT4_SUPER_MAGIC {
		return nil, errors.New("not ext4")
	}
	var st unix.Stat_t
	if err := unix.Fstat(walFd, &st); err != nil {
		return nil, err
	}
	dev := uint64(st.Dev)
	if !ext4WithoutJournal(dev) {
		return nil, errors.New("ext4 with a journal (or its sysfs directory unread)")
	}
	f, err := openQuietFile(fsys, dev)
	if err != nil {
		return nil, err
	}
	fd, ok := fdOf(f)
	if !ok {
		f.Close()
		return nil, errors.New("the quiet file is no file of the host")
	}
	q := &quietFlush{f: f, fd: fd, dev: dev, checked: wal}
	if err := q.flushesDisk(); err != nil {
		f.Close()
		return nil, err
	}
	return q, nil
}

// sysBlockDir is the sysfs directory of the block device dev.
func sysBlockDir(dev uint64) string {
	return fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev))
}

// ext4WithoutJournal reports whether the ext4 filesystem on dev runs without a journal
// (/sys/fs/ext4/NAME/journal_task reads "<none>"; with a journal it names the journal's
// thread, and fdatasync of the log writes no inode block anyway).
func ext4WithoutJournal(dev uint64) bool {
	link, err := os.Readlink(sysBlockDir(dev))
	if err != nil {
		return false
	}
	b, err := os.ReadFile("/sys/fs/ext4/" + filepath.Base(link) + "/journal_task")
	return err == nil && strings.TrimSpace(string(b)) == "<none>"
}

// diskFlushes reads how many cache flushes the block device dev (or the disk it is a
// partition of) has completed: the 16th field of its sysfs stat file, Linux 5.5 on.
func diskFlushes(dev uint64) (self, disk uint64, ok bool) {
	read := func(name string) (uint64, bool) {
		b, err := os.ReadFile(name)
		if err != nil {
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) < 16 {
			return 0, false
		}
		n, err := strconv.ParseUint(f[15], 10, 64)
		return n, err == nil
	}
	dir := sysBlockDir(dev)
	self, ok1 := read(dir + "/stat")
	disk, ok2 := read(dir + "/../stat") // a partition's disk; for a disk, a directory with no stat
	return self, disk, ok1 || ok2
}

// flushesDisk checks that fdatasync of the quiet file sends the disk a cache flush: the
// disk's count of flushes must grow by at least as many calls. Eight calls in a row (well
// under a millisecond here), so that other processes' flushes cannot pass for ours unless
// they flush thousands of times a second, and only once per store and process.
func (q *quietFlush) flushesDisk() error {
	const calls = 8
	self0, disk0, ok := diskFlushes(q.dev)
	if !ok {
		return errors.New("the disk's count of flushes unread")
	}
	for range calls {
		if err := retryErr(func() error { return unix.Fdatasync(q.fd) }); err != nil {
			return err
		}
	}
	self1, disk1, ok := diskFlushes(q.dev)
	if !ok || (self1 < self0+calls && disk1 < disk0+calls) {
		return fmt.Errorf("%d fdatasync calls of the quiet file, %d flushes counted (%d by its disk)", calls, self1-self0, disk1-disk0)
	}
	return nil
}

// covers reports whether the quiet file's flush is the disk of the log wal.
func (q *quietFlush) covers(wal afero.File) bool {
	if q.checked == wal {
		return true
	}
	fd, ok := fdOf(wal)
	if !ok {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != q.dev {
		return false
	}
	q.checked = wal
	return true
}

// flush makes every record written to wal so far durable: its pages written, then the
// disk's cache flushed.
func (q *quietFlush) flush(wal afero.File) error {
	fd, ok := fdOf(wal)
	if !ok {
		return syncFile(wal)
	}
	const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	if err := retryErr(func() error { return unix.SyncFileRange(fd, 0, 0, wait) }); err != nil {
		return &fs.PathError{Op: "sync", Path: walName, Err: err}
	}
	if err := retryErr(func() error { return unix.Fdatasync(q.fd) }); err != nil {
		return &fs.PathError{Op: "sync", Path: walName, Err: err}
	}
	return nil
}

func (q *quietFlush) close() { q.f.Close() }

// fdOf returns the descriptor of a file the storage opened.
func fdOf(f afero.File) (int, bool) {
	switch f := f.(type) {
	case *fdFile:
		return f.fd, f.fd >= 0
	case osFile:
		return int(f.Fd()), true
	}
	return 0, false
}

// quietBuild serialises the making of quiet blocks within the process; other processes
// make theirs under another name and keep whichever lands first.
var quietBuild sync.Mutex

// openQuietFile opens a file of the store's quiet block on dev, making the block first
// if there is none (or the one there is no block: a copy of the store, say).
func openQuietFile(fsys FS, dev uint64) (afero.File, error) {
	quietBuild.Lock()
	defer quietBuild.Unlock()
	if f := useQuietBlock(fsys, dev); f != nil {
		return f, nil
	}
	fsys.RemoveAll(quietDir)
	tmp := quietDir + ".tmp-" + newEpoch() // 16 random hex digits
	if err := makeQuietBlock(fsys, tmp, dev); err != nil {
		fsys.RemoveAll(tmp)
		return nil, err
	}
	if err := fsys.Rename(tmp, quietDir); err != nil {
		fsys.RemoveAll(tmp) // another process's landed first: use it
	}
	if f := useQuietBlock(fsys, dev); f != nil {
		return f, nil
	}
	return nil, errors.New("the quiet block made is gone or spoiled")
}

// makeQuietBlock makes the new directory dir holding quietPerBlock empty files that fill
// one inode-table block, and no other files.
//
// Files made one after another get consecutive inodes where the group's inodes are free,
// so a whole block of them comes after a few dozen files, or a few hundred where the
// group's lowest free inodes are scattered among files in use. But another process making
// files in the same group at the same time (another store making its quiet block or its
// spare, which the spreading allocator places in the same group: two test suites at once
// did) takes every other inode, and no block fills while both go on. So after every
// quietPauseEvery files that filled no block, it waits a random 5–25 ms, long enough for the
// two to stop overlapping. The files made so far are kept until a block is full: the
// allocator hands an inode freed within the same second straight back, so removing them
// would send the next files over the same scattered inodes again.
func makeQuietBlock(fsys FS, dir string, dev uint64) error {
	if err := spreadMkdir(fsys, dir); err != nil {
		return err
	}
	names := map[uint64]string{} // inode → name
	perBlock := map[uint64]int{}
	var full uint64
	found := false
	for i := 0; i < quietMaxFiles && !found; i++ {
		if i > 0 && i%quietPauseEvery == 0 {
			time.Sleep(5*time.Millisecond + rand.N(20*time.Millisecond))
		}
		name := dir + "/" + strconv.Itoa(i)
		f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		f.Close()
		if err != nil {
			return err
		}
		d, ino, _, ok := sysStat(fi)
		if !ok || d != dev || ino == 0 {
			return fmt.Errorf("quiet file %s: no inode on the log's device", name)
		}
		names[ino] = name
		b := (ino - 1) / quietPerBlock
		perBlock[b]++
		full, found = b, perBlock[b] == quietPerBlock
	}
	if !found {
		return fmt.Errorf("no whole inode block in %d files", len(names))
	}
	for ino, name := range names {
		if (ino-1)/quietPerBlock != full {
			if err := fsys.Remove(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// useQuietBlock opens a file of quietDir if it holds exactly one whole inode-table block
// of empty files on dev; nil otherwise.
func useQuietBlock(fsys FS, dev uint64) afero.File {
	d, err := fsys.Open(quietDir)
	if err != nil {
		return nil
	}
	fis, err := d.Readdir(-1)
	d.Close()
	if err != nil || len(fis) != quietPerBlock {
		return nil
	}
	var block uint64
	seen := map[uint64]bool{}
	for i, fi := range fis {
		fdev, ino, _, ok := sysStat(fi)
		if !ok || !fi.Mode().IsRegular() || fi.Size() != 0 || fdev != dev || ino == 0 {
			return nil
		}
		if b := (ino - 1) / quietPerBlock; i == 0 {
			block = b
		} else if b != block {
			return nil
		}
		seen[ino] = true
	}
	if len(seen) != quietPerBlock {
		return nil
	}
	f, err := fsys.OpenFile(quietDir+"/"+fis[0].Name(), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil
	}
	if _, ino, _, ok := sysStat(fi); !ok || !seen[ino] {
		f.Close()
		return nil
	}
	return f
}

// fsTopdirFlag is FS_TOPDIR_FL (chattr +T): ext4 spreads the subdirectories made in such a
// directory over its block groups (the Orlov allocator) instead of keeping them in the
// parent's.
const fsTopdirFlag = 0x00020000

// spreadMkdir makes the directory dir with the history's directory marked as a top of a
// hierarchy for the time of the mkdir, so that ext4 places it in a block group with more
// free inodes than the average and few directories, whose lowest free inodes, where the
// files made in it go, then mostly come in whole blocks; in the group of a storage
// directory that sees files made and removed all the time, the inodes freed in the last
// minute are skipped and the files land one here, one there. Without the flag (another
// filesystem, or the call refused) dir is made all the same; a process killed before it
// puts the flags back leaves the flag, which only places later subdirectories of the
// history's directory in other groups.
func spreadMkdir(fsys FS, dir string) error {
	if d, err := fsys.Open(historyDir); err == nil {
		defer d.Close()
		if fd, ok := fdOf(d); ok {
			if flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil && flags&fsTopdirFlag == 0 {
				if unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFlag)) == nil {
					defer unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags))
				}
			}
		}
	}
	return fsys.Mkdir(dir, 0o700)
}
