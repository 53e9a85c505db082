package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// stdioClient speaks JSON-RPC to the binary over its stdin and stdout with as little work
// of its own as possible, so that a round trip measures the server.
type stdioClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStdio(tb testing.TB, args ...string) *stdioClient {
	tb.Helper()
	return startStdioCommand(tb, binary, append([]string{"-log-level", "error"}, args...)...)
}

// responder builds testdata/responder, the floor of the stdio benchmarks, once.
var responder = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "responder")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "responder")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/responder").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	return bin, nil
})

func startStdioCommand(tb testing.TB, path string, args ...string) *stdioClient {
	tb.Helper()
	settleDisk()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+tb.TempDir())
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &stdioClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	tb.Cleanup(func() { in.Close(); cmd.Wait() })
	c.roundTrip(tb, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n"))
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return c
}

// roundTrip sends one request line and returns its response line.
func (c *stdioClient) roundTrip(tb testing.TB, req []byte) []byte {
	if _, err := c.in.Write(req); err != nil {
		tb.Fatal(err)
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			tb.Fatal(err)
		}
		if bytes.Contains(line, []byte(`"id":`)) {
			return line
		}
	}
}

// toolCall is the request line of one tool call (arguments already JSON).
func toolCall(name, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}` + "\n")
}

func (c *stdioClient) call(tb testing.TB, name, args string) []byte {
	resp := c.roundTrip(tb, toolCall(name, args))
	if bytes.Contains(resp, []byte(`"isError":true`)) {
		tb.Fatalf("%s %s: %.300s", name, args, resp)
	}
	return resp
}

func jsonString(s string) string { return strconv.Quote(s) } // valid JSON for the ASCII texts used here

// BenchmarkStdio is a real round trip to the built binary over stdio for every command. The
// floor, "noop", is a tool call that the server refuses before touching storage (memory_view
// without arguments): read every figure as a ratio to it.
func BenchmarkStdio(b *testing.B) {
	// The floor of the floor: a minimal Go responder's round trip for the same call.
	if bin, err := responder(); err != nil {
		b.Fatal(err)
	} else {
		c := startStdioCommand(b, bin)
		b.Run("responder/noop", func(b *testing.B) {
			req := toolCall("memory_view", `{}`)
			for b.Loop() {
				c.roundTrip(b, req)
			}
		})
	}
	small := "unique marker: small\n" + strings.Repeat("a small memory line\n", 39) // 800 bytes
	big := strings.Repeat(strings.Repeat("x", 63)+"\n", 16384)
	for _, backend := range []string{"memory", "os", "postgres"} {
		args := []string{"-backend", backend}
		switch backend {
		case "os":
			args = []string{"-root", filepath.Join(b.TempDir(), "m")}
		case "postgres":
			args = append(args, "-dsn", vfstest.PostgresDSN(b), "-store", vfstest.UniqueName(b))
		}
		c := startStdio(b, append(args, "-max-file-bytes", "4194304", "-max-request-bytes", "8388608")...)
		c.call(b, "memory_create", `{"path":"/memories/small.md","file_text":`+jsonString(small)+`}`)
		c.call(b, "memory_create", `{"path":"/memories/big.txt","file_text":`+jsonString(big[:len(big)-100]+"MARKER-A"+strings.Repeat("y", 91)+"\n")+`}`)

		run := func(name string, fn func(b *testing.B)) { b.Run(backend+"/"+name, fn) }
		run("noop", func(b *testing.B) {
			req := toolCall("memory_view", `{}`)
			for b.Loop() {
				c.roundTrip(b, req)
			}
		})
		// The same call as a 2026-era client sends it: its protocol in _meta.
		run("noop-2026", func(b *testing.B) {
			req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
				`"io.modelcontextprotocol/clientCapabilities":{}},"name":"memory_view","arguments":{}}}` + "\n")
			for b.Loop() {
				c.roundTrip(b, req)
			}
		})
		run("view", func(b *testing.B) {
			req := toolCall("memory_view", `{"path":"/memories/small.md"}`)
			for b.Loop() {
				c.roundTrip(b, req)
			}
		})
		run("create", func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				c.call(b, "memory_create", `{"path":"/memories/new/`+strconv.Itoa(i)+`.md","file_text":"a new memory"}`)
			}
			b.StopTimer()
			c.call(b, "memory_delete", `{"path":"/memories/new"}`)
		})
		from, to := "small", "SMALL" // outlives the closure: -count runs it again on the same file
		run("str_replace", func(b *testing.B) {
			for b.Loop() {
				c.call(b, "memory_str_replace", `{"path":"/memories/small.md","old_str":"unique marker: `+from+`","new_str":"unique marker: `+to+`"}`)
				from, to = to, from
			}
		})
		run("insert", func(b *testing.B) {
			c.call(b, "memory_create", `{"path":"/memories/ins.md","file_text":"# notes\n"}`)
			i := 0
			for b.Loop() {
				if i++; i%500 == 0 {
					b.StopTimer()
					c.call(b, "memory_delete", `{"path":"/memories/ins.md"}`)
					c.call(b, "memory_create", `{"path":"/memories/ins.md","file_text":"# notes\n"}`)
					b.StartTimer()
				}
				c.call(b, "memory_insert", `{"path":"/memories/ins.md","insert_line":1,"insert_text":"- another fact"}`)
			}
			b.StopTimer()
			c.call(b, "memory_delete", `{"path":"/memories/ins.md"}`)
		})
		run("rename", func(b *testing.B) {
			from, to := "small.md", "renamed.md"
			for b.Loop() {
				c.call(b, "memory_rename", `{"old_path":"/memories/`+from+`","new_path":"/memories/`+to+`"}`)
				from, to = to, from
			}
			if from != "small.md" {
				c.call(b, "memory_rename", `{"old_path":"/memories/`+from+`","new_path":"/memories/small.md"}`)
			}
		})
		run("delete", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				c.call(b, "memory_create", `{"path":"/memories/doomed.md","file_text":"x"}`)
				b.StartTimer()
				c.call(b, "memory_delete", `{"path":"/memories/doomed.md"}`)
			}
		})
		run("view-1MiB", func(b *testing.B) {
			req := toolCall("memory_view", `{"path":"/memories/big.txt"}`)
			for b.Loop() {
				c.roundTrip(b, req)
			}
		})
		bigFrom, bigTo := "MARKER-A", "MARKER-B"
		run("str_replace-1MiB", func(b *testing.B) {
			for b.Loop() {
				c.call(b, "memory_str_replace", `{"path":"/memories/big.txt","old_str":"`+bigFrom+`","new_str":"`+bigTo+`"}`)
				bigFrom, bigTo = bigTo, bigFrom
			}
		})
		run("create-1MiB", func(b *testing.B) {
			req := toolCall("memory_create", `{"path":"/memories/copy.txt","file_text":`+jsonString(big)+`}`)
			del := toolCall("memory_delete", `{"path":"/memories/copy.txt"}`)
			for b.Loop() {
				if resp := c.roundTrip(b, req); bytes.Contains(resp, []byte(`"isError":true`)) {
					b.Fatalf("%.200s", resp)
				}
				b.StopTimer()
				c.roundTrip(b, del)
				b.StartTimer()
			}
		})
		c.call(b, "memory_delete", `{"path":"/memories/big.txt"}`)
	}
}

// BenchmarkStdioViewTree views a directory tree of 1,000 and 10,000 entries over stdio, on
// the os and postgres backends.
func BenchmarkStdioViewTree(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		root := filepath.Join(b.TempDir(), "m")
		for d := 0; d < 100; d++ {
			dir := filepath.Join(root, fmt.Sprintf("dir%03d", d))
			os.MkdirAll(dir, 0o700)
			for f := 0; f < n/100-1; f++ {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%04d.md", f)), []byte("a short memory\n"), 0o600)
			}
		}
		for _, backend := range []string{"os", "postgres"} {
			args := []string{"-root", root}
			if backend == "postgres" {
				// The same tree, moved into the database with export and import.
				tarFile := filepath.Join(b.TempDir(), "tree.tar")
				if out, err := exec.Command(binary, "-root", root, "export", "-no-history", tarFile).CombinedOutput(); err != nil {
					b.Fatalf("export: %v %s", err, out)
				}
				args = []string{"-backend", "postgres", "-dsn", vfstest.PostgresDSN(b), "-store", vfstest.UniqueName(b)}
				if out, err := exec.Command(binary, append(args, "import", tarFile)...).CombinedOutput(); err != nil {
					b.Fatalf("import: %v %s", err, out)
				}
			}
			c := startStdio(b, args...)
			b.Run(fmt.Sprintf("%s/%d-entries", backend, n), func(b *testing.B) {
				req := toolCall("memory_view", `{"path":"/memories"}`)
				for b.Loop() {
					c.roundTrip(b, req)
				}
			})
		}
	}
}

// BenchmarkStartup is the time from starting the process to its answer to initialize.
func BenchmarkStartup(b *testing.B) {
	root := filepath.Join(b.TempDir(), "m")
	req := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n")
	for b.Loop() {
		cmd := exec.Command(binary, "-root", root, "-log-level", "error")
		cmd.Stdin = bytes.NewReader(req)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cmd.Wait()
		b.StartTimer()
	}
}

// BenchmarkMixedWorkload runs 10,000 mixed calls over stdio and reports the server's peak
// resident memory afterwards (Linux: VmHWM).
func BenchmarkMixedWorkload(b *testing.B) {
	for b.Loop() {
		c := startStdio(b, "-root", filepath.Join(b.TempDir(), "m"))
		for i := 0; i < 10000; i++ {
			file := fmt.Sprintf(`"/memories/p%d/notes-%d.md"`, i%10, i%50)
			switch i % 5 {
			case 0:
				c.roundTrip(b, toolCall("memory_create", `{"path":`+file+`,"file_text":"# notes\nfirst line\n"}`))
			case 1:
				c.roundTrip(b, toolCall("memory_insert", `{"path":`+file+`,"insert_line":1,"insert_text":"- fact `+strconv.Itoa(i)+`"}`))
			case 2:
				c.roundTrip(b, toolCall("memory_view", `{"path":`+file+`}`))
			case 3:
				c.roundTrip(b, toolCall("memory_str_replace", `{"path":`+file+`,"old_str":"first line","new_str":"first line"}`))
			case 4:
				c.roundTrip(b, toolCall("memory_view", `{"path":"/memories"}`))
			}
		}
		b.StopTimer()
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
		if err == nil {
			for _, line := range strings.Split(string(status), "\n") {
				if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")))
					b.ReportMetric(float64(n)/1024, "peak-RSS-MB")
				}
			}
		}
		b.StartTimer()
	}
}

// BenchmarkHTTPConcurrent50 runs 50 clients at once over Streamable HTTP, each with its own
// session and files, doing a mixed workload; every call must succeed. It reports calls/s.
func BenchmarkHTTPConcurrent50(b *testing.B) {
	// 50 calls at once: the in-flight limit must let them all in (a quarter of it per tenant).
	p := startHTTPBench(b, "-root", filepath.Join(b.TempDir(), "m"), "-max-inflight", "256")
	benchHTTPClients(b, []string{p}, 50, func(i int) []mcp.CallToolParams {
		file := fmt.Sprintf("/memories/client%02d.md", i)
		return []mcp.CallToolParams{
			{Name: "memory_create", Arguments: map[string]any{"path": file, "file_text": "# notes\n"}},
			{Name: "memory_insert", Arguments: map[string]any{"path": file, "insert_line": 1, "insert_text": "- fact"}},
			{Name: "memory_view", Arguments: map[string]any{"path": file}},
			{Name: "memory_str_replace", Arguments: map[string]any{"path": file, "old_str": "- fact", "new_str": "- FACT"}},
			{Name: "memory_view", Arguments: map[string]any{"path": "/memories"}},
			{Name: "memory_delete", Arguments: map[string]any{"path": file}},
		}
	})
}

// benchHTTPClients connects n Streamable HTTP clients, client i to urls[i%len(urls)], and
// runs them at once, each calling steps(i) in turn, once per benchmark iteration. It reports
// calls/s; every call must succeed.
func benchHTTPClients(b *testing.B, urls []string, n int, steps func(i int) []mcp.CallToolParams) {
	b.Helper()
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: urls[i%len(urls)] + "/mcp", MaxRetries: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	var calls, failures atomic.Int64
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		for i, cs := range sessions {
			wg.Go(func() {
				for _, s := range steps(i) {
					res, err := cs.CallTool(context.Background(), &s)
					calls.Add(1)
					if err != nil || res.IsError {
						failures.Add(1)
					}
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(calls.Load())/time.Since(start).Seconds(), "calls/s")
	if failures.Load() > 0 {
		b.Fatalf("%d of %d calls failed", failures.Load(), calls.Load())
	}
}

func startHTTPBench(b *testing.B, args ...string) string {
	b.Helper()
	_, base := startHTTPBenchCmd(b, args...)
	return base
}

// settleDisk has the system write back what is waiting before a server under measure
// starts, so that it does not pay for what ran before it: the build, the previous run's
// removed stores, another server. (On ext4 without a journal, a file created within six
// minutes of many removals, while their inode table blocks wait to be written, scans past
// each removed inode, and within one minute after they were written: on the test machine a
// creation took 0.24–1.5 ms instead of 17 µs.) Where there is no sync command it does
// nothing.
func settleDisk() { exec.Command("sync").Run() }

// startHTTPBenchCmd starts the binary over HTTP and returns its process and base URL.
func startHTTPBenchCmd(b *testing.B, args ...string) (*exec.Cmd, string) {
	b.Helper()
	if len(args) == 0 {
		args = []string{"-root", filepath.Join(b.TempDir(), "m")}
	}
	cmd := exec.Command(binary, append([]string{"-transport", "http", "-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+b.TempDir())
	settleDisk()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), `"url":"`); ok {
			go io.Copy(io.Discard, stderr)
			return cmd, strings.TrimSuffix(rest[:strings.Index(rest, `"`)], "/mcp")
		}
	}
	b.Fatal("the HTTP server did not start")
	return nil, ""
}

