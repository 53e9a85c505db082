package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
)

// Concurrent calls never lose an update and never crash (docs/behaviour.md §6), on every backend.
func TestConcurrentCalls(t *testing.T) {
	const n = 50
	var lines []string
	for i := 0; i < n; i++ {
		lines = append(lines, fmt.Sprintf("line-%02d", i))
	}
	seed := map[string][]byte{
		"edits.txt":   []byte(strings.Join(lines, "\n")),
		"inserts.txt": []byte("original"),
	}
	for i := 0; i < n/2; i++ {
		seed[fmt.Sprintf("src-%02d.txt", i)] = []byte(fmt.Sprintf("renamed %d", i))
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fx := b.open(t, seed, noWrap)
			h := handlers.New(fx.store, handlers.DefaultLimits())
			ctx := context.Background()
			var wg sync.WaitGroup
			results := make([][2]handlers.Result, n/2)
			for i := 0; i < n; i++ {
				wg.Add(4)
				go func() {
					defer wg.Done()
					res := h.Exec(ctx, map[string]any{"command": "str_replace", "path": "/memories/edits.txt",
						"old_str": fmt.Sprintf("line-%02d", i), "new_str": fmt.Sprintf("done-%02d", i)})
					if res.IsError {
						t.Errorf("str_replace %d: %s", i, res.Text)
					}
				}()
				go func() {
					defer wg.Done()
					res := h.Exec(ctx, map[string]any{"command": "insert", "path": "/memories/inserts.txt",
						"insert_line": float64(0), "insert_text": fmt.Sprintf("ins-%02d", i)})
					if res.IsError {
						t.Errorf("insert %d: %s", i, res.Text)
					}
				}()
				go func() {
					defer wg.Done()
					if i < n/2 {
						results[i][0] = h.Exec(ctx, map[string]any{"command": "create", "path": fmt.Sprintf("/memories/dst-%02d.txt", i), "file_text": fmt.Sprintf("created %d", i)})
					}
				}()
				go func() {
					defer wg.Done()
					if i < n/2 {
						results[i][1] = h.Exec(ctx, map[string]any{"command": "rename", "old_path": fmt.Sprintf("/memories/src-%02d.txt", i), "new_path": fmt.Sprintf("/memories/dst-%02d.txt", i)})
					}
					h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"})
				}()
			}
			wg.Wait()

			tree := dumpTree(t, fx.fs)
			edits := string(tree["edits.txt"])
			for i := 0; i < n; i++ {
				if !strings.Contains(edits, fmt.Sprintf("done-%02d", i)) {
					t.Errorf("str_replace %d was lost", i)
				}
			}
			inserts := string(tree["inserts.txt"])
			if got := strings.Count(inserts, "\n"); got != n {
				t.Errorf("inserts.txt has %d new lines, want %d", got, n)
			}
			for i := 0; i < n; i++ {
				if !strings.Contains(inserts, fmt.Sprintf("ins-%02d\n", i)) {
					t.Errorf("insert %d was lost", i)
				}
			}
			for i, r := range results {
				created, renamed := !r[0].IsError, !r[1].IsError
				dst := string(tree[fmt.Sprintf("dst-%02d.txt", i)])
				src, srcLeft := tree[fmt.Sprintf("src-%02d.txt", i)]
				switch {
				case created == renamed:
					t.Errorf("pair %d: create ok=%v (%s), rename ok=%v (%s); exactly one must win", i, created, r[0].Text, renamed, r[1].Text)
				case created && (dst != fmt.Sprintf("created %d", i) || !srcLeft || string(src) != fmt.Sprintf("renamed %d", i)):
					t.Errorf("pair %d: create won but dst=%q src=%q", i, dst, src)
				case renamed && (dst != fmt.Sprintf("renamed %d", i) || srcLeft):
					t.Errorf("pair %d: rename won but dst=%q, src left=%v", i, dst, srcLeft)
				}
			}
		})
	}
}
