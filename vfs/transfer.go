package vfs

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// A store moves between backends (a directory and PostgreSQL, either way) as a tar stream:
//
//	memory-mcp-export.json          {"format":1,"history":true}
//	memories/<path>                  each file, in byte order of its path
//	history/contents/<sha256>        with the history: each content a version names that
//	                                 the history keeps, in byte order of the digest
//	history/versions.jsonl           then one Version per line, oldest first
//
// Every entry has mode 0600 and time zero, so the same store exports to the same bytes
// whichever backend holds it. Directories are implied by the files' paths: an empty
// directory is not carried.

// exportFormat is the version of the stream's layout.
const exportFormat = 1

const (
	exportHeader   = "memory-mcp-export.json"
	exportFiles    = "memories/"
	exportVersions = "history/versions.jsonl"
	exportContents = "history/contents/"
)

// maxImportEntry bounds one entry of an imported stream, and so the memory it takes.
const maxImportEntry = 256 << 20

type exportInfo struct {
	Format  int  `json:"format"`
	History bool `json:"history"`
	// Pruned is the history's Pruned: the highest number of a version pruning dropped.
	Pruned uint64 `json:"pruned,omitempty"`
}

// Export writes the store to w as a tar stream, with its history when withHistory is set
// (and the store keeps one), from one consistent view of the store.
func (s *Store) Export(ctx context.Context, w io.Writer, withHistory bool) error {
	return s.View(ctx, func(tx *Tx) error {
		withHistory := withHistory && tx.hist != nil
		tw := tar.NewWriter(w)
		put := func(name string, data []byte) error {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o600, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
				return err
			}
			_, err := tw.Write(data)
			return err
		}
		info := exportInfo{Format: exportFormat, History: withHistory}
		if withHistory {
			var err error
			if info.Pruned, err = tx.Pruned(); err != nil {
				return err
			}
		}
		head, _ := json.Marshal(info)
		if err := put(exportHeader, append(head, '\n')); err != nil {
			return err
		}
		var walk func(dir Path) error
		walk = func(dir Path) error {
			entries, err := tx.List(dir)
			if err != nil {
				return err
			}
			for _, e := range entries {
				p := dir.Join(e.Name)
				if !ValidName(e.Name) || len(p.String()) > MaxPathBytes {
					continue // made outside memory-mcp: no import could name it
				}
				switch e.Kind {
				case KindDir:
					err = walk(p)
				case KindFile:
					var data []byte
					if data, err = tx.ReadFile(p); err == nil {
						err = put(exportFiles+p.Name(), data)
					}
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(Path{clean: Root}); err != nil {
			return err
		}
		if withHistory {
			vs, err := tx.Versions()
			if err != nil {
				return err
			}
			var lines bytes.Buffer
			enc := json.NewEncoder(&lines)
			enc.SetEscapeHTML(false)
			var kept []Digest
			for i := range vs {
				if err := enc.Encode(&vs[i]); err != nil {
					return err
				}
				for _, c := range vs[i].contents() {
					if !c.sum.IsZero() {
						kept = append(kept, c.sum)
					}
				}
			}
			slices.SortFunc(kept, func(a, b Digest) int { return bytes.Compare(a[:], b[:]) })
			for _, d := range slices.Compact(kept) {
				data, err := tx.Content(d)
				if errors.Is(err, ErrNoContent) {
					continue // pruned: the version stays, as it does in the store
				}
				if err != nil {
					return err
				}
				if err := put(exportContents+d.String(), data); err != nil {
					return err
				}
			}
			if err := put(exportVersions, lines.Bytes()); err != nil {
				return err
			}
		}
		return tw.Close()
	})
}

// Imported says what Import brought in.
type Imported struct {
	Files, Versions, Contents int
}

// ImportLimits are what an import holds the stream to, as the commands hold the model:
// the size of one file (and of one content of the history), the size of all files
// together, and Check, which may refuse a file's content (the secret guard). Zero values
// leave a bound at maxImportEntry and the total unbounded; a nil Check accepts everything.
type ImportLimits struct {
	MaxFileBytes, MaxStoreBytes int64
	Check                       func(path string, data []byte) error
}

// Import reads a stream Export wrote into the store, which must be empty (no files and no
// history), in one transaction, all of it or nothing: a failure leaves the store empty
// again. Every path is checked as a path the model sends would be, every version as the
// store itself would record it; a content must match its digest. One entry at a time is
// held in memory, and none larger than the limits allow.
func (s *Store) Import(ctx context.Context, r io.Reader, lim ImportLimits) (Imported, error) {
	if lim.MaxFileBytes <= 0 || lim.MaxFileBytes > maxImportEntry {
		lim.MaxFileBytes = maxImportEntry
	}
	var got Imported
	_, err := s.Apply(ctx, "import", func(tx *Tx) error {
		got = Imported{}
		entries, err := tx.List(Path{clean: Root})
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return errors.New("the store is not empty: import into a new store")
		}
		if tx.hist != nil {
			if vs, err := tx.Versions(); err != nil || len(vs) > 0 {
				return errors.Join(err, errors.New("the store has a history: import into a new store"))
			}
		}
		if err := importStream(ctx, tx, r, lim, &got); err != nil {
			// What was written goes again (PostgreSQL's rollback would undo it too).
			if entries, lerr := tx.List(Path{clean: Root}); lerr == nil {
				for _, e := range entries {
					tx.t.RemoveAll(ctx, Path{clean: Root}.Join(e.Name))
				}
			}
			return err
		}
		return nil
	})
	return got, err
}

// importStream reads the stream's entries into the store (see Import).
func importStream(ctx context.Context, tx *Tx, r io.Reader, lim ImportLimits, got *Imported) error {
	tr := tar.NewReader(bufio.NewReader(r))
	var info exportInfo
	var total int64
	var vs []Version // the history, written last: nothing can fail after it
	for first := true; ; first = false {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if first {
				return errors.New("the stream is empty")
			}
			if vs != nil {
				if err := tx.hist.Import(ctx, vs, info.Pruned); err != nil {
					return err
				}
				got.Versions = len(vs)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the stream: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size < 0 || hdr.Size > maxImportEntry {
			return fmt.Errorf("%q: only regular files of at most %d bytes are imported", hdr.Name, maxImportEntry)
		}
		read := func() ([]byte, error) {
			data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
			if err != nil {
				return nil, fmt.Errorf("reading %q: %w", hdr.Name, err)
			}
			return data, nil
		}
		isFile := strings.HasPrefix(hdr.Name, exportFiles)
		isContent := strings.HasPrefix(hdr.Name, exportContents)
		if (isFile || isContent) && hdr.Size > lim.MaxFileBytes {
			return fmt.Errorf("%q is %d bytes, over the limit of %d bytes per memory file (raise -max-file-bytes to import it)", hdr.Name, hdr.Size, lim.MaxFileBytes)
		}
		switch name := hdr.Name; {
		case first:
			data, err := read()
			if err != nil {
				return err
			}
			if name != exportHeader || json.Unmarshal(data, &info) != nil || info.Format != exportFormat {
				return fmt.Errorf("not a memory-mcp export (format %d)", exportFormat)
			}
			if info.Pruned > maxImportSeq {
				return fmt.Errorf("%s: pruned must be at most %d", name, uint64(maxImportSeq))
			}
		case isFile:
			p, err := Resolve(Root + "/" + strings.TrimPrefix(name, exportFiles))
			if err != nil || p.IsRoot() || hasBookkeeping(p) {
				return fmt.Errorf("%q: not a memory file's path", name)
			}
			if total += hdr.Size; lim.MaxStoreBytes > 0 && total > lim.MaxStoreBytes {
				return fmt.Errorf("the files would be %d bytes or more, over the store's limit of %d bytes (raise -max-store-bytes to import them)", total, lim.MaxStoreBytes)
			}
			data, err := read()
			if err != nil {
				return err
			}
			if lim.Check != nil {
				if err := lim.Check(p.String(), data); err != nil {
					return err
				}
			}
			if err := tx.t.CreateFile(ctx, p, data); err != nil {
				return importConflict(ctx, tx.t, p, err)
			}
			got.Files++
		case name == exportVersions && info.History:
			if tx.hist == nil {
				return errors.New("the stream has a history but the store keeps none (-history=false)")
			}
			if vs != nil {
				return fmt.Errorf("%s: given twice", name)
			}
			vs = []Version{}
			dec := json.NewDecoder(io.LimitReader(tr, hdr.Size))
			dec.DisallowUnknownFields()
			for dec.More() {
				var v Version
				if err := dec.Decode(&v); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				vs = append(vs, v)
			}
			if err := checkVersions(vs); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case isContent && info.History && tx.hist != nil:
			data, err := read()
			if err != nil {
				return err
			}
			var d Digest
			if err := d.UnmarshalText([]byte(strings.TrimPrefix(name, exportContents))); err != nil || DigestOf(data) != d {
				return fmt.Errorf("%q: the content does not match its digest", name)
			}
			if lim.Check != nil {
				if err := lim.Check(name, data); err != nil {
					return err // a version restored would bring it back
				}
			}
			if err := tx.hist.Keep(ctx, d, data); err != nil {
				return err
			}
			got.Contents++
		default:
			return fmt.Errorf("%q: not part of a memory-mcp export", name)
		}
	}
}

// importConflict says why the file at p could not be created, where something the stream
// made before is in its way.
func importConflict(ctx context.Context, t Txn, p Path, err error) error {
	for q := p; !q.IsRoot(); q = q.Parent() {
		e, serr := t.Stat(ctx, q)
		switch {
		case serr != nil:
		case q == p && e.IsDir():
			return fmt.Errorf("%s: the stream has it as a file and as a directory", p)
		case q == p:
			return fmt.Errorf("%s: given twice, or in two spellings that this storage does not tell apart (macOS and Windows ignore case): rename one where the stream came from", p)
		case !e.IsDir():
			return fmt.Errorf("%s: the stream has %s as a file and as a directory", p, q)
		}
	}
	return err
}

// hasBookkeeping reports whether any name of p is the server's bookkeeping.
func hasBookkeeping(p Path) bool {
	return slices.ContainsFunc(strings.Split(p.Name(), "/"), IsBookkeeping)
}

// Bounds of an imported version.
const (
	maxImportSeq  = 1<<53 - 1 // exact in every JSON reader; far from any counter's wrap
	maxLabelBytes = 256       // an actor's, a command's or a redactor's name
)

// checkVersions holds an imported history to what the store itself records: numbers
// that grow (versions of one change share its number) and stay far from wrapping, paths
// the jail accepts as they are written, the four kinds of change, and names that are
// short, printable text. It does not hold a file's versions to follow on from each other,
// within a change or across changes: pruning leaves gaps, even inside a change that
// touched a file more than once (FuzzPrune).
func checkVersions(vs []Version) error {
	var last uint64
	for i := range vs {
		v := &vs[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("version %d (seq %d): %s", i+1, v.Seq, fmt.Sprintf(format, args...))
		}
		switch {
		case v.Seq == 0 || v.Seq > maxImportSeq:
			return bad("seq must be from 1 to %d", uint64(maxImportSeq))
		case v.Seq < last:
			return bad("seqs must not go down (the one before is %d)", last)
		}
		last = v.Seq
		if v.Time.IsZero() || v.Time.Year() > 9999 || (v.Redacted != nil && v.Redacted.Time.IsZero()) {
			return bad("a time is missing or out of range")
		}
		if v.Command == "" {
			v.Command = "update" // as Store.Update records it now; older builds left it empty
		}
		for _, label := range []string{v.Actor, v.Command} {
			if !printableLabel(label) {
				return bad("actor and command must be printable text of 1 to %d bytes", maxLabelBytes)
			}
		}
		if c := v.Client; c != nil {
			for _, label := range []string{c.Name, c.Version, c.Tenant, c.Transport} {
				if label != "" && !printableLabel(label) {
					return bad("the client's name, version, tenant and transport must be printable text of up to %d bytes", maxLabelBytes)
				}
			}
		}
		if v.Redacted != nil && !printableLabel(v.Redacted.By) {
			return bad("redacted.by must be printable text of 1 to %d bytes", maxLabelBytes)
		}
		switch v.Kind {
		case Created, Modified, Deleted:
			if v.NewPath != "" {
				return bad("only a move has a new_path")
			}
		case Moved:
			if !versionPath(v.NewPath) {
				return bad("new_path %q is not a memory file's path", v.NewPath)
			}
		default:
			return bad("kind %q is not created, modified, deleted or moved", v.Kind)
		}
		if !versionPath(v.Path) {
			return bad("path %q is not a memory file's path", v.Path)
		}
		if v.Size < 0 || v.PrevSize < 0 || v.Size > maxImportEntry || v.PrevSize > maxImportEntry {
			return bad("sizes must be from 0 to %d", maxImportEntry)
		}
	}
	return nil
}

// versionPath reports whether p is a memory file's path as the store writes one: valid,
// below the root, clean, and no bookkeeping.
func versionPath(p string) bool {
	r, err := Resolve(p)
	return err == nil && !r.IsRoot() && r.String() == p && !hasBookkeeping(r)
}

// printableLabel reports whether s is 1 to maxLabelBytes of valid UTF-8 without control or
// format characters (which would move an operator's cursor or colour their terminal).
func printableLabel(s string) bool {
	if s == "" || len(s) > maxLabelBytes || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return !labelRune(r) })
}
