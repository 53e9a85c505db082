package postgres_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// withParam returns dsn (a URL or key/value DSN) with a connection parameter set.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// openStore opens the store name of the database at dsn, closed when the test ends.
func openStore(t *testing.T, dsn, name string, migrate bool, opts ...vfs.Option) *vfs.Store {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, migrate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	st, err := db.Store(ctx, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openMemory opens the store name of the database at dsn as the model's memory.
func openMemory(t *testing.T, dsn, name string, migrate bool, opts ...vfs.Option) *handlers.Memory {
	t.Helper()
	return handlers.New(openStore(t, dsn, name, migrate, opts...), handlers.DefaultLimits())
}

// The database's refusals reach the model as a filesystem's do: a database that takes no
// writes (a standby) is read-only storage, a role without the grants is denied permission.
// The store still opens and lists; with vfs.ReadOnly, which records no views, a file's view
// works too.
func TestPostgresRefusals(t *testing.T) {
	ctx := context.Background()
	dsn, name := vfstest.PostgresDSN(t), vfstest.UniqueName(t)
	h := openMemory(t, dsn, name, true)
	if res := h.Create(ctx, handlers.CreateArgs{Path: "/memories/a.md", FileText: "kept\n"}); res.IsError {
		t.Fatal(res.Text)
	}
	role := strings.ToLower(strings.ReplaceAll(name, "-", "_")) + "_reader"
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`CREATE ROLE "` + role + `"`, `GRANT SELECT ON ALL TABLES IN SCHEMA public TO "` + role + `"`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, dsn, reason string }{
		{"standby", withParam(dsn, "default_transaction_read_only", "on"), "storage is read-only"},
		{"no grants", withParam(dsn, "role", role), "permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := openMemory(t, c.dsn, name, false)
			for _, input := range []map[string]any{
				{"command": "create", "path": "/memories/b.md", "file_text": "x"},
				{"command": "str_replace", "path": "/memories/a.md", "old_str": "kept", "new_str": "lost"},
				{"command": "delete", "path": "/memories/a.md"},
			} {
				want := "Error: Could not " + input["command"].(string) + " " + input["path"].(string) + ": " + c.reason
				if res := h.Exec(ctx, input); res.Text != want || !res.IsError {
					t.Errorf("%v: got %q, want %q", input["command"], res.Text, want)
				}
			}
			if res := h.View(ctx, handlers.ViewArgs{Path: "/memories"}); res.IsError || !strings.Contains(res.Text, "/memories/a.md") {
				t.Errorf("view /memories: %s", res.Text)
			}
			ro := openMemory(t, c.dsn, name, false, vfs.ReadOnly())
			if res := ro.View(ctx, handlers.ViewArgs{Path: "/memories/a.md"}); res.IsError || !strings.Contains(res.Text, "kept") {
				t.Errorf("view /memories/a.md on a read-only store: %s", res.Text)
			}
		})
	}
}

// A database opened with Connect that is down gives stores all the same, with migration or
// without: their calls fail as unavailable until it is back, and then work (the schema
// migrated, the store made, at the first use).
func TestPostgresConnectWhileDown(t *testing.T) {
	c := vfstest.NewPostgresCluster(t)
	c.Stop(t, "fast")
	ctx := context.Background()
	var stores []*vfs.Store
	for _, migrate := range []bool{true, false} {
		db, err := postgres.Connect(c.DSN, migrate)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		st, err := db.Store(ctx, vfstest.UniqueName(t), vfs.WithHistory(vfs.HistoryConfig{}))
		if err != nil {
			t.Fatalf("migrate %v: the store of a database that is down: %v", migrate, err)
		}
		if err := st.View(ctx, func(*vfs.Tx) error { return nil }); !errors.Is(err, vfs.ErrUnavailable) {
			t.Errorf("migrate %v: a view with the database down: %v", migrate, err)
		}
		stores = append(stores, st)
	}
	c.Start(t)
	for i, st := range stores {
		if err := st.Update(ctx, func(tx *vfs.Tx) error { return tx.CreateFile(vfs.MustResolve("/memories/a.md"), []byte("x")) }); err != nil {
			t.Errorf("store %d once the database is back: %v", i, err)
		}
	}
}

// A database that takes connections and never answers (its host black-holed) holds no call
// past the call's own time: opening its store waits for nothing, and a call that gives up
// while another waits for the database to bring the schema up to date returns at once.
func TestPostgresConnectNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held, never answered
		}
	}()
	db, err := postgres.Connect("postgres://u@"+ln.Addr().String()+"/db?sslmode=disable", true)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *vfs.Store, 1)
	go func() {
		st, err := db.Store(context.Background(), "s")
		if err != nil {
			t.Error(err)
		}
		opened <- st
	}()
	var st *vfs.Store
	select {
	case st = <-opened:
	case <-time.After(10 * time.Second): // bounds a failure only
		t.Fatal("opening a store waits for the database")
	}
	first, cancelFirst := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() { firstDone <- st.View(first, func(*vfs.Tx) error { return nil }) }()
	// The first call waits for the database's answer, the schema's turn held; the second
	// has 100 ms, and waits for that turn.
	conn := <-accepted
	second, cancelSecond := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelSecond()
	secondDone := make(chan error, 1)
	go func() { secondDone <- st.View(second, func(*vfs.Tx) error { return nil }) }()
	select {
	case err := <-secondDone:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the call that gave up: %v", err)
		}
	case <-time.After(10 * time.Second): // bounds a failure only
		t.Error("a call whose time ended waits for another call's answer from the database")
	}
	cancelFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Errorf("the first call: %v", err)
	}
	conn.Close()
	db.Close()
	ln.Close()
	for c := range accepted {
		c.Close()
	}
}
