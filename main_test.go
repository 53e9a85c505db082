package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/server"
	"github.com/memory-mcp/memory-mcp/vfs/files"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// binary is memory-mcp built from this tree; the end-to-end tests run it as a client would.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "memory-mcp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "memory-mcp")
	if b := os.Getenv("MEMORY_MCP_BENCH_BINARY"); b != "" {
		binary = b // another build, for a benchmark's before and after: go test -run '^$' -bench …
	} else if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	vfstest.StopPostgres()
	os.Exit(code)
}

// step is one call of the end-to-end scenario and the exact result the model must get.
type step struct {
	command string
	args    map[string]any
	want    string
	isError bool
}

const listingHeader = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"

var scenario = []step{
	{"view", map[string]any{"path": "/memories"}, listingHeader + "0B\t/memories", false},
	{"create", map[string]any{"path": "/memories/notes.md", "file_text": "# Notes\n- one\n"}, "File created successfully at: /memories/notes.md", false},
	{"create", map[string]any{"path": "/memories/notes.md", "file_text": "again"}, "Error: File /memories/notes.md already exists", true},
	{"str_replace", map[string]any{"path": "/memories/notes.md", "old_str": "- one", "new_str": "- 1"}, "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t# Notes\n     2\t- 1\n     3\t", false},
	{"insert", map[string]any{"path": "/memories/notes.md", "insert_line": 2, "insert_text": "- two"}, "The file /memories/notes.md has been edited.", false},
	{"view", map[string]any{"path": "/memories/notes.md"}, "Here's the content of /memories/notes.md with line numbers:\n     1\t# Notes\n     2\t- 1\n     3\t- two\n     4\t", false},
	{"view", map[string]any{"path": "/memories/notes.md", "view_range": []int{2, 3}}, "Here's the content of /memories/notes.md with line numbers:\n     2\t- 1\n     3\t- two", false},
	{"insert", map[string]any{"path": "/memories/notes.md", "insert_line": 9, "insert_text": "x"}, "Error: Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 4]", true},
	{"rename", map[string]any{"old_path": "/memories/notes.md", "new_path": "/memories/archive/notes.md"}, "Successfully renamed /memories/notes.md to /memories/archive/notes.md", false},
	{"view", map[string]any{"path": "/memories"}, listingHeader + "18B\t/memories\n18B\t/memories/archive/\n18B\t/memories/archive/notes.md", false},
	{"view", map[string]any{"path": "/memories/../etc/passwd"}, "Error: Path /memories/../etc/passwd would escape /memories directory", true},
	{"delete", map[string]any{"path": "/memories/archive"}, "Successfully deleted /memories/archive", false},
	{"view", map[string]any{"path": "/memories/archive"}, "The path /memories/archive does not exist. Please provide a valid path.", true},
	{"delete", map[string]any{"path": "/memories"}, "Error: Cannot delete the /memories directory itself", true},
}

// runScenario plays the scenario through the session, by the six tools or the one memory tool.
func runScenario(t *testing.T, cs *mcp.ClientSession, single bool) {
	t.Helper()
	for i, s := range scenario {
		name, args := "memory_"+s.command, s.args
		if single {
			name = "memory"
			args = map[string]any{"command": s.command}
			for k, v := range s.args {
				args[k] = v
			}
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("step %d %s: %v", i+1, name, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if text != s.want || res.IsError != s.isError {
			t.Errorf("step %d %s %v:\n got %q (isError %v)\nwant %q (isError %v)", i+1, name, s.args, text, res.IsError, s.want, s.isError)
		}
	}
}

// server is a running memory-mcp process.
type serverProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// awaitLockWaiter returns once a memory-mcp process waits for the storage lock that held
// (an OSFs of the same store) holds: the waiting process holds the store's gate, so held's
// own try for the lock, with a context already done, fails at the gate.
func awaitLockWaiter(t *testing.T, held *files.OSFs) {
	t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := held.LockStorage(done, false); err != nil {
			return
		}
		held.UnlockStorage()
		if time.Now().After(deadline) {
			t.Fatal("no call came to wait for the storage lock")
		}
	}
}

func testEnv(t *testing.T) []string {
	return append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "HOME="+t.TempDir())
}

