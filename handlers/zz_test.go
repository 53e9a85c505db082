package handlers_test

import (
	"context"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

func TestZZPrunedShow(t *testing.T) {
	dir := t.TempDir()
	cfg := vfs.HistoryConfig{MaxVersions: 1}
	st, _ := files.OpenOSStore(dir, vfs.WithHistory(cfg))
	h := handlers.New(st, handlers.DefaultLimits())
	ctx := context.Background()
	for _, c := range []string{"a\n", "b\n", "c\n"} {
		if _, err := h.Write(ctx, "/memories/f.md", []byte(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	st, _ = files.OpenOSStore(dir, vfs.WithHistory(cfg))
	defer st.Close()
	h = handlers.New(st, handlers.DefaultLimits())
	h.Write(ctx, "/memories/g.md", []byte("g\n"), nil)
	vs, _ := h.Log(ctx, handlers.LogQuery{})
	for _, v := range vs {
		t.Logf("v%d %s %s", v.Seq, v.Kind, v.Path)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		data, err := h.Show(ctx, "/memories/f.md", seq)
		t.Logf("show @%d: %q %v", seq, data, err)
	}
	res, err := h.Restore(ctx, "/memories/f.md", 1)
	t.Logf("restore @1: %+v %v", res, err)
	data, _, _ := h.Read(ctx, "/memories/f.md")
	t.Logf("now %q", data)
}
