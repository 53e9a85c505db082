package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL backend: a store is a set of rows in one database, which any number of
// memory-mcp processes (replicas on several machines) share. Every transaction of the
// Storage interface is one PostgreSQL transaction that first takes the store's
// transaction-scoped advisory lock (exclusive for a change, shared for a read), so changes to
// a store are serialised across replicas, reads see one consistent state, and the lock goes
// with a commit, a rollback or a dropped connection. A directory rename or delete is one
// statement; the store's size and history are updated in the same transaction.

//go:embed schema/*.sql
var pgSchema embed.FS

// lockClass is the first key of memory-mcp's advisory locks (the second is the store's id).
const lockClass = 0x6d6d // "mm"

// migrationLock is the advisory lock that serialises migrations of one database.
const migrationLock = 0x6d6d_0001

// Storage is the Storage of one store in a PostgreSQL database.
type Storage struct {
	db       *DB
	name     string
	id       int64 // set once, under mu (0: not found yet, see find)
	readOnly bool
	history  *vfs.HistoryConfig // nil when the store keeps no history

	mu        sync.Mutex
	gen       int64            // the store's generation as this value last knew it
	now       func() time.Time // access tracking's clock; nil when not tracked
	lastPrune time.Time        // when this value last pruned (zero: not yet)
	since     int              // versions recorded since the last prune
}

// Migrate brings the schema of the database of dsn up to date and returns its
// version (memory-mcp migrate).
func Migrate(ctx context.Context, dsn string) (int, error) {
	db, err := Open(ctx, dsn, false)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	v, err := migrate(ctx, db.pool)
	return v, pgErr(ctx, err)
}

// migrate brings the database's schema up to date, under an advisory lock so that replicas
// starting together take turns; it returns the schema version.
func migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS memory_mcp_schema (version int NOT NULL)"); err != nil {
		return 0, err
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM memory_mcp_schema").Scan(&version); err != nil {
		return 0, err
	}
	files, _ := fs.Glob(pgSchema, "schema/*.sql")
	slices.Sort(files)
	for _, f := range files {
		n, err := strconv.Atoi(strings.SplitN(path.Base(f), "_", 2)[0])
		if err != nil || n <= version {
			continue
		}
		sql, _ := pgSchema.ReadFile(f)
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return 0, fmt.Errorf("schema migration %s: %w", path.Base(f), err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO memory_mcp_schema (version) VALUES ($1)", n); err != nil {
			return 0, err
		}
		version = n
	}
	return version, tx.Commit(ctx)
}

// ReadOnly reports whether every change is refused.
func (s *Storage) ReadOnly() bool { return s.readOnly }

// Close does nothing: the database connection is its DB's, shared with the
// database's other stores, and closed with it.
func (s *Storage) Close() error { return nil }

// Changes returns a channel that receives when another transaction may have changed the
// store, in any process (the database's LISTEN/NOTIFY); stop ends it. Store.Watch uses it
// instead of polling.
func (s *Storage) Changes() (ch <-chan struct{}, stop func()) {
	s.mu.Lock()
	id := s.id // 0 (woken by every store's change) while the database has not been reached
	s.mu.Unlock()
	return s.db.watch(id)
}

// TrackAccess records when each file is viewed or changed, by the clock now.
func (s *Storage) TrackAccess(now func() time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
	return nil
}

