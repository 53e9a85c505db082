package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// openHistoryBench opens an empty store on backend with the default history, or none.
func openHistoryBench(b *testing.B, backend string, history bool) *handlers.Memory {
	cfg := vfs.DefaultHistory
	cfg.Off = !history
	st := files.NewMemoryStore(vfs.WithHistory(cfg))
	if backend == "os" {
		var err error
		if st, err = files.OpenOSStore(filepath.Join(b.TempDir(), "m"), vfs.WithHistory(cfg)); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
	}
	return handlers.New(st, handlers.Limits{MaxFileBytes: 64 << 20, MaxStoreBytes: 1 << 40})
}

// The price of history per change: a str_replace that flips a small file, and a 1 MiB one,
// between two contents, with history on and off, on memory and os.
func BenchmarkHistoryCost(b *testing.B) {
	for _, backend := range benchBackends {
		for _, size := range []struct {
			name string
			data []byte
		}{{"small", []byte("the user prefers short answers\n")}, {"1MiB", oneMiB()}} {
			for _, on := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/history=%v", backend, size.name, on)
				b.Run(name, func(b *testing.B) {
					h := openHistoryBench(b, backend, on)
					ctx := context.Background()
					if res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/f.md", "file_text": string(size.data)}); res.IsError {
						b.Fatal(res.Text)
					}
					// The last line changes between two texts of one length.
					lastLine := size.data[bytes.LastIndexByte(size.data[:len(size.data)-1], '\n')+1:]
					old, alt := string(lastLine), string(bytes.ToUpper(lastLine))
					b.SetBytes(int64(len(size.data)))
					b.ReportAllocs()
					for b.Loop() {
						if res := h.Exec(ctx, map[string]any{"command": "str_replace", "path": "/memories/f.md", "old_str": old, "new_str": alt}); res.IsError {
							b.Fatal(res.Text)
						}
						old, alt = alt, old
					}
				})
			}
		}
	}
}

// The price of history when every change makes a content never seen before (an insert of a
// new line at the top of a small file): its content is then written to the history too.
func BenchmarkHistoryCostNewContent(b *testing.B) {
	for _, backend := range benchBackends {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/history=%v", backend, on), func(b *testing.B) {
				h := openHistoryBench(b, backend, on)
				ctx := context.Background()
				h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/f.md", "file_text": "notes\n"})
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					if res := h.Exec(ctx, map[string]any{"command": "insert", "path": "/memories/f.md", "insert_line": float64(0), "insert_text": fmt.Sprint("note ", i)}); res.IsError {
						b.Fatal(res.Text)
					}
				}
			})
		}
	}
}

// historyStore builds a store with 10,000 versions (creates, edits, renames and deletes of 200
// files over a week) in memory, and copies it to a directory for the os backend.
func historyStore(b *testing.B, backend string) (*handlers.Memory, time.Time) {
	b.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	cfg := vfs.HistoryConfig{Now: func() time.Time { return clock }}
	mfs := files.NewMemFs()
	h := handlers.New(vfs.NewStore(files.NewAferoStorage(mfs, vfs.WithHistory(cfg))), handlers.DefaultLimits())
	ctx := context.Background()
	for i := 0; i < 10000; i++ {
		clock = clock.Add(time.Minute)
		p := fmt.Sprintf("/memories/d%d/f%d.md", i%20, i%200)
		var in map[string]any
		switch {
		case i < 200:
			in = map[string]any{"command": "create", "path": p, "file_text": fmt.Sprintf("note %d\n", i)}
		case i%50 == 0:
			in = map[string]any{"command": "rename", "old_path": p, "new_path": p + ".tmp"}
		case i%50 == 1:
			q := fmt.Sprintf("/memories/d%d/f%d.md", (i-1)%20, (i-1)%200)
			in = map[string]any{"command": "rename", "old_path": q + ".tmp", "new_path": q}
		default:
			in = map[string]any{"command": "insert", "path": p, "insert_line": float64(0), "insert_text": fmt.Sprintf("line %d", i)}
		}
		if res := h.Exec(ctx, in); res.IsError {
			b.Fatalf("%v: %s", in, res.Text)
		}
	}
	if backend == "memory" {
		return h, start
	}
	dir := filepath.Join(b.TempDir(), "m")
	err := afero.Walk(mfs, "/", func(name string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		host := filepath.Join(dir, filepath.FromSlash(name))
		if fi.IsDir() {
			return os.MkdirAll(host, 0o700)
		}
		data, err := afero.ReadFile(mfs, name)
		if err != nil {
			return err
		}
		return os.WriteFile(host, data, 0o600)
	})
	if err != nil {
		b.Fatal(err)
	}
	st, err := files.OpenOSStore(dir, vfs.WithHistory(cfg))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return handlers.New(st, handlers.DefaultLimits()), start
}

// log and a point-in-time restore of the whole store on 10,000 versions.
func BenchmarkHistory10kVersions(b *testing.B) {
	for _, backend := range benchBackends {
		h, start := historyStore(b, backend)
		ctx := context.Background()
		b.Run(backend+"/log", func(b *testing.B) {
			for b.Loop() {
				if vs, err := h.Log(ctx, handlers.LogQuery{}); err != nil || len(vs) != 10000 {
					b.Fatal(len(vs), err)
				}
			}
		})
		b.Run(backend+"/log-one-file", func(b *testing.B) {
			for b.Loop() {
				if vs, err := h.Log(ctx, handlers.LogQuery{Path: "/memories/d7/f7.md", N: 10}); err != nil || len(vs) != 10 {
					b.Fatal(len(vs), err)
				}
			}
		})
		b.Run(backend+"/restore-at", func(b *testing.B) {
			// Each restore puts back all 200 files as they were at one of two times.
			times := []time.Time{start.Add(5000 * time.Minute), start.Add(9000 * time.Minute)}
			i := 0
			for b.Loop() {
				res, err := h.RestoreAt(ctx, vfs.Root, times[i%2])
				if err != nil || len(res.Modified) == 0 {
					b.Fatal(res, err)
				}
				i++
			}
		})
	}
}

// The web page's reads over a memory of 1,000 files (1 KiB each, in 10 directories) with a
// version of each: the tree with last-change times, and a search that reads every file.
func BenchmarkWebPageReads(b *testing.B) {
	for _, backend := range benchBackends {
		h := openHistoryBench(b, backend, true)
		ctx := context.Background()
		line := bytes.Repeat([]byte("a line of memory, "), 56)[:1000]
		for i := range 1000 {
			if _, err := h.Write(ctx, fmt.Sprintf("/memories/d%d/f%d.md", i%10, i), append(line, '\n'), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(backend+"/files", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := h.Files(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(backend+"/search", func(b *testing.B) {
			for b.Loop() {
				if m, _, err := h.Search(ctx, "not there"); err != nil || len(m) != 0 {
					b.Fatal(err, m)
				}
			}
		})
	}
}
