package vfs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Store is the memory directory: transactions on a Storage, and the change feed that
// reports what each committed transaction changed. Every access goes through a transaction:
// View for reads, Update (or Apply) for changes.
type Store struct {
	st   Storage
	feed feed
	now  func() time.Time // the clock of TrackAccess, for Expire
}

// NewStore returns the store over st.
func NewStore(st Storage) *Store { return &Store{st: st} }

// Storage returns the storage behind the store.
func (s *Store) Storage() Storage { return s.st }

// FoldsCase reports whether the storage ignores case in names, as a directory on macOS or
// Windows usually does (see caseFolder).
func (s *Store) FoldsCase() bool {
	f, ok := s.st.(interface{ FoldsCase() bool })
	return ok && f.FoldsCase()
}

// ReadOnly reports whether the store refuses every change.
func (s *Store) ReadOnly() bool { return s.st.ReadOnly() }

// Close releases the storage.
func (s *Store) Close() error { return s.st.Close() }

// TrackAccess makes the store record when each file is viewed or changed, for Expire; now is
// the clock (time.Now, or a fake one in tests). Every process that serves or edits the
// storage should track, so that Expire counts all uses. A read-only store records nothing.
func (s *Store) TrackAccess(now func() time.Time) error {
	if s.st.ReadOnly() {
		return nil
	}
	s.now = now
	return s.st.TrackAccess(now)
}

// View runs fn with read access to the store. It waits for the lock at most until ctx is
// done, and then fails with ctx's error; fn should give up when ctx is done, too (Tree does).
func (s *Store) View(ctx context.Context, fn func(*Tx) error) error {
	t, err := s.st.Begin(ctx, false)
	if err != nil {
		return err
	}
	ended := false
	defer func() {
		if !ended {
			t.Rollback() // fn panicked; the caller recovers
		}
	}()
	if t.External() {
		s.feed.external()
	}
	err = fn(&Tx{t: t, ctx: ctx, hist: t.History()})
	ended = true
	if err != nil {
		t.Rollback()
		if derr := durable(t); derr != nil {
			return errors.Join(err, derr)
		}
		return err
	}
	if err := t.Commit(); err != nil {
		return err
	}
	return durable(t)
}

// Update runs fn with exclusive access to the store: no other transaction of this process,
// nor of any other process serving the same storage, runs at the same time.
func (s *Store) Update(ctx context.Context, fn func(*Tx) error) error {
	_, err := s.Apply(ctx, "", fn)
	return err
}

// Apply is Update that also returns what the transaction changed: the batch the change
// feed's subscribers get (nil when fn failed). The actor comes from ctx (WithActor);
// command names what makes the changes, as a label (see Label), "update" when empty.
func (s *Store) Apply(ctx context.Context, command string, fn func(*Tx) error) (b *Batch, err error) {
	if command = Label(command); command == "" {
		command = "update"
	}
	t, err := s.st.Begin(ctx, true)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			t.Rollback() // also after a panic in fn, which the caller recovers
		}
	}()
	if t.External() {
		s.feed.external()
	}
	tx := &Tx{t: t, ctx: ctx, write: true, hist: t.History(), actor: ActorOf(ctx), command: command}
	// Digests are computed only when someone needs them: the history, or a subscriber.
	tx.digests = tx.hist != nil || s.feed.n.Load() > 0
	tx.changes = tx.first[:0]
	if err := fn(tx); err != nil {
		s.feed.mu.Lock()
		committed = true
		if errors.Is(t.Rollback(), ErrChangesKept) && len(tx.changes) > 0 {
			// What the transaction changed before it failed stays: subscribers hear of it.
			s.feed.publishLocked(&Batch{Actor: tx.actor, Command: command, Version: tx.version(), Changes: tx.changes})
		}
		s.feed.mu.Unlock()
		if derr := durable(t); derr != nil {
			return nil, errors.Join(err, derr)
		}
		return nil, err
	}
	if len(tx.changes) > 0 {
		b = &tx.batch // part of tx, which is on the heap already: no allocation of its own
		*b = Batch{Actor: tx.actor, Command: command, Version: tx.version(), Changes: tx.changes}
	}
	// Subscribers get batches in the order of their commits: the next writer cannot commit
	// before this batch is out, since it publishes under the same mutex (and a publication
	// never waits for a subscriber).
	s.feed.mu.Lock()
	committed = true
	if err := t.Commit(); err != nil {
		s.feed.mu.Unlock()
		return nil, err
	}
	if b != nil {
		s.feed.publishLocked(b)
	}
	s.feed.mu.Unlock()
	// Outside every lock: the flush that makes the change durable is shared with the
	// transactions that end meanwhile. Subscribers may hear of the change a moment before
	// it is durable; the caller is answered after.
	if err := durable(t); err != nil {
		return nil, err
	}
	return b, nil
}

// Watch notices changes made by other processes while this one is idle, until ctx is
// done, so that subscribers hear of them without waiting for this process's next call. (A
// transaction notices them anyway.) Storage that announces its changes (PostgreSQL's
// LISTEN/NOTIFY) is checked when it says so, and every 20 intervals besides; other storage
// every interval.
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	var changes <-chan struct{}
	if a, ok := s.st.(announcer); ok {
		ch, stop := a.Changes()
		defer stop()
		changes, interval = ch, 20*interval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-t.C:
		}
		s.View(ctx, func(*Tx) error { return nil })
	}
}

// Claim reports whether this process should run task (such as "expiry") on the store
// now. Storage shared by replicas (PostgreSQL) lets one process win within every period;
// on other storage the process runs it (processes on one directory take turns through the
// storage lock, and the second finds nothing left to do).
func (s *Store) Claim(ctx context.Context, task string, every time.Duration) (bool, error) {
	if c, ok := s.st.(claimer); ok {
		return c.Claim(ctx, task, every)
	}
	return true, nil
}

type claimer interface {
	Claim(ctx context.Context, task string, every time.Duration) (bool, error)
}

// announcer is storage that tells when another transaction may have changed it.
type announcer interface {
	Changes() (ch <-chan struct{}, stop func())
}

// feed hands each committed batch to the subscribers.
type feed struct {
	mu   sync.Mutex // orders publications (see Apply) and guards the fields below
	seq  uint64
	subs []*Subscription
	n    atomic.Int32 // len(subs), read without the lock
}

func (f *feed) external() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishLocked(&Batch{Actor: ActorExternal, External: true, Changes: []Change{{Kind: Changed, Path: Root}}})
}

// publishLocked numbers b and offers it to every subscriber without waiting: a subscriber
// whose buffer is full misses it (and can tell, from Missed).
func (f *feed) publishLocked(b *Batch) {
	f.seq++
	b.Seq = f.seq
	b.Time = time.Now()
	for _, sub := range f.subs {
		if sub.fn != nil {
			sub.fn(*b)
			continue
		}
		select {
		case sub.c <- *b:
		default:
			sub.missed.Add(1)
		}
	}
}

// KeepsHistory reports whether the store keeps a history of its changes (false also when
// the storage cannot be reached within ctx).
func (s *Store) KeepsHistory(ctx context.Context) bool {
	kept := false
	s.View(ctx, func(tx *Tx) error {
		kept = tx.hist != nil
		return nil
	})
	return kept
}
