package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// mountSpec is one -mount or -mount-ro, or a tenant's mount: a store placed at
// /memories/NAME. Its source is a directory, or KIND:ARG for the other backends.
type mountSpec struct {
	name, source string
	readOnly     bool
}

const mountUsage = "NAME=DIR places the directory DIR at /memories/NAME (repeatable, up to 16); NAME=memory: a memory store, NAME=postgres:STORE the store STORE in the -dsn database, NAME=overlay:LOWER a copy-on-write overlay of LOWER with changes in memory (overlay:LOWER" + string(os.PathListSeparator) + "UPPER keeps them in UPPER)"

// mountFlag collects -mount (read-write) or -mount-ro (read-only) values.
type mountFlag struct {
	specs    *[]mountSpec
	readOnly bool
}

func (f mountFlag) String() string { return "" }

func (f mountFlag) Set(v string) error {
	name, source, ok := strings.Cut(v, "=")
	if !ok || source == "" {
		return errors.New("want NAME=DIR, NAME=memory:, NAME=postgres:STORE or NAME=overlay:LOWER")
	}
	if err := handlers.ValidMountName(name); err != nil {
		return err
	}
	*f.specs = append(*f.specs, mountSpec{name: name, source: source, readOnly: f.readOnly})
	return nil
}

// kind splits a mount's source into its backend and argument: a source without one of the
// known prefixes is a directory (so C:\dir stays a directory on Windows).
func (m mountSpec) kind() (kind, arg string) {
	for _, k := range []string{"memory", "postgres", "overlay", "dir"} {
		if arg, ok := strings.CutPrefix(m.source, k+":"); ok {
			return k, arg
		}
	}
	return "dir", m.source
}

// checkMounts validates the mounts: at most 16, distinct names, sources that can be
// opened as given.
func checkMounts(c *config, specs []mountSpec) error {
	if len(specs) > handlers.MaxMounts {
		return usageError{fmt.Sprintf("%d mounts: at most %d", len(specs), handlers.MaxMounts)}
	}
	seen := map[string]bool{}
	for _, m := range specs {
		if seen[m.name] {
			return usageError{fmt.Sprintf("mount %s given twice", m.name)}
		}
		seen[m.name] = true
		kind, arg := m.kind()
		switch {
		case kind == "memory" && arg != "":
			return usageError{fmt.Sprintf("mount %s: memory: takes nothing after the colon", m.name)}
		case kind == "postgres" && (arg == "" || strings.ContainsRune(arg, 0)):
			return usageError{fmt.Sprintf("mount %s: postgres: needs the store's name", m.name)}
		case kind == "postgres" && c.dsn == "":
			return usageError{fmt.Sprintf("mount %s: postgres:%s needs -dsn, the database", m.name, arg)}
		case kind == "dir" || kind == "overlay":
			for _, dir := range filepath.SplitList(arg) {
				if err := checkStorageDir("mount "+m.name+":", dir, c.anyRoot); err != nil {
					return err
				}
			}
			if arg == "" {
				return usageError{fmt.Sprintf("mount %s: needs a directory", m.name)}
			}
		}
	}
	return nil
}

// openMount opens a mount's store with the server's history settings.
func openMount(c *config, m mountSpec) (*vfs.Store, string, error) {
	opts := []vfs.Option{vfs.WithHistory(vfs.HistoryConfig{
		Off: !c.history, MaxAge: c.historyMaxAge, MaxVersions: c.historyMaxVersions, MaxBytes: c.historyMaxBytes,
	})}
	if m.readOnly {
		opts = append(opts, vfs.ReadOnly())
	}
	kind, arg := m.kind()
	where := kind + " " + arg
	switch kind {
	case "memory":
		return files.NewMemoryStore(opts...), "memory", nil
	case "postgres":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := c.pg.Store(ctx, arg, opts...)
		return s, "postgres store " + arg, err
	case "overlay":
		dirs := filepath.SplitList(arg)
		upper := ""
		if len(dirs) > 1 {
			upper = dirs[1]
		}
		s, err := files.OpenOverlayStore(dirs[0], upper, opts...)
		return s, where, err
	}
	if m.readOnly {
		if fi, err := os.Stat(arg); err != nil || !fi.IsDir() {
			return nil, "", fmt.Errorf("the read-only mount %s needs an existing directory %s", m.name, arg)
		}
	}
	s, err := files.OpenOSStore(arg, opts...)
	return s, arg, err
}

// openedMounts are the stores of the mounts, opened once and shared by every memory that
// mounts them.
type openedMounts struct {
	mounts []handlers.Mount
	stores []*vfs.Store
}

func (o *openedMounts) close() {
	for _, s := range o.stores {
		s.Close()
	}
}

// open opens every mount, each as a memory with the server's limits and options (and
// read-only where the mount is).
func (o *openedMounts) open(c *config, specs []mountSpec, memoryOf func(*vfs.Store, mountSpec) (*handlers.Memory, error)) error {
	for _, m := range specs {
		store, where, err := openMount(c, m)
		if err != nil {
			return fmt.Errorf("cannot open the store mounted at /memories/%s (%s): %w", m.name, m.source, err)
		}
		o.stores = append(o.stores, store)
		h, err := memoryOf(store, m)
		if err != nil {
			return fmt.Errorf("cannot open the store mounted at /memories/%s (%s): %w", m.name, where, err)
		}
		o.mounts = append(o.mounts, handlers.Mount{Name: m.name, Memory: h})
	}
	return nil
}