// Begin starts a transaction on a connection of the pool and takes the store's lock.
func (s *Storage) Begin(ctx context.Context, write bool) (vfs.Txn, error) {
	if write && s.readOnly {
		return nil, vfs.ErrReadOnlyStore
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.find(ctx); err != nil {
		return nil, err
	}
	tx, err := s.db.pool.Begin(ctx)
	if err != nil {
		return nil, pgErr(ctx, err)
	}
	lock := "SELECT pg_advisory_xact_lock_shared($1, $2)"
	if write {
		lock = "SELECT pg_advisory_xact_lock($1, $2)"
	}
	t := &pgTx{s: s, tx: tx, write: write, ctx: ctx}
	var gen int64
	_, err = tx.Exec(ctx, lock, lockClass, int32(s.id))
	if err == nil {
		err = tx.QueryRow(ctx, "SELECT generation FROM memory_mcp_stores WHERE id = $1", s.id).Scan(&gen)
	}
	if err != nil {
		tx.Rollback(context.Background())
		return nil, pgErr(ctx, err)
	}
	s.mu.Lock()
	t.external = gen != s.gen
	s.gen = gen
	t.now = s.now
	s.mu.Unlock()
	if s.history != nil {
		t.hist = &pgHistory{tx: t, cfg: *s.history}
	}
	return t, nil
}

// pgTx is one transaction of a Storage.
type pgTx struct {
	s        *Storage
	tx       pgx.Tx
	write    bool
	changed  bool
	external bool
	done     bool
	gen      int64            // the generation this transaction's change gives the store
	xid      int64            // its transaction id (txid_current), once it changes the store
	ctx      context.Context  // Begin's: a commit, too, ends with the call
	now      func() time.Time // access tracking's clock, nil when not tracked
	accessed []string         // files a read transaction viewed, recorded at commit
	hist     *pgHistory
}

// External reports whether another transaction, of this process or another, changed the
// store since this storage value's previous transaction.
func (t *pgTx) External() bool { return t.external }

// History returns the store's history, nil when it keeps none.
func (t *pgTx) History() vfs.History {
	if t.hist == nil {
		return nil
	}
	return t.hist
}

// Commit records the views of a read transaction, prunes the history when due, and
// commits, within the call's time. When the connection is lost during the commit, or the
// call's time ends in it, the change may have landed all the same: the database is asked,
// within the call's time or, once that has ended, within commitGrace. A change that landed
// is answered as made, however late.
func (t *pgTx) Commit() error {
	if t.done {
		return nil
	}
	t.done = true
	ctx := t.ctx
	if len(t.accessed) > 0 && t.now != nil {
		if _, err := t.tx.Exec(ctx, "UPDATE memory_mcp_entries SET accessed = $3 WHERE store = $1 AND path = ANY($2)", t.s.id, t.accessed, t.now().Unix()); err != nil {
			t.rollback()
			return pgErr(ctx, err)
		}
	}
	if t.hist != nil && t.hist.seq != 0 {
		if err := t.hist.pruneIfDue(ctx); err != nil {
			t.rollback()
			return pgErr(ctx, err)
		}
	}
	if t.changed {
		// This value's own change is no news to it. Set before the commit: no other
		// transaction can read the new generation until then (this one holds the store's
		// lock), and a failed commit costs at most one needless rescan later.
		t.s.mu.Lock()
		t.s.gen = t.gen
		t.s.mu.Unlock()
	}
	err := t.tx.Commit(ctx)
	if err != nil && t.xid != 0 && (ctx.Err() != nil || unreachable(err)) {
		ask := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			ask, cancel = context.WithTimeout(context.WithoutCancel(ctx), commitGrace)
			defer cancel()
		}
		if t.s.db.committed(ask, t.xid) {
			return nil
		}
	}
	return pgErr(ctx, err)
}

// commitGrace bounds how long a call whose time ended during its commit waits to learn
// whether the commit landed, rather than report a change that was made as failed.
const commitGrace = 5 * time.Second

// Rollback undoes the transaction.
func (t *pgTx) Rollback() error {
	if t.done {
		return nil
	}
	t.done = true
	t.rollback()
	return nil
}

// rollback ends the transaction without its changes; a connection that does not answer
// within the time is closed, which ends the transaction in the database too.
func (t *pgTx) rollback() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.tx.Rollback(ctx)
}

