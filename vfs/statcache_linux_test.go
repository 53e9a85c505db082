package vfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cachedOSFs opens dir as an OSFs whose listings go through a statCache.
func cachedOSFs(t *testing.T, dir string) *OSFs {
	t.Helper()
	osfs, err := NewOSFs(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osfs.Close() })
	if c, _ := osfs.statCache(); c == nil {
		msg := "the temporary directory's filesystem is not one whose changes all reach inotify (ext4, xfs, btrfs, tmpfs, f2fs): no stat cache to test"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return osfs
}

// listAll describes every entry below the root through the OSFs's directory handles, as
// listings do: path → kind and size.
func listAll(t *testing.T, osfs *OSFs) map[string]string {
	t.Helper()
	got := map[string]string{}
	var walk func(d DirHandle, prefix string)
	walk = func(d DirHandle, prefix string) {
		defer d.Close()
		entries, err := d.Entries()
		if err != nil {
			t.Error(err) // Error, not Fatal: listings run on goroutines of their own too
			return
		}
		for _, e := range entries {
			if IsBookkeeping(e.Name) {
				continue
			}
			got[prefix+e.Name] = fmt.Sprintf("kind %d size %d", e.Kind, e.Size)
			if e.IsDir() {
				child, err := d.Child(e.Name)
				if err != nil {
					continue // no longer a directory: changed while listing
				}
				walk(child, prefix+e.Name+"/")
			}
		}
	}
	d, err := osfs.OpenDir("/")
	if err != nil {
		t.Error(err)
		return got
	}
	walk(d, "")
	return got
}

