package files

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// NewMemoryStore returns an empty store held in memory.
func NewMemoryStore(opts ...vfs.Option) *vfs.Store {
	return vfs.NewStore(NewAferoStorage(NewMemFs(), opts...))
}

// OpenOSStore opens (creating it, mode 0700, if needed) a host directory as the store. A
// read-only store's directory must exist.
func OpenOSStore(dir string, opts ...vfs.Option) (*vfs.Store, error) {
	o := vfs.ReadOptions(opts...)
	open := NewOSFs
	if o.ReadOnly {
		open = NewReadOnlyOSFs
	}
	osfs, err := open(dir)
	if err != nil {
		return nil, err
	}
	if d, ok := walFS(osfs); ok && !o.ReadOnly && walNeedsRecovery(osfs, d) {
		// The machine crashed with changes in the write-ahead log: recover them now, with
		// the history on whatever the options say, so that no reader sees the files
		// without them. Recovery prunes nothing: the store does, by its own limits.
		cfg := vfs.HistoryConfig{}
		if o.History != nil {
			cfg.Now = o.History.Now
		}
		rec := NewAferoStorage(osfs, vfs.WithHistory(cfg))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t, err := rec.Begin(ctx, true)
		if err == nil {
			if _, err = t.(*aferoTx).History().(*historyTx).writer(); err == nil {
				err = t.Commit()
			} else {
				t.Rollback()
			}
		}
		cancel()
		rec.Close() // the log's descriptor, should a flush have opened one
		if err != nil {
			osfs.Close()
			return nil, fmt.Errorf("recover the write-ahead log: %w", err)
		}
	}
	st := NewAferoStorage(osfs, opts...)
	st.closers = append(st.closers, osfs)
	return vfs.NewStore(st), nil
}

// OpenOverlayStore opens a copy-on-write store: lowerDir is read and never written; changes
// go to upperDir, or to memory when upperDir is "".
func OpenOverlayStore(lowerDir, upperDir string, opts ...vfs.Option) (*vfs.Store, error) {
	o := vfs.ReadOptions(opts...)
	lower, err := NewReadOnlyOSFs(lowerDir)
	if err != nil {
		return nil, err
	}
	var upper FS = NewMemFs()
	closers := []io.Closer{lower}
	if upperDir != "" {
		open := NewOSFs
		if o.ReadOnly {
			open = NewReadOnlyOSFs
		}
		u, err := open(upperDir)
		if err != nil {
			lower.Close()
			return nil, err
		}
		upper = u
		closers = append(closers, u)
	}
	ov, err := NewOverlayFs(lower, upper)
	if err != nil {
		for _, c := range closers {
			c.Close()
		}
		return nil, err
	}
	st := NewAferoStorage(ov, opts...)
	st.closers = closers
	return vfs.NewStore(st), nil
}
