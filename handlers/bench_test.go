package handlers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// benchBackends are the stores the benchmarks run on: memory shows the handlers' own cost,
// os adds the filesystem's (with fsync on every change), postgres a database's round trips.
var benchBackends = []string{"memory", "os", "postgres"}

func openBench(b *testing.B, backend string, seed map[string][]byte) *handlers.Memory {
	b.Helper()
	for _, be := range append(backends(), postgresBackend) {
		if be.name == backend {
			fx := be.open(b, seed, noWrap)
			return handlers.New(fx.store, handlers.Limits{MaxFileBytes: 64 << 20, MaxStoreBytes: 1 << 40})
		}
	}
	b.Fatalf("no backend %q", backend)
	return nil
}

// oneMiB is a 1 MiB file of 64-byte lines (16,384 lines).
func oneMiB() []byte {
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		fmt.Fprintf(&sb, "%-63s\n", fmt.Sprintf("line %d of a one-mebibyte memory file", i))
	}
	return []byte(sb.String()[:1<<20])
}

func run(b *testing.B, h *handlers.Memory, input map[string]any) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		if res := h.Exec(context.Background(), input); res.IsError {
			b.Fatal(res.Text)
		}
	}
}

func BenchmarkView1MiBFile(b *testing.B) {
	for _, backend := range benchBackends {
		h := openBench(b, backend, map[string][]byte{"big.txt": oneMiB()})
		b.Run(backend+"/whole", func(b *testing.B) {
			run(b, h, map[string]any{"command": "view", "path": "/memories/big.txt"})
		})
		b.Run(backend+"/range-near-end", func(b *testing.B) {
			run(b, h, map[string]any{"command": "view", "path": "/memories/big.txt", "view_range": []any{float64(16000), float64(16100)}})
		})
	}
}

func BenchmarkStrReplaceEndOf1MiBFile(b *testing.B) {
	content := oneMiB()
	copy(content[len(content)-100:], "MARKER-A")
	for _, backend := range benchBackends {
		b.Run(backend, func(b *testing.B) {
			h := openBench(b, backend, map[string][]byte{"big.txt": content})
			b.ReportAllocs()
			from, to := "MARKER-A", "MARKER-B"
			for b.Loop() {
				if res := h.Exec(context.Background(), map[string]any{"command": "str_replace", "path": "/memories/big.txt", "old_str": from, "new_str": to}); res.IsError {
					b.Fatal(res.Text)
				}
				from, to = to, from
			}
		})
	}
}

func BenchmarkInsertSmallFile(b *testing.B) {
	for _, backend := range benchBackends {
		h := openBench(b, backend, nil)
		b.Run(backend, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%1000 == 0 {
					b.StopTimer()
					h.Exec(context.Background(), map[string]any{"command": "delete", "path": "/memories/notes.md"})
					h.Exec(context.Background(), map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n- first\n- second\n"})
					b.StartTimer()
				}
				i++
				if res := h.Exec(context.Background(), map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": float64(1), "insert_text": "- a new fact"}); res.IsError {
					b.Fatal(res.Text)
				}
			}
		})
	}
}

// tree makes entries files spread over 100 directories (each also an entry).
func tree(entries int) map[string][]byte {
	seed := map[string][]byte{}
	perDir := entries/100 - 1
	for d := 0; d < 100; d++ {
		for f := 0; f < perDir; f++ {
			seed[fmt.Sprintf("dir%03d/file%04d.md", d, f)] = []byte("a short memory\n")
		}
	}
	return seed
}

func BenchmarkViewDirectory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, backend := range benchBackends {
			h := openBench(b, backend, tree(n))
			b.Run(fmt.Sprintf("%s/%d-entries", backend, n), func(b *testing.B) {
				run(b, h, map[string]any{"command": "view", "path": "/memories"})
			})
		}
	}
}

// BenchmarkSmallFile runs every command on a file under 1 KiB, calling the handlers directly.
func BenchmarkSmallFile(b *testing.B) {
	small := "unique marker: small\n" + strings.Repeat("a small memory line\n", 39)
	for _, backend := range benchBackends {
		h := openBench(b, backend, map[string][]byte{"small.md": []byte(small)})
		ctx := context.Background()
		exec := func(b *testing.B, input map[string]any) {
			if res := h.Exec(ctx, input); res.IsError {
				b.Fatal(res.Text)
			}
		}
		b.Run(backend+"/view", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				exec(b, map[string]any{"command": "view", "path": "/memories/small.md"})
			}
		})
		b.Run(backend+"/create", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				exec(b, map[string]any{"command": "create", "path": fmt.Sprintf("/memories/new/%d.md", i), "file_text": "a new memory"})
			}
			b.StopTimer()
			h.Exec(ctx, map[string]any{"command": "delete", "path": "/memories/new"})
		})
		from, to := "small", "SMALL" // outlives the closure: -count runs it again on the same file
		b.Run(backend+"/str_replace", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				exec(b, map[string]any{"command": "str_replace", "path": "/memories/small.md", "old_str": "unique marker: " + from, "new_str": "unique marker: " + to})
				from, to = to, from
			}
		})
		b.Run(backend+"/rename", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				exec(b, map[string]any{"command": "rename", "old_path": "/memories/small.md", "new_path": "/memories/renamed.md"})
				exec(b, map[string]any{"command": "rename", "old_path": "/memories/renamed.md", "new_path": "/memories/small.md"})
			}
		})
		b.Run(backend+"/delete", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				exec(b, map[string]any{"command": "create", "path": "/memories/doomed.md", "file_text": "x"})
				b.StartTimer()
				exec(b, map[string]any{"command": "delete", "path": "/memories/doomed.md"})
			}
		})
	}
}

