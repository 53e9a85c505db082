package vfs

// An Option changes how a store is opened.
type Option func(*options)

type options struct {
	readOnly bool
	history  *HistoryConfig
	noWAL    bool
}

// ReadOnly opens a store that refuses every change and writes nothing into the storage:
// no lock file is created (an existing one is still used to stay out of writers' way), and
// no access is recorded.
func ReadOnly() Option { return func(o *options) { o.readOnly = true } }

// FlushEachChange turns the write-ahead log off: every change flushes its own files, as
// on systems without the log (see wal.go). Benchmarks compare the two ways.
func FlushEachChange() Option { return func(o *options) { o.noWAL = true } }

// WithHistory sets how much history the store keeps (DefaultHistory unless given; Off keeps
// none).
func WithHistory(cfg HistoryConfig) Option { return func(o *options) { o.history = &cfg } }

// historyConfig is the history the options ask for: DefaultHistory unless given, nil when
// off.
func (o options) historyConfig() *HistoryConfig {
	cfg := DefaultHistory
	if o.history != nil {
		cfg = *o.history
	}
	if cfg.Off {
		return nil
	}
	return &cfg
}

// StoreOptions is what a store's options ask for, as a backend reads them.
type StoreOptions struct {
	ReadOnly bool
	History  *HistoryConfig // nil: no history
	NoWAL    bool           // FlushEachChange
}

// ReadOptions says what opts ask for.
func ReadOptions(opts ...Option) StoreOptions {
	o := collect(opts)
	return StoreOptions{ReadOnly: o.readOnly, History: o.historyConfig(), NoWAL: o.noWAL}
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}