// beforeChange marks the transaction as changing the store: its generation goes up, and
// every process listening hears of it when the transaction commits (NOTIFY is delivered
// at commit, and not at all after a rollback).
func (t *pgTx) beforeChange(ctx context.Context) error {
	if !t.write {
		return vfs.ErrReadOnlyTx
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.changed {
		return nil
	}
	t.changed = true
	err := t.tx.QueryRow(ctx, "UPDATE memory_mcp_stores SET generation = generation + 1 WHERE id = $1 RETURNING generation, pg_notify('"+changeChannel+"', id::text), txid_current()", t.s.id).Scan(&t.gen, nil, &t.xid)
	return pgErr(ctx, err)
}

// touch records that the file name was viewed or changed now.
func (t *pgTx) touch(ctx context.Context, name string) error {
	if t.now == nil {
		return nil
	}
	if !t.write {
		t.accessed = append(t.accessed, name)
		return nil
	}
	_, err := t.tx.Exec(ctx, "UPDATE memory_mcp_entries SET accessed = $3 WHERE store = $1 AND path = $2", t.s.id, name, t.now().Unix())
	return pgErr(ctx, err)
}

func notExist(op string, p vfs.Path) error {
	return &fs.PathError{Op: op, Path: p.String(), Err: fs.ErrNotExist}
}

// errIsDir is reading a directory as a file.
var errIsDir = errors.New("is a directory")

// entry returns the row at p: whether it exists, is a directory, and its size.
func (t *pgTx) entry(ctx context.Context, name string) (exists, dir bool, size int64, err error) {
	if name == "" {
		return true, true, 0, ctx.Err()
	}
	err = t.tx.QueryRow(ctx, "SELECT dir, size FROM memory_mcp_entries WHERE store = $1 AND path = $2", t.s.id, name).Scan(&dir, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, 0, nil
	}
	return err == nil, dir, size, pgErr(ctx, err)
}

// Stat describes the entry at p.
func (t *pgTx) Stat(ctx context.Context, p vfs.Path) (vfs.Entry, error) {
	exists, dir, size, err := t.entry(ctx, p.Name())
	switch {
	case err != nil:
		return vfs.Entry{}, err
	case !exists:
		return vfs.Entry{}, notExist("stat", p)
	case dir:
		return vfs.Entry{Name: p.Base(), Kind: vfs.KindDir}, nil
	}
	return vfs.Entry{Name: p.Base(), Kind: vfs.KindFile, Size: size}, nil
}

// ReadFile returns the content of the file at p.
func (t *pgTx) ReadFile(ctx context.Context, p vfs.Path) ([]byte, error) {
	if p.IsRoot() {
		return nil, &fs.PathError{Op: "read", Path: p.String(), Err: errIsDir}
	}
	var dir bool
	var data []byte
	err := t.tx.QueryRow(ctx, "SELECT dir, content FROM memory_mcp_entries WHERE store = $1 AND path = $2", t.s.id, p.Name()).Scan(&dir, &data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, notExist("read", p)
	case err != nil:
		return nil, pgErr(ctx, err)
	case dir:
		return nil, &fs.PathError{Op: "read", Path: p.String(), Err: errIsDir}
	}
	if data == nil {
		data = []byte{}
	}
	return data, t.touch(ctx, p.Name())
}

// List returns the entries of the directory at p, sorted by name in byte order.
func (t *pgTx) List(ctx context.Context, p vfs.Path) ([]vfs.Entry, error) {
	exists, dir, _, err := t.entry(ctx, p.Name())
	switch {
	case err != nil:
		return nil, err
	case !exists:
		return nil, notExist("list", p)
	case !dir:
		return nil, &fs.PathError{Op: "list", Path: p.String(), Err: syscall.ENOTDIR}
	}
	rows, err := t.tx.Query(ctx, "SELECT name, dir, size FROM memory_mcp_entries WHERE store = $1 AND parent = $2 ORDER BY name", t.s.id, p.Name())
	if err != nil {
		return nil, pgErr(ctx, err)
	}
	out := []vfs.Entry{}
	for rows.Next() {
		var e vfs.Entry
		var isDir bool
		if err := rows.Scan(&e.Name, &isDir, &e.Size); err != nil {
			rows.Close()
			return nil, err
		}
		if isDir {
			e.Kind, e.Size = vfs.KindDir, 0
		}
		out = append(out, e)
	}
	return out, pgErr(ctx, rows.Err())
}

// below is the condition selecting the rows at and below storage name $2 ("" is the root:
// every row). Names compare in byte order: everything below "a" lies in ["a/", "a0").
const below = "store = $1 AND ($2 = '' OR path = $2 OR (path >= $2 || '/' AND path < $2 || '0'))"

// Tree describes the directory at p down to depth levels, with the sizes of every
// directory at any depth; what skip names is neither listed nor counted.
func (t *pgTx) Tree(ctx context.Context, p vfs.Path, depth int, skip func(name string) bool) (vfs.Node, error) {
	exists, dir, _, err := t.entry(ctx, p.Name())
	switch {
	case err != nil:
		return vfs.Node{}, err
	case !exists:
		return vfs.Node{}, notExist("tree", p)
	case !dir:
		return vfs.Node{}, &fs.PathError{Op: "tree", Path: p.String(), Err: syscall.ENOTDIR}
	}
	rows, err := t.tx.Query(ctx, "SELECT path, dir, size FROM memory_mcp_entries WHERE "+below+" ORDER BY path", t.s.id, p.Name())
	if err != nil {
		return vfs.Node{}, pgErr(ctx, err)
	}
	// One node per row, skipped ones left out (with everything below them), linked to
	// their parents.
	type treeNode struct {
		vfs.Node
		kids []*treeNode
	}
	root := &treeNode{Node: vfs.Node{Name: p.Base(), Dir: true}}
	nodes := map[string]*treeNode{"": root}
	prefix := p.Name()
	for rows.Next() {
		var name string
		var n treeNode
		if err := rows.Scan(&name, &n.Dir, &n.Size); err != nil {
			rows.Close()
			return vfs.Node{}, err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(name, prefix), "/")
		if name == prefix || slices.ContainsFunc(strings.Split(rel, "/"), skip) {
			continue
		}
		n.Name = path.Base(rel)
		nodes[rel] = &n
	}
	if err := rows.Err(); err != nil {
		return vfs.Node{}, pgErr(ctx, err)
	}
	for rel, n := range nodes {
		if rel == "" {
			continue
		}
		parent := path.Dir(rel)
		if parent == "." {
			parent = ""
		}
		if up := nodes[parent]; up != nil {
			up.kids = append(up.kids, n)
		}
	}
	// A directory's size is its files' below it, at any depth; its children are listed
	// down to depth.
	var build func(n *treeNode, level int) vfs.Node
	build = func(n *treeNode, level int) vfs.Node {
		out := n.Node
		if !n.Dir {
			return out
		}
		out.Size = 0
		slices.SortFunc(n.kids, func(a, b *treeNode) int { return strings.Compare(a.Name, b.Name) })
		for _, k := range n.kids {
			c := build(k, level+1)
			out.Size += c.Size
			if level < depth {
				out.Children = append(out.Children, c)
			}
		}
		return out
	}
	return build(root, 0), nil
}

// Usage returns the bytes of all files of the store.
func (t *pgTx) Usage(ctx context.Context) (int64, error) {
	var n int64
	err := t.tx.QueryRow(ctx, "SELECT usage FROM memory_mcp_stores WHERE id = $1", t.s.id).Scan(&n)
	return n, pgErr(ctx, err)
}

func (t *pgTx) addUsage(ctx context.Context, delta int64) error {
	if delta == 0 {
		return nil
	}
	_, err := t.tx.Exec(ctx, "UPDATE memory_mcp_stores SET usage = usage + $2 WHERE id = $1", t.s.id, delta)
	return pgErr(ctx, err)
}

// LastAccess returns when each file was last viewed or changed; a file without a record
// starts one now.
func (t *pgTx) LastAccess(ctx context.Context) (map[string]int64, error) {
	if t.now == nil {
		return nil, vfs.ErrNotTracked
	}
	now := t.now().Unix()
	if t.write {
		if _, err := t.tx.Exec(ctx, "UPDATE memory_mcp_entries SET accessed = $2 WHERE store = $1 AND NOT dir AND accessed IS NULL", t.s.id, now); err != nil {
			return nil, pgErr(ctx, err)
		}
	}
	rows, err := t.tx.Query(ctx, "SELECT path, coalesce(accessed, $2) FROM memory_mcp_entries WHERE store = $1 AND NOT dir", t.s.id, now)
	if err != nil {
		return nil, pgErr(ctx, err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var at int64
		if err := rows.Scan(&name, &at); err != nil {
			rows.Close()
			return nil, err
		}
		out[name] = at
	}
	return out, pgErr(ctx, rows.Err())
}

// WriteFile replaces the content of the file at p.
func (t *pgTx) WriteFile(ctx context.Context, p vfs.Path, data []byte) error {
	if err := t.beforeChange(ctx); err != nil {
		return err
	}
	exists, dir, old, err := t.entry(ctx, p.Name())
	switch {
	case err != nil:
		return err
	case !exists:
		return notExist("write", p)
	case dir:
		return &fs.PathError{Op: "write", Path: p.String(), Err: errIsDir}
	}
	if _, err := t.tx.Exec(ctx, "UPDATE memory_mcp_entries SET content = $3, size = $4 WHERE store = $1 AND path = $2", t.s.id, p.Name(), data, len(data)); err != nil {
		return pgErr(ctx, err)
	}
	if err := t.addUsage(ctx, int64(len(data))-old); err != nil {
		return err
	}
	return t.touch(ctx, p.Name())
}

// mkdirParents creates the missing directories above p; a file on the way is an error.
func (t *pgTx) mkdirParents(ctx context.Context, p vfs.Path) error {
	var chain []vfs.Path
	for q := p.Parent(); !q.IsRoot(); q = q.Parent() {
		chain = append(chain, q)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		q := chain[i]
		exists, dir, _, err := t.entry(ctx, q.Name())
		switch {
		case err != nil:
			return err
		case exists && !dir:
			return &fs.PathError{Op: "mkdir", Path: q.String(), Err: syscall.ENOTDIR}
		case exists:
			continue
		}
		if _, err := t.tx.Exec(ctx, "INSERT INTO memory_mcp_entries (store, path, parent, name, dir) VALUES ($1, $2, $3, $4, true)",
			t.s.id, q.Name(), q.Parent().Name(), q.Base()); err != nil {
			return pgErr(ctx, err)
		}
	}
	return nil
}

// CreateFile creates the file at p and its missing parents; it never replaces anything.
func (t *pgTx) CreateFile(ctx context.Context, p vfs.Path, data []byte) error {
	if err := t.beforeChange(ctx); err != nil {
		return err
	}
	if exists, _, _, err := t.entry(ctx, p.Name()); err != nil || exists {
		if err == nil {
			err = &fs.PathError{Op: "create", Path: p.String(), Err: fs.ErrExist}
		}
		return err
	}
	if err := t.mkdirParents(ctx, p); err != nil {
		return err
	}
	if data == nil {
		data = []byte{}
	}
	if _, err := t.tx.Exec(ctx, "INSERT INTO memory_mcp_entries (store, path, parent, name, dir, size, content) VALUES ($1, $2, $3, $4, false, $5, $6)",
		t.s.id, p.Name(), p.Parent().Name(), p.Base(), len(data), data); err != nil {
		return pgErr(ctx, err)
	}
	if err := t.addUsage(ctx, int64(len(data))); err != nil {
		return err
	}
	return t.touch(ctx, p.Name())
}

// Rename moves the entry at oldp, with everything below it, to newp in one statement; it
// never replaces anything.
func (t *pgTx) Rename(ctx context.Context, oldp, newp vfs.Path) error {
	if err := t.beforeChange(ctx); err != nil {
		return err
	}
	exists, _, _, err := t.entry(ctx, oldp.Name())
	switch {
	case err != nil:
		return err
	case !exists || oldp.IsRoot():
		return notExist("rename", oldp)
	}
	if exists, _, _, err := t.entry(ctx, newp.Name()); err != nil || exists {
		if err == nil {
			err = &fs.PathError{Op: "rename", Path: newp.String(), Err: fs.ErrExist}
		}
		return err
	}
	if oldp.Contains(newp) {
		return &fs.PathError{Op: "rename", Path: newp.String(), Err: syscall.EINVAL}
	}
	if err := t.mkdirParents(ctx, newp); err != nil {
		return err
	}
	o, n := oldp.Name(), newp.Name()
	if _, err := t.tx.Exec(ctx, `UPDATE memory_mcp_entries SET
		path = $3 || substr(path, length($2) + 1),
		parent = CASE WHEN path = $2 THEN $4 ELSE $3 || substr(parent, length($2) + 1) END,
		name = CASE WHEN path = $2 THEN $5 ELSE name END
		WHERE `+below, t.s.id, o, n, newp.Parent().Name(), newp.Base()); err != nil {
		return pgErr(ctx, err)
	}
	if t.now != nil {
		if _, err := t.tx.Exec(ctx, "UPDATE memory_mcp_entries SET accessed = $3 WHERE "+below+" AND NOT dir", t.s.id, n, t.now().Unix()); err != nil {
			return pgErr(ctx, err)
		}
	}
	return nil
}

// RemoveAll deletes the entry at p with everything below it, in one statement.
func (t *pgTx) RemoveAll(ctx context.Context, p vfs.Path) error {
	if err := t.beforeChange(ctx); err != nil {
		return err
	}
	if p.IsRoot() {
		return &fs.PathError{Op: "remove", Path: p.String(), Err: syscall.EINVAL}
	}
	var n, size int64
	if err := t.tx.QueryRow(ctx, `WITH gone AS (DELETE FROM memory_mcp_entries WHERE `+below+` RETURNING size)
		SELECT count(*), coalesce(sum(size), 0) FROM gone`, t.s.id, p.Name()).Scan(&n, &size); err != nil {
		return pgErr(ctx, err)
	}
	if n == 0 {
		return notExist("remove", p)
	}
	return t.addUsage(ctx, -size)
}

// RemoveDir deletes the directory at p if it is empty.
func (t *pgTx) RemoveDir(ctx context.Context, p vfs.Path) error {
	if err := t.beforeChange(ctx); err != nil {
		return err
	}
	exists, dir, _, err := t.entry(ctx, p.Name())
	switch {
	case err != nil:
		return err
	case !exists || p.IsRoot():
		return notExist("remove", p)
	case !dir:
		return &fs.PathError{Op: "remove", Path: p.String(), Err: syscall.ENOTDIR}
	}
	var children int
	if err := t.tx.QueryRow(ctx, "SELECT count(*) FROM memory_mcp_entries WHERE store = $1 AND parent = $2", t.s.id, p.Name()).Scan(&children); err != nil {
		return pgErr(ctx, err)
	}
	if children > 0 {
		return &fs.PathError{Op: "remove", Path: p.String(), Err: syscall.ENOTEMPTY}
	}
	_, err = t.tx.Exec(ctx, "DELETE FROM memory_mcp_entries WHERE store = $1 AND path = $2", t.s.id, p.Name())
	return pgErr(ctx, err)
}

var (
	_ vfs.Storage = (*Storage)(nil)
	_ vfs.Txn     = (*pgTx)(nil)
)
