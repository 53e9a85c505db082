package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// Resource notifications: notifications/resources/list_changed when files of a memory
// appear or disappear, and notifications/resources/updated to whoever subscribed to a file
// when it changes, whoever changed it.
//
// mcp-go v1.2.1 acknowledges resources/subscribe but never sends resources/updated: none
// of its sessions records subscriptions, and its broadcast keeps that notification off the
// 2026-07-28 subscriptions/listen streams (server/subscriptions.go,
// subscriptionAllowsNotification). So this file keeps the listeners itself and writes the
// notifications into their sessions' channels:
//
//   - a 2025-era session (it sent initialize) listens from its initialize: list_changed
//     always, updated for the URIs it subscribed to with resources/subscribe;
//   - a 2026-07-28 subscriptions/listen stream listens for what it opted in to, for as long
//     as the request runs, and every notification carries its subscription id.
//
// Each memory with a listener has one watch: a goroutine that takes the memory's change
// feed in order, and rescans the memory when another process (exec, another server,
// another replica) changed it. Changes are attributed by path, so a tenant's listeners
// hear only of its own memory.

// watchInterval is how often a watched memory is checked for changes by other processes.
const watchInterval = 250 * time.Millisecond

// listEvery is the shortest time between two list_changed notifications about one memory.
// A burst of creates, renames and deletes is announced by its first change at once and by
// one more listEvery later, not once per change: each notification is a write to every
// listener (over Streamable HTTP, an event flushed on its own) and a re-listing by its
// client, and a client that re-lists after the last one sees every change of the burst.
const listEvery = 50 * time.Millisecond

// maxSubscriptions and maxSubscriptionBytes bound the URIs one session or stream follows,
// and so the memory a client can make the server hold; beyond them, subscriptions are
// acknowledged and ignored, as are URIs that name no memory file (no change reaches them).
const (
	maxSubscriptions     = 1000
	maxSubscriptionBytes = 128 << 10
)

type notifier struct {
	s    *Server
	warn zerolog.Logger // sampled: clients that do not read, or subscribe too much

	mu       sync.Mutex
	sessions map[string]*listener // 2025-era sessions, by session id (registered ones)
	watches  map[*handlers.Memory]*watch
	running  sync.WaitGroup // the watches' goroutines, which read the memories

	// The clock of list_changed's pacing (time.Now and time.AfterFunc; tests set their own).
	now   func() time.Time
	after func(time.Duration, func()) interface{ Stop() bool }
}

// listener is one session or listen stream that receives notifications.
type listener struct {
	session     mcpserver.ClientSession
	mem         *handlers.Memory
	subID       any  // the subscriptions/listen request's id; nil for a 2025-era session
	active      bool // a 2025-era session becomes active at initialize
	gone        bool // removed: add attaches it no more
	listChanged bool
	uris        map[string]vfs.Digest // subscribed URIs → the content last announced
	uriBytes    int                   // their length together
}

// follows reports whether l may follow one more URI, uri: one that names a memory file,
// within the bounds. n.mu is held for a registered session.
func (l *listener) follows(uri string) bool {
	_, known := l.uris[uri]
	if !known && (len(l.uris) >= maxSubscriptions || l.uriBytes+len(uri) > maxSubscriptionBytes) {
		return false
	}
	_, err := uriPath(uri)
	return err == nil
}

// follow records that l follows uri, whose content is now d.
func (l *listener) follow(uri string, d vfs.Digest) {
	if _, known := l.uris[uri]; !known {
		l.uriBytes += len(uri)
	}
	l.uris[uri] = d
}

// watch follows one memory for its listeners.
type watch struct {
	listeners map[*listener]bool
	paths     map[string]bool // the listed files, to tell list changes made elsewhere
	stop      context.CancelFunc
	known     bool                     // paths came from a listing (none failed)
	listSent  time.Time                // the last list_changed
	listLater interface{ Stop() bool } // the one due listEvery after it, when the list changed since
	ended     bool                     // the watch stopped: a due list_changed is not sent
	ready     chan struct{}            // closed once the first listing is read (see add)
	batches   chan vfs.Batch           // this process's changes, in order (up to maxQueued)
	rescan    chan struct{}            // read the memory again: changed elsewhere, or batches overflowed
}

// maxQueued bounds the batches a watch holds; past it, it reads the memory again instead.
const maxQueued = 256

