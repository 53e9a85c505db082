package vfs

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statCache remembers the status of directory entries between listings for as long as
// inotify reports no change to them, so that listing an unchanged directory costs no
// system call per entry. One stat per file (1–3 µs each) is most of what listing a
// directory of a few hundred files costs, and a model lists /memories all the time.
//
// Why it stays true:
//   - Every change to a directory's entries or to a file's content (write, truncate,
//     fallocate, create, remove, rename either way) queues an inotify event on the
//     directory before the system call that made it returns, in this process or any other.
//     Each listing first applies the queued events, each dropping the entry it names, so
//     a change that completed before the listing began is never hidden from it.
//   - A directory is watched before any of its entries are remembered, and a status read
//     while events were being applied by another listing is not remembered (gen): the
//     change behind such an event may be newer than the status.
//   - A lost event (the queue overflowed) forgets everything; a directory removed, or on
//     another device than the root (a mount below it), or a file with more than one link
//     (written through a name in a directory not watched), is never remembered.
//   - Network and FUSE filesystems, whose other clients' changes never reach inotify, get
//     no cache at all.
//
// The one change inotify cannot report is a write through a hard link made, after the
// listing, from a directory that is not watched: so nothing is remembered for longer than
// statCacheTTL. The names themselves are always read from the directory.
//
// One cache serves the whole process, every store included (one inotify instance: a user
// has 128 by default, and a server with a store per tenant must not take them all). It is
// keyed by the directories' inodes, and a listing asks only about a directory it has open.
type statCache struct {
	fd    int // the inotify instance
	start time.Time

	mu    sync.Mutex
	byIno map[fileID]*dirStats // a watched directory → its entries
	byWd  map[int32]*dirStats  // its watch descriptor → its entries
	n     int                  // entries remembered, at most statCacheMax
	gen   uint64               // times events were applied
	buf   []byte

	hits atomic.Int64 // entries answered from the cache (tests read it)
}

// dirStats is what the cache remembers of one directory.
type dirStats struct {
	wd    int32
	id    fileID
	names map[string]cachedStat
}

// fileID is a file's device and inode number.
type fileID struct{ dev, ino uint64 }

type cachedStat struct {
	kind Kind
	size int64
	at   time.Duration // when it was read, since start
}

const (
	// statCacheMax bounds the entries remembered (about 100 bytes each).
	statCacheMax = 1 << 16
	// watchMask is every event that changes an entry's status or the directory itself.
	watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE |
		unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_ONLYDIR |
		unix.IN_EXCL_UNLINK
)

// statCacheTTL is how long an entry is remembered at most (see statCache); a variable for
// the tests.
var statCacheTTL = time.Second

// localFilesystems are the filesystems whose every change, from whichever process, reaches
// inotify.
var localFilesystems = map[uint32]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2, ext3 too
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
	unix.F2FS_SUPER_MAGIC:  true,
}

// processStatCache is the process's cache, made at the first listing (nil: inotify is not
// to be had, the user's instances being used up, say: listings then stat every entry).
var processStatCache = sync.OnceValue(func() *statCache {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	return &statCache{fd: fd, start: time.Now(),
		byIno: map[fileID]*dirStats{}, byWd: map[int32]*dirStats{}, buf: make([]byte, 64<<10)}
})

// statCache returns the cache for the storage's listings and the root's device (a
// directory on another, a mount below the root, is never cached); nil where the cache
// cannot be kept true (see statCache). It is decided at the first listing.
func (f *OSFs) statCache() (*statCache, uint64) {
	f.statsOnce.Do(func() {
		var sfs unix.Statfs_t
		if err := unix.Statfs(f.dir, &sfs); err != nil || !localFilesystems[uint32(sfs.Type)] {
			return
		}
		var st unix.Stat_t
		if err := statAtNoTimes(unix.AT_FDCWD, f.dir, 0, &st); err != nil {
			return
		}
		f.stats, f.statsDev = processStatCache(), uint64(st.Dev)
	})
	return f.stats, f.statsDev
}