// hostListing is listAll as lstat(2) reports the host directory now.
func hostListing(t *testing.T, dir string) map[string]string {
	t.Helper()
	want := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if IsBookkeeping(fi.Name()) {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		e := Entry{Kind: kindOf(fi.Mode())}
		if e.Kind == KindFile {
			e.Size = fi.Size()
		}
		want[filepath.ToSlash(rel)] = fmt.Sprintf("kind %d size %d", e.Kind, e.Size)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// Every store of a process shares one inotify instance: a user has 128 by default, and a
// server with a store per tenant must not take them all.
func TestStatCacheOnePerProcess(t *testing.T) {
	a, _ := cachedOSFs(t, t.TempDir()).statCache()
	b, _ := cachedOSFs(t, t.TempDir()).statCache()
	if a != b {
		t.Fatal("two stores have caches of their own")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, name, text string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(text)
	must(t, err)
	must(t, f.Close())
}

// A listing answered from the cache is the listing the directory has now, whatever another
// program did to it since the last one; and an unchanged directory's entries come from the
// cache.
func TestStatCacheFollowsChangesFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir, outside string)
	}{
		{"append", func(t *testing.T, dir, outside string) { appendTo(t, filepath.Join(dir, "a.md"), "more\n") }},
		{"append in a subdirectory", func(t *testing.T, dir, outside string) { appendTo(t, filepath.Join(dir, "sub", "c.md"), "more\n") }},
		{"truncate", func(t *testing.T, dir, outside string) { must(t, os.Truncate(filepath.Join(dir, "a.md"), 2)) }},
		{"rewrite", func(t *testing.T, dir, outside string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("a longer text than before\n"), 0o600))
		}},
		{"fallocate past the end", func(t *testing.T, dir, outside string) {
			f, err := os.OpenFile(filepath.Join(dir, "a.md"), os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			must(t, unix.Fallocate(int(f.Fd()), 0, 0, 8192))
		}},
		{"rename over", func(t *testing.T, dir, outside string) {
			must(t, os.Rename(filepath.Join(dir, "b.md"), filepath.Join(dir, "a.md")))
		}},
		{"remove", func(t *testing.T, dir, outside string) { must(t, os.Remove(filepath.Join(dir, "a.md"))) }},
		{"create", func(t *testing.T, dir, outside string) {
			must(t, os.WriteFile(filepath.Join(dir, "new.md"), []byte("new\n"), 0o600))
		}},
		{"new directory", func(t *testing.T, dir, outside string) {
			must(t, os.MkdirAll(filepath.Join(dir, "d2", "d3"), 0o700))
			must(t, os.WriteFile(filepath.Join(dir, "d2", "d3", "x.md"), []byte("deep\n"), 0o600))
		}},
		{"remove a directory", func(t *testing.T, dir, outside string) { must(t, os.RemoveAll(filepath.Join(dir, "sub"))) }},
		{"move in", func(t *testing.T, dir, outside string) {
			src := filepath.Join(outside, "in.md")
			must(t, os.WriteFile(src, []byte("from outside\n"), 0o600))
			must(t, os.Rename(src, filepath.Join(dir, "sub", "moved.md")))
		}},
		{"move a directory out", func(t *testing.T, dir, outside string) {
			must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(outside, "out")))
		}},
		{"move a directory within", func(t *testing.T, dir, outside string) {
			must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub2")))
			appendTo(t, filepath.Join(dir, "sub2", "c.md"), "after the move\n")
		}},
		{"file becomes a directory", func(t *testing.T, dir, outside string) {
			must(t, os.Remove(filepath.Join(dir, "a.md")))
			must(t, os.Mkdir(filepath.Join(dir, "a.md"), 0o700))
		}},
		{"file becomes a link", func(t *testing.T, dir, outside string) {
			must(t, os.Remove(filepath.Join(dir, "a.md")))
			must(t, os.Symlink("b.md", filepath.Join(dir, "a.md")))
		}},
		{"written through a hard link from outside", func(t *testing.T, dir, outside string) {
			// The link was made before the listings (setup): a file with two links is
			// never remembered.
			appendTo(t, filepath.Join(outside, "link"), "through the other name\n")
		}},
		{"exchange", func(t *testing.T, dir, outside string) {
			must(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "a.md"), unix.AT_FDCWD, filepath.Join(dir, "sub"), unix.RENAME_EXCHANGE))
		}},
		{"exchange across directories", func(t *testing.T, dir, outside string) {
			must(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "b.md"), unix.AT_FDCWD, filepath.Join(dir, "sub", "c.md"), unix.RENAME_EXCHANGE))
		}},
		{"hard link in", func(t *testing.T, dir, outside string) {
			must(t, os.WriteFile(filepath.Join(outside, "elsewhere"), []byte("linked in\n"), 0o600))
			must(t, os.Link(filepath.Join(outside, "elsewhere"), filepath.Join(dir, "sub", "in.md")))
		}},
		{"fifo", func(t *testing.T, dir, outside string) { must(t, unix.Mkfifo(filepath.Join(dir, "pipe"), 0o600)) }},
		{"create and remove", func(t *testing.T, dir, outside string) {
			must(t, os.WriteFile(filepath.Join(dir, "brief.md"), nil, 0o600))
			must(t, os.Remove(filepath.Join(dir, "brief.md")))
		}},
		{"remove and create again as a directory", func(t *testing.T, dir, outside string) {
			must(t, os.Remove(filepath.Join(dir, "b.md")))
			must(t, os.Mkdir(filepath.Join(dir, "b.md"), 0o700))
		}},
		{"rename away and back", func(t *testing.T, dir, outside string) {
			must(t, os.Rename(filepath.Join(dir, "a.md"), filepath.Join(dir, "z.md")))
			must(t, os.Rename(filepath.Join(dir, "z.md"), filepath.Join(dir, "a.md")))
			must(t, os.Rename(filepath.Join(dir, "b.md"), filepath.Join(dir, "y.md")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := filepath.Join(t.TempDir(), "store"), t.TempDir()
			must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
			for name, text := range map[string]string{"a.md": "alpha\n", "b.md": "bravo bravo\n", "sub/c.md": "charlie\n", "linked.md": "linked\n"} {
				must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
			}
			must(t, os.Link(filepath.Join(dir, "linked.md"), filepath.Join(outside, "link")))
			osfs := cachedOSFs(t, dir)
			c, _ := osfs.statCache()

			if got, want := listAll(t, osfs), hostListing(t, dir); !reflect.DeepEqual(got, want) {
				t.Fatalf("first listing:\n got %v\nwant %v", got, want)
			}
			before, namesBefore := c.hits.Load(), c.nameHits.Load()
			listAll(t, osfs)
			// a.md, b.md, sub and sub/c.md: linked.md has two links.
			if hits := c.hits.Load() - before; hits != 4 {
				t.Fatalf("an unchanged store's listing took %d entries from the cache, want 4", hits)
			}
			if hits := c.nameHits.Load() - namesBefore; hits != 2 {
				t.Fatalf("an unchanged store's listing took the names of %d directories from the cache, want 2", hits)
			}
			tc.change(t, dir, outside)
			if got, want := listAll(t, osfs), hostListing(t, dir); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the change:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// shortTTL makes statCacheTTL 100 ms for the test.
func shortTTL(t *testing.T) {
	was := statCacheTTL
	statCacheTTL = 100 * time.Millisecond
	t.Cleanup(func() { statCacheTTL = was })
}

// The one change inotify misses (a write through a hard link made after the listing from
// a directory not watched) shows once the entry is older than statCacheTTL.
func TestStatCacheForgetsAfterTTL(t *testing.T) {
	shortTTL(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("alpha\n"), 0o600))
	osfs := cachedOSFs(t, dir)
	listAll(t, osfs)
	link := filepath.Join(t.TempDir(), "link")
	must(t, os.Link(filepath.Join(dir, "a.md"), link))
	appendTo(t, link, "through the link\n")
	time.Sleep(statCacheTTL + 10*time.Millisecond)
	if got, want := listAll(t, osfs), hostListing(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the TTL:\n got %v\nwant %v", got, want)
	}
}

// When the kernel's event queue overflows, events are lost: the cache then forgets all.
func TestStatCacheForgetsOnOverflow(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	must(t, err)
	max, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	must(t, err)
	if max > 1<<20 {
		t.Skipf("max_queued_events is %d: too many events to make here", max)
	}
	dir := t.TempDir()
	for _, name := range []string{"a.md", "x.md", "y.md"} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o600))
	}
	osfs := cachedOSFs(t, dir)
	listAll(t, osfs)
	x, err := os.OpenFile(filepath.Join(dir, "x.md"), os.O_WRONLY, 0)
	must(t, err)
	defer x.Close()
	y, err := os.OpenFile(filepath.Join(dir, "y.md"), os.O_WRONLY, 0)
	must(t, err)
	defer y.Close()
	for i := 0; i <= max; i++ { // alternating: identical events in a row are merged
		_, err := []*os.File{x, y}[i%2].WriteAt([]byte("z"), 0)
		must(t, err)
	}
	appendTo(t, filepath.Join(dir, "a.md"), "its event is lost\n")
	if got, want := listAll(t, osfs), hostListing(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("after an overflow:\n got %v\nwant %v", got, want)
	}
}

