package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// The end-to-end scenario on -backend postgres over stdio, both protocol eras: the same
// strings as on disk.
func TestPostgresEndToEnd(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	for eraName, version := range eras {
		t.Run(eraName, func(t *testing.T) {
			cmd := exec.Command(binary, "-backend", "postgres", "-dsn", dsn, "-store", vfstest.UniqueName(t))
			cmd.Env = testEnv(t)
			cs := connect(t, &mcp.CommandTransport{Command: cmd}, version)
			checkSession(t, cs, version)
			checkTools(t, cs)
			runScenario(t, cs, false)
		})
	}
}

// memory-mcp migrate brings the schema up to date, and says so; flags that make no sense
// with postgres are refused.
func TestPostgresMigrateAndFlags(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	for range 2 { // the second time there is nothing to do
		out, err := exec.Command(binary, "-backend", "postgres", "-dsn", dsn, "migrate").CombinedOutput()
		if err != nil || string(out) != "The database's schema is at version 1.\n" {
			t.Fatalf("migrate: %v %q", err, out)
		}
	}
	for _, args := range [][]string{
		{"-backend", "postgres", "-root", "/tmp/x"},
		{"-dsn", dsn},
		{"migrate"},
	} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.HasPrefix(string(out), "memory-mcp: ") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Two replicas (two server processes over Streamable HTTP) on one store: 2 × 25 concurrent
// str_replace calls on distinct lines of one file all land, and each replica sees the
// other's changes at once.
func TestPostgresTwoReplicas(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	store := vfstest.UniqueName(t)
	args := []string{"-backend", "postgres", "-dsn", dsn, "-store", store, "-max-inflight", "128"} // 25 calls at once per replica
	a, b := startHTTP(t, "http", args...), startHTTP(t, "http", args...)
	ca := connect(t, &mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", MaxRetries: -1}, "")
	cb := connect(t, &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp", MaxRetries: -1}, "")
	var lines []string
	for i := range 50 {
		lines = append(lines, fmt.Sprintf("line %02d", i))
	}
	if out, isErr := callText(t, ca, "memory_create", map[string]any{"path": "/memories/shared.md", "file_text": strings.Join(lines, "\n") + "\n"}); isErr {
		t.Fatal(out)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		cs := ca
		if i%2 == 1 {
			cs = cb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_str_replace", Arguments: map[string]any{
				"path": "/memories/shared.md", "old_str": fmt.Sprintf("line %02d\n", i), "new_str": fmt.Sprintf("line %02d done\n", i)}})
			if err != nil || res.IsError {
				t.Errorf("str_replace %d: %v %+v", i, err, res)
			}
		}()
	}
	wg.Wait()
	for _, cs := range []*mcp.ClientSession{ca, cb} {
		out, _ := callText(t, cs, "memory_view", map[string]any{"path": "/memories/shared.md"})
		if n := strings.Count(out, " done"); n != 50 {
			t.Errorf("%d of 50 changes present:\n%s", n, out)
		}
	}
}