// BenchmarkPostgresReplicas runs 32 clients at once over Streamable HTTP on one PostgreSQL
// store, served by 1 replica or by 2 (each client on one of them), with a mixed workload of
// reads and changes, each client on files of its own plus listings of the whole store. It
// reports calls/s; every call must succeed.
func BenchmarkPostgresReplicas(b *testing.B) {
	dsn := vfstest.PostgresDSN(b)
	for _, replicas := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas-%d", replicas), func(b *testing.B) {
			args := []string{"-backend", "postgres", "-dsn", dsn, "-store", vfstest.UniqueName(b), "-max-inflight", "256"}
			var urls []string
			for range replicas {
				urls = append(urls, startHTTPBench(b, args...))
			}
			benchHTTPClients(b, urls, 32, func(i int) []mcp.CallToolParams {
				file := fmt.Sprintf("/memories/c%02d/notes.md", i)
				return []mcp.CallToolParams{
					{Name: "memory_create", Arguments: map[string]any{"path": file, "file_text": "# notes\n"}},
					{Name: "memory_view", Arguments: map[string]any{"path": file}},
					{Name: "memory_insert", Arguments: map[string]any{"path": file, "insert_line": 1, "insert_text": "- fact"}},
					{Name: "memory_view", Arguments: map[string]any{"path": file}},
					{Name: "memory_str_replace", Arguments: map[string]any{"path": file, "old_str": "- fact", "new_str": "- FACT"}},
					{Name: "memory_view", Arguments: map[string]any{"path": "/memories"}},
					{Name: "memory_delete", Arguments: map[string]any{"path": file}},
				}
			})
		})
	}
}