// startHTTP starts the binary on a free loopback port and waits for its "listening" line.
func startHTTP(t *testing.T, transport string, args ...string) *serverProc {
	t.Helper()
	base := []string{"-transport", transport, "-addr", "127.0.0.1:0"}
	if !slices.Contains(args, "postgres") { // a database store has no -root
		base = append(base, "-root", filepath.Join(t.TempDir(), "m"))
	}
	cmd := exec.Command(binary, append(base, args...)...)
	cmd.Env = testEnv(t)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, stderr: &syncBuffer{}}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.Write([]byte(line + "\n"))
			var e struct{ Message, URL string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Message == "listening" {
				found <- e.URL
			}
		}
	}()
	select {
	case u := <-found:
		p.url = strings.TrimSuffix(strings.TrimSuffix(u, "/mcp"), "/sse")
	case <-time.After(20 * time.Second):
		t.Fatalf("server did not start:\n%s", p.stderr.String())
	}
	return p
}

func connect(t *testing.T, transport mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	var copts *mcp.ClientOptions
	if os.Getenv("E2E_DEBUG") != "" {
		copts = &mcp.ClientOptions{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, copts)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	// The SSE transport keeps its event stream on this context: it must outlive Connect.
	cs, err := client.Connect(t.Context(), transport, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func checkTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"memory_view": {"path"}, "memory_create": {"path", "file_text"}, "memory_str_replace": {"path", "old_str"},
		"memory_insert": {"path", "insert_line", "insert_text"}, "memory_delete": {"path"}, "memory_rename": {"old_path", "new_path"},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("%d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		req, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct{ Required []string }
		json.Unmarshal(schema, &s)
		if strings.Join(s.Required, ",") != strings.Join(req, ",") {
			t.Errorf("%s requires %v, want %v", tool.Name, s.Required, req)
		}
		a := tool.Annotations
		if a == nil || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint == nil {
			t.Errorf("%s: annotations %+v", tool.Name, a)
			continue
		}
		view := tool.Name == "memory_view"
		destructive := tool.Name == "memory_str_replace" || tool.Name == "memory_delete"
		if a.ReadOnlyHint != view || a.IdempotentHint != view || *a.DestructiveHint != destructive {
			t.Errorf("%s: readOnly=%v idempotent=%v destructive=%v", tool.Name, a.ReadOnlyHint, a.IdempotentHint, *a.DestructiveHint)
		}
	}
}

func checkSession(t *testing.T, cs *mcp.ClientSession, version string) {
	t.Helper()
	want := version
	if want == "" {
		want = "2026-07-28"
	}
	init := cs.InitializeResult()
	if init == nil {
		t.Fatal("no initialize result")
	}
	if init.ProtocolVersion != want {
		t.Errorf("protocol version %q, want %q", init.ProtocolVersion, want)
	}
	if init.Instructions != server.DefaultInstructions(server.ToolsSplit) {
		t.Errorf("instructions = %q", init.Instructions)
	}
	p, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "memory_protocol"})
	if err != nil {
		t.Fatal(err)
	}
	if text := p.Messages[0].Content.(*mcp.TextContent).Text; text != server.DefaultInstructions(server.ToolsSplit) {
		t.Errorf("prompt text = %q", text)
	}
}

var eras = map[string]string{"2026-07-28": "", "2025-11-25": "2025-11-25"}

func TestEndToEnd(t *testing.T) {
	for eraName, version := range eras {
		t.Run("stdio/"+eraName, func(t *testing.T) {
			cmd := exec.Command(binary, "-root", filepath.Join(t.TempDir(), "m"), "-log-level", "debug")
			cmd.Env = testEnv(t)
			cs := connect(t, &mcp.CommandTransport{Command: cmd}, version)
			checkSession(t, cs, version)
			checkTools(t, cs)
			runScenario(t, cs, false)
		})
		t.Run("http/"+eraName, func(t *testing.T) {
			p := startHTTP(t, "http")
			cs := connect(t, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1}, version)
			checkSession(t, cs, version)
			checkTools(t, cs)
			runScenario(t, cs, false)
		})
		t.Run("sse/"+eraName, func(t *testing.T) {
			p := startHTTP(t, "sse")
			cs := connect(t, &mcp.SSEClientTransport{Endpoint: p.url + "/sse"}, version)
			checkSession(t, cs, version)
			checkTools(t, cs)
			runScenario(t, cs, false)
		})
	}
	t.Run("single-tool/stdio", func(t *testing.T) {
		cmd := exec.Command(binary, "-root", filepath.Join(t.TempDir(), "m"), "-tools", "single")
		cmd.Env = testEnv(t)
		cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != 1 || res.Tools[0].Name != "memory" {
			t.Fatalf("tools = %v, want one named memory", res.Tools)
		}
		if got := cs.InitializeResult().Instructions; !strings.Contains(got, "Use the `memory` tool") {
			t.Errorf("single-mode instructions name the wrong tool: %q", got)
		}
		runScenario(t, cs, true)
	})
}

