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
// minute, at most an hour), writes the stores' access records every minute, and returns
// when ctx is done. Each expired entry is an audit line. The stores must track access.
func RunExpiry(ctx context.Context, targets []ExpiryTarget, maxAge time.Duration, dryRun bool, log zerolog.Logger) {
	sweep := func() {
		for _, t := range targets {
			l := log
			if t.Tenant != "" {
				l = log.With().Str("tenant", t.Tenant).Logger()
			}
			expired, err := t.Store.Expire(maxAge, dryRun)
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
	interval := min(max(maxAge/10, time.Minute), time.Hour)
	sweeps, flushes := time.NewTicker(interval), time.NewTicker(time.Minute)
	defer sweeps.Stop()
	defer flushes.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweeps.C:
			sweep()
		case <-flushes.C:
			for _, t := range targets {
				if err := t.Store.FlushAccess(); err != nil {
					log.Error().Err(err).Str("tenant", t.Tenant).Msg("cannot write the access record")
				}
			}
		}
	}
}