// BenchmarkListingDepth lists /memories over chains of 1,000 and 2,000 nested directories
// and over one directory of 2,000 files: the cost grows linearly with the chain (each
// directory is opened relative to its parent, once), not with the square of its depth.
func BenchmarkListingDepth(b *testing.B) {
	for _, shape := range []string{"chain-1000", "chain-2000", "flat-2000"} {
		b.Run(shape, func(b *testing.B) {
			dir := b.TempDir()
			if n, ok := strings.CutPrefix(shape, "chain-"); ok {
				levels, _ := strconv.Atoi(n)
				deepChain(b, dir, levels)
			} else {
				for i := range 2000 {
					os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), []byte("12345"), 0o600)
				}
			}
			s, err := files.OpenOSStore(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			h := handlers.New(s, handlers.DefaultLimits())
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}); res.IsError {
					b.Fatal(res.Text)
				}
			}
		})
	}
}

// BenchmarkChangeFeedDigests is the price of the feed's digests, paid only while the store
// has a subscriber: str_replace of a small and of a 1 MiB file, on memory, with one
// subscriber that drains the feed.
func BenchmarkChangeFeedDigests(b *testing.B) {
	big := oneMiB()
	copy(big[len(big)-100:], "MARKER-A")
	for _, size := range []struct {
		name    string
		content []byte
	}{{"small", []byte("MARKER-A and a small memory\n")}, {"1MiB", big}} {
		for _, subscribed := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/subscribed=%v", size.name, subscribed), func(b *testing.B) {
				fx := backends()[1].open(b, map[string][]byte{"f.txt": size.content}, noWrap)
				if subscribed {
					sub := fx.store.Subscribe(64)
					done := make(chan struct{})
					go func() {
						for {
							select {
							case <-sub.C:
							case <-done:
								return
							}
						}
					}()
					defer func() { close(done); sub.Close() }()
				}
				h := handlers.New(fx.store, handlers.Limits{MaxFileBytes: 64 << 20, MaxStoreBytes: 1 << 40})
				from, to := "MARKER-A", "MARKER-B"
				b.ReportAllocs()
				for b.Loop() {
					if res := h.Exec(context.Background(), map[string]any{"command": "str_replace", "path": "/memories/f.txt", "old_str": from, "new_str": to}); res.IsError {
						b.Fatal(res.Text)
					}
					from, to = to, from
				}
			})
		}
	}
}

// BenchmarkTwoProcesses creates files in a 10,000-file os store, from one process, and from
// two taking turns (two stores on one directory, each with its own locks, as two desktop
// clients each starting a server on the default root): each sees the other's change before
// its own, so what it caches of the store must not cost a walk.
func BenchmarkTwoProcesses(b *testing.B) {
	dir := b.TempDir()
	for i := range 10_000 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%100))
		os.MkdirAll(sub, 0o700)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.md", i)), []byte("a memory of about forty bytes, say it so\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	open := func() *handlers.Memory {
		s, err := files.OpenOSStore(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return handlers.New(s, handlers.DefaultLimits())
	}
	one, other := open(), open()
	// Each store makes its history's files with its first change; then the seeded files
	// are written back, which would otherwise hold up the first run's flushes (measured:
	// processes=1 took twice as long as processes=2, which ran after it).
	for i, h := range []*handlers.Memory{one, other} {
		if res := h.Exec(context.Background(), map[string]any{"command": "create", "path": fmt.Sprintf("/memories/warm-%d.md", i), "file_text": "x"}); res.IsError {
			b.Fatal(res.Text)
		}
	}
	exec.Command("sync").Run()
	n := 0
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("processes=%d", procs), func(b *testing.B) {
			hs := []*handlers.Memory{one, other}[:procs]
			for b.Loop() {
				n++
				res := hs[n%procs].Exec(context.Background(), map[string]any{"command": "create", "path": fmt.Sprintf("/memories/new/%d.md", n), "file_text": "x"})
				if res.IsError {
					b.Fatal(res.Text)
				}
			}
		})
	}
}

