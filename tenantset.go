package main

import (
	"fmt"
	"sync"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// tenantSet is the tenants of a server and their open memories. load takes a new tenants
// file: a tenant whose directory and read-only setting did not change keeps its memory
// open (its token may change); the others get theirs opened. Memories of removed tenants
// stay open until the server stops, since calls may still be running on them.
type tenantSet struct {
	open    func(dir string, readOnly bool) (*handlers.Memory, *vfs.Store, string, error)
	prepare func(store *vfs.Store, where string) // readies a store opened for serving

	mu      sync.Mutex
	specs   []server.TenantSpec
	stores  map[string]openedTenant // by dir
	retired []*vfs.Store
}

type openedTenant struct {
	readOnly bool
	h        *handlers.Memory
	store    *vfs.Store
}

func (ts *tenantSet) load(specs []server.TenantSpec) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	next := map[string]openedTenant{}
	for _, spec := range specs {
		if o, ok := ts.stores[spec.Dir]; ok && o.readOnly == spec.ReadOnly {
			next[spec.Dir] = o
			continue
		}
		h, store, where, err := ts.open(spec.Dir, spec.ReadOnly)
		if err != nil {
			for dir, o := range next {
				if _, kept := ts.stores[dir]; !kept {
					o.store.Close()
				}
			}
			return fmt.Errorf("cannot open the memory of tenant %s: %v", spec.Name, err)
		}
		if ts.prepare != nil {
			ts.prepare(store, where)
		}
		next[spec.Dir] = openedTenant{readOnly: spec.ReadOnly, h: h, store: store}
	}
	for dir, o := range ts.stores {
		if n, ok := next[dir]; !ok || n.store != o.store {
			ts.retired = append(ts.retired, o.store)
		}
	}
	ts.specs, ts.stores = specs, next
	return nil
}

func (ts *tenantSet) tenants() []server.Tenant {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []server.Tenant
	for _, spec := range ts.specs {
		out = append(out, server.NewTenant(spec, ts.stores[spec.Dir].h))
	}
	return out
}

func (ts *tenantSet) expiry() []server.ExpiryTarget {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []server.ExpiryTarget
	for _, spec := range ts.specs {
		out = append(out, server.ExpiryTarget{Tenant: spec.Name, Store: ts.stores[spec.Dir].store})
	}
	return out
}

func (ts *tenantSet) close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, o := range ts.stores {
		o.store.Close()
	}
	for _, s := range ts.retired {
		s.Close()
	}
}