// With no flags, from any working directory, the server keeps its memory in
// ~/.memory-mcp/memories (the Claude Desktop bundle's default too), created 0700, and the
// subcommands find it there. A memory kept where earlier releases kept it (the data
// directory) is still found while nothing is at the new place.
func TestDefaultRoot(t *testing.T) {
	home, data := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "XDG_DATA_HOME="+data, "HOME="+home, "USERPROFILE="+home)
	cmd := exec.Command(binary)
	cmd.Dir = t.TempDir()
	cmd.Env = env
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	runScenario(t, cs, false)
	cs.Close()
	fi, err := os.Stat(filepath.Join(home, ".memory-mcp", "memories"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("memory directory mode %v, want 0700", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(data, "memory-mcp")); err == nil {
		t.Error("the data directory was written to as well")
	}
	create := exec.Command(binary, "exec", `{"command":"create","path":"/memories/seen.md","file_text":"x"}`)
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("exec without -root: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(home, ".memory-mcp", "memories", "seen.md")); err != nil {
		t.Errorf("exec without -root uses another memory than the server's: %v", err)
	}

	// An earlier release's memory, and nothing at the new place: it is the one used.
	home, data = t.TempDir(), t.TempDir()
	old := filepath.Join(data, "memory-mcp", "memories")
	os.MkdirAll(old, 0o700)
	os.WriteFile(filepath.Join(old, "kept.md"), []byte("from before\n"), 0o600)
	view := exec.Command(binary, "exec", `{"command":"view","path":"/memories/kept.md"}`)
	view.Env = append(os.Environ(), "XDG_DATA_HOME="+data, "HOME="+home, "USERPROFILE="+home)
	if out, err := view.Output(); err != nil || !strings.Contains(string(out), "from before") {
		t.Errorf("the earlier default's memory is not found: %v\n%s", err, out)
	}
}

// At debug level, stdout carries nothing but JSON-RPC messages, one per line.
func TestStdoutIsOnlyProtocol(t *testing.T) {
	cmd := exec.Command(binary, "-root", filepath.Join(t.TempDir(), "m"), "-log-level", "debug", "-log-format", "console")
	cmd.Env = testEnv(t)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/nope"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"memory_protocol"}}`,
	}, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	// Five responses, and perhaps the notification that the create changed the list of
	// resources (written if it is out before the process ends).
	responses := 0
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
		}
		switch err := json.Unmarshal([]byte(l), &msg); {
		case err != nil || msg.JSONRPC != "2.0":
			t.Errorf("stdout line is not a JSON-RPC message: %q", l)
		case len(msg.ID) > 0:
			responses++
		case msg.Method != "notifications/resources/list_changed":
			t.Errorf("unexpected notification on stdout: %q", l)
		}
	}
	if responses != 5 {
		t.Errorf("%d responses on stdout, want 5:\n%s", responses, out)
	}
	if !strings.Contains(stderr.String(), "tool call") || !strings.Contains(stderr.String(), "mcp.request") {
		t.Errorf("our log and mcp-go's (at debug level) must both go to stderr:\n%s", stderr.String())
	}
}