func newNotifier(s *Server) *notifier {
	return &notifier{
		s: s, sessions: map[string]*listener{}, watches: map[*handlers.Memory]*watch{},
		warn: s.log.Sample(&zerolog.BurstSampler{Burst: 5, Period: time.Minute}),
		now:  time.Now,
		after: func(d time.Duration, f func()) interface{ Stop() bool } {
			return time.AfterFunc(d, f)
		},
	}
}

// hooks connects the notifier to mcp-go's session and request hooks.
func (n *notifier) hooks(h *mcpserver.Hooks) {
	h.AddOnRegisterSession(func(ctx context.Context, session mcpserver.ClientSession) {
		if mem := n.s.handlersFor(ctx); mem != nil {
			l := &listener{session: session, mem: mem, listChanged: true, uris: map[string]vfs.Digest{}}
			n.mu.Lock()
			n.sessions[session.SessionID()] = l
			// Streamable HTTP registers a session after its initialize; stdio before.
			active := session.Initialized()
			l.active = active
			n.mu.Unlock()
			if active {
				n.add(l)
			}
		}
	})
	h.AddOnUnregisterSession(func(ctx context.Context, session mcpserver.ClientSession) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if l := n.sessions[session.SessionID()]; l != nil {
			delete(n.sessions, session.SessionID())
			n.removeLocked(l)
		}
	})
	h.AddAfterInitialize(func(ctx context.Context, id any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
		if session := mcpserver.ClientSessionFromContext(ctx); session != nil {
			n.mu.Lock()
			l := n.sessions[session.SessionID()]
			start := l != nil && !l.active
			if start {
				l.active = true
			}
			n.mu.Unlock()
			if start {
				n.add(l) // before the answer to initialize goes out: see add
			}
		}
	})
	h.AddAfterSubscribe(func(ctx context.Context, id any, req *mcp.SubscribeRequest, res *mcp.EmptyResult) {
		if session := mcpserver.ClientSessionFromContext(ctx); session != nil {
			n.subscribe(session.SessionID(), req.Params.URI, true)
		}
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, id any, req *mcp.UnsubscribeRequest, res *mcp.EmptyResult) {
		if session := mcpserver.ClientSessionFromContext(ctx); session != nil {
			n.subscribe(session.SessionID(), req.Params.URI, false)
		}
	})
	h.AddBeforeSubscriptionsListen(func(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
		session := mcpserver.ClientSessionFromContext(ctx)
		mem := n.s.handlersFor(ctx)
		f := req.Params.Notifications
		if session == nil || mem == nil || id == nil || (!f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0) {
			return
		}
		l := &listener{session: session, mem: mem, subID: id, active: true, listChanged: f.ResourcesListChanged, uris: map[string]vfs.Digest{}}
		for _, uri := range f.ResourceSubscriptions {
			if len(l.uris) == maxSubscriptions {
				break // the rest are ignored: a request may name millions
			}
			if l.follows(uri) {
				d, _ := n.digest(mem, uri)
				l.follow(uri, d)
			}
		}
		n.add(l)
		context.AfterFunc(ctx, func() { // the stream ends with its request
			n.mu.Lock()
			n.removeLocked(l)
			n.mu.Unlock()
		})
	})
}

