package files

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// Whatever an actor or a client calls itself (a client names itself in initialize; a Go
// caller names the actor), the versions it makes can be exported and imported again:
// the names are recorded as the printable text an import accepts.
func TestLabelsSurviveExport(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	for i, who := range []struct {
		actor  string
		client vfs.Client
	}{
		{"line\u2028break", vfs.Client{Name: "para\u2029graph", Version: "1\x00\x1b[31m"}},
		{"\u200b\t", vfs.Client{Name: string([]byte{0xff, 'x'}), Tenant: "t\u2028"}},
		{string(bytes.Repeat([]byte("é"), 200)), vfs.Client{Name: string(bytes.Repeat([]byte("n"), 300))}},
	} {
		cctx := vfs.WithClient(vfs.WithActor(ctx, who.actor), who.client)
		if _, err := s.Apply(cctx, "create", func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve(fmt.Sprintf("/memories/%d.md", i)), []byte("x"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A change through Update names no command.
	if err := s.Update(ctx, func(tx *vfs.Tx) error {
		return tx.CreateFile(vfs.MustResolve("/memories/u.md"), []byte("u"))
	}); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := s.Export(ctx, &stream, true); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMemoryStore().Import(ctx, &stream, vfs.ImportLimits{}); err != nil {
		t.Errorf("the export does not import again: %v", err)
	}
	vs := versionsOf(t, s)
	if vs[0].Actor != "linebreak" || vs[0].Client.Name != "paragraph" || vs[0].Client.Version != "1[31m" || vs[1].Actor != vfs.ActorLocal || vs[1].Client.Name != "x" {
		t.Errorf("the names recorded: %+v %+v, %+v %+v", vs[0].Actor, vs[0].Client, vs[1].Actor, vs[1].Client)
	}
}
