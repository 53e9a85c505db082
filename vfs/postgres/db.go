// Package postgres is memory-mcp's PostgreSQL backend: stores (and their history) as rows
// of a database that several processes, on several machines, serve at once, each command
// one transaction under the store's advisory lock; and the table of Streamable HTTP
// sessions those processes share. It implements vfs.Storage and runs the conformance
// suites of vfs/vfstest; only the command (package main) links it, and with it pgx.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is one PostgreSQL database that holds stores: a connection pool that all its
// stores share, and the one connection that listens for changes (LISTEN/NOTIFY) on behalf
// of every store of this process that is watched. A process opens it once, however many
// tenants' stores it serves.
type DB struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig

	mu       sync.Mutex
	watchers map[int64]map[chan struct{}]bool // by store id; 0: a store whose id is not known yet
	stop     context.CancelFunc               // the listener's, nil until something watches
	done     chan struct{}
	closed   bool

	schemaTurn chan struct{} // held while the schema is brought up to date: a call waits its turn, or its time
	schemaOwed bool          // Connect's migration, made at the first use that reaches the database
	lazy       bool          // opened by Connect: each store is found at its first use
}

// changeChannel is the NOTIFY channel on which every committed change of a store is
// announced; the payload is the store's id.
const changeChannel = "memory_mcp_changes"

// defaultMaxConns is the pool's size unless the DSN sets pool_max_conns: enough for the
// reads of many concurrent calls (changes to one store wait for its lock in turn anyway).
const defaultMaxConns = 16

// Open connects to the database of dsn (a postgres:// URL or key/value DSN; PG*
// environment variables fill in what it leaves out). With migrateSchema the schema is
// brought up to date first.
func Open(ctx context.Context, dsn string, migrateSchema bool) (*DB, error) {
	db, err := Connect(dsn, migrateSchema)
	if err != nil {
		return nil, err
	}
	if err := db.schema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	db.lazy = false
	return db, nil
}

// Connect is Open without reaching the database: the schema is brought up to date, and
// each store found, at the first use that reaches it. A database that serves only mounts
// is opened so, and one that is down when the server starts fails only the calls under
// its mounts until it is back.
func Connect(dsn string, migrateSchema bool) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // it connects when asked
	if err != nil {
		return nil, err
	}
	return &DB{pool: pool, connCfg: cfg.ConnConfig, watchers: map[int64]map[chan struct{}]bool{},
		schemaTurn: make(chan struct{}, 1), schemaOwed: migrateSchema, lazy: true}, nil
}

// schema makes the migration Connect owes, once it succeeds.
func (db *DB) schema(ctx context.Context) error {
	select {
	case db.schemaTurn <- struct{}{}:
	case <-ctx.Done(): // another call is at it, and the database may not answer at all
		return ctx.Err()
	}
	defer func() { <-db.schemaTurn }()
	if !db.schemaOwed {
		return nil
	}
	if _, err := migrate(ctx, db.pool); err != nil {
		return pgErr(ctx, err)
	}
	db.schemaOwed = false
	return nil
}

// Close stops the listener and closes the pool; the stores opened from db must be closed
// (or no longer used) first.
func (db *DB) Close() {
	db.mu.Lock()
	db.closed = true
	stop, done := db.stop, db.done
	db.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	db.pool.Close()
}

