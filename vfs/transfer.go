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
		info, _ := json.Marshal(exportInfo{Format: exportFormat, History: withHistory})
		if err := put(exportHeader, append(info, '\n')); err != nil {
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

// Import reads a stream Export wrote into the store, which must be empty (no files and no
// history), in one transaction: on PostgreSQL all of it or nothing. Every path is checked
// as a path the model sends would be; a content must match its digest.
func (s *Store) Import(ctx context.Context, r io.Reader) (Imported, error) {
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
		tr := tar.NewReader(bufio.NewReader(r))
		var info exportInfo
		for first := true; ; first = false {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				if first {
					return errors.New("the stream is empty")
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading the stream: %w", err)
			}
			if hdr.Typeflag != tar.TypeReg || hdr.Size < 0 || hdr.Size > maxImportEntry {
				return fmt.Errorf("%q: only regular files of at most %d bytes are imported", hdr.Name, maxImportEntry)
			}
			data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
			if err != nil {
				return fmt.Errorf("reading %q: %w", hdr.Name, err)
			}
			switch name := hdr.Name; {
			case first:
				if name != exportHeader || json.Unmarshal(data, &info) != nil || info.Format != exportFormat {
					return fmt.Errorf("not a memory-mcp export (format %d)", exportFormat)
				}
			case strings.HasPrefix(name, exportFiles):
				p, err := Resolve(Root + "/" + strings.TrimPrefix(name, exportFiles))
				if err != nil || p.IsRoot() || hasBookkeeping(p) {
					return fmt.Errorf("%q: not a memory file's path", name)
				}
				if err := tx.t.CreateFile(ctx, p, data); err != nil {
					return err
				}
				got.Files++
			case name == exportVersions && info.History:
				if tx.hist == nil {
					return errors.New("the stream has a history but the store keeps none (-history=false)")
				}
				var vs []Version
				dec := json.NewDecoder(bytes.NewReader(data))
				dec.DisallowUnknownFields()
				for dec.More() {
					var v Version
					if err := dec.Decode(&v); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					vs = append(vs, v)
				}
				if err := tx.hist.Import(ctx, vs); err != nil {
					return err
				}
				got.Versions = len(vs)
			case strings.HasPrefix(name, exportContents) && info.History && tx.hist != nil:
				var d Digest
				if err := d.UnmarshalText([]byte(strings.TrimPrefix(name, exportContents))); err != nil || DigestOf(data) != d {
					return fmt.Errorf("%q: the content does not match its digest", name)
				}
				if err := tx.hist.Keep(ctx, d, data); err != nil {
					return err
				}
				got.Contents++
			default:
				return fmt.Errorf("%q: not part of a memory-mcp export", name)
			}
		}
	})
	return got, err
}

// hasBookkeeping reports whether any name of p is the server's bookkeeping.
func hasBookkeeping(p Path) bool {
	return slices.ContainsFunc(strings.Split(p.Name(), "/"), IsBookkeeping)
}
