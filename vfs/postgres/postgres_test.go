package postgres_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	vfstest.StopPostgres()
	os.Exit(code)
}

// The PostgreSQL backend passes the storage conformance suite and keeps history the same
// way as the others.
func TestPostgresConformance(t *testing.T) {
	vfstest.TestStorage(t, func(t *testing.T) vfs.Storage { return vfstest.PostgresStorage(t) })
}

func TestPostgresHistoryConformance(t *testing.T) {
	vfstest.TestHistory(t, func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage {
		return vfstest.PostgresStorage(t, vfs.WithHistory(cfg))
	})
}

// A change committed through one database connection reaches a store watched through
// another (another replica) by LISTEN/NOTIFY: at once, not at Watch's next poll, which here
// would be 20 minutes away. The listener comes back after the server ends its connection.
func TestPostgresChangesAreAnnounced(t *testing.T) {
	ctx := context.Background()
	dsn, name := vfstest.PostgresDSN(t), vfstest.UniqueName(t)
	a := openStore(t, withParam(dsn, "application_name", name), name, true)
	b := openStore(t, dsn, name, false)
	sub := a.Subscribe(16)
	defer sub.Close()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Watch(wctx, time.Minute) }()
	defer func() { stop(); <-done }()

	announced := func(file string) {
		t.Helper()
		p, _ := vfs.Resolve("/memories/" + file)
		if err := b.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(p, []byte("x")) }); err != nil {
			t.Fatal(err)
		}
		select {
		case batch := <-sub.C:
			if !batch.External {
				t.Errorf("batch %+v is not another process's change", batch)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the change to %s was not announced within 10 s", file)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// listener returns the database process that listens for A's changes, other than old,
	// once its LISTEN is done: a change committed after that reaches A by NOTIFY alone.
	listener := func(old int) (pid int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND query LIKE 'LISTEN%' AND pid <> $2", name, old).Scan(&pid)
			if err == nil {
				return pid
			}
			if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
				t.Fatalf("A does not listen: %v", err)
			}
		}
	}
	pid := listener(0)
	announced("one.md")
	// The server ends the listener's connection; A connects again and listens again.
	var ended bool
	if err := conn.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("ending the listener's connection: %v, %v", err, ended)
	}
	listener(pid)
	announced("two.md")
}
