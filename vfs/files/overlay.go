package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
)

// whiteoutsName is the overlay's record of deleted lower entries, kept in the upper layer's root.
const whiteoutsName = vfs.BookkeepingPrefix + "-whiteouts"

// OverlayFs is a copy-on-write union of a read-only lower layer and a writable upper layer.
// Reads see the upper entry where there is one and the lower one otherwise; directories
// present in both list the union. Every change goes to the upper layer; the lower layer is
// never written (the Store opens it read-only, too).
//
// Deleting or renaming away an entry that the lower layer has records a whiteout: the
// entry's name, which then hides the lower entry and everything below it for good, even
// when a new entry of that name is created later (the new one is upper-only). The set of
// whiteouts is kept in a file of the upper layer, rewritten atomically before the upper
// layer is touched, so a crash leaves either the old or the new state visible. Renaming an
// entry that involves the lower layer copies it up to the new name first and then hides
// the old one.
//
// Unlike afero.CopyOnWriteFs, deletes and renames of lower entries work and stay done, and a
// deleted copied-up file does not bring back the lower version.
type OverlayFs struct {
	lower afero.Fs
	upper FS
	links interface{ ReachesBookkeeping(string, bool) bool } // the lower layer's links; nil: none

	fold bool // a layer ignores case (see OSFs.FoldsCase): whiteouts hide any spelling

	mu    sync.RWMutex
	wh    map[string]bool // cleaned relative names whose lower entries are hidden, with everything below
	hides map[string]bool // wh's names as foldName spells them, for lookups
}

// NewOverlayFs layers upper over lower and loads the whiteouts recorded in upper.
func NewOverlayFs(lower afero.Fs, upper FS) (*OverlayFs, error) {
	o := &OverlayFs{lower: afero.NewReadOnlyFs(lower), upper: upper}
	o.links, _ = lower.(interface{ ReachesBookkeeping(string, bool) bool })
	for _, layer := range []any{lower, upper} {
		if f, ok := layer.(interface{ FoldsCase() bool }); ok && f.FoldsCase() {
			o.fold = true
		}
	}
	if err := o.Reload(); err != nil {
		return nil, err
	}
	return o, nil
}

// ReachesBookkeeping reports whether a link of either layer on name's way leads into the
// server's own files.
func (o *OverlayFs) ReachesBookkeeping(name string, last bool) bool {
	return o.upper.ReachesBookkeeping(name, last) || o.links != nil && o.links.ReachesBookkeeping(name, last)
}

// Reload re-reads the whiteouts from the upper layer (another process may have changed them).
func (o *OverlayFs) Reload() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	wh := map[string]bool{}
	data, err := afero.ReadFile(o.upper, "/"+whiteoutsName)
	if err != nil && !vfs.IsNotExist(err) {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, err := strconv.Unquote(sc.Text()); err == nil {
			wh[name] = true
		}
	}
	o.setWhiteouts(wh)
	return nil
}

func (o *OverlayFs) setWhiteouts(wh map[string]bool) {
	o.wh, o.hides = wh, make(map[string]bool, len(wh))
	for n := range wh {
		o.hides[o.foldName(n)] = true
	}
}

// whitedOut reports whether a whiteout names n itself, in any spelling where case is ignored.
func (o *OverlayFs) whitedOut(n string) bool { return o.hides[o.foldName(n)] }

// foldName is the name that n and its other spellings share where a layer ignores case.
func (o *OverlayFs) foldName(n string) string {
	if o.fold {
		return strings.ToLower(n)
	}
	return n
}

// FoldsCase reports whether a layer ignores case.
func (o *OverlayFs) FoldsCase() bool { return o.fold }

// Canonical spells name as the merged view lists it where a layer ignores case (see
// OSFs.Canonical): a file copied up, or hidden, keeps the lower layer's spelling.
func (o *OverlayFs) Canonical(name string) string {
	if !o.fold {
		return name
	}
	return canonical(o, name)
}