// subscribe adds or removes a 2025-era session's subscription to uri.
func (n *notifier) subscribe(sessionID, uri string, on bool) {
	n.mu.Lock()
	l := n.sessions[sessionID]
	ok := l != nil && l.follows(uri)
	n.mu.Unlock()
	if l == nil {
		return
	}
	if on && !ok {
		n.warn.Warn().Int("max", maxSubscriptions).Msg("a session subscribed to too many resources, or to a URI that names no memory file; ignored")
		return
	}
	var d vfs.Digest
	if on {
		d, _ = n.digest(l.mem, uri) // read outside the lock: the storage may be slow
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !on {
		if _, known := l.uris[uri]; known {
			l.uriBytes -= len(uri)
			delete(l.uris, uri)
		}
	} else if l.follows(uri) { // checked again: another call may have come between
		l.follow(uri, d)
	}
}

// digest is the digest of the file uri names now (zero if there is none); known is false
// when its storage failed, which says nothing of the file.
func (n *notifier) digest(mem *handlers.Memory, uri string) (d vfs.Digest, known bool) {
	p, err := uriPath(uri)
	if err != nil {
		return vfs.Digest{}, true
	}
	_, d, err = mem.Read(context.Background(), p.String())
	var refusal *handlers.Refusal
	switch {
	case err == nil:
		return d, true
	case errors.As(err, &refusal): // none there, or none a resource can show
		return vfs.Digest{}, true
	}
	return vfs.Digest{}, false
}

// add attaches a listener to its memory's watch, starting the watch if it is the first.
// It returns once the watch has subscribed to the memory's feed and read its listing, so
// that every change made after it returns is compared with that listing and announced.
// Listed any later, a file created meanwhile would be in the listing already, and its
// creation announced to no one. add runs before the listener's client hears back for a
// stdio session (from initialize's hook) and a listen stream; a Streamable HTTP session
// is registered by mcp-go only after the answer to its initialize is written.
func (n *notifier) add(l *listener) {
	n.mu.Lock()
	if l.gone {
		n.mu.Unlock()
		return
	}
	if w := n.watches[l.mem]; w != nil {
		w.listeners[l] = true
		n.mu.Unlock()
		<-w.ready // the first listener's add is reading the listing
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &watch{listeners: map[*listener]bool{l: true}, paths: map[string]bool{}, stop: stop,
		batches: make(chan vfs.Batch, maxQueued), rescan: make(chan struct{}, 1), ready: make(chan struct{})}
	n.watches[l.mem] = w
	n.running.Add(1)
	n.mu.Unlock()
	// Subscribed before the listing is read: batches published meanwhile wait in the
	// watch, and are applied after it (one the listing shows already announces nothing).
	sub := l.mem.SubscribeFunc(func(b vfs.Batch) { deliver(w, b) })
	if paths := n.listed(l.mem); paths != nil {
		n.mu.Lock()
		w.paths, w.known = paths, true
		n.mu.Unlock()
	}
	close(w.ready)
	go n.run(ctx, l.mem, w, sub)
}

// removeLocked detaches a listener; the last one stops its memory's watch.
func (n *notifier) removeLocked(l *listener) {
	l.gone = true
	w := n.watches[l.mem]
	if w == nil || !w.listeners[l] {
		return
	}
	delete(w.listeners, l)
	if len(w.listeners) == 0 {
		n.endLocked(w)
		delete(n.watches, l.mem)
	}
}

// endLocked stops a watch and the list_changed it had due.
func (n *notifier) endLocked(w *watch) {
	w.stop()
	w.ended = true
	if w.listLater != nil {
		w.listLater.Stop()
	}
}

// close stops every watch and waits until none reads its memory any more: the server is
// done, and its caller may close the stores.
func (n *notifier) close() {
	n.mu.Lock()
	for mem, w := range n.watches {
		n.endLocked(w)
		delete(n.watches, mem)
	}
	n.mu.Unlock()
	n.running.Wait()
}

// listed returns the memory's listed files, or nil when the listing failed or left out a
// mount whose store fails: what is listed is then not known.
func (n *notifier) listed(mem *handlers.Memory) map[string]bool {
	files, err := mem.FileList(context.Background())
	if err != nil {
		return nil
	}
	paths := make(map[string]bool, len(files))
	for _, f := range files {
		paths[f.Path] = true
	}
	return paths
}

// run applies the memory's changes, whose files add listed, until ctx is done: this
// process's in order as sub delivers them, and those made elsewhere by reading it again.
func (n *notifier) run(ctx context.Context, mem *handlers.Memory, w *watch, sub *handlers.Subscription) {
	defer n.running.Done()
	defer sub.Close()
	n.running.Add(1)
	go func() {
		defer n.running.Done()
		mem.Watch(ctx, watchInterval)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-w.batches:
			n.mu.Lock()
			if !w.ended {
				n.changedLocked(mem, w, b)
			}
			n.mu.Unlock()
		case <-w.rescan:
			n.rescan(mem, w)
		}
	}
}

// deliver takes one batch from the memory's feed, in the goroutine that published it
// with the feed's lock held: it must not wait.
func deliver(w *watch, b vfs.Batch) {
	if !b.External {
		select {
		case w.batches <- b:
			return
		default: // the watch is behind: reading the memory again covers this change too
		}
	}
	select {
	case w.rescan <- struct{}{}:
	default: // one is due already, and will see this change too
	}
}

// changedLocked notifies the listeners of one batch of this process's changes. A URI in
// another spelling than the change's names the same file where the storage ignores case.
func (n *notifier) changedLocked(mem *handlers.Memory, w *watch, b vfs.Batch) {
	touched := map[string]vfs.Digest{}
	listChanged := false
	// The list changed if a listed file came or went; without a listing to compare with
	// (it failed), if the change could have done that.
	set := func(p string, in bool) {
		if w.known && w.paths[p] == in {
			return // applied already: a batch the first listing showed
		}
		listChanged = true
		if in {
			w.paths[p] = true
		} else {
			delete(w.paths, p)
		}
	}
	for _, c := range b.Changes {
		if c.From != "" && handlers.Listed(c.From) {
			set(c.From, false)
		}
		if c.Kind != vfs.Modified && handlers.Listed(c.Path) {
			set(c.Path, c.Kind != vfs.Deleted)
		}
		if c.From != "" {
			touched[mem.FileKey(c.From)] = vfs.Digest{}
		}
		d := c.SHA256After
		if c.Kind == vfs.Deleted {
			d = vfs.Digest{}
		}
		touched[mem.FileKey(c.Path)] = d // after From: a rename may change only case
	}
	n.notifyLocked(w, listChanged, func(uri string) (vfs.Digest, bool) {
		p, err := uriPath(uri)
		if err != nil {
			return vfs.Digest{}, false
		}
		d, ok := touched[mem.FileKey(p.String())]
		return d, ok
	})
}

// rescan notifies the listeners of changes made elsewhere (or dropped from a full
// watch): the feed says only that something changed, so the listing and the subscribed
// files are compared with what was last announced.
func (n *notifier) rescan(mem *handlers.Memory, w *watch) {
	paths := n.listed(mem)
	n.mu.Lock()
	var uris []string
	for l := range w.listeners {
		for uri := range l.uris {
			uris = append(uris, uri)
		}
	}
	n.mu.Unlock()
	now := map[string]vfs.Digest{}
	for _, uri := range uris {
		if d, known := n.digest(mem, uri); known {
			now[uri] = d
		}
	}
	n.mu.Lock()
	if w.ended {
		n.mu.Unlock()
		return
	}
	listChanged := paths != nil && len(paths) != len(w.paths)
	for p := range paths {
		listChanged = listChanged || !w.paths[p]
	}
	if paths != nil {
		w.paths, w.known = paths, true
	}
	n.notifyLocked(w, listChanged, func(uri string) (vfs.Digest, bool) {
		d, ok := now[uri]
		return d, ok
	})
	n.mu.Unlock()
}

// notifyLocked sends list_changed to the listeners that want it (at most once per
// listEvery: see listChangedLocked), and updated for every subscribed URI whose content
// differs from what its listener last heard.
func (n *notifier) notifyLocked(w *watch, listChanged bool, current func(uri string) (vfs.Digest, bool)) {
	if listChanged {
		n.listChangedLocked(w)
	}
	for l := range w.listeners {
		for uri, last := range l.uris {
			if d, ok := current(uri); ok && d != last {
				l.uris[uri] = d
				n.send(l, mcp.MethodNotificationResourceUpdated, map[string]any{"uri": uri})
			}
		}
	}
}

// listChangedLocked sends list_changed to the listeners that want it, or, within listEvery
// of the last one, makes sure one more follows when listEvery has passed.
func (n *notifier) listChangedLocked(w *watch) {
	if w.listLater != nil {
		return // one is due, and will say this change too
	}
	if wait := listEvery - n.now().Sub(w.listSent); wait > 0 {
		w.listLater = n.after(wait, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			w.listLater = nil
			if !w.ended {
				n.sendListLocked(w)
			}
		})
		return
	}
	n.sendListLocked(w)
}

func (n *notifier) sendListLocked(w *watch) {
	w.listSent = n.now()
	for l := range w.listeners {
		if l.listChanged {
			n.send(l, mcp.MethodNotificationResourcesListChanged, nil)
		}
	}
}

// send writes a notification into a listener's session without waiting: a client that
// does not read its stream loses notifications, never holds up the server.
func (n *notifier) send(l *listener, method mcp.MCPMethod, params map[string]any) {
	note := mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(method), Params: mcp.NotificationParams{AdditionalFields: params}},
	}
	if l.subID != nil {
		note.Params.Meta = map[string]any{mcp.MetaKeySubscriptionID: l.subID}
	}
	if up, ok := l.session.(mcpserver.SessionWithStreamableHTTPConfig); ok {
		up.UpgradeToSSEWhenReceiveNotification()
	}
	select {
	case l.session.NotificationChannel() <- note:
	default:
		n.warn.Warn().Str("method", string(method)).Msg("a client is not reading its notifications; one was dropped")
	}
}
