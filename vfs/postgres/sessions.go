package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sessions keeps the Streamable HTTP sessions of every replica in the database
// (package server's SessionStore), so that a client whose requests land on different
// replicas keeps its session, and a session ended on one replica (deleted, idle, evicted)
// is ended on all.
type Sessions struct{ db *DB }

// Sessions returns the database's session table.
func (db *DB) Sessions() *Sessions { return &Sessions{db: db} }

// sessionsLock serialises the changes of the session table that count sessions (a bigint
// advisory key, a key space apart from the stores' two-int keys).
const sessionsLock = 0x6d6d_0002

// touchEvery is how stale a session's last use may be in the table before a use is
// written: a write per minute per session instead of one per request. Idle limits are
// minutes long, so a minute's lag never ends a session in use.
const touchEvery = time.Minute

// Key returns the key that signs session ids, the same for every replica of the database
// (made by the first replica that asks).
func (ps *Sessions) Key(ctx context.Context) ([]byte, error) {
	key := make([]byte, 32)
	rand.Read(key)
	if _, err := ps.db.pool.Exec(ctx, "INSERT INTO memory_mcp_keys (name, key) VALUES ('session-ids', $1) ON CONFLICT (name) DO NOTHING", key); err != nil {
		return nil, pgErr(ctx, err)
	}
	err := ps.db.pool.QueryRow(ctx, "SELECT key FROM memory_mcp_keys WHERE name = 'session-ids'").Scan(&key)
	return key, pgErr(ctx, err)
}

// Add records a new session of tenant. When the tenant has maxPerTenant sessions, or all
// tenants max, the least recently used ones are removed to make room; Add returns them.
func (ps *Sessions) Add(ctx context.Context, id, tenant string, now time.Time, max, maxPerTenant int) (evicted []string, err error) {
	tx, err := ps.db.pool.Begin(ctx)
	if err != nil {
		return nil, pgErr(ctx, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", sessionsLock); err != nil {
		return nil, pgErr(ctx, err)
	}
	evict := func(sql string, args ...any) error {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		evicted = append(evicted, ids...)
		return err
	}
	if maxPerTenant > 0 {
		err = evict(`DELETE FROM memory_mcp_sessions WHERE id IN (SELECT id FROM memory_mcp_sessions WHERE tenant = $1
			ORDER BY last_seen DESC OFFSET $2) RETURNING id`, tenant, maxPerTenant-1)
	}
	if err == nil && max > 0 {
		err = evict(`DELETE FROM memory_mcp_sessions WHERE id IN (SELECT id FROM memory_mcp_sessions
			ORDER BY last_seen DESC OFFSET $1) RETURNING id`, max-1)
	}
	if err == nil {
		_, err = tx.Exec(ctx, "INSERT INTO memory_mcp_sessions (id, tenant, last_seen) VALUES ($1, $2, $3)", id, tenant, now)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	return evicted, pgErr(ctx, err)
}

// Touch records a use of session id at now, and reports whether it is a session of
// tenant that was used within idle; an idle one is removed (ended).
func (ps *Sessions) Touch(ctx context.Context, id, tenant string, now time.Time, idle time.Duration) (ok bool, err error) {
	var owner string
	var last time.Time
	err = ps.db.pool.QueryRow(ctx, "SELECT tenant, last_seen FROM memory_mcp_sessions WHERE id = $1", id).Scan(&owner, &last)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, pgErr(ctx, err)
	case owner != tenant:
		return false, nil
	case idle > 0 && now.Sub(last) > idle:
		return false, ps.Remove(ctx, id)
	case now.Sub(last) > touchEvery || idle > 0 && now.Sub(last) > idle/4:
		_, err = ps.db.pool.Exec(ctx, "UPDATE memory_mcp_sessions SET last_seen = $2 WHERE id = $1 AND last_seen < $2", id, now)
	}
	return true, pgErr(ctx, err)
}

// Remove ends session id.
func (ps *Sessions) Remove(ctx context.Context, id string) error {
	_, err := ps.db.pool.Exec(ctx, "DELETE FROM memory_mcp_sessions WHERE id = $1", id)
	return pgErr(ctx, err)
}

// Sweep ends the sessions unused since before, and returns them.
func (ps *Sessions) Sweep(ctx context.Context, before time.Time) ([]string, error) {
	rows, err := ps.db.pool.Query(ctx, "DELETE FROM memory_mcp_sessions WHERE last_seen < $1 RETURNING id", before)
	if err != nil {
		return nil, pgErr(ctx, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, pgErr(ctx, err)
}
