package server

import (
	"context"
	"sync"
	"time"
)

// Limits bound what the HTTP transports hold at once, so that no mix of clients can make
// the server hold unbounded memory.
//
// A request's body is read within one of two pools, by its declared size: small bodies (up
// to SmallBody bytes, which every ordinary call is) by number, SmallRequests at once; larger
// or undeclared ones by bytes, RequestBytes at once. So a client that stalls large uploads
// cannot take the room ordinary calls need. Once read, a request is executed within
// Requests at once (PerTenant of them per tenant); beyond that it waits its turn in a queue
// (first come, first served within a tenant, tenants in turn), Queue requests in all and
// QueuePerTenant of one tenant, for at most Wait. Only a full queue, a full pool or a wait
// past Wait gets 503 with Retry-After.
type Limits struct {
	Requests, PerTenant   int
	Queue, QueuePerTenant int
	Wait                  time.Duration
	SmallRequests         int
	RequestBytes          int64
	// Streams bounds the long-lived event streams (GET /mcp, GET /sse, subscriptions/listen),
	// StreamsPerTenant each tenant's.
	Streams, StreamsPerTenant int
	// Pending bounds the responses an SSE session has not yet been sent; a call beyond it
	// waits, as one beyond Requests does, QueuePerTenant of them per session.
	Pending int
}

// SmallBody is the largest body read in the small pool.
const SmallBody = 64 << 10

// DefaultLimits: 64 requests executing (16 per tenant) and 512 waiting (256 per tenant, so
// one client can have 272 calls outstanding) for up to 30 s; small bodies for all of them
// and 64 more being read, and 32 MiB of large ones; 256 streams (64 per tenant); 64 pending
// responses per SSE session.
func DefaultLimits() Limits {
	l := Limits{Requests: 64, PerTenant: 16, Queue: 512, QueuePerTenant: 256, Wait: 30 * time.Second,
		RequestBytes: 32 << 20, Streams: 256, StreamsPerTenant: 64, Pending: 64}
	l.SmallRequests = l.Requests + l.Queue + 64
	return l
}

// budget counts work in flight, globally and per tenant.
type budget struct {
	mu      sync.Mutex
	limits  Limits
	small   int
	bytes   int64
	tenantB map[string]int64
	running counter // requests executing
	streams counter // long-lived event streams

	// The requests waiting for room to execute: by tenant, each tenant's in arrival
	// order, and the tenants in the order they are served in turn.
	waiting map[string][]*waiter
	turns   []string
	queued  int
}

// waiter is a request waiting for room to execute; ready is closed when it has it.
type waiter struct {
	ready   chan struct{}
	granted bool
}

// counter counts things in flight, in all and per tenant, against a cap on each.
type counter struct {
	n, max, perMax int
	per            map[string]int
}

func (c *counter) take(tenant string) bool {
	if c.n >= c.max || c.per[tenant] >= c.perMax {
		return false
	}
	c.n++
	c.per[tenant]++
	return true
}

func (c *counter) give(tenant string) {
	c.n--
	if c.per[tenant]--; c.per[tenant] == 0 {
		delete(c.per, tenant)
	}
}

func newBudget(l Limits) *budget {
	return &budget{
		limits:  l,
		tenantB: map[string]int64{},
		running: counter{max: l.Requests, perMax: l.PerTenant, per: map[string]int{}},
		streams: counter{max: l.Streams, perMax: l.StreamsPerTenant, per: map[string]int{}},
		waiting: map[string][]*waiter{},
	}
}

// read takes room to read a body of size bytes (-1: unknown), or reports false; release
// gives it back.
func (b *budget) read(tenant string, size int64, max int64) (release func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if size >= 0 && size <= SmallBody {
		if b.small >= b.limits.SmallRequests {
			return nil, false
		}
		b.small++
		return func() { b.mu.Lock(); b.small--; b.mu.Unlock() }, true
	}
	if size < 0 {
		size = max
	}
	if b.bytes+size > b.limits.RequestBytes || b.tenantB[tenant]+size > b.limits.RequestBytes/2 {
		return nil, false
	}
	b.bytes += size
	b.tenantB[tenant] += size
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.bytes -= size
		if b.tenantB[tenant] -= size; b.tenantB[tenant] == 0 {
			delete(b.tenantB, tenant)
		}
	}, true
}

// execute takes room to execute one request, waiting its turn when there is none: false
// when the queue is full, or no room came within the limits' Wait or before ctx ended.
// done gives the room back.
func (b *budget) execute(ctx context.Context, tenant string) bool {
	b.mu.Lock()
	if len(b.waiting[tenant]) == 0 && b.running.take(tenant) {
		b.mu.Unlock()
		return true
	}
	if b.queued >= b.limits.Queue || len(b.waiting[tenant]) >= b.limits.QueuePerTenant {
		b.mu.Unlock()
		return false
	}
	w := &waiter{ready: make(chan struct{})}
	if len(b.waiting[tenant]) == 0 {
		b.turns = append(b.turns, tenant)
	}
	b.waiting[tenant] = append(b.waiting[tenant], w)
	b.queued++
	b.mu.Unlock()

	t := time.NewTimer(b.limits.Wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		return true // the room came as the wait ended: the request uses it
	}
	q := b.waiting[tenant]
	for i := range q {
		if q[i] == w {
			b.waiting[tenant] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	b.queued--
	b.dropTurn(tenant)
	return false
}

// done gives back the room a request executed in, to the next waiting request: tenants
// take turns, and within a tenant the first to come is the first served.
func (b *budget) done(tenant string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running.give(tenant)
	for served := true; served && b.queued > 0; {
		served = false
		for i := 0; i < len(b.turns); i++ {
			t := b.turns[i]
			if !b.running.take(t) {
				continue
			}
			w := b.waiting[t][0]
			b.waiting[t] = b.waiting[t][1:]
			b.queued--
			w.granted = true
			close(w.ready)
			// This tenant's turn is over: it goes to the back of the line.
			b.turns = append(b.turns[:i:i], b.turns[i+1:]...)
			if len(b.waiting[t]) > 0 {
				b.turns = append(b.turns, t)
			} else {
				delete(b.waiting, t)
			}
			served = true
			break
		}
	}
}

// dropTurn takes a tenant that no longer waits out of the turns.
func (b *budget) dropTurn(tenant string) {
	if len(b.waiting[tenant]) > 0 {
		return
	}
	delete(b.waiting, tenant)
	for i, t := range b.turns {
		if t == tenant {
			b.turns = append(b.turns[:i:i], b.turns[i+1:]...)
			return
		}
	}
}

// stream takes room for one long-lived stream, or reports false; endStream gives it back.
func (b *budget) stream(tenant string) bool {
	return b.with(func() bool { return b.streams.take(tenant) })
}
func (b *budget) endStream(tenant string) {
	b.with(func() bool { b.streams.give(tenant); return true })
}

func (b *budget) with(fn func() bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fn()
}
