package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statMask is what memory-mcp reads of a file's status: never its times, which nothing
// here uses. Since Linux 6.13 (multigrain timestamps) reading a file's change time marks
// it, and the file's next change then takes a fine-grained time that also moves forward
// the coarse clock every file's next change is stamped with. The write-ahead log's next
// record then changes the log's modification time, so its flush writes the log's inode
// too: on ext4 a third synchronous device write per change, besides the record and the
// cache flush (measured on this project's test machine: ~45 µs more per change).
const statMask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_NLINK | unix.STATX_UID |
	unix.STATX_GID | unix.STATX_INO | unix.STATX_SIZE | unix.STATX_BLOCKS

// noStatx is set once the kernel (or a seccomp filter) has refused statx: fstatat it is.
var noStatx atomic.Bool

// statAtNoTimes is fstatat(dirfd, name, st, flags), "" with unix.AT_EMPTY_PATH for dirfd
// itself, that leaves st's times zero (see statMask).
func statAtNoTimes(dirfd int, name string, flags int, st *unix.Stat_t) error {
	var e entryStats
	return e.stat(dirfd, name, flags, st)
}

// fromStatx fills st from sx, times zero. Some fields differ in width between
// architectures; set and setInt convert to whichever each has.
func fromStatx(sx *unix.Statx_t, st *unix.Stat_t) {
	*st = unix.Stat_t{}
	set(&st.Dev, unix.Mkdev(sx.Dev_major, sx.Dev_minor))
	set(&st.Rdev, unix.Mkdev(sx.Rdev_major, sx.Rdev_minor))
	set(&st.Ino, sx.Ino)
	set(&st.Nlink, uint64(sx.Nlink))
	set(&st.Mode, uint64(sx.Mode))
	set(&st.Uid, uint64(sx.Uid))
	set(&st.Gid, uint64(sx.Gid))
	setInt(&st.Size, int64(sx.Size))
	setInt(&st.Blksize, int64(sx.Blksize))
	setInt(&st.Blocks, int64(sx.Blocks))
}

func set[T ~uint16 | ~uint32 | ~uint64](dst *T, v uint64) { *dst = T(v) }

func setInt[T ~int32 | ~int64](dst *T, v int64) { *dst = T(v) }

// statPath is os.Stat without the times (see statMask).
func statPath(name string) (os.FileInfo, error) {
	var st unix.Stat_t
	if err := statAtNoTimes(unix.AT_FDCWD, name, 0, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return &statInfo{name: filepath.Base(name), st: st}, nil
}

// sameFile is os.SameFile for what statPath and the os package return.
func sameFile(a, b os.FileInfo) bool {
	da, ia, _, ok := sysStat(a)
	db, ib, _, ok2 := sysStat(b)
	return ok && ok2 && da == db && ia == ib
}

// sysStat returns the fields used here of the status fi was made from: the os package's
// (a *syscall.Stat_t) or statAtNoTimes's (a *unix.Stat_t).
func sysStat(fi os.FileInfo) (dev, ino, nlink uint64, ok bool) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink), true
	case *unix.Stat_t:
		return uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink), true
	}
	return 0, 0, 0, false
}

// fileStat is f.Stat() without the times (see statMask).
func fileStat(f *os.File) (os.FileInfo, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if cerr := rc.Control(func(fd uintptr) { err = statAtNoTimes(int(fd), "", unix.AT_EMPTY_PATH, &st) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	return &statInfo{name: filepath.Base(f.Name()), st: st}, nil
}

// entryStats reads statuses through one buffer for the names, which the system call takes
// NUL-terminated (unix.Statx allocates a copy of each): a listing reuses one for all its
// entries, a call per entry.
type entryStats struct{ name []byte }

// stat is statAtNoTimes(dirfd, name, flags, st): statx, or fstatat once the kernel has
// refused statx.
func (e *entryStats) stat(dirfd int, name string, flags int, st *unix.Stat_t) error {
	if !noStatx.Load() {
		if strings.IndexByte(name, 0) >= 0 {
			return unix.EINVAL // as unix.Statx refuses it
		}
		e.name = append(append(e.name[:0], name...), 0)
		var sx unix.Statx_t
		for {
			_, _, errno := unix.Syscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(&e.name[0])),
				uintptr(flags|unix.AT_STATX_SYNC_AS_STAT), statMask, uintptr(unsafe.Pointer(&sx)), 0)
			if errno == unix.EINTR {
				continue
			}
			if errno == 0 {
				fromStatx(&sx, st)
				return nil
			}
			if errno != unix.ENOSYS && errno != unix.EPERM {
				return errno
			}
			break
		}
		noStatx.Store(true)
	}
	return retryErr(func() error { return unix.Fstatat(dirfd, name, st, flags) })
}
