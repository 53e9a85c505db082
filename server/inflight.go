package server

import "sync"

// Limits bound what the HTTP transports hold at once, so that no mix of clients can make
// the server hold unbounded memory; beyond them a request gets 503 with Retry-After.
//
// A request's body is read within one of two pools, by its declared size: small bodies (up
// to SmallBody bytes, which every ordinary call is) by number, SmallRequests at once; larger
// or undeclared ones by bytes, RequestBytes at once. So a client that stalls large uploads
// cannot take the room ordinary calls need. Once read, a request is executed within
// Requests at once (PerTenant of them per tenant).
type Limits struct {
	Requests, PerTenant int
	SmallRequests       int
	RequestBytes        int64
	// Streams bounds the long-lived event streams (GET /mcp, GET /sse, subscriptions/listen),
	// StreamsPerTenant each tenant's.
	Streams, StreamsPerTenant int
	// Pending bounds the responses an SSE session has not yet been sent.
	Pending int
}

// SmallBody is the largest body read in the small pool.
const SmallBody = 64 << 10

// DefaultLimits: 64 requests executing (16 per tenant); 256 small bodies and 32 MiB of
// large ones being read; 256 streams (64 per tenant); 64 pending responses per SSE session.
func DefaultLimits() Limits {
	return Limits{Requests: 64, PerTenant: 16, SmallRequests: 256, RequestBytes: 32 << 20, Streams: 256, StreamsPerTenant: 64, Pending: 64}
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

// execute takes room to execute one request, or reports false; done gives it back.
func (b *budget) execute(tenant string) bool {
	return b.with(func() bool { return b.running.take(tenant) })
}
func (b *budget) done(tenant string) { b.with(func() bool { b.running.give(tenant); return true }) }

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