// Listings running while another program writes never keep a size from before a write
// that completed: once the writer stops, the listing is the directory's.
func TestStatCacheWithConcurrentWriter(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
	names := []string{"a.md", "b.md", "sub/c.md", "sub/d.md"}
	for _, name := range names {
		must(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	raceListings(t, dir, func(round int) {
		for i := 0; i < 200; i++ {
			f, err := os.OpenFile(filepath.Join(dir, names[(round+i)%len(names)]), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Error(err)
				break
			}
			f.WriteString("x")
			f.Close()
		}
	})
}

// raceListings runs change(round) 20 times, each while two goroutines list the store at dir
// over and over, and holds the listing after each to the host's.
func raceListings(t *testing.T, dir string, change func(round int)) {
	t.Helper()
	osfs := cachedOSFs(t, dir)
	for round := 0; round < 20; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			defer close(stop)
			change(round)
		}()
		for range 2 {
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						listAll(t, osfs)
					}
				}
			}()
		}
		wg.Wait()
		if got, want := listAll(t, osfs), hostListing(t, dir); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, after the changes stopped:\n got %v\nwant %v", round, got, want)
		}
		checkNamesInStep(t, osfs)
	}
}

// checkNamesInStep fails the test unless every directory's names in order (sorted) are
// its known names (list), and its marked names those whose look-up is due.
func checkNamesInStep(t *testing.T, osfs *OSFs) {
	t.Helper()
	c, _ := osfs.statCache()
	osfsCheck(t, c)
}

// checkDirNames fails the test unless d's names in order (sorted), where kept, are its
// known names (list), and its marked names those whose look-up is due, each once.
func checkDirNames(t *testing.T, d *dirStats) {
	t.Helper()
	var keys, due []string
	for n, there := range d.list {
		keys = append(keys, n)
		if !there {
			due = append(due, n)
		}
	}
	slices.Sort(keys)
	slices.Sort(due)
	marked := slices.Sorted(slices.Values(d.marked))
	if len(slices.Compact(slices.Clone(marked))) != len(marked) {
		t.Fatalf("a name marked twice: %v", d.marked)
	}
	if d.sorted != nil && !slices.Equal(keys, d.sorted) && (len(keys) > 0 || len(d.sorted) > 0) {
		t.Fatalf("names in order %v, known names %v", d.sorted, keys)
	}
	if !slices.Equal(due, marked) && (len(due) > 0 || len(marked) > 0) {
		t.Fatalf("names marked %v, names due for a look-up %v", d.marked, due)
	}
}

