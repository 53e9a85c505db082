package server_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// Every expiry is an audit line with the tenant, path and bytes; a dry run deletes nothing.
func TestRunExpiryAudits(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, dryRun := range []bool{true, false} {
		store := vfs.NewMemoryStore()
		if err := store.TrackAccess(clock); err != nil {
			t.Fatal(err)
		}
		store.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/stale.md"), []byte("12345")) })
		now = now.Add(48 * time.Hour)
		var log bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // one sweep, then return
		server.RunExpiry(ctx, func() []server.ExpiryTarget { return []server.ExpiryTarget{{Tenant: "alice", Store: store}} }, 24*time.Hour, dryRun, zerolog.New(&log))
		line := log.String()
		for _, want := range []string{`"tenant":"alice"`, `"command":"expire"`, `"path":"/memories/stale.md"`, `"bytes_before":5`, `"bytes_after":0`, `"message":"audit"`} {
			if !strings.Contains(line, want) {
				t.Errorf("dry run %v: audit line lacks %s:\n%s", dryRun, want, line)
			}
		}
		err := store.View(context.Background(), func(tx *vfs.Tx) error { _, err := tx.Stat(vfs.MustResolve("/memories/stale.md")); return err })
		if exists := err == nil; exists != dryRun {
			t.Errorf("dry run %v: the file exists=%v afterwards", dryRun, exists)
		}
	}
}
