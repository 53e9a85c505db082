package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"

	"github.com/jackc/pgx/v5"
)

// pgHistory is the history of a PostgreSQL store, in the transaction of the change: a version
// is a row written before the change's statements and removed if the change fails, so the
// files and their history commit together or not at all.
type pgHistory struct {
	tx  *pgTx
	cfg vfs.HistoryConfig
	seq uint64
	ids []int64 // the rows of the operation Record announced last
}

// Keep stores content under its digest unless it is there.
func (h *pgHistory) Keep(ctx context.Context, d vfs.Digest, data []byte) error {
	if d.IsZero() {
		return nil
	}
	if data == nil {
		data = []byte{}
	}
	tag, err := h.tx.tx.Exec(ctx, "INSERT INTO memory_mcp_contents (store, sha256, size, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
		h.tx.s.id, d[:], len(data), data)
	if err != nil {
		return pgErr(ctx, err)
	}
	if tag.RowsAffected() == 1 {
		_, err = h.tx.tx.Exec(ctx, "UPDATE memory_mcp_stores SET history_bytes = history_bytes + $2 WHERE id = $1", h.tx.s.id, len(data))
	}
	return pgErr(ctx, err)
}

// Record writes the versions of the next operation, under the transaction's number.
func (h *pgHistory) Record(ctx context.Context, vs []vfs.Version) error {
	if !h.tx.write {
		return vfs.ErrReadOnlyTx
	}
	if h.seq == 0 {
		var seq int64
		if err := h.tx.tx.QueryRow(ctx, "UPDATE memory_mcp_stores SET next_seq = next_seq + 1 WHERE id = $1 RETURNING next_seq - 1", h.tx.s.id).Scan(&seq); err != nil {
			return pgErr(ctx, err)
		}
		h.seq = uint64(seq)
	}
	now := h.cfg.Clock().UTC()
	h.ids = h.ids[:0]
	for i := range vs {
		v := &vs[i]
		v.Seq, v.Time = h.seq, now
		id, err := h.insert(ctx, v)
		if err != nil {
			return err
		}
		h.ids = append(h.ids, id)
	}
	h.tx.s.mu.Lock()
	h.tx.s.since += len(vs)
	h.tx.s.mu.Unlock()
	return nil
}

// insert writes one version as it is and returns its row's id.
func (h *pgHistory) insert(ctx context.Context, v *vfs.Version) (int64, error) {
	var redactedBy *string
	var redactedTime *time.Time
	var redactedNs int
	if v.Redacted != nil {
		redactedBy, redactedTime, redactedNs = &v.Redacted.By, &v.Redacted.Time, v.Redacted.Time.Nanosecond()%1000
	}
	var client []byte
	if v.Client != nil {
		client, _ = json.Marshal(v.Client)
	}
	var id int64
	err := h.tx.tx.QueryRow(ctx, `INSERT INTO memory_mcp_versions
		(store, seq, time, time_ns, actor, command, kind, path, new_path, size, sha256, prev_size, prev,
		redacted_by, redacted_time, redacted_ns, prev_redacted, client)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) RETURNING id`,
		h.tx.s.id, int64(v.Seq), v.Time, v.Time.Nanosecond()%1000, v.Actor, v.Command, string(v.Kind), v.Path, v.NewPath,
		v.Size, digestArg(v.SHA256), v.PrevSize, digestArg(v.Prev), redactedBy, redactedTime, redactedNs, v.PrevRedacted, client).Scan(&id)
	return id, pgErr(ctx, err)
}

// Import gives a store whose history is empty the versions vs, as they are (numbers, times
// and redactions included); the contents they name are Kept first.
func (h *pgHistory) Import(ctx context.Context, vs []vfs.Version, pruned uint64) error {
	if !h.tx.write {
		return vfs.ErrReadOnlyTx
	}
	var n int64
	if err := h.tx.tx.QueryRow(ctx, "SELECT count(*) FROM memory_mcp_versions WHERE store = $1", h.tx.s.id).Scan(&n); err != nil {
		return pgErr(ctx, err)
	}
	if n > 0 {
		return errors.New("vfs: history: import into a history that has versions")
	}
	var last uint64
	for i := range vs {
		if _, err := h.insert(ctx, &vs[i]); err != nil {
			return err
		}
		last = max(last, vs[i].Seq)
	}
	// The next number comes after the last version and after any pruned: the newest may have been.
	_, err := h.tx.tx.Exec(ctx, "UPDATE memory_mcp_stores SET next_seq = greatest(next_seq, $2), pruned = $3 WHERE id = $1", h.tx.s.id, int64(max(last, pruned))+1, int64(pruned))
	return pgErr(ctx, err)
}