// oneFileStore makes a store holding a.md ("alpha\n") and returns its directory, the cache,
// the root's device and a descriptor of the directory, for calling the cache directly.
func oneFileStore(t *testing.T) (dir string, c *statCache, dev uint64, fd int) {
	t.Helper()
	dir = t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("alpha\n"), 0o600))
	c, dev = cachedOSFs(t, dir).statCache()
	d, err := os.Open(dir)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return dir, c, dev, int(d.Fd())
}

// A status read while another listing applies events is not remembered: the change behind
// such an event may be newer than the status.
func TestStatCacheKeepsNoStatusReadAcrossEvents(t *testing.T) {
	dir, c, dev, fd := oneFileStore(t)
	stat := func(n string) (Entry, bool, bool) {
		var st unix.Stat_t
		must(t, statAtNoTimes(fd, n, unix.AT_SYMLINK_NOFOLLOW, &st))
		return Entry{Name: n, Kind: KindFile, Size: st.Size}, true, true
	}
	racing := func(n string) (Entry, bool, bool) {
		e, ok, keep := stat(n)
		// Between the status and remembering it: the file changes, and another
		// listing applies the change's event.
		appendTo(t, filepath.Join(dir, n), "more\n")
		c.dir(fd, dev)
		return e, ok, keep
	}
	c.entries(fd, dev, namesOf("a.md"), racing)
	got, _ := c.entries(fd, dev, namesOf("a.md"), stat)
	if len(got) != 1 || got[0].Size != int64(len("alpha\nmore\n")) {
		t.Fatalf("listing after the race: %+v, want a.md of %d bytes", got, len("alpha\nmore\n"))
	}
}

// An entry removed between reading the names and its status is left out, cache or none.
func TestStatCacheLeavesOutEntriesGone(t *testing.T) {
	_, c, dev, fd := oneFileStore(t)
	stat := func(n string) (Entry, bool, bool) {
		if n == "gone.md" {
			return Entry{Name: n}, false, false
		}
		return Entry{Name: n, Kind: KindFile, Size: 6}, true, true
	}
	for _, cache := range []*statCache{c, nil} {
		got, _ := cache.entries(fd, dev, namesOf("a.md", "gone.md"), stat)
		if len(got) != 1 || got[0].Name != "a.md" {
			t.Fatalf("cache %v: %+v, want a.md alone", cache != nil, got)
		}
	}
}

// statFileIn is a statFunc for the regular files of the directory open as fd.
func statFileIn(fd int) statFunc {
	return func(n string) (Entry, bool, bool) {
		var st unix.Stat_t
		if err := statAtNoTimes(fd, n, unix.AT_SYMLINK_NOFOLLOW, &st); err != nil {
			return Entry{Name: n}, false, false
		}
		return Entry{Name: n, Kind: KindFile, Size: st.Size}, true, true
	}
}

// namesIn is a readNames that reads the directory dir.
func namesIn(t *testing.T, dir string) func() ([]string, error) {
	return func() ([]string, error) {
		d, err := os.Open(dir)
		must(t, err)
		defer d.Close()
		return d.Readdirnames(-1)
	}
}

// namesOf is a readNames that gives names.
func namesOf(names ...string) func() ([]string, error) {
	return func() ([]string, error) { return names, nil }
}

// Names read while another listing applies events are not remembered: those events were
// applied to no names, and their changes may be newer than the read.
func TestStatCacheKeepsNoNamesReadAcrossEvents(t *testing.T) {
	dir, c, dev, fd := oneFileStore(t)
	stat := statFileIn(fd)
	racing := func() ([]string, error) {
		names := []string{"a.md"}
		// Between reading the names and remembering them: a file is created, and
		// another listing applies its event.
		must(t, os.WriteFile(filepath.Join(dir, "new.md"), nil, 0o600))
		c.dir(fd, dev)
		return names, nil
	}
	c.entries(fd, dev, racing, stat)
	got, err := c.entries(fd, dev, namesIn(t, dir), stat)
	must(t, err)
	if got = sorted(got); len(got) != 2 || got[0].Name != "a.md" || got[1].Name != "new.md" {
		t.Fatalf("listing after the race: %+v, want a.md and new.md", got)
	}
}

