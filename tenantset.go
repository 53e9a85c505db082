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
	open       func(dir string, readOnly, plain bool, more ...handlers.Mount) (*handlers.Memory, *vfs.Store, string, error)
	flagMounts int // the mounts every tenant has

	mu      sync.Mutex
	specs   []server.TenantSpec
	stores  map[string]openedTenant // by dir
	mounts  map[string]openedTenant // the stores tenants mount, by dir and read-only
	retired []*vfs.Store
}

func newTenantSet(open func(string, bool, bool, ...handlers.Mount) (*handlers.Memory, *vfs.Store, string, error), flagMounts int) *tenantSet {
	return &tenantSet{open: open, flagMounts: flagMounts, stores: map[string]openedTenant{}, mounts: map[string]openedTenant{}}
}

type openedTenant struct {
	readOnly bool
	mounts   string // the tenant's mounts, as the tenants file gave them
	where    string // the store, for messages
	h        *handlers.Memory
	store    *vfs.Store
}

// mountsOf opens (or finds open) the stores a tenant mounts; one store mounted by several
// tenants is opened once.
func (ts *tenantSet) mountsOf(spec server.TenantSpec, next map[string]openedTenant) ([]handlers.Mount, error) {
	if ts.flagMounts+len(spec.Mounts) > handlers.MaxMounts {
		return nil, fmt.Errorf("tenant %s: %d mounts with those of the flags, over %d", spec.Name, ts.flagMounts+len(spec.Mounts), handlers.MaxMounts)
	}
	var out []handlers.Mount
	for _, m := range spec.Mounts {
		key := fmt.Sprintf("%s\x00%v", m.Dir, m.ReadOnly || spec.ReadOnly)
		o, ok := next[key]
		if !ok {
			if o, ok = ts.mounts[key]; !ok {
				h, store, _, err := ts.open(m.Dir, m.ReadOnly || spec.ReadOnly, true)
				if err != nil {
					return nil, fmt.Errorf("tenant %s: cannot open the store mounted at /memories/%s: %v", spec.Name, m.Name, err)
				}
				o = openedTenant{h: h, store: store}
			}
			next[key] = o
		}
		out = append(out, handlers.Mount{Name: m.Name, Memory: o.h})
	}
	return out, nil
}

func (ts *tenantSet) load(specs []server.TenantSpec) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	next, nextMounts := map[string]openedTenant{}, map[string]openedTenant{}
	fail := func(err error) error {
		for _, set := range []struct{ next, kept map[string]openedTenant }{{next, ts.stores}, {nextMounts, ts.mounts}} {
			for key, o := range set.next {
				if k, kept := set.kept[key]; (!kept || k.store != o.store) && o.store != nil {
					o.store.Close()
				}
			}
		}
		return err
	}
	for _, spec := range specs {
		mounts, err := ts.mountsOf(spec, nextMounts)
		if err != nil {
			return fail(err)
		}
		shape := fmt.Sprint(spec.Mounts)
		if o, ok := ts.stores[spec.Dir]; ok && o.readOnly == spec.ReadOnly && o.mounts == shape {
			next[spec.Dir] = o
			continue
		}
		h, store, where, err := ts.open(spec.Dir, spec.ReadOnly, false, mounts...)
		if err != nil {
			return fail(fmt.Errorf("cannot open the memory of tenant %s: %v", spec.Name, err))
		}
		next[spec.Dir] = openedTenant{readOnly: spec.ReadOnly, mounts: shape, where: where, h: h, store: store}
	}
	for _, set := range []struct{ old, next map[string]openedTenant }{{ts.stores, next}, {ts.mounts, nextMounts}} {
		for key, o := range set.old {
			if n, ok := set.next[key]; !ok || n.store != o.store {
				ts.retired = append(ts.retired, o.store)
			}
		}
	}
	ts.specs, ts.stores, ts.mounts = specs, next, nextMounts
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
	for _, o := range ts.mounts {
		if !o.h.ReadOnlyStore() {
			out = append(out, server.ExpiryTarget{Store: o.store})
		}
	}
	return out
}

func (ts *tenantSet) close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, o := range ts.stores {
		o.store.Close()
	}
	for _, o := range ts.mounts {
		o.store.Close()
	}
	for _, s := range ts.retired {
		s.Close()
	}
}