// SIGTERM during a slow call: the call finishes, the process then exits 0, the store is
// consistent. The call is slow because this test holds the storage lock that every
// memory-mcp process takes before a change.
func TestSIGTERMDuringSlowCall(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	p := startHTTP(t, "http", "-root", root)
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1}, "")

	lock, err := files.NewOSFs(root)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.LockStorage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_create", Arguments: map[string]any{"path": "/memories/slow.md", "file_text": "written during shutdown"}})
		done <- outcome{res, err}
	}()
	awaitLockWaiter(t, lock)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(p.stderr.String(), "letting running calls finish"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown after SIGTERM:\n%s", p.stderr.String())
		}
	}
	lock.UnlockStorage()

	o := <-done
	if o.err != nil || o.res.IsError {
		t.Errorf("the call in flight during shutdown failed: %v %+v", o.err, o.res)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, p.stderr.String())
		}
		if strings.Contains(p.stderr.String(), "calls still running after the shutdown timeout") {
			t.Errorf("the server waited out its shutdown timeout although the call had ended:\n%s", p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("did not exit once its call had ended:\n%s", p.stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(root, "slow.md"))
	if err != nil || string(data) != "written during shutdown" {
		t.Errorf("store after shutdown: %q, %v", data, err)
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".memory-mcp-tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// memory-mcp exec gives the same strings as the tools, and exits 1 on an error result.
func TestExec(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	for i, s := range scenario {
		input := map[string]any{"command": s.command}
		for k, v := range s.args {
			input[k] = v
		}
		raw, _ := json.Marshal(input)
		args := []string{"-root", root, "exec", string(raw)}
		var stdin io.Reader
		if i%2 == 1 { // every other step reads its input from stdin
			args, stdin = []string{"exec", "-root", root, "-"}, bytes.NewReader(raw)
		}
		cmd := exec.Command(binary, args...)
		cmd.Env = testEnv(t)
		cmd.Stdin = stdin
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		wantCode := 0
		if s.isError {
			wantCode = 1
		}
		if string(out) != s.want+"\n" || code != wantCode {
			t.Errorf("exec %s:\n got %q (exit %d)\nwant %q (exit %d)", raw, out, code, s.want+"\n", wantCode)
		}
	}
}

// exec reads its input as the server does: a number beyond a float64's range is an
// argument's error, named; what is not one JSON object is refused before anything runs.
func TestExecInputs(t *testing.T) {
	for _, tt := range []struct {
		input, stdout, stderr string
		code                  int
	}{
		{`{"command":"view","path":"/memories","view_range":[1e400,2]}`, "Error: Invalid `view_range`. It should be a list of two integers.\n", "", 1},
		{`{"command":"insert","path":"/memories/a.md","insert_line":-1e999,"insert_text":"x"}`, "Error: Parameter `insert_line` must be an integer\n", "", 1},
		{`{"command":"view","path":"/memories"} {}`, "", "memory-mcp: exec needs a JSON object such as {\"command\":\"view\",\"path\":\"/memories\"}: more follows the object\n", 2},
		{`null`, "", "memory-mcp: exec needs a JSON object such as {\"command\":\"view\",\"path\":\"/memories\"}: null is not an object\n", 2},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-backend", "memory", "exec", tt.input}, func(string) string { return "" }, nil, &stdout, &stderr)
		if code != tt.code || stdout.String() != tt.stdout || stderr.String() != tt.stderr {
			t.Errorf("exec %s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.input, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
}

// A bad flag or value is one clear line on stderr and exit status 2; environment variables
// set flags, and the command line wins over them.
func TestFlags(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"-bogus"}, nil, "memory-mcp: flag provided but not defined: -bogus (see memory-mcp -help)\n"},
		{"bad transport", []string{"-transport", "carrier-pigeon"}, nil, "memory-mcp: invalid value \"carrier-pigeon\" for -transport: use stdio, http, sse (see memory-mcp -help)\n"},
		{"bad env", nil, map[string]string{"MEMORY_MCP_MAX_FILE_BYTES": "lots"}, "memory-mcp: invalid value \"lots\" for MEMORY_MCP_MAX_FILE_BYTES: parse error (see memory-mcp -help)\n"},
		{"overlay without lower", []string{"-backend", "overlay"}, nil, "memory-mcp: -backend overlay needs -lower DIR, the read-only layer (see memory-mcp -help)\n"},
		{"ui with an argument", []string{"ui", "now"}, nil, "memory-mcp: ui takes no arguments: it prints the page's address (see memory-mcp -help)\n"},
		{"ui over memory", []string{"-backend", "memory", "ui"}, nil, "memory-mcp: ui shows a memory kept on disk: use -backend os or overlay (a memory store lives only inside its own process) (see memory-mcp -help)\n"},
		{"ui with tenants and no tenant", []string{"ui", "-tenants", "t.json"}, nil, "memory-mcp: ui works on one memory: give -tenant NAME with -tenants, or -root DIR (see memory-mcp -help)\n"},
		{"unknown command", []string{"serve"}, nil, "memory-mcp: unknown command \"serve\": the commands are exec, ui, token, migrate, export, import, log, show, diff, restore, redact and help (see memory-mcp -help)\n"},
		{"bad addr", []string{"-transport", "http", "-addr", "8080"}, nil, "memory-mcp: invalid value \"8080\" for -addr: use HOST:PORT, such as 127.0.0.1:8080 (see memory-mcp -help)\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, env(tt.env), strings.NewReader(""), &stdout, &stderr)
		if code != 2 || stderr.String() != tt.want || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 2 and %q", tt.name, code, stderr.String(), stdout.String(), tt.want)
		}
	}

	// The environment sets the store and a limit; the command line wins over it.
	root := t.TempDir()
	var stdout, stderr bytes.Buffer
	e := env(map[string]string{"MEMORY_MCP_ROOT": root, "MEMORY_MCP_MAX_FILE_BYTES": "3", "MEMORY_MCP_LOG_LEVEL": "error"})
	if code := run(context.Background(), []string{"exec", `{"command":"create","path":"/memories/a","file_text":"1234"}`}, e, nil, &stdout, &stderr); code != 1 || stdout.String() != "Error: /memories/a would be 4 bytes, over the limit of 3 bytes per memory file\n" {
		t.Errorf("env limit: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"-max-file-bytes", "10", "exec", `{"command":"create","path":"/memories/a","file_text":"1234"}`}, e, nil, &stdout, &stderr); code != 0 {
		t.Errorf("flag over env: exit %d, %q", code, stdout.String())
	}
	if _, err := os.Stat(filepath.Join(root, "a")); err != nil {
		t.Errorf("MEMORY_MCP_ROOT not used: %v", err)
	}
	// -stdio-poll is accepted and ignored for a release.
	stdout.Reset()
	if code := run(context.Background(), []string{"-stdio-poll", "100us", "exec", `{"command":"view","path":"/memories/a"}`}, e, nil, &stdout, &stderr); code != 0 {
		t.Errorf("-stdio-poll: exit %d, %q %q", code, stdout.String(), stderr.String())
	}

	stdout.Reset()
	if code := run(context.Background(), []string{"-version"}, env(nil), nil, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "memory-mcp ") {
		t.Errorf("-version: exit %d, %q", code, stdout.String())
	}
}

// -instructions FILE replaces the protocol in the instructions and the prompt; -instructions
// none sends no instructions and keeps the prompt.
func TestInstructionsFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "protocol.md")
	os.WriteFile(file, []byte("Keep one file per project."), 0o600)
	for _, tt := range []struct {
		arg, instructions, prompt string
	}{
		{file, "Keep one file per project.", "Keep one file per project."},
		{"none", "", server.DefaultInstructions(server.ToolsSplit)},
	} {
		cmd := exec.Command(binary, "-root", filepath.Join(t.TempDir(), "m"), "-instructions", tt.arg)
		cmd.Env = testEnv(t)
		cs := connect(t, &mcp.CommandTransport{Command: cmd}, "2025-11-25")
		if got := cs.InitializeResult().Instructions; got != tt.instructions {
			t.Errorf("-instructions %s: instructions %q, want %q", tt.arg, got, tt.instructions)
		}
		p, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "memory_protocol"})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Messages[0].Content.(*mcp.TextContent).Text; got != tt.prompt {
			t.Errorf("-instructions %s: prompt %q, want %q", tt.arg, got, tt.prompt)
		}
	}
}