// Names are not remembered for longer than statCacheTTL either: a change inotify did not
// report (here: a name taken from the cache behind its back) shows once they are older.
func TestStatCacheForgetsNamesAfterTTL(t *testing.T) {
	shortTTL(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("alpha\n"), 0o600))
	osfs := cachedOSFs(t, dir)
	c, _ := osfs.statCache()
	listAll(t, osfs)
	c.mu.Lock()
	for _, d := range c.byWd {
		delete(d.list, "a.md")
		d.sorted = slices.DeleteFunc(d.sorted, func(n string) bool { return n == "a.md" })
	}
	c.mu.Unlock()
	if got := listAll(t, osfs); len(got) != 0 {
		t.Fatalf("the name taken from the cache is listed (%v): the test does not see the cache", got)
	}
	time.Sleep(statCacheTTL + 10*time.Millisecond)
	if got, want := listAll(t, osfs), hostListing(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the TTL:\n got %v\nwant %v", got, want)
	}
}

// Listings running while another program creates, renames and removes files list, once it
// stops, the names the directories have.
func TestStatCacheNamesWithConcurrentChanges(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
	raceListings(t, dir, func(round int) {
		for i := 0; i < 100; i++ {
			a := filepath.Join(dir, fmt.Sprintf("f%d.md", (round*7+i)%13))
			b := filepath.Join(dir, "sub", fmt.Sprintf("g%d.md", (round*5+i)%11))
			switch i % 4 {
			case 0:
				os.WriteFile(a, []byte("x"), 0o600)
			case 1:
				os.Rename(a, b)
			case 2:
				os.Remove(b)
			case 3:
				os.WriteFile(b, nil, 0o600)
				unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
			}
		}
	})
}

// A bookkeeping file is reported by its name alone (no status read), so a name an event
// named since the last listing is looked up: one removed is not reported.
func TestStatCacheLooksUpNamesEventsNamed(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, tmpPrefix+"0123456789abcdef")
	must(t, os.WriteFile(tmp, nil, 0o600))
	osfs := cachedOSFs(t, dir)
	c, _ := osfs.statCache()
	names := func() []string {
		d, err := osfs.OpenDir("/")
		must(t, err)
		defer d.Close()
		entries, err := d.Entries()
		must(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name)
		}
		slices.Sort(out)
		return out
	}
	names()
	must(t, os.Remove(tmp))
	before := c.nameHits.Load()
	if got := names(); slices.Contains(got, filepath.Base(tmp)) {
		t.Fatalf("names after the removal: %v", got)
	}
	if c.nameHits.Load() == before {
		t.Fatal("the names did not come from the cache: the test does not see it")
	}
}

// What a listing's look-up found is not recorded when events were applied meanwhile: they
// may name the name again.
func TestStatCacheKeepsNoLookUpAcrossEvents(t *testing.T) {
	dir, c, dev, fd := oneFileStore(t)
	stat := statFileIn(fd)
	c.entries(fd, dev, namesIn(t, dir), stat)
	must(t, os.Remove(filepath.Join(dir, "a.md")))
	// A listing applies the removal's event and looks a.md up: gone.
	d, gen := c.dir(fd, dev)
	_, check, ok := c.knownNames(d, time.Since(c.start))
	if !ok || !slices.Contains(check, "a.md") {
		t.Fatalf("names known %v, to look up %v: want a.md to look up", ok, check)
	}
	// Before it records that, a.md is made again and another listing applies the event.
	must(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("again\n"), 0o600))
	c.dir(fd, dev)
	c.lookedUp(d, gen, check, map[string]bool{"a.md": true})
	got, err := c.entries(fd, dev, namesIn(t, dir), stat)
	must(t, err)
	if !slices.ContainsFunc(got, func(e Entry) bool { return e.Name == "a.md" }) {
		t.Fatalf("listing after the race: %+v, want a.md", got)
	}
}

