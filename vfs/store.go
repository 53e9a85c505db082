package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime/debug"
	"slices"
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

	// Prepare's work in the background, which Close cancels and waits for.
	prepMu   sync.Mutex
	prepping sync.WaitGroup
	stopPrep []context.CancelFunc
	closing  bool
}

// NewStore returns the store over st.
func NewStore(st Storage) *Store { return &Store{st: st} }

// Storage returns the storage behind the store.
func (s *Store) Storage() Storage { return s.st }

// ReadOnly reports whether the store refuses every change.
func (s *Store) ReadOnly() bool { return s.st.ReadOnly() }

// Close releases the storage, once what Prepare started is over.
func (s *Store) Close() error {
	s.prepMu.Lock()
	s.closing = true
	for _, stop := range s.stopPrep {
		stop()
	}
	s.stopPrep = nil
	s.prepMu.Unlock()
	s.prepping.Wait()
	return s.st.Close()
}

// Prepare sets up in the background what the storage's first change would otherwise set
// up on its way, so that the first change a client makes does not wait for it: for the os
// backend with the write-ahead log, the history's directories, the log written in advance
// and made durable, and its flush (see walState.ready). It writes nothing a change would
// not write, changes no file of the memory, and returns at once; a change that comes
// meanwhile waits for the part it needs. Storage with nothing to prepare, and a read-only
// store, do nothing. A failure is dropped: the first change meets it again and reports it.
//
// A server calls it once the store is open; a command that makes one change and exits
// has nothing to gain. done, if not nil, is called when the work is over, with its error
// (nil also when there was nothing to do; the context's error when Close cut it short).
func (s *Store) Prepare(done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	p, ok := s.st.(preparer)
	if !ok || s.st.ReadOnly() {
		done(nil)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.prepMu.Lock()
	if s.closing {
		s.prepMu.Unlock()
		cancel()
		done(context.Canceled)
		return
	}
	s.stopPrep = append(s.stopPrep, cancel)
	s.prepping.Add(1)
	s.prepMu.Unlock()
	go func() {
		defer s.prepping.Done()
		defer cancel()
		// A server with many tenants prepares their stores a few at a time.
		select {
		case prepSlots <- struct{}{}:
		case <-ctx.Done():
			done(ctx.Err())
			return
		}
		err := func() (err error) {
			defer func() {
				// Nothing waits for this goroutine's panic to be recovered: it would end the
				// server. The first change meets the same state and reports it.
				if r := recover(); r != nil {
					err = fmt.Errorf("panic while preparing the store: %v\n%s", r, debug.Stack())
				}
			}()
			return p.Prepare(ctx)
		}()
		<-prepSlots
		done(err)
	}()
}

// prepSlots bounds the stores a process prepares at once.
var prepSlots = make(chan struct{}, 2)

// preparer is storage that has something to set up before its first change (see Prepare).
type preparer interface {
	Prepare(ctx context.Context) error
}

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
// feed's subscribers get (nil when fn failed). The actor and command come from ctx
// (WithActor); command names what makes them.
func (s *Store) Apply(ctx context.Context, command string, fn func(*Tx) error) (b *Batch, err error) {
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

// Tx is one transaction of a Store, as the commands use it: the storage's transaction, bound
// to the call's context, recording what it changes for the feed. Its methods take
// validated virtual paths.
type Tx struct {
	t       Txn
	ctx     context.Context
	write   bool
	digests bool // compute the changes' digests (someone subscribes)
	changes []Change
	first   [1]Change // most transactions change one file: no allocation for it
	batch   Batch

	hist           History // nil when the store keeps no history
	actor, command string  // who and what makes the changes, for their versions

	// The file this transaction read last, whose digest a change of it needs (str_replace
	// and insert read the file they then write).
	readPath string
	readData []byte
}

// Stat describes the entry at p without following a final symbolic link. A symbolic link
// anywhere on the way that leads outside the storage gives ErrEscape; so does a final link
// that points outside. A path that runs through a file reports IsNotExist.
func (tx *Tx) Stat(p Path) (Entry, error) { return tx.t.Stat(tx.ctx, p) }

// ReadFile returns the content of the file at p.
func (tx *Tx) ReadFile(p Path) ([]byte, error) {
	data, err := tx.t.ReadFile(tx.ctx, p)
	if err == nil && tx.write {
		tx.readPath, tx.readData = p.clean, data
	}
	return data, err
}

// Open returns a reader of the regular file at p, valid until the transaction ends: the
// file read in pieces where the storage can (a file on disk may be larger than anything
// the server should hold), else its content read whole.
func (tx *Tx) Open(p Path) (io.ReadCloser, error) {
	if o, ok := tx.t.(interface {
		OpenFile(context.Context, Path) (io.ReadCloser, error)
	}); ok {
		return o.OpenFile(tx.ctx, p)
	}
	data, err := tx.t.ReadFile(tx.ctx, p)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// List returns the entries of the directory at p, sorted by name in byte order, without
// the server's bookkeeping files, described without following links.
func (tx *Tx) List(p Path) ([]Entry, error) { return tx.t.List(tx.ctx, p) }

// Tree describes the directory at p and everything below it: its entries down to depth
// levels (1: the children only), and the total size of every directory at any depth. An
// entry for which skip reports true is neither listed nor counted, nor descended into;
// symbolic links and special files never are. It gives up when the call's context is done.
func (tx *Tx) Tree(p Path, depth int, skip func(name string) bool) (Node, error) {
	return tx.t.Tree(tx.ctx, p, depth, skip)
}

// Usage returns the bytes of all files at virtual paths (hidden files included, the
// server's bookkeeping not).
func (tx *Tx) Usage() (int64, error) { return tx.t.Usage(tx.ctx) }

// WriteFile replaces the content of the existing file at p, atomically: a crash leaves the
// old or the new content, never a mix.
func (tx *Tx) WriteFile(p Path, data []byte) error {
	before, err := tx.state(p)
	if err != nil {
		return err
	}
	c := Change{Kind: Modified, Path: p.clean, SizeBefore: before.size, SHA256Before: before.sum, SizeAfter: int64(len(data))}
	if tx.digests {
		c.SHA256After = DigestOf(data)
	}
	if tx.hist != nil {
		if err := tx.hist.Keep(tx.ctx, c.SHA256After, data); err != nil {
			return err
		}
		v := Version{Kind: Modified, Path: p.clean, Size: c.SizeAfter, SHA256: c.SHA256After, PrevSize: before.size, Prev: before.sum}
		if err := tx.record(v); err != nil {
			return err
		}
	}
	if err := tx.settle(tx.t.WriteFile(tx.ctx, p, data)); err != nil {
		return err
	}
	tx.readPath, tx.readData = "", nil
	tx.changes = append(tx.changes, c)
	return nil
}

// CreateFile creates a new file at p with data as its content, creating missing parent
// directories; it fails with fs.ErrExist if p exists, and never replaces anything.
func (tx *Tx) CreateFile(p Path, data []byte) error {
	c := Change{Kind: Created, Path: p.clean, SizeAfter: int64(len(data))}
	if tx.digests {
		c.SHA256After = DigestOf(data)
	}
	if tx.hist != nil {
		if err := tx.hist.Keep(tx.ctx, c.SHA256After, data); err != nil {
			return err
		}
		if err := tx.record(Version{Kind: Created, Path: p.clean, Size: c.SizeAfter, SHA256: c.SHA256After}); err != nil {
			return err
		}
	}
	if err := tx.settle(tx.t.CreateFile(tx.ctx, p, data)); err != nil {
		return err
	}
	tx.changes = append(tx.changes, c)
	return nil
}

// record announces to the history the versions the next operation makes.
func (tx *Tx) record(vs ...Version) error {
	for i := range vs {
		vs[i].Actor, vs[i].Command = tx.actor, tx.command
	}
	return tx.hist.Record(tx.ctx, vs)
}

// settle tells the history how the operation it was told of ended, and returns the
// operation's error. (A failure to write that down is no failure of the operation: the next
// transaction checks an unsettled operation against the files.)
func (tx *Tx) settle(opErr error) error {
	return tx.settleAs(opErr, Failed)
}

// settleAs is settle for an operation that ends as failure when it fails.
func (tx *Tx) settleAs(opErr error, failure Outcome) error {
	if tx.hist != nil {
		outcome := Done
		if opErr != nil {
			outcome = failure
		}
		tx.hist.Settle(tx.ctx, outcome)
	}
	return opErr
}

// version returns the transaction's version number in the history (0 if none).
func (tx *Tx) version() uint64 {
	if tx.hist == nil {
		return 0
	}
	return tx.hist.Seq()
}

// RemoveAll deletes the file or directory at p with everything below it.
func (tx *Tx) RemoveAll(p Path) error {
	files, err := tx.files(p)
	if err != nil {
		return err
	}
	if tx.hist != nil && len(files) > 0 {
		vs := make([]Version, len(files))
		for i, f := range files {
			vs[i] = Version{Kind: Deleted, Path: f.path, PrevSize: f.size, Prev: f.sum}
		}
		if err := tx.record(vs...); err != nil {
			return err
		}
	}
	if err := tx.settleAs(tx.t.RemoveAll(tx.ctx, p), Partial); err != nil {
		return err
	}
	for _, f := range files {
		tx.changes = append(tx.changes, Change{Kind: Deleted, Path: f.path, SizeBefore: f.size, SHA256Before: f.sum})
	}
	return nil
}

// Rename moves oldp to newp, creating missing parents of newp. It fails with fs.ErrExist if
// newp exists; the check and the move are one step, so a concurrent create is never
// overwritten.
func (tx *Tx) Rename(oldp, newp Path) error {
	files, err := tx.files(oldp)
	if err != nil {
		return err
	}
	if tx.hist != nil && len(files) > 0 {
		vs := make([]Version, len(files))
		for i, f := range files {
			vs[i] = Version{Kind: Moved, Path: f.path, NewPath: newp.clean + f.path[len(oldp.clean):],
				Size: f.size, SHA256: f.sum, PrevSize: f.size, Prev: f.sum}
		}
		if err := tx.record(vs...); err != nil {
			return err
		}
	}
	if err := tx.settle(tx.t.Rename(tx.ctx, oldp, newp)); err != nil {
		return err
	}
	for _, f := range files {
		to := newp.clean + f.path[len(oldp.clean):]
		tx.changes = append(tx.changes, Change{
			Kind: Moved, From: f.path, Path: to,
			SizeBefore: f.size, SHA256Before: f.sum, SizeAfter: f.size, SHA256After: f.sum,
		})
	}
	return nil
}

type fileState struct {
	path string
	size int64
	sum  Digest // zero unless tx.digests
}

// state describes the file at p as it is before a change of it: its size, and its digest
// when the transaction computes digests (reading the file unless it was just read).
func (tx *Tx) state(p Path) (fileState, error) {
	f := fileState{path: p.clean}
	switch {
	case tx.readPath == p.clean:
		f.size = int64(len(tx.readData))
		if tx.digests {
			f.sum = DigestOf(tx.readData)
		}
		if tx.hist != nil {
			// The content before the change must be restorable: usually the history
			// has it already (as the previous version's), else it is kept now.
			return f, tx.hist.Keep(tx.ctx, f.sum, tx.readData)
		}
	case tx.digests:
		data, err := tx.t.ReadFile(tx.ctx, p)
		if err != nil {
			return f, err
		}
		f.size, f.sum = int64(len(data)), DigestOf(data)
		if tx.hist != nil {
			return f, tx.hist.Keep(tx.ctx, f.sum, data)
		}
	default:
		e, err := tx.t.Stat(tx.ctx, p)
		if err != nil {
			return f, err
		}
		f.size = e.Size
	}
	return f, nil
}

// files describes the regular file at p, or every regular file below the directory at p,
// as a delete or rename of p is about to change them.
func (tx *Tx) files(p Path) ([]fileState, error) {
	e, err := tx.t.Stat(tx.ctx, p)
	if err != nil {
		return nil, err
	}
	var out []fileState
	add := func(q Path, size int64) error {
		if !tx.digests {
			out = append(out, fileState{path: q.clean, size: size})
			return nil
		}
		f, err := tx.state(q)
		out = append(out, f)
		return err
	}
	switch e.Kind {
	case KindFile:
		return out, add(p, e.Size)
	case KindDir:
		tree, err := tx.t.Tree(tx.ctx, p, maxDepth, func(string) bool { return false })
		if err != nil {
			return nil, err
		}
		var walk func(dir Path, nodes []Node) error
		walk = func(dir Path, nodes []Node) error {
			for _, n := range nodes {
				q := dir.Join(n.Name)
				if n.Dir {
					if err := walk(q, n.Children); err != nil {
						return err
					}
				} else if err := add(q, n.Size); err != nil {
					return err
				}
			}
			return nil
		}
		return out, walk(p, tree.Children)
	}
	return nil, nil // a link or special file: removing it changes no file
}

// maxDepth is deeper than any tree a path of MaxPathBytes can name.
const maxDepth = MaxPathBytes

// Expired is a file, or a directory left empty, that Expire deleted (or, in a dry run,
// would delete).
type Expired struct {
	Path string // virtual path
	Size int64  // bytes of the file; 0 for a directory
	Dir  bool
}

// ErrNotTracked is returned by Expire on a store that does not record access.
var ErrNotTracked = errors.New("vfs: Expire needs TrackAccess")

// Expire deletes every file not viewed or changed for longer than maxAge, and the
// directories that become empty with them (never /memories itself). A file the record does
// not know yet (created by hand, or before tracking was turned on) starts its grace period
// now. With dryRun it deletes nothing and reports what it would delete. A read-only store,
// and one that does not track access, is never touched. The deletions reach the change
// feed with actor ActorExpiry.
func (s *Store) Expire(ctx context.Context, maxAge time.Duration, dryRun bool) ([]Expired, error) {
	if s.st.ReadOnly() {
		return nil, ErrReadOnlyStore
	}
	if s.now == nil {
		return nil, ErrNotTracked
	}
	var out []Expired
	ctx = WithActor(ctx, ActorExpiry)
	_, err := s.Apply(ctx, "expire", func(tx *Tx) error {
		out = out[:0]
		rec, err := tx.t.LastAccess(ctx)
		if err != nil {
			return err
		}
		now := s.now().Unix()
		var old []string
		for name, t := range rec {
			if now-t > int64(maxAge/time.Second) {
				old = append(old, name)
			}
		}
		slices.Sort(old)
		gone := map[string]bool{}
		for _, name := range old {
			p := Path{clean: Root + "/" + name}
			e, err := tx.Stat(p)
			if err != nil {
				return err
			}
			out = append(out, Expired{Path: p.clean, Size: e.Size})
			gone[name] = true
			if !dryRun {
				if err := tx.RemoveAll(p); err != nil {
					return err
				}
			}
		}
		// Directories left empty go too, deepest first; a dry run works out which would.
		for _, name := range old {
			for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
				if gone[dir] {
					continue
				}
				p := Path{clean: Root + "/" + dir}
				empty, err := tx.emptyAfter(p, dir, gone)
				if err != nil || !empty {
					break
				}
				if !dryRun && tx.t.RemoveDir(ctx, p) != nil {
					break // something the listing does not show is in it: keep it
				}
				gone[dir] = true
				out = append(out, Expired{Path: p.clean, Dir: true})
			}
		}
		return nil
	})
	return out, err
}

// emptyAfter reports whether directory p (storage name dir) holds nothing once the names
// in gone are gone.
func (tx *Tx) emptyAfter(p Path, dir string, gone map[string]bool) (bool, error) {
	entries, err := tx.List(p)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !gone[path.Join(dir, e.Name)] {
			return false, nil
		}
	}
	return true, nil
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

// Versions returns every version in the store's history, oldest first (ErrNoHistory when
// the store keeps none).
func (tx *Tx) Versions() ([]Version, error) {
	if tx.hist == nil {
		return nil, ErrNoHistory
	}
	return tx.hist.Versions(tx.ctx)
}

// Content returns a content the history keeps, by digest (ErrNoContent when it was pruned or
// redacted).
func (tx *Tx) Content(d Digest) ([]byte, error) {
	if tx.hist == nil {
		return nil, ErrNoHistory
	}
	return tx.hist.Content(tx.ctx, d)
}

// Redact purges a content from the history, marking the versions that named it as redacted
// by the transaction's actor; it returns how many versions it marked.
func (tx *Tx) Redact(d Digest) (int, error) {
	if tx.hist == nil {
		return 0, ErrNoHistory
	}
	return tx.hist.Redact(tx.ctx, d, Redaction{By: tx.actor, Time: time.Now().UTC()})
}

// RemoveDir deletes the directory at p if it is empty.
func (tx *Tx) RemoveDir(p Path) error { return tx.t.RemoveDir(tx.ctx, p) }

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
