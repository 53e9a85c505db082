package files_test

import (
	"path/filepath"
	"testing"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// Every backend passes the storage conformance suite.
func TestConformance(t *testing.T) {
	backends := map[string]func(t *testing.T) vfs.Storage{
		"os": func(t *testing.T) vfs.Storage {
			s, err := files.OpenOSStore(filepath.Join(t.TempDir(), "store"))
			if err != nil {
				t.Fatal(err)
			}
			return s.Storage()
		},
		"memory": func(t *testing.T) vfs.Storage { return files.NewMemoryStore().Storage() },
		"overlay": func(t *testing.T) vfs.Storage {
			s, err := files.OpenOverlayStore(t.TempDir(), filepath.Join(t.TempDir(), "upper"))
			if err != nil {
				t.Fatal(err)
			}
			return s.Storage()
		},
		"overlay-mem": func(t *testing.T) vfs.Storage {
			s, err := files.OpenOverlayStore(t.TempDir(), "")
			if err != nil {
				t.Fatal(err)
			}
			return s.Storage()
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) { vfstest.TestStorage(t, open) })
	}
}

// Every backend keeps history the same way.
func TestHistoryConformance(t *testing.T) {
	backends := map[string]func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage{
		"os": func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage {
			s, err := files.OpenOSStore(filepath.Join(t.TempDir(), "store"), vfs.WithHistory(cfg))
			if err != nil {
				t.Fatal(err)
			}
			return s.Storage()
		},
		"memory": func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage {
			return files.NewMemoryStore(vfs.WithHistory(cfg)).Storage()
		},
		"overlay": func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage {
			s, err := files.OpenOverlayStore(t.TempDir(), filepath.Join(t.TempDir(), "upper"), vfs.WithHistory(cfg))
			if err != nil {
				t.Fatal(err)
			}
			return s.Storage()
		},
		"overlay-mem": func(t *testing.T, cfg vfs.HistoryConfig) vfs.Storage {
			s, err := files.OpenOverlayStore(t.TempDir(), "", vfs.WithHistory(cfg))
			if err != nil {
				t.Fatal(err)
			}
			return s.Storage()
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) { vfstest.TestHistory(t, open) })
	}
}
