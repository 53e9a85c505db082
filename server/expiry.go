package server

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// ExpiryTarget is one memory that expiry sweeps: the server's, or a tenant's.
type ExpiryTarget struct {
	Tenant string // "" for the server's own memory
	Store  *vfs.Store
}

// RunExpiry deletes files nobody viewed or changed for longer than maxAge (with dryRun it
// only logs what it would delete). It sweeps at once, then every maxAge/10 (at least a
// minute, at most an hour), and returns when ctx is done. Each expired entry is an audit
// line. Read-only stores are never swept; the others must track access.
func RunExpiry(ctx context.Context, targets func() []ExpiryTarget, maxAge time.Duration, dryRun bool, log zerolog.Logger) {
	interval := min(max(maxAge/10, time.Minute), time.Hour)
	sweep := func() {
		// A sweep that has begun finishes (a stop waits for it), within its own bound.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, t := range targets() {
			if t.Store.ReadOnly() {
				continue
			}
			l := log
			if t.Tenant != "" {
				l = log.With().Str("tenant", t.Tenant).Logger()
			}
			// Replicas sharing a database sweep a store one at a time: whoever claims it
			// first in this interval (a little less, so that the same replica's next
			// sweep is never turned away by its own claim).
			if mine, err := t.Store.Claim(sctx, "expiry", interval*9/10); err != nil || !mine {
				if err != nil {
					l.Error().Err(err).Msg("expiry sweep failed")
				}
				continue
			}
			expired, err := t.Store.Expire(sctx, maxAge, dryRun)
			if err != nil {
				l.Error().Err(err).Msg("expiry sweep failed")
			}
			outcome := "expired"
			if dryRun {
				outcome = "dry run: would expire"
			}
			for _, e := range expired {
				l.Info().Str("command", "expire").Str("path", e.Path).Int64("bytes_before", e.Size).
					Int64("bytes_after", 0).Str("outcome", outcome).Msg("audit")
			}
		}
	}
	sweep()
	sweeps := time.NewTicker(interval)
	defer sweeps.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweeps.C:
			sweep()
		}
	}
}