// BenchmarkHTTPWriters32Plain is BenchmarkHTTPWriters32 with clients that cost the server's
// two cores as little as they can: each of the 32 posts tool calls through one shared
// net/http client and reads the answer, where the official SDK's client takes about as much
// CPU per call as the server. "2026" sends 2026-07-28 calls (that era needs no session and
// is served the direct way); "2025" opens a 2025-06-18 session per client first (such calls
// take mcp-go's way). It reports calls/s and the server's and the clients' CPU time per
// call (Linux); every call must succeed.
func BenchmarkHTTPWriters32Plain(b *testing.B) {
	for _, era := range []string{"2026", "2025"} {
		b.Run(era, func(b *testing.B) { benchHTTPWritersPlain(b, era == "2026") })
	}
}

func benchHTTPWritersPlain(b *testing.B, modern bool) {
	cmd, base := startHTTPBenchCmd(b, "-root", filepath.Join(b.TempDir(), "m"), "-max-inflight", "256")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	post := func(session, body string, headers ...string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		return resp, answer, err
	}
	sessions := make([]string, 32)
	for i := range sessions {
		if modern {
			break
		}
		resp, _, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		if err != nil || resp.Header.Get("Mcp-Session-Id") == "" {
			b.Fatalf("initialize: %v", err)
		}
		sessions[i] = resp.Header.Get("Mcp-Session-Id")
		if _, _, err := post(sessions[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Protocol-Version", "2025-06-18"); err != nil {
			b.Fatal(err)
		}
	}
	var calls, failures, id, round atomic.Int64
	call := func(session, tool, args string) {
		var resp *http.Response
		var answer []byte
		var err error
		if modern {
			resp, answer, err = post("", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{`+
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},`+
				`"name":%q,"arguments":%s}}`, id.Add(1), tool, args),
				"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool)
		} else {
			resp, answer, err = post(session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`,
				id.Add(1), tool, args), "Mcp-Protocol-Version", "2025-06-18")
		}
		calls.Add(1)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"result"`)) || bytes.Contains(answer, []byte(`"isError":true`)) {
			if failures.Add(1) == 1 && resp != nil {
				b.Logf("%s: %d %s", tool, resp.StatusCode, answer)
			}
		}
	}
	cpu0, clientCPU0 := processCPU(cmd.Process.Pid), processCPU(os.Getpid())
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		for i, session := range sessions {
			wg.Go(func() {
				file := strconv.Quote(fmt.Sprintf("/memories/w%02d-%d.md", i, round.Add(1)))
				call(session, "memory_create", `{"path":`+file+`,"file_text":"# notes\n"}`)
				call(session, "memory_str_replace", `{"path":`+file+`,"old_str":"notes","new_str":"NOTES"}`)
				call(session, "memory_insert", `{"path":`+file+`,"insert_line":1,"insert_text":"- fact"}`)
				call(session, "memory_delete", `{"path":`+file+`}`)
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(calls.Load())/elapsed.Seconds(), "calls/s")
	if cpu := processCPU(cmd.Process.Pid); cpu > 0 {
		b.ReportMetric(float64((cpu-cpu0).Microseconds())/float64(calls.Load()), "server-µs/call")
		b.ReportMetric(float64((processCPU(os.Getpid())-clientCPU0).Microseconds())/float64(calls.Load()), "client-µs/call")
	}
	if failures.Load() > 0 {
		b.Fatalf("%d of %d calls failed", failures.Load(), calls.Load())
	}
}

// BenchmarkHTTPWriters32 runs 32 clients at once over Streamable HTTP on one os store (no
// tenants), each changing files of its own: creates, edits and deletes, every one durable
// before it is acknowledged. It reports changes/s; every call must succeed.
func BenchmarkHTTPWriters32(b *testing.B) {
	p := startHTTPBench(b, "-root", filepath.Join(b.TempDir(), "m"), "-max-inflight", "256")
	var round atomic.Int64
	benchHTTPClients(b, []string{p}, 32, func(i int) []mcp.CallToolParams {
		file := fmt.Sprintf("/memories/w%02d-%d.md", i, round.Add(1))
		return []mcp.CallToolParams{
			{Name: "memory_create", Arguments: map[string]any{"path": file, "file_text": "# notes\n"}},
			{Name: "memory_str_replace", Arguments: map[string]any{"path": file, "old_str": "notes", "new_str": "NOTES"}},
			{Name: "memory_insert", Arguments: map[string]any{"path": file, "insert_line": 1, "insert_text": "- fact"}},
			{Name: "memory_delete", Arguments: map[string]any{"path": file}},
		}
	})
}

// processCPU returns the user and system CPU time process pid has used so far, from
// /proc/PID/stat (in clock ticks of 10 ms); 0 where there is no /proc.
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+2:]))
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	system, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+system) * 10 * time.Millisecond
}