// The README's run command, go run ., serves a client.
func TestReadmeRunCommand(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "| run the server | `go run .` |") || !strings.Contains(string(readme), "| run the tests | `go test ./...` |") {
		t.Fatal("the README no longer gives the commands this test runs")
	}
	cmd := exec.Command("go", "run", ".")
	// testEnv moves HOME; keep the Go caches where they are, or go run rebuilds everything.
	caches, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	dirs := strings.Fields(string(caches))
	cmd.Env = append(testEnv(t), "GOCACHE="+dirs[0], "GOMODCACHE="+dirs[1], "GOPATH="+dirs[2])
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	checkTools(t, cs)
	runScenario(t, cs, false)
}

// -read-only lists only view and refuses changes with the exact message, in both tool modes.
func TestReadOnlyFlag(t *testing.T) {
	for _, mode := range []string{"split", "single"} {
		root := filepath.Join(t.TempDir(), "m")
		cmd := exec.Command(binary, "-root", root, "-read-only", "-tools", mode)
		cmd.Env = testEnv(t)
		cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		want, name, args := "memory_view", "memory_create", map[string]any{"path": "/memories/a.md", "file_text": "x"}
		if mode == "single" {
			want, name, args = "memory", "memory", map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"}
		}
		if len(tools.Tools) != 1 || tools.Tools[0].Name != want {
			t.Errorf("%s: tools %d, want only %s", mode, len(tools.Tools), want)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; text != "Error: The memory store is read-only" || !res.IsError {
			t.Errorf("%s: create gave %q", mode, text)
		}
		cs.Close()
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("%s: a read-only server wrote %v", mode, entries)
		}
	}
}