// Store opens the store named name, creating it if needed.
func (db *DB) Store(ctx context.Context, name string, opts ...vfs.Option) (*vfs.Store, error) {
	st, err := db.Storage(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return vfs.NewStore(st), nil
}

// Storage is Store's storage. Of a database that Connect opened, the store is found at its
// first transaction: opening it never waits for the database, which may not answer at all.
func (db *DB) Storage(ctx context.Context, name string, opts ...vfs.Option) (*Storage, error) {
	o := vfs.ReadOptions(opts...)
	s := &Storage{db: db, name: name, readOnly: o.ReadOnly, history: o.History}
	if db.lazy {
		return s, nil
	}
	if err := s.find(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// find learns the store's id, once: the schema first, if owed. A read-only store that does
// not exist yet is made too, empty, as the os backend makes a read-only tenant's missing
// directory: the row is bookkeeping, not memory. One that exists is only read, so that a
// database that takes no writes (a standby) still serves views.
func (s *Storage) find(ctx context.Context) error {
	s.mu.Lock()
	found := s.id != 0
	s.mu.Unlock()
	if found {
		return nil
	}
	if err := s.db.schema(ctx); err != nil {
		return err
	}
	var id, gen int64
	find := func() error {
		return s.db.pool.QueryRow(ctx, "SELECT id, generation FROM memory_mcp_stores WHERE name = $1", s.name).Scan(&id, &gen)
	}
	err := find()
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err = s.db.pool.Exec(ctx, "INSERT INTO memory_mcp_stores (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", s.name); err == nil {
			err = find()
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("there is no store %q in the database", s.name)
	}
	if err != nil {
		return pgErr(ctx, err)
	}
	s.mu.Lock()
	if s.id == 0 { // calls that found it at once agree
		s.id, s.gen = id, gen
	}
	s.mu.Unlock()
	return nil
}

// watch returns a channel that receives (without blocking the sender, so at most one is
// pending) whenever the store id may have changed: a change committed by any process, or
// the listener reconnecting after it could have missed some. stop ends it.
func (db *DB) watch(id int64) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.watchers[id] == nil {
		db.watchers[id] = map[chan struct{}]bool{}
	}
	db.watchers[id][ch] = true
	if db.stop == nil && !db.closed {
		ctx, cancel := context.WithCancel(context.Background())
		db.stop, db.done = cancel, make(chan struct{})
		go db.listen(ctx, db.done)
	}
	return ch, func() {
		db.mu.Lock()
		defer db.mu.Unlock()
		delete(db.watchers[id], ch)
		if len(db.watchers[id]) == 0 {
			delete(db.watchers, id)
		}
	}
}

// wake signals the watchers of store id, or of every store when all is set (and those of
// stores not found yet, whatever the id).
func (db *DB) wake(id int64, all bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for sid, chans := range db.watchers {
		if all || sid == id || sid == 0 {
			for ch := range chans {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}
}

// listen holds a connection of its own that LISTENs for changes, reconnecting with a
// growing pause (at most 5 s) when it is lost, until ctx is done. After each (re)connect
// every watcher is woken, since changes may have been made while nobody listened.
func (db *DB) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, db.connCfg)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+changeChannel); err == nil {
				pause = 100 * time.Millisecond
				db.wake(0, true)
				for {
					n, err := conn.WaitForNotification(ctx)
					if err != nil {
						break
					}
					if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
						db.wake(id, false)
					}
				}
			}
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// pgErr turns an error of a call into ctx's error when ctx is done (the call was cancelled
// or ran out of time), and marks the errors that mean the database cannot be reached with
// ErrUnavailable.
func pgErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", vfs.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && refusals[pgErr.Code] != nil {
		return fmt.Errorf("%w: %w", err, refusals[pgErr.Code])
	}
	return err
}

// refusals are the database's errors that mean what a filesystem's do, so that the model
// gets the same reason for them (the disk full, a standby or a read-only database, a role
// without the grants, a failing disk).
var refusals = map[string]error{
	"53100": syscall.ENOSPC,
	"25006": syscall.EROFS,
	"42501": fs.ErrPermission,
	"58030": syscall.EIO,
}

// unreachable reports whether err says the database could not be reached or the
// connection was lost, as opposed to a statement the database refused.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exceptions; 57P0x: the server shutting down or starting;
		// 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "conn closed")
}

// committed reports whether the transaction xid committed, once the database knows
// (txid_status says "in progress" until the backend that lost its client ends it), or
// false when it cannot say within ctx: a database restarting is waited for.
func (db *DB) committed(ctx context.Context, xid int64) bool {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var status *string
		err := db.pool.QueryRow(ctx, "SELECT txid_status($1)", xid).Scan(&status)
		switch {
		case err == nil && status == nil: // too old to know
			return false
		case err == nil && *status != "in progress":
			return *status == "committed"
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// Claim reports whether this process may run task on the store now: at most one process
// of all that share the database wins a claim within every period (the database's clock
// decides). Expiry claims each sweep, so that one replica at a time sweeps a store.
func (s *Storage) Claim(ctx context.Context, task string, every time.Duration) (bool, error) {
	if task != "expiry" {
		return false, fmt.Errorf("vfs: unknown task %q", task)
	}
	if err := s.find(ctx); err != nil {
		return false, err
	}
	tag, err := s.db.pool.Exec(ctx, "UPDATE memory_mcp_stores SET swept = now() WHERE id = $1 AND (swept IS NULL OR swept <= now() - $2::interval)", s.id, every)
	if err != nil {
		return false, pgErr(ctx, err)
	}
	return tag.RowsAffected() == 1, nil
}
