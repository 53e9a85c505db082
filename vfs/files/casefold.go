package files

import (
	"os"
	"path"
	"slices"
	"strings"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/spf13/afero"
	"golang.org/x/text/unicode/norm"
)

// Filesystems that ignore case, as macOS's and Windows' usually do, find notes.md when
// Notes.md is there. The store spells every path it records (history, feed, access record)
// as the directory lists it, so that one file has one name whatever the model sent.

// FoldsCase reports whether the filesystem ignores case, as macOS's and Windows' usually do.
func (f *OSFs) FoldsCase() bool { return f.foldsCase }

// FoldsCase reports whether the storage's filesystem ignores case (see OSFs.FoldsCase).
func (s *AferoStorage) FoldsCase() bool {
	f, ok := s.fs.(interface{ FoldsCase() bool })
	return ok && f.FoldsCase()
}

// Canonical spells name as the directory does where the filesystem ignores case (see
// canonical); elsewhere it returns name.
func (f *OSFs) Canonical(name string) string {
	if !f.foldsCase {
		return name
	}
	return canonical(f, name)
}

// canonical spells name as fsys lists it: each element that names an existing entry in
// another case, or in another Unicode normal form (macOS finds a name typed as "é" when
// another program wrote it as "e" and a combining accent), takes that entry's spelling;
// from the first that names none, the rest stays as given.
func canonical(fsys afero.Fs, name string) string {
	elems := strings.Split(name, "/")
	for i, e := range elems {
		dir := path.Join(append([]string{"/"}, elems[:i]...)...)
		d, err := fsys.Open(dir)
		if err != nil {
			break
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			break
		}
		if slices.Contains(names, e) {
			continue
		}
		valid := func(n string) bool { return vfs.ValidName(n) && !vfs.IsBookkeeping(n) }
		j := slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(n, e) && valid(n) })
		if j < 0 {
			// Another normal form is the same name only where the filesystem takes it so
			// (macOS; Windows tells them apart): e must find the entry.
			composed := norm.NFC.String(e)
			j = slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(norm.NFC.String(n), composed) && valid(n) })
			if j < 0 {
				break
			}
			if _, err := lstat(fsys, path.Join(dir, e)); err != nil {
				break
			}
		}
		elems[i] = names[j]
	}
	return strings.Join(elems, "/")
}

func lstat(fsys afero.Fs, name string) (os.FileInfo, error) {
	if l, ok := fsys.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(name)
		return fi, err
	}
	return fsys.Stat(name)
}

// foldsCase reports whether root's filesystem ignores case: it finds one of its entries by
// another spelling that it does not list.
func foldsCase(root *os.Root) bool {
	d, err := root.Open(".")
	if err != nil {
		return false
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		other := strings.ToUpper(n)
		if other == n {
			other = strings.ToLower(n)
		}
		if other != n && !slices.Contains(names, other) {
			_, err := root.Lstat(other)
			return err == nil
		}
	}
	return false
}