// A -root that is a filesystem's root or a pseudo-filesystem is refused unless the operator
// says they mean it; one that is a file is refused, plainly.
func TestStorageDirRefusals(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-root", "/"}, "memory-mcp: -root / is the root of a filesystem: give a directory of its own (or -allow-any-root if you mean it)"},
		{[]string{"-root", "/proc/self"}, "memory-mcp: -root /proc/self is in /proc, a pseudo-filesystem: give a directory of your own (or -allow-any-root if you mean it)"},
		{[]string{"-root", "/sys"}, "is in /sys, a pseudo-filesystem"},
		{[]string{"-backend", "overlay", "-lower", "/"}, "memory-mcp: -lower / is the root of a filesystem"},
		{[]string{"-root", file}, "memory-mcp: -root " + file + " is a file: give a directory (it is made if it does not exist)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(c.args, "exec", `{"command":"view","path":"/memories"}`), func(string) string { return "" }, nil, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, stderr.String(), c.want)
		}
	}
	// Said to be meant, the check steps aside (the store's own opening then decides).
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"-allow-any-root", "-root", "/proc/self", "exec", `{"command":"view","path":"/memories"}`}, func(string) string { return "" }, nil, &stdout, &stderr)
	if strings.Contains(stderr.String(), "pseudo-filesystem") {
		t.Errorf("-allow-any-root did not lift the check: %q", stderr.String())
	}
}

// Started by a person in a terminal, the server says in one plain line what it waits for
// and where to go instead; started by a client (a pipe), it says nothing of the kind.
func TestTerminalStartSaysWhatItWaitsFor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the terminal comes from util-linux's script, whose flags are Linux's")
	}
	script, err := exec.LookPath("script")
	if err != nil {
		missing(t, "script", "apt-get install bsdutils")
	}
	root := filepath.Join(t.TempDir(), "m")
	cmd := exec.Command(script, "-qfec", binary+" -root "+root+" -log-level error", "/dev/null")
	cmd.Env = testEnv(t)
	cmd.Stdin = strings.NewReader("")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "waiting") {
				line <- sc.Text()
				return
			}
		}
		close(line)
	}()
	select {
	case l := <-line:
		want := "memory-mcp is waiting for an MCP client on stdin (clients start it themselves: see the README); its memory is " + root + ". Try memory-mcp -help for the flags and commands, or memory-mcp ui to see the memory in a browser. Ctrl+C stops it."
		if strings.TrimRight(l, "\r") != want {
			t.Errorf("in a terminal:\n got %q\nwant %q", l, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("nothing said in a terminal")
	}
	// Through a pipe, as a client starts it: the protocol alone.
	var stderr bytes.Buffer
	pipe := exec.Command(binary, "-root", root, "-log-level", "error")
	pipe.Env, pipe.Stdin, pipe.Stderr = testEnv(t), strings.NewReader(""), &stderr
	pipe.Run()
	if strings.Contains(stderr.String(), "waiting") {
		t.Errorf("through a pipe: %q", stderr.String())
	}
}
