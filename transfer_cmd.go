package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// transferCommands move a store between backends as a tar stream.
var transferCommands = map[string]bool{"export": true, "import": true}

func (c *config) validateTransfer(rest []string) error {
	switch {
	case len(rest) > 2:
		return usageError{rest[0] + " takes at most one FILE (without it, " + map[string]string{"export": "standard output", "import": "standard input"}[rest[0]] + ")"}
	case c.sub.mount != "" && !slices.ContainsFunc(c.mounts, func(m mountSpec) bool { return m.name == c.sub.mount }):
		return usageError{fmt.Sprintf("%s -of %s: no mount of that name (give it with -mount or -mount-ro)", rest[0], c.sub.mount)}
	case c.sub.mount == "" && c.backend == "memory", c.sub.mount != "" && c.mountKind(c.sub.mount) == "memory":
		return usageError{rest[0] + " works on a store that outlives its process: use -backend os, overlay or postgres"}
	case rest[0] == "import" && c.readOnly:
		return usageError{"import writes the store: drop -read-only"}
	case rest[0] == "import" && c.sub.mount != "" && slices.ContainsFunc(c.mounts, func(m mountSpec) bool { return m.name == c.sub.mount && m.readOnly }):
		return usageError{"import writes the store: mount it with -mount, not -mount-ro"}
	}
	return nil
}

// runTransfer runs export or import on store; the status is 1 when it fails.
func runTransfer(ctx context.Context, c *config, h *handlers.Memory, store *vfs.Store, where string, rest []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := func() error {
		if len(rest) == 2 && rest[1] == "-" {
			rest = rest[:1] // standard input or output
		}
		if rest[0] == "export" {
			if len(rest) == 1 {
				return store.Export(ctx, stdout, !c.sub.noHistory)
			}
			f, err := os.OpenFile(rest[1], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			err = store.Export(ctx, f, !c.sub.noHistory)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(rest[1]) // no half an export left behind
			}
			return err
		}
		r := stdin
		if len(rest) == 2 {
			f, err := os.Open(rest[1])
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		got, err := store.Import(vfs.WithActor(ctx, vfs.ActorLocal), r, h.ImportLimits())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Imported %d %s, %d %s and %d history %s into %s.\n", got.Files, plural(got.Files, "file", "files"),
			got.Versions, plural(got.Versions, "version", "versions"), got.Contents, plural(got.Contents, "content", "contents"), where)
		return nil
	}()
	if err != nil {
		fmt.Fprintf(stderr, "memory-mcp: %s: %v\n", rest[0], err)
		return 1
	}
	return 0
}

// mountKind is the backend of the mount name ("" when there is none).
func (c *config) mountKind(name string) string {
	for _, m := range c.mounts {
		if m.name == name {
			kind, _ := m.kind()
			return kind
		}
	}
	return ""
}
