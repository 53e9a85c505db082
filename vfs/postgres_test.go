package vfs_test

import (
	"context"
	"os"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	vfstest.StopPostgres()
	os.Exit(code)
}

// openPostgres opens a fresh store (a name no other test uses) in the test cluster.
func openPostgres(t *testing.T, opts ...vfs.Option) *vfs.PostgresStorage {
	t.Helper()
	st, err := vfs.NewPostgresStorage(context.Background(), vfstest.PostgresDSN(t), vfstest.UniqueName(t), true, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The PostgreSQL backend passes the storage conformance suite and keeps history the same
// way as the others.
func TestPostgresConformance(t *testing.T) {
	vfstest.TestStorage(t, func(t *testing.T) vfs.Storage { return openPostgres(t) })
}

func TestPostgresHistoryConformance(t *testing.T) {
	vfstest.TestHistory(t, func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage { return openPostgres(t, vfs.WithHistory(cfg)) })
}