// entries describes names, the entries of the directory open as fd (of a store whose root is
// on device dev), from what the cache remembers where it can, else through stat,
// remembering what stat reports as cacheable. The order of names is kept.
func (c *statCache) entries(fd int, dev uint64, names []string, stat statFunc) []Entry {
	if c == nil {
		return statAll(names, stat)
	}
	d, gen := c.dir(fd, dev)
	if d == nil {
		return statAll(names, stat)
	}
	now := time.Since(c.start)
	out := make([]Entry, len(names)) // an entry without a name: not (yet) described
	hits := 0
	c.mu.Lock()
	for i, n := range names {
		if s, ok := d.names[n]; ok && now-s.at < statCacheTTL {
			out[i] = Entry{Name: n, Kind: s.kind, Size: s.size}
			hits++
		}
	}
	c.mu.Unlock()
	c.hits.Add(int64(hits))
	if hits == len(names) {
		return out
	}
	keep := make([]bool, len(names))
	for i, n := range names {
		if out[i].Name == "" {
			var ok bool
			if out[i], ok, keep[i] = stat(n); !ok {
				out[i] = Entry{} // gone since the names were read
			}
		}
	}
	c.mu.Lock()
	if c.gen == gen && c.byWd[d.wd] == d {
		for i, n := range names {
			if !keep[i] {
				continue
			}
			if _, ok := d.names[n]; !ok {
				if c.n >= statCacheMax {
					continue
				}
				c.n++
			}
			d.names[n] = cachedStat{kind: out[i].Kind, size: out[i].Size, at: now}
		}
	}
	c.mu.Unlock()
	return slices.DeleteFunc(out, func(e Entry) bool { return e.Name == "" })
}

// dir applies the queued events and returns the entries remembered of the directory open
// as fd, watching it if it is not yet, with the count of event applications as of then;
// nil where the directory cannot be cached (not on device dev).
func (c *statCache) dir(fd int, dev uint64) (*dirStats, uint64) {
	var st unix.Stat_t
	if err := statAtNoTimes(fd, "", unix.AT_EMPTY_PATH, &st); err != nil || uint64(st.Dev) != dev {
		return nil, 0
	}
	id := fileID{dev, uint64(st.Ino)}
	c.mu.Lock()
	defer c.mu.Unlock()
	// After the status: a directory that had this inode number before is removed, so its
	// watch's IN_IGNORED is already queued, and applying it forgets the old one.
	c.apply()
	if d := c.byIno[id]; d != nil {
		return d, c.gen
	}
	wd, err := unix.InotifyAddWatch(c.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		return nil, 0 // no /proc, or the user's watches are used up: this one is not cached
	}
	d := c.byWd[int32(wd)]
	if d == nil || d.id != id {
		c.drop(d)
		d = &dirStats{wd: int32(wd), id: id, names: map[string]cachedStat{}}
		c.byWd[d.wd] = d
	}
	c.byIno[id] = d
	return d, c.gen
}

// apply reads the queued events and forgets what they name.
func (c *statCache) apply() {
	read := false
	for {
		n, err := unix.Read(c.fd, c.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break // EAGAIN: no more
		}
		read = true
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&c.buf[off]))
			name := c.buf[off+unix.SizeofInotifyEvent : min(n, off+unix.SizeofInotifyEvent+int(ev.Len))]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				c.forget()
			case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_UNMOUNT) != 0:
				c.drop(c.byWd[ev.Wd])
			case len(name) > 0:
				if d := c.byWd[ev.Wd]; d != nil {
					if _, ok := d.names[string(name)]; ok {
						delete(d.names, string(name))
						c.n--
					}
				}
			}
		}
	}
	if read {
		c.gen++
	}
}

// drop forgets a directory (nil: none).
func (c *statCache) drop(d *dirStats) {
	if d == nil {
		return
	}
	c.n -= len(d.names)
	delete(c.byWd, d.wd)
	if c.byIno[d.id] == d {
		delete(c.byIno, d.id)
	}
}

// forget forgets every directory (events were lost). The watches stay: watching a
// directory again returns its watch descriptor.
func (c *statCache) forget() {
	clear(c.byIno)
	clear(c.byWd)
	c.n = 0
	c.gen++
}
