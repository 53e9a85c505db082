package vfs

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statCache remembers the names in a directory and the status of its entries between
// listings for as long as inotify reports no change to them, so that listing an unchanged
// directory costs no system call per entry, and none to read its names. One stat per file
// (1–3 µs each) is most of what listing a directory of a few hundred files costs, and
// reading the names is about half of the rest (ext4 hashes and sorts every name of an
// indexed directory at each read); a model lists /memories all the time.
//
// Why it stays true:
//   - Every change to a directory's entries or to a file's content (write, truncate,
//     fallocate, create, remove, rename either way) queues an inotify event on the
//     directory before the system call that made it returns, in this process or any other.
//     Each listing first applies the queued events, each dropping the status of the entry
//     it names, so a change that completed before the listing began is never hidden from
//     it.
//   - The names are kept by the same events: a name that an event names (created,
//     removed, moved either way) is marked to be looked up at the next listing, which
//     lists it only if it is there then. (The events alone cannot say: a rename over an
//     existing name and back, and an exchange of the two (RENAME_EXCHANGE), queue the
//     same four events and leave different names.) A name no event named since it was
//     read or looked up is still there.
//   - A directory is watched before any of its names or entries are remembered, and names
//     or a status read while events were being applied by another listing are not
//     remembered (gen): those events are then applied to nothing, and the change behind
//     them may be newer than what was read.
//   - A lost event (the queue overflowed) forgets everything; a directory removed, or on
//     another device than the root (a mount below it), or a file with more than one link
//     (written through a name in a directory not watched), is never remembered.
//   - Network and FUSE filesystems, whose other clients' changes never reach inotify, get
//     no cache at all.
//
// The one change inotify cannot report is a write through a hard link made, after the
// listing, from a directory that is not watched: so nothing is remembered for longer than
// statCacheTTL, the names neither.
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

	hits     atomic.Int64 // entries answered from the cache (tests read it)
	nameHits atomic.Int64 // listings whose names came from the cache (tests read it)
}

// dirStats is what the cache remembers of one directory.
type dirStats struct {
	wd    int32
	id    fileID
	names map[string]cachedStat // entries' status, by name
	// The directory's names, as read and then kept by the events (nil: not known), each
	// true when it was there at the last look and no event has named it since; and when
	// they were read.
	list   map[string]bool
	listAt time.Duration
	// The same names in order, so that a listing need not sort them: kept in step with
	// list while few names come and go between listings (a name an event adds is
	// inserted, one found gone removed, each a copy of the slice), else nil until the next
	// listing sorts them again (see maxInserts). And those of list's names whose value is
	// false (events named them since they were last looked up).
	sorted  []string
	inserts int // names inserted into or removed from sorted since the last listing
	marked  []string
}

// maxInserts bounds the names inserted into or removed from a directory's sorted names
// between two listings: each costs a copy of the slice, and a burst of creations (another
// program's, in a directory of tens of thousands of names) is cheaper sorted once.
const maxInserts = 64

// fileID is a file's device and inode number.
type fileID struct{ dev, ino uint64 }

type cachedStat struct {
	kind Kind
	size int64
	at   time.Duration // when it was read, since start
}

