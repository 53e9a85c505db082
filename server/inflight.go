package server

import "sync"

// Limits bound what the HTTP transports hold at once, so that no mix of clients can make
// the server hold unbounded memory; beyond them a request gets 503 with Retry-After.
type Limits struct {
	// Requests and RequestBytes bound the requests being read, decoded or executed:
	// their number and the bytes of their bodies. PerTenant is each tenant's share of
	// Requests (and half of RequestBytes).
	Requests, PerTenant int
	RequestBytes        int64
	// Streams bounds the long-lived event streams (GET /mcp, GET /sse, subscriptions/listen),
	// StreamsPerTenant each tenant's.
	Streams, StreamsPerTenant int
	// Pending bounds the responses an SSE session has not yet been sent.
	Pending int
}

// DefaultLimits: 64 requests with 32 MiB of bodies (16 per tenant), 256 streams (64 per
// tenant), 64 pending responses per SSE session.
func DefaultLimits() Limits {
	return Limits{Requests: 64, PerTenant: 16, RequestBytes: 32 << 20, Streams: 256, StreamsPerTenant: 64, Pending: 64}
}

// budget counts work in flight, globally and per tenant.
type budget struct {
	mu      sync.Mutex
	limits  Limits
	n       int
	bytes   int64
	tenantN map[string]int
	tenantB map[string]int64
	streams map[string]int
	nstream int
}

func newBudget(l Limits) *budget {
	return &budget{limits: l, tenantN: map[string]int{}, tenantB: map[string]int64{}, streams: map[string]int{}}
}

// request takes room for one request of size bytes, or reports false.
func (b *budget) request(tenant string, size int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.limits
	if b.n >= l.Requests || b.bytes+size > l.RequestBytes ||
		b.tenantN[tenant] >= l.PerTenant || b.tenantB[tenant]+size > l.RequestBytes/2 {
		return false
	}
	b.n++
	b.bytes += size
	b.tenantN[tenant]++
	b.tenantB[tenant] += size
	return true
}

func (b *budget) release(tenant string, size int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	b.bytes -= size
	if b.tenantN[tenant]--; b.tenantN[tenant] == 0 {
		delete(b.tenantN, tenant)
		delete(b.tenantB, tenant)
	} else {
		b.tenantB[tenant] -= size
	}
}

// stream takes room for one long-lived stream, or reports false.
func (b *budget) stream(tenant string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nstream >= b.limits.Streams || b.streams[tenant] >= b.limits.StreamsPerTenant {
		return false
	}
	b.nstream++
	b.streams[tenant]++
	return true
}

func (b *budget) endStream(tenant string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nstream--
	if b.streams[tenant]--; b.streams[tenant] == 0 {
		delete(b.streams, tenant)
	}
}