// Settle removes the versions of an operation that failed. A failed statement changes
// nothing in PostgreSQL, so a Partial failure (a directory delete) changed nothing either.
func (h *pgHistory) Settle(ctx context.Context, outcome vfs.Outcome) error {
	ids := h.ids
	h.ids = nil
	if outcome == vfs.Succeeded || len(ids) == 0 {
		return nil
	}
	_, err := h.tx.tx.Exec(ctx, "DELETE FROM memory_mcp_versions WHERE store = $1 AND id = ANY($2)", h.tx.s.id, ids)
	return pgErr(ctx, err)
}

// Seq returns the transaction's number once it recorded a version.
func (h *pgHistory) Seq() uint64 { return h.seq }

// Versions returns every version, oldest first.
func (h *pgHistory) Versions(ctx context.Context) ([]vfs.Version, error) {
	vs, _, err := h.versions(ctx)
	return vs, err
}

// Pruned returns the highest number of a version pruning dropped.
func (h *pgHistory) Pruned(ctx context.Context) (uint64, error) {
	var n int64
	err := h.tx.tx.QueryRow(ctx, "SELECT pruned FROM memory_mcp_stores WHERE id = $1", h.tx.s.id).Scan(&n)
	return uint64(n), pgErr(ctx, err)
}

func (h *pgHistory) versions(ctx context.Context) ([]vfs.Version, []int64, error) {
	rows, err := h.tx.tx.Query(ctx, `SELECT id, seq, time, time_ns, actor, command, kind, path, new_path, size, sha256, prev_size, prev,
		redacted_by, redacted_time, redacted_ns, prev_redacted, client FROM memory_mcp_versions WHERE store = $1 ORDER BY seq, id`, h.tx.s.id)
	if err != nil {
		return nil, nil, pgErr(ctx, err)
	}
	defer rows.Close()
	var (
		vs  []vfs.Version
		ids []int64
	)
	for rows.Next() {
		var (
			v            vfs.Version
			id, seq      int64
			kind         string
			sum, prev    []byte
			redactedBy   *string
			redactedTime *time.Time
			ns, rns      int
			client       []byte
		)
		if err := rows.Scan(&id, &seq, &v.Time, &ns, &v.Actor, &v.Command, &kind, &v.Path, &v.NewPath, &v.Size, &sum, &v.PrevSize, &prev,
			&redactedBy, &redactedTime, &rns, &v.PrevRedacted, &client); err != nil {
			return nil, nil, err
		}
		if client != nil {
			v.Client = &vfs.Client{}
			if err := json.Unmarshal(client, v.Client); err != nil {
				return nil, nil, err
			}
		}
		v.Seq, v.Kind, v.Time = uint64(seq), vfs.ChangeKind(kind), v.Time.UTC().Add(time.Duration(ns))
		copy(v.SHA256[:], sum)
		copy(v.Prev[:], prev)
		if redactedBy != nil && redactedTime != nil {
			v.Redacted = &vfs.Redaction{By: *redactedBy, Time: redactedTime.UTC().Add(time.Duration(rns))}
		}
		vs = append(vs, v)
		ids = append(ids, id)
	}
	return vs, ids, pgErr(ctx, rows.Err())
}

// Content returns the content with digest d.
func (h *pgHistory) Content(ctx context.Context, d vfs.Digest) ([]byte, error) {
	var data []byte
	err := h.tx.tx.QueryRow(ctx, "SELECT data FROM memory_mcp_contents WHERE store = $1 AND sha256 = $2", h.tx.s.id, d[:]).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, vfs.ErrNoContent
	}
	if data == nil && err == nil {
		data = []byte{}
	}
	return data, pgErr(ctx, err)
}

