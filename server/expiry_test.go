package server_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// Every expiry is an audit line with the tenant, path and bytes; a dry run deletes nothing.
func TestRunExpiryAudits(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, dryRun := range []bool{true, false} {
		store := files.NewMemoryStore()
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

// A read-only store is never swept, however long its files went unused; the same files
// opened for writing are.
func TestRunExpiryLeavesReadOnlyStores(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	w, err := files.OpenOSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.TrackAccess(clock)
	if err := w.Update(context.Background(), func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/stale.md"), []byte("12345")) }); err != nil {
		t.Fatal(err)
	}
	w.Close()
	now = now.Add(48 * time.Hour)
	for _, readOnly := range []bool{true, false} {
		var opts []vfs.Option
		if readOnly {
			opts = append(opts, vfs.ReadOnly())
		}
		store, err := files.OpenOSStore(dir, opts...)
		if err != nil {
			t.Fatal(err)
		}
		store.TrackAccess(clock)
		var log bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // one sweep, then return
		server.RunExpiry(ctx, func() []server.ExpiryTarget { return []server.ExpiryTarget{{Store: store}} }, 24*time.Hour, false, zerolog.New(&log))
		store.Close()
		_, err = os.Stat(filepath.Join(dir, "stale.md"))
		if expired := os.IsNotExist(err); expired == readOnly || strings.Contains(log.String(), "failed") {
			t.Errorf("read-only %v: expired %v; log:\n%s", readOnly, expired, log.String())
		}
	}
}

// Two replicas on one PostgreSQL store, sweeping at the same moment: one of them sweeps
// (a dry run would otherwise log twice), the file goes, and the other replica sees the
// expiry in the history and can restore the file.
func TestRunExpiryOneReplicaAtATime(t *testing.T) {
	pg := vfstest.NewPostgresCluster(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	var replicas [2]*vfs.Store
	for i := range replicas {
		db, err := postgres.Open(ctx, pg.DSN, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		if replicas[i], err = db.Store(ctx, "shared"); err != nil {
			t.Fatal(err)
		}
		replicas[i].TrackAccess(clock)
	}
	stale := vfs.MustResolve("/memories/stale.md")
	replicas[0].Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(stale, []byte("12345")) })
	clockMu.Lock()
	now = now.Add(48 * time.Hour)
	clockMu.Unlock()

	sweep := func(dryRun bool) (logs [2]string) {
		var wg sync.WaitGroup
		for i, st := range replicas {
			wg.Go(func() {
				var log bytes.Buffer
				stopped, cancel := context.WithCancel(ctx)
				cancel() // one sweep, then return
				server.RunExpiry(stopped, func() []server.ExpiryTarget { return []server.ExpiryTarget{{Store: st}} }, 24*time.Hour, dryRun, zerolog.New(&log))
				logs[i] = log.String()
			})
		}
		wg.Wait()
		return logs
	}
	logs := sweep(true)
	if n := strings.Count(logs[0]+logs[1], `"path":"/memories/stale.md"`); n != 1 {
		t.Fatalf("the dry run was logged %d times, want once:\n%s\n%s", n, logs[0], logs[1])
	}
	// The claim lasts most of the interval (an hour here): a real sweep now would be
	// turned away too. The next interval's claim goes through, on whichever replica.
	if logs := sweep(false); logs[0]+logs[1] != "" {
		t.Fatalf("swept again within the interval:\n%s\n%s", logs[0], logs[1])
	}
	if _, err := pgExec(ctx, pg.DSN, "UPDATE memory_mcp_stores SET swept = swept - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	logs = sweep(false)
	if n := strings.Count(logs[0]+logs[1], `"outcome":"expired"`); n != 1 {
		t.Fatalf("expired %d times, want once:\n%s\n%s", n, logs[0], logs[1])
	}
	for i, st := range replicas {
		err := st.View(ctx, func(tx *vfs.Tx) error { _, err := tx.Stat(stale); return err })
		if !vfs.IsNotExist(err) {
			t.Errorf("replica %d: stale.md is still there (%v)", i, err)
		}
	}
	// The other replica finds the expiry in the history, with the content to restore.
	var found bool
	replicas[1].View(ctx, func(tx *vfs.Tx) error {
		vs, err := tx.Versions()
		for _, v := range vs {
			found = found || v.Actor == vfs.ActorExpiry && v.Path == "/memories/stale.md" && v.Kind == vfs.Deleted && !v.Prev.IsZero()
		}
		return err
	})
	if !found {
		t.Error("the expiry is not in the history the other replica reads")
	}
}

func pgExec(ctx context.Context, dsn, sql string) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, sql)
	return tag.RowsAffected(), err
}