// clean turns any afero name into a cleaned relative name, "" for the root.
func clean(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

func parent(n string) string {
	if d := path.Dir(n); d != "." {
		return d
	}
	return ""
}

// hidden reports whether a whiteout covers n.
func (o *OverlayFs) hidden(n string) bool {
	for ; n != ""; n = parent(n) {
		if o.whitedOut(n) {
			return true
		}
	}
	return false
}

// lowerVisible reports whether the lower layer's entry at n (if any) may show: no whiteout
// covers it and the upper layer has no file where n's parent directory should be.
func (o *OverlayFs) lowerVisible(n string) bool {
	if n == "" {
		return true
	}
	if o.hidden(n) {
		return false
	}
	fi, err := o.upper.Stat("/" + parent(n))
	if err == nil && !fi.IsDir() || errors.Is(err, syscall.ENOTDIR) {
		return false
	}
	return true
}

func layerStat(fsys afero.Fs, n string, lstat bool) (fs.FileInfo, error) {
	if l, ok := fsys.(afero.Lstater); ok && lstat {
		fi, _, err := l.LstatIfPossible("/" + n)
		return fi, err
	}
	return fsys.Stat("/" + n)
}

func (o *OverlayFs) stat(n string, lstat bool) (fs.FileInfo, error) {
	fi, err := layerStat(o.upper, n, lstat)
	if err == nil || !vfs.IsNotExist(err) {
		return fi, err
	}
	if !o.lowerVisible(n) {
		return nil, &fs.PathError{Op: "stat", Path: n, Err: fs.ErrNotExist}
	}
	return layerStat(o.lower, n, lstat)
}

func (o *OverlayFs) inUpper(n string) bool {
	_, err := layerStat(o.upper, n, true)
	return err == nil
}

func (o *OverlayFs) inLower(n string) bool {
	if !o.lowerVisible(n) {
		return false
	}
	_, err := layerStat(o.lower, n, true)
	return err == nil
}

// readDir merges the listings of both layers; upper entries win on a name clash.
func (o *OverlayFs) readDir(n string) ([]fs.FileInfo, error) {
	var out []fs.FileInfo
	seen := map[string]bool{}
	if fi, err := o.upper.Stat("/" + n); err == nil && fi.IsDir() {
		infos, err := readLayerDir(o.upper, n)
		if err != nil {
			return nil, err
		}
		for _, fi := range infos {
			seen[o.foldName(fi.Name())] = true
		}
		out = append(out, infos...)
	}
	if o.lowerVisible(n) {
		if fi, err := o.lower.Stat("/" + n); err == nil && fi.IsDir() {
			infos, err := readLayerDir(o.lower, n)
			if err != nil {
				return nil, err
			}
			for _, fi := range infos {
				if !seen[o.foldName(fi.Name())] && !o.whitedOut(path.Join(n, fi.Name())) {
					out = append(out, fi)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b fs.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func readLayerDir(fsys afero.Fs, n string) ([]fs.FileInfo, error) {
	d, err := fsys.Open("/" + n)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdir(-1)
}

// copyUpDirs makes sure the upper layer has directory n and all its parents.
func (o *OverlayFs) copyUpDirs(n string) error {
	if n == "" || o.inUpper(n) {
		return nil
	}
	if err := o.copyUpDirs(parent(n)); err != nil {
		return err
	}
	if err := o.upper.Mkdir("/"+n, 0o700); err != nil {
		return err
	}
	// The directory made lasts in its parent: what is written in it flushes only itself.
	return o.upper.SyncDir("/" + parent(n))
}

// copyUpFile writes the lower file at src to dst in the upper layer, atomically.
func (o *OverlayFs) copyUpFile(src, dst string) error {
	data, err := afero.ReadFile(o.lower, "/"+src)
	if err != nil {
		return err
	}
	return o.writeUpper(dst, data)
}

func (o *OverlayFs) writeUpper(n string, data []byte) error {
	return o.upper.WriteFileAtomic(n, data, false)
}

// addWhiteout hides the lower entry at n for good, and persists the set first.
func (o *OverlayFs) addWhiteout(n string) error {
	wh := make(map[string]bool, len(o.wh)+1)
	for k := range o.wh {
		if k != n && !strings.HasPrefix(k, n+"/") {
			wh[k] = true
		}
	}
	wh[n] = true
	names := make([]string, 0, len(wh))
	for k := range wh {
		names = append(names, strconv.Quote(k))
	}
	slices.Sort(names)
	if err := o.writeUpper(whiteoutsName, []byte(strings.Join(names, "\n")+"\n")); err != nil {
		return err
	}
	o.setWhiteouts(wh)
	return nil
}

func errNotDir(op, n string) error  { return &fs.PathError{Op: op, Path: n, Err: syscall.ENOTDIR} }
func errNoEnt(op, n string) error   { return &fs.PathError{Op: op, Path: n, Err: syscall.ENOENT} }
func errExist(op, n string) error   { return &fs.PathError{Op: op, Path: n, Err: syscall.EEXIST} }
func errInvalid(op, n string) error { return &fs.PathError{Op: op, Path: n, Err: syscall.EINVAL} }

// checkParentDir requires n's parent to be a visible directory.
func (o *OverlayFs) checkParentDir(op, n string) error {
	fi, err := o.stat(parent(n), false)
	if err != nil {
		return errNoEnt(op, n)
	}
	if !fi.IsDir() {
		return errNotDir(op, n)
	}
	return nil
}

// Name identifies the filesystem type.
func (o *OverlayFs) Name() string { return "OverlayFs" }

// Stat describes the visible entry at name.
func (o *OverlayFs) Stat(name string) (os.FileInfo, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.stat(clean(name), false)
}

// LstatIfPossible describes the visible entry at name without following a final link.
func (o *OverlayFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	fi, err := o.stat(clean(name), true)
	return fi, true, err
}

// Open opens the visible file, or the merged directory, at name for reading.
func (o *OverlayFs) Open(name string) (afero.File, error) {
	n := clean(name)
	o.mu.RLock()
	defer o.mu.RUnlock()
	fi, err := o.stat(n, false)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		infos, err := o.readDir(n)
		if err != nil {
			return nil, err
		}
		return &overlayDir{name: "/" + n, info: fi, entries: infos}, nil
	}
	if o.inUpper(n) {
		return o.upper.Open("/" + n)
	}
	return o.lower.Open("/" + n)
}

// OpenFile opens a file; any write goes to the upper layer, copying the file up first.
func (o *OverlayFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) == 0 {
		return o.Open(name)
	}
	n := clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := o.stat(n, false)
	switch {
	case err == nil && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, errExist("open", n)
	case err == nil && fi.IsDir():
		return nil, &fs.PathError{Op: "open", Path: n, Err: syscall.EISDIR}
	case err != nil && (!vfs.IsNotExist(err) || flag&os.O_CREATE == 0):
		return nil, err
	case err != nil:
		if err := o.checkParentDir("open", n); err != nil {
			return nil, err
		}
	}
	if err := o.copyUpDirs(parent(n)); err != nil {
		return nil, err
	}
	if err == nil && !o.inUpper(n) && flag&os.O_TRUNC == 0 {
		if err := o.copyUpFile(n, n); err != nil {
			return nil, err
		}
	}
	return o.upper.OpenFile("/"+n, flag, perm)
}

// Create creates or truncates a file in the upper layer.
func (o *OverlayFs) Create(name string) (afero.File, error) {
	return o.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Mkdir creates a directory in the upper layer.
func (o *OverlayFs) Mkdir(name string, perm os.FileMode) error {
	n := clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mkdir(n, perm)
}

func (o *OverlayFs) mkdir(n string, perm os.FileMode) error {
	if _, err := o.stat(n, true); err == nil {
		return errExist("mkdir", n)
	}
	if err := o.checkParentDir("mkdir", n); err != nil {
		return err
	}
	if err := o.copyUpDirs(parent(n)); err != nil {
		return err
	}
	return o.upper.Mkdir("/"+n, perm)
}

// MkdirAll creates a directory and its missing parents.
func (o *OverlayFs) MkdirAll(name string, perm os.FileMode) error {
	n := clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	if n == "" {
		return nil
	}
	elems := strings.Split(n, "/")
	for i := range elems {
		p := strings.Join(elems[:i+1], "/")
		fi, err := o.stat(p, false)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			return errNotDir("mkdir", p)
		case !vfs.IsNotExist(err):
			return err
		}
		if err := o.mkdir(p, perm); err != nil {
			return err
		}
	}
	return nil
}

// Remove removes a file or an empty directory, hiding the lower entry if there is one.
func (o *OverlayFs) Remove(name string) error {
	n := clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := o.stat(n, true)
	if err != nil {
		return err
	}
	if n == "" {
		return errInvalid("remove", n)
	}
	if fi.IsDir() {
		entries, err := o.readDir(n)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return &fs.PathError{Op: "remove", Path: n, Err: syscall.ENOTEMPTY}
		}
	}
	return o.remove(n, false)
}

func (o *OverlayFs) remove(n string, all bool) error {
	if o.inLower(n) {
		if err := o.addWhiteout(n); err != nil {
			return err
		}
	}
	if !o.inUpper(n) {
		return nil
	}
	if all {
		return o.upper.RemoveAll("/" + n)
	}
	return o.upper.Remove("/" + n)
}

// RemoveAll removes a path and everything below it, in both layers' views.
func (o *OverlayFs) RemoveAll(name string) error {
	n := clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	if n == "" {
		return errInvalid("removeall", n)
	}
	if _, err := o.stat(n, true); err != nil {
		if vfs.IsNotExist(err) {
			return nil
		}
		return err
	}
	return o.remove(n, true)
}

// Rename moves a file or directory; an existing file at newname is replaced by a file.
func (o *OverlayFs) Rename(oldname, newname string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rename(clean(oldname), clean(newname), false)
}

// RenameNoReplace moves a file or directory and fails with fs.ErrExist if newname exists.
func (o *OverlayFs) RenameNoReplace(oldname, newname string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rename(clean(oldname), clean(newname), true)
}

func (o *OverlayFs) rename(oldn, newn string, noReplace bool) error {
	src, err := o.stat(oldn, true)
	if err != nil {
		return err
	}
	if oldn == "" || newn == "" || src.IsDir() && strings.HasPrefix(newn, oldn+"/") {
		return errInvalid("rename", oldn)
	}
	dst, err := o.stat(newn, true)
	if err == nil {
		switch {
		case noReplace || dst.IsDir():
			return errExist("rename", newn)
		case src.IsDir():
			return errNotDir("rename", newn)
		}
	}
	if err := o.checkParentDir("rename", newn); err != nil {
		return err
	}
	if err := o.copyUpDirs(parent(newn)); err != nil {
		return err
	}
	if !o.inLower(oldn) {
		return o.upper.Rename("/"+oldn, "/"+newn)
	}
	var moved [][2]string
	err = o.copyTree(oldn, newn, src, &moved)
	if err == nil {
		err = o.addWhiteout(oldn)
	}
	if err != nil {
		// Refused (no room for the copy or the whiteout): what moved goes back, and the
		// copy goes, so that nothing changed.
		for i := len(moved) - 1; i >= 0; i-- {
			o.upper.Rename("/"+moved[i][1], "/"+moved[i][0])
		}
		if dst == nil {
			o.upper.RemoveAll("/" + newn)
		}
		return err
	}
	if !o.inUpper(oldn) {
		return nil
	}
	return o.upper.RemoveAll("/" + oldn) // under the whiteout: hidden already
}

// copyTree copies the visible entry at src to dst in the upper layer; entries already in
// the upper layer are moved rather than copied (and added to moved).
func (o *OverlayFs) copyTree(src, dst string, fi fs.FileInfo, moved *[][2]string) error {
	switch {
	case o.inUpper(src) && !fi.IsDir():
		if err := o.upper.Rename("/"+src, "/"+dst); err != nil {
			return err
		}
		*moved = append(*moved, [2]string{src, dst})
		return nil
	case fi.Mode().IsRegular():
		return o.copyUpFile(src, dst)
	case !fi.IsDir():
		return nil // a lower symbolic link or device is not carried over
	}
	if err := o.upper.Mkdir("/"+dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	entries, err := o.readDir(src)
	if err != nil {
		return err
	}
	for _, child := range entries {
		if err := o.copyTree(path.Join(src, child.Name()), path.Join(dst, child.Name()), child, moved); err != nil {
			return err
		}
	}
	return o.upper.SyncDir("/" + dst) // its entries last (dst itself, in its parent: the caller's)
}

// Chmod changes the mode of an entry, copying it up first.
func (o *OverlayFs) Chmod(name string, mode os.FileMode) error {
	return o.changeUpper(name, func(n string) error { return o.upper.Chmod(n, mode) })
}

// Chown changes the owner of an entry, copying it up first.
func (o *OverlayFs) Chown(name string, uid, gid int) error {
	return o.changeUpper(name, func(n string) error { return o.upper.Chown(n, uid, gid) })
}

// Chtimes changes the times of an entry, copying it up first.
func (o *OverlayFs) Chtimes(name string, atime, mtime time.Time) error {
	return o.changeUpper(name, func(n string) error { return o.upper.Chtimes(n, atime, mtime) })
}

func (o *OverlayFs) changeUpper(name string, change func(string) error) error {
	n := clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := o.stat(n, false)
	if err != nil {
		return err
	}
	if !o.inUpper(n) {
		if err := o.copyUpDirs(parent(n)); err != nil {
			return err
		}
		if fi.IsDir() {
			err = o.upper.Mkdir("/"+n, 0o700)
		} else {
			err = o.copyUpFile(n, n)
		}
		if err != nil {
			return err
		}
	}
	return change("/" + n)
}

// SyncDir flushes the upper layer's directory, if the upper layer has it.
func (o *OverlayFs) SyncDir(name string) error {
	d := o.upper
	n := clean(name)
	o.mu.RLock()
	up := o.inUpper(n)
	o.mu.RUnlock()
	if !up {
		return nil
	}
	return d.SyncDir("/" + n)
}

// LockStorage takes the upper layer's storage lock.
func (o *OverlayFs) LockStorage(ctx context.Context, exclusive bool) (Counters, error) {
	return o.upper.LockStorage(ctx, exclusive)
}

// SetGeneration stores the change counter in the upper layer's lock.
func (o *OverlayFs) SetGeneration(gen uint64) error { return o.upper.SetGeneration(gen) }

// SetUsage stores the usage in the upper layer's lock.
func (o *OverlayFs) SetUsage(gen uint64, usage int64) error { return o.upper.SetUsage(gen, usage) }

// SetLost stores the time of lost access events in the upper layer's lock.
func (o *OverlayFs) SetLost(sec int64) error { return o.upper.SetLost(sec) }

// UnlockStorage releases the upper layer's storage lock.
func (o *OverlayFs) UnlockStorage() error { return o.upper.UnlockStorage() }

// WriteFileAtomic writes through the overlay (copying parents up) with a temporary file and
// a rename, so a crash leaves the old or the new content in the upper layer.
func (o *OverlayFs) WriteFileAtomic(name string, data []byte, noReplace bool) error {
	return writeAtomic(o, name, data, noReplace)
}

// OpenDir opens a merged directory for a walk by names.
func (o *OverlayFs) OpenDir(name string) (DirHandle, error) { return openNamedDir(o, name) }

// overlayDir is an open merged directory: it can be listed and described, nothing else.
type overlayDir struct {
	name    string
	info    fs.FileInfo
	entries []fs.FileInfo
	off     int
}

func (d *overlayDir) isDir(op string) error {
	return &fs.PathError{Op: op, Path: d.name, Err: syscall.EISDIR}
}

func (d *overlayDir) Close() error                       { return nil }
func (d *overlayDir) Name() string                       { return d.name }
func (d *overlayDir) Stat() (fs.FileInfo, error)         { return d.info, nil }
func (d *overlayDir) Sync() error                        { return nil }
func (d *overlayDir) Read([]byte) (int, error)           { return 0, d.isDir("read") }
func (d *overlayDir) ReadAt([]byte, int64) (int, error)  { return 0, d.isDir("read") }
func (d *overlayDir) Seek(int64, int) (int64, error)     { return 0, d.isDir("seek") }
func (d *overlayDir) Write([]byte) (int, error)          { return 0, d.isDir("write") }
func (d *overlayDir) WriteAt([]byte, int64) (int, error) { return 0, d.isDir("write") }
func (d *overlayDir) WriteString(string) (int, error)    { return 0, d.isDir("write") }
func (d *overlayDir) Truncate(int64) error               { return d.isDir("truncate") }
func (d *overlayDir) Readdirnames(n int) ([]string, error) {
	infos, err := d.Readdir(n)
	names := make([]string, len(infos))
	for i, fi := range infos {
		names[i] = fi.Name()
	}
	return names, err
}

// Readdir follows os.File.Readdir: n <= 0 returns the rest; n > 0 at most n, io.EOF at the end.
func (d *overlayDir) Readdir(n int) ([]fs.FileInfo, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}