// Redact purges the content with digest d and marks the versions that named it.
func (h *pgHistory) Redact(ctx context.Context, d vfs.Digest, by string) (int, error) {
	if !h.tx.write {
		return 0, vfs.ErrReadOnlyTx
	}
	r := vfs.Redaction{By: by, Time: h.cfg.Clock().UTC()}
	tag, err := h.tx.tx.Exec(ctx, "UPDATE memory_mcp_versions SET sha256 = NULL, redacted_by = $3, redacted_time = $4, redacted_ns = $5 WHERE store = $1 AND sha256 = $2",
		h.tx.s.id, d[:], r.By, r.Time, r.Time.Nanosecond()%1000)
	if err != nil {
		return 0, pgErr(ctx, err)
	}
	if _, err := h.tx.tx.Exec(ctx, "UPDATE memory_mcp_versions SET prev = NULL, prev_redacted = true WHERE store = $1 AND prev = $2", h.tx.s.id, d[:]); err != nil {
		return 0, pgErr(ctx, err)
	}
	if err := h.dropContents(ctx, "sha256 = $2", d[:]); err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// dropContents deletes the contents that cond selects ($1 is the store) and takes their
// bytes off the history's total.
func (h *pgHistory) dropContents(ctx context.Context, cond string, args ...any) error {
	_, err := h.tx.tx.Exec(ctx, `WITH gone AS (DELETE FROM memory_mcp_contents c WHERE c.store = $1 AND `+cond+` RETURNING size)
		UPDATE memory_mcp_stores SET history_bytes = history_bytes - (SELECT coalesce(sum(size), 0) FROM gone) WHERE id = $1`,
		append([]any{h.tx.s.id}, args...)...)
	return pgErr(ctx, err)
}

// pruneIfDue prunes the history by its limits when a pass is due
// (vfs.HistoryConfig.PruneDue), inside the change's transaction.
func (h *pgHistory) pruneIfDue(ctx context.Context) error {
	s := h.tx.s
	s.mu.Lock()
	last, since := s.lastPrune, s.since
	s.mu.Unlock()
	var bytes int64
	var oldest time.Time
	if !last.IsZero() && since >= vfs.PruneEvery/100 {
		var first *time.Time
		if err := h.tx.tx.QueryRow(ctx, `SELECT history_bytes, (SELECT min(time) FROM memory_mcp_versions WHERE store = $1)
			FROM memory_mcp_stores WHERE id = $1`, s.id).Scan(&bytes, &first); err != nil {
			return err
		}
		if first != nil {
			oldest = *first
		}
	}
	if !h.cfg.PruneDue(last, since, bytes, oldest) {
		return nil
	}
	vs, ids, err := h.versions(ctx)
	if err != nil {
		return err
	}
	kept, _, dropped := h.cfg.Prune(vs, h.cfg.Clock())
	if len(kept) < len(vs) {
		// Prune returns copies: match them back to their rows by what identifies a version.
		type key struct {
			seq           uint64
			path, newPath string
			kind          vfs.ChangeKind
		}
		want := map[key]int{}
		for _, v := range kept {
			want[key{v.Seq, v.Path, v.NewPath, v.Kind}]++
		}
		var drop []int64
		for i, v := range vs {
			k := key{v.Seq, v.Path, v.NewPath, v.Kind}
			if want[k] > 0 {
				want[k]--
				continue
			}
			drop = append(drop, ids[i])
		}
		if _, err := h.tx.tx.Exec(ctx, "DELETE FROM memory_mcp_versions WHERE store = $1 AND id = ANY($2)", s.id, drop); err != nil {
			return err
		}
		if _, err := h.tx.tx.Exec(ctx, "UPDATE memory_mcp_stores SET pruned = greatest(pruned, $2) WHERE id = $1", s.id, int64(dropped)); err != nil {
			return err
		}
		if err := h.dropContents(ctx, `NOT EXISTS (SELECT 1 FROM memory_mcp_versions v WHERE v.store = $1 AND (v.sha256 = c.sha256 OR v.prev = c.sha256))`); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.lastPrune, s.since = h.cfg.Clock(), 0
	s.mu.Unlock()
	return nil
}

// digestArg is a digest as a column value: NULL for none.
func digestArg(d vfs.Digest) any {
	if d.IsZero() {
		return nil
	}
	return d[:]
}
