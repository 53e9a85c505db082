package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// Every client configuration in the README is valid JSON, and each server entry it gives,
// run as it says (with this build for memory-mcp, and the Windows path mapped to it), serves
// a client the memory tools.
func TestReadmeClientConfigs(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(readme, -1)
	entries := 0
	for _, b := range blocks {
		var cfg map[string]map[string]struct {
			Type    string
			Command string
			Args    []string
			URL     string
		}
		if err := json.Unmarshal(b[1], &cfg); err != nil {
			if json.Valid(b[1]) {
				continue // not a client configuration (a tenants file, say)
			}
			t.Errorf("invalid JSON in the README:\n%s", b[1])
			continue
		}
		for _, key := range []string{"mcpServers", "servers"} {
			for name, e := range cfg[key] {
				if e.Command == "" {
					continue
				}
				entries++
				base := strings.TrimSuffix(filepath.Base(strings.ReplaceAll(e.Command, `\`, "/")), ".exe")
				if base != "memory-mcp" {
					t.Errorf("%s: command %q is not memory-mcp", name, e.Command)
					continue
				}
				args := slices.Clone(e.Args)
				for i, a := range args {
					if strings.HasPrefix(a, "postgres://") {
						args[i] = vfstest.PostgresDSN(t) // the recipe's hosted database: the test's
					}
				}
				cmd := exec.Command(binary, args...)
				cmd.Env = testEnv(t)
				cmd.Dir = t.TempDir() // a relative -root is the project's
				cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
				tools, err := cs.ListTools(t.Context(), nil)
				if err != nil || len(tools.Tools) != 6 {
					t.Errorf("%s (%v): %v, %d tools", name, e.Args, err, len(tools.Tools))
				}
				cs.Close()
			}
		}
	}
	if entries < 4 {
		t.Errorf("only %d client configurations found in the README", entries)
	}
}

// The Go the README asks for is the one go.mod requires: an older one would fetch another
// toolchain, or with GOTOOLCHAIN=local refuse to build.
func TestReadmeGoVersion(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if want := "You need Go " + string(m[1]) + " or newer."; !strings.Contains(string(readme), want) {
		t.Errorf("the README does not say %q", want)
	}
}