// BenchmarkMemoryBackend50k renames and deletes one file, and renames a directory of 10
// files, in a memory store of 50,000 files: each must cost what it moves, not what the
// store holds. The history is off, so that its pruning passes (which read every version,
// once per 1,000 changes) do not blur what the backend costs.
func BenchmarkMemoryBackend50k(b *testing.B) {
	s := files.NewMemoryStore(vfs.WithHistory(vfs.HistoryConfig{Off: true}))
	err := s.Update(context.Background(), func(tx *vfs.Tx) error {
		for i := range 50_000 {
			if err := tx.CreateFile(vfs.MustResolve(fmt.Sprintf("/memories/d%03d/f%d.md", i%500, i)), []byte("a memory")); err != nil {
				return err
			}
		}
		for i := range 10 {
			if err := tx.CreateFile(vfs.MustResolve(fmt.Sprintf("/memories/ten/f%d.md", i)), []byte("a memory")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	h := handlers.New(s, handlers.DefaultLimits())
	exec := func(b *testing.B, input map[string]any) {
		if res := h.Exec(context.Background(), input); res.IsError {
			b.Fatal(res.Text)
		}
	}
	b.Run("rename-file", func(b *testing.B) {
		for b.Loop() {
			exec(b, map[string]any{"command": "rename", "old_path": "/memories/d001/f1.md", "new_path": "/memories/d001/g1.md"})
			exec(b, map[string]any{"command": "rename", "old_path": "/memories/d001/g1.md", "new_path": "/memories/d001/f1.md"})
		}
	})
	b.Run("rename-dir-of-10", func(b *testing.B) {
		for b.Loop() {
			exec(b, map[string]any{"command": "rename", "old_path": "/memories/ten", "new_path": "/memories/TEN"})
			exec(b, map[string]any{"command": "rename", "old_path": "/memories/TEN", "new_path": "/memories/ten"})
		}
	})
	b.Run("delete-file", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			exec(b, map[string]any{"command": "create", "path": "/memories/d002/doomed.md", "file_text": "x"})
			b.StartTimer()
			exec(b, map[string]any{"command": "delete", "path": "/memories/d002/doomed.md"})
		}
	})
}

// durableWays are the two ways an os store makes changes durable: the write-ahead log (one
// flush per change, shared, the default on Linux) and every change flushing its own files
// (vfs.FlushEachChange, the way elsewhere).
var durableWays = []struct {
	name string
	opts []vfs.Option
}{{"write-ahead-log", nil}, {"flush-each-change", []vfs.Option{vfs.FlushEachChange()}}}

// createAndEdit creates the file p and edits it, the round of the durable benchmarks; it
// returns the text of a failure, or "".
func createAndEdit(h *handlers.Memory, p string) string {
	if res := h.Exec(context.Background(), map[string]any{"command": "create", "path": p, "file_text": "a new memory"}); res.IsError {
		return res.Text
	}
	if res := h.Exec(context.Background(), map[string]any{"command": "str_replace", "path": p, "old_str": "new", "new_str": "newer"}); res.IsError {
		return res.Text
	}
	return ""
}

// BenchmarkDurableChange creates and edits small files in an os store, durable both ways
// (durableWays).
func BenchmarkDurableChange(b *testing.B) {
	for _, way := range durableWays {
		s, err := files.OpenOSStore(b.TempDir(), way.opts...)
		if err != nil {
			b.Fatal(err)
		}
		h := handlers.New(s, handlers.DefaultLimits())
		i := 0 // outlives the closure: -count runs it again on the same store
		b.Run(way.name, func(b *testing.B) {
			for b.Loop() {
				i++
				if msg := createAndEdit(h, fmt.Sprintf("/memories/d%d/%d.md", i%10, i)); msg != "" {
					b.Fatal(msg)
				}
			}
		})
		s.Close()
	}
}

// BenchmarkDurableWriters32 runs 32 writers at once on one os store, in the process (no
// protocol in the way), each creating and editing files of its own, durable both ways as
// BenchmarkDurableChange. With the write-ahead log, the writers share its flushes (group
// commit) and none holds the store's lock across one. It reports changes/s.
func BenchmarkDurableWriters32(b *testing.B) {
	for _, way := range durableWays {
		s, err := files.OpenOSStore(b.TempDir(), way.opts...)
		if err != nil {
			b.Fatal(err)
		}
		h := handlers.New(s, handlers.DefaultLimits())
		var next atomic.Int64 // outlives the closure: -count runs it again on the same store
		b.Run(way.name, func(b *testing.B) {
			b.SetParallelism(16) // × GOMAXPROCS (2 here): 32 writers
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					if msg := createAndEdit(h, fmt.Sprintf("/memories/w%d/%d.md", i%32, i)); msg != "" {
						b.Error(msg)
						return
					}
				}
			})
			b.ReportMetric(float64(2*b.N)/time.Since(start).Seconds(), "changes/s")
		})
		s.Close()
	}
}

// BenchmarkViewFlatDirectory views a directory of 150 small files, as the side-by-side
// script's listing does halfway through its run.
func BenchmarkViewFlatDirectory(b *testing.B) {
	seed := map[string][]byte{}
	for i := 0; i < 150; i++ {
		seed[fmt.Sprintf("moved-%d.md", i)] = []byte("# notes\n- fact\nfirst LINE\n")
	}
	for _, backend := range benchBackends {
		h := openBench(b, backend, seed)
		b.Run(backend, func(b *testing.B) {
			run(b, h, map[string]any{"command": "view", "path": "/memories"})
		})
	}
}