// The names a listing takes from the cache come in order without being sorted again: the
// cache inserts the names events add and removes those found gone, and marks for a
// look-up exactly the names events named since the last one.
func TestStatCacheKeepsNamesInOrder(t *testing.T) {
	dir, c, dev, fd := oneFileStore(t)
	stat := statFileIn(fd)
	list := func() []string {
		t.Helper()
		got, err := c.entries(fd, dev, namesIn(t, dir), stat)
		must(t, err)
		var names []string
		for _, e := range got {
			names = append(names, e.Name)
		}
		return names
	}
	for _, n := range []string{"m.md", "c.md", "x.md"} {
		must(t, os.WriteFile(filepath.Join(dir, n), nil, 0o600))
	}
	list() // the names read, then kept
	steps := []func(){
		func() { must(t, os.WriteFile(filepath.Join(dir, "b.md"), nil, 0o600)) },
		func() { must(t, os.Rename(filepath.Join(dir, "x.md"), filepath.Join(dir, "d.md"))) },
		func() { must(t, os.Remove(filepath.Join(dir, "c.md"))) },
		func() {
			must(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "a.md"), unix.AT_FDCWD, filepath.Join(dir, "m.md"), unix.RENAME_EXCHANGE))
		},
		func() { // named twice before a look-up: marked once
			must(t, os.WriteFile(filepath.Join(dir, "z.md"), nil, 0o600))
			must(t, os.Rename(filepath.Join(dir, "z.md"), filepath.Join(dir, "y.md")))
			must(t, os.Rename(filepath.Join(dir, "y.md"), filepath.Join(dir, "z.md")))
		},
	}
	for i, step := range steps {
		step()
		c.dir(fd, dev) // the events applied, the names they named not yet looked up
		osfsCheck(t, c)
		before := c.nameHits.Load()
		got := list()
		if c.nameHits.Load() == before {
			t.Fatalf("step %d: the names did not come from the cache: the test does not see it", i)
		}
		want := hostNames(t, dir)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: listed %v, want %v", i, got, want)
		}
		osfsCheck(t, c)
	}
}

// A burst of names between two listings (another program creating files) is sorted once
// at the next listing rather than inserted one by one, each a copy of all the names; the
// listing is the host's either way.
func TestStatCacheSortsABurstOnce(t *testing.T) {
	dir, c, dev, fd := oneFileStore(t)
	stat := statFileIn(fd)
	_, err := c.entries(fd, dev, namesIn(t, dir), stat)
	must(t, err)
	for i := range maxInserts + 1 {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("burst-%03d.md", i)), nil, 0o600))
	}
	d, _ := c.dir(fd, dev)
	c.mu.Lock()
	dropped := d.sorted == nil
	c.mu.Unlock()
	if !dropped {
		t.Errorf("%d names inserted one by one, want them left to one sort", maxInserts+1)
	}
	osfsCheck(t, c)
	before := c.nameHits.Load()
	got, err := c.entries(fd, dev, namesIn(t, dir), stat)
	must(t, err)
	if c.nameHits.Load() == before {
		t.Fatal("the names did not come from the cache: the test does not see it")
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	if want := hostNames(t, dir); !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v", names, want)
	}
	osfsCheck(t, c)
}

// hostNames lists dir's names in order, as the host does.
func hostNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// osfsCheck fails the test unless the cache's names are in step (see checkNamesInStep).
func osfsCheck(t *testing.T, c *statCache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.byWd {
		checkDirNames(t, d)
	}
}

// BenchmarkListAfterChanges lists a directory of 150 files the way the side-by-side mix
// does: after each listing a file is created and another renamed (here by another
// program), so every listing applies their events and looks those names up again.
func BenchmarkListAfterChanges(b *testing.B) {
	dir := b.TempDir()
	for i := range 150 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("moved-%d.md", i)), []byte("# notes\n- fact\nfirst LINE\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := OpenOSStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	list := func() {
		if err := s.View(context.Background(), func(tx *Tx) error {
			_, err := tx.Tree(MustResolve("/memories"), 2, func(name string) bool { return name[0] == '.' })
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	list()
	i := 0
	for b.Loop() {
		b.StopTimer()
		note, moved := filepath.Join(dir, fmt.Sprintf("note-%d.md", i)), filepath.Join(dir, fmt.Sprintf("x-%d.md", i))
		if err := os.WriteFile(note, []byte("# notes\nfirst line\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(note, moved); err != nil {
			b.Fatal(err)
		}
		if i >= 150 { // the directory keeps about 300 names
			os.Remove(filepath.Join(dir, fmt.Sprintf("x-%d.md", i-150)))
		}
		i++
		b.StartTimer()
		list()
	}
}