const (
	// statCacheMax bounds the entries and names remembered (about 100 bytes each).
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

// entries describes the entries of the directory open as fd (of a store whose root is on
// device dev), from what the cache remembers where it can, else through readNames (the
// directory's names, in any order) and stat, remembering the names and what stat reports as
// cacheable. The entries come sorted by name in byte order, when the cache serves them
// (names sort faster on their own than in entries, which are twice their size).
func (c *statCache) entries(fd int, dev uint64, readNames func() ([]string, error), stat statFunc) ([]Entry, error) {
	if c == nil {
		return statNames(readNames, stat)
	}
	d, gen := c.dir(fd, dev)
	if d == nil {
		return statNames(readNames, stat)
	}
	now := time.Since(c.start)
	names, check, ok := c.knownNames(d, now) // in order
	if !ok {
		var err error
		if names, err = readNames(); err != nil {
			return nil, err
		}
		slices.Sort(names)
		c.rememberNames(d, gen, names, now)
	}
	if len(check) > 0 {
		// The names events named since: each is looked up.
		gone := map[string]bool{}
		var st unix.Stat_t
		var look entryStats
		for _, n := range check {
			if errors.Is(look.stat(fd, n, unix.AT_SYMLINK_NOFOLLOW, &st), unix.ENOENT) {
				gone[n] = true
			}
		}
		c.lookedUp(d, gen, check, gone)
		names = slices.DeleteFunc(names, func(n string) bool { return gone[n] })
	}
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
		return out, nil
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
	return slices.DeleteFunc(out, func(e Entry) bool { return e.Name == "" }), nil
}

// knownNames returns the names of d as remembered, in order, if they are not older than
// statCacheTTL, and those of them to look up (events named them since).
func (c *statCache) knownNames(d *dirStats, now time.Duration) (names, check []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.list == nil || now-d.listAt >= statCacheTTL || c.byWd[d.wd] != d {
		return nil, nil, false
	}
	c.nameHits.Add(1)
	if d.sorted == nil {
		d.sorted = slices.Sorted(maps.Keys(d.list))
	}
	d.inserts = 0
	return slices.Clone(d.sorted), slices.Clone(d.marked), true
}

// resort adds (or, with gone, removes) name in d's sorted names, or drops them to be
// sorted again once more than maxInserts names came or went since the last listing.
func (d *dirStats) resort(name string, gone bool) {
	if d.sorted == nil {
		return
	}
	if d.inserts++; d.inserts > maxInserts {
		d.sorted = nil
		return
	}
	i, found := slices.BinarySearch(d.sorted, name)
	switch {
	case gone && found:
		d.sorted = slices.Delete(d.sorted, i, i+1)
	case !gone && !found:
		d.sorted = slices.Insert(d.sorted, i, name)
	}
}

// lookedUp records what looking up the names check of d found (gone: not there), unless
// events were applied since generation gen (they may have named them again).
func (c *statCache) lookedUp(d *dirStats, gen uint64, check []string, gone map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.byWd[d.wd] != d {
		return
	}
	for _, n := range check {
		if _, ok := d.list[n]; !ok { // a nil list too
			continue
		}
		if gone[n] {
			delete(d.list, n)
			c.n--
			d.resort(n, true)
		} else {
			d.list[n] = true
		}
	}
	// No event was applied since knownNames (gen): the names marked then are all looked
	// up now, and no other.
	d.marked = d.marked[:0]
}

// rememberNames keeps names (in order), read from d's directory after the events of
// generation gen were applied, unless events were applied since (their changes may be
// newer than the read, and they were applied to no names).
func (c *statCache) rememberNames(d *dirStats, gen uint64, names []string, now time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.byWd[d.wd] != d || c.n-len(d.list)+len(names) > statCacheMax {
		return
	}
	c.n += len(names) - len(d.list)
	d.list = make(map[string]bool, len(names))
	for _, n := range names {
		d.list[n] = true
	}
	d.sorted, d.inserts, d.marked = slices.Clone(names), 0, nil
	d.listAt = now
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
					c.markName(d, string(name), ev.Mask)
				}
			}
		}
	}
	if read {
		c.gen++
	}
}

// markName marks name to be looked up at d's next listing when the event (mask) may have
// added or taken it away, if d's names are known.
func (c *statCache) markName(d *dirStats, name string, mask uint32) {
	if d.list == nil || mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) == 0 {
		return
	}
	there, ok := d.list[name]
	if !ok {
		if c.n >= statCacheMax {
			c.n -= len(d.list)
			d.list, d.sorted, d.marked = nil, nil, nil // read again at the next listing
			return
		}
		c.n++
		d.resort(name, false)
	}
	if there || !ok {
		d.marked = append(d.marked, name)
	}
	d.list[name] = false
}

// drop forgets a directory (nil: none).
func (c *statCache) drop(d *dirStats) {
	if d == nil {
		return
	}
	c.n -= len(d.names) + len(d.list)
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
