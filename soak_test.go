//go:build soak

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/server"
)

// bearerOver adds a bearer token to the requests of its own transport.
type bearerOver struct {
	token string
	rt    http.RoundTripper
}

func (b bearerOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// rssKiB reads a process's resident set size.
func rssKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// The attacks that exhausted the HTTP service, run together against servers with default
// flags for 30 s (MEMORY_MCP_SOAK_SECONDS to change): unauthenticated chunked uploads that
// stall, a flood of sessions never deleted, half-sent bodies, 2,000 idle keep-alive
// connections, 200 concurrent 4 MiB creates, and (on an SSE server) a client that posts
// views and never reads its stream. Each server's RSS must stay under 256 MiB, and a
// legitimate client's call must keep succeeding within 2 s of its quiet baseline.
//
// It has the build tag soak (go test -tags soak -run TestSoakAttacks .), so that the
// everyday test command stays quick; .ci/run runs it on its own, with nothing else
// competing for the machine.
func TestSoakAttacks(t *testing.T) {
	seconds := 30
	if s, err := strconv.Atoi(os.Getenv("MEMORY_MCP_SOAK_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	token, sha := server.NewToken()
	tenants := filepath.Join(t.TempDir(), "tenants.json")
	os.WriteFile(tenants, []byte(`{"tenants":[{"name":"team","token_sha256":"`+sha+`"}]}`), 0o600)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "team"), 0o700)
	os.WriteFile(filepath.Join(root, "team", "small.md"), []byte("remember this\n"), 0o600)
	os.WriteFile(filepath.Join(root, "team", "big.md"), bytes.Repeat([]byte("a line that a view sends back again and again\n"), 400), 0o600)

	httpSrv := startHTTP(t, "http", "-root", root, "-tenants", tenants)
	sseSrv := startHTTP(t, "sse", "-root", root, "-tenants", tenants)
	httpAddr := strings.TrimPrefix(httpSrv.url, "http://")

	client := &http.Client{Transport: bearer{token}}
	legit := connect(t, &mcp.StreamableClientTransport{Endpoint: httpSrv.url + "/mcp", HTTPClient: client, MaxRetries: -1}, "")
	call := func() (time.Duration, error) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := legit.CallTool(ctx, &mcp.CallToolParams{Name: "memory_view", Arguments: map[string]any{"path": "/memories/small.md"}})
		if err == nil && (res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "remember this")) {
			err = fmt.Errorf("unexpected result %+v", res.Content)
		}
		return time.Since(start), err
	}
	var quiet []time.Duration
	for range 20 {
		d, err := call()
		if err != nil {
			t.Fatal(err)
		}
		quiet = append(quiet, d)
	}
	slices.Sort(quiet)
	baseline := quiet[len(quiet)/2]

	ctx, stop := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var counts sync.Map
	count := func(name string) { v, _ := counts.LoadOrStore(name, new(atomic.Int64)); v.(*atomic.Int64).Add(1) }
	// conns runs n attackers that each open a connection, do attack on it, and start over
	// when the server closes it. (They pause 100 ms before starting over: the attackers
	// share this machine's two cores with the servers, which a remote attacker would not.)
	conns := func(name string, n int, attack func(c net.Conn)) {
		for range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					c, err := (&net.Dialer{}).DialContext(ctx, "tcp", httpAddr)
					if err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					context.AfterFunc(ctx, func() { c.Close() })
					attack(c)
					c.Close()
					count(name)
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
	}
	// 1. Unauthenticated chunked uploads of ~4 MiB that stall.
	chunk := strings.Repeat("x", 64<<10)
	conns("unauthenticated stalled upload", 200, func(c net.Conn) {
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+httpAddr+"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
		for range 64 {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				break
			}
		}
		io.Copy(io.Discard, c) // stall until the server gives up on us
	})
	// 3. Headers and part of a body, then nothing.
	conns("half-sent body", 500, func(c net.Conn) {
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+httpAddr+"\r\nAuthorization: Bearer "+token+"\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{\"jsonrpc\":")
		io.Copy(io.Discard, c)
	})
	// 4. Idle keep-alive connections: one request, then silence.
	conns("idle keep-alive", 2000, func(c net.Conn) {
		io.WriteString(c, "GET /nowhere HTTP/1.1\r\nHost: "+httpAddr+"\r\nAuthorization: Bearer "+token+"\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	// 2. Sessions opened and never deleted.
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	flood := &http.Client{Transport: bearerOver{token, &http.Transport{MaxIdleConnsPerHost: 8}}}
	send := func(url, body string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := flood.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			time.Sleep(20 * time.Millisecond)
		}
		return resp.StatusCode
	}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				send(httpSrv.url+"/mcp", initBody)
				count("initialize flood")
			}
		})
	}
	// 5. 200 concurrent valid creates of 4 MiB requests.
	text := strings.Repeat("z", 4<<20-200)
	big := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"memory_create","arguments":{"path":"/memories/huge.md","file_text":"` + text + `"}}}`)
	for range 200 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpSrv.url+"/mcp", bytes.NewReader(big))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusServiceUnavailable {
						time.Sleep(100 * time.Millisecond)
					}
				}
				count("4 MiB create")
			}
		})
	}
	// 6. A legacy SSE client that posts views and never reads its stream.
	wg.Go(func() {
		sseAddr := strings.TrimPrefix(sseSrv.url, "http://")
		for ctx.Err() == nil {
			c, err := net.Dial("tcp", sseAddr)
			if err != nil {
				return
			}
			context.AfterFunc(ctx, func() { c.Close() })
			io.WriteString(c, "GET /sse HTTP/1.1\r\nHost: "+sseAddr+"\r\nAuthorization: Bearer "+token+"\r\nAccept: text/event-stream\r\n\r\n")
			r := bufio.NewReader(c)
			endpoint := ""
			for endpoint == "" {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				if v, ok := strings.CutPrefix(line, "data: "); ok {
					endpoint = strings.TrimSpace(v)
				}
			}
			for i := 0; ctx.Err() == nil && endpoint != ""; i++ {
				status := send(sseSrv.url+endpoint, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories/big.md"}}}`, i))
				count("non-reading SSE post")
				if status == http.StatusBadRequest || status == 0 {
					break // disconnected: start over
				}
			}
			c.Close()
		}
	})

	// Watch both servers' memory, and the legitimate client, until the attacks end.
	var peakHTTP, peakSSE int
	var worst time.Duration
	var failures []string
	tick := time.NewTicker(100 * time.Millisecond)
	next := time.Now()
	for ctx.Err() == nil {
		<-tick.C
		peakHTTP, peakSSE = max(peakHTTP, rssKiB(httpSrv.cmd.Process.Pid)), max(peakSSE, rssKiB(sseSrv.cmd.Process.Pid))
		if time.Now().After(next) && ctx.Err() == nil {
			d, err := call()
			if err != nil {
				failures = append(failures, err.Error())
			}
			worst = max(worst, d)
			next = time.Now().Add(500 * time.Millisecond)
		}
	}
	tick.Stop()
	stop()
	wg.Wait()

	counts.Range(func(k, v any) bool { t.Logf("%s: %d", k, v.(*atomic.Int64).Load()); return true })
	t.Logf("peak RSS: http %d KiB, sse %d KiB; legitimate call: baseline %v, worst %v", peakHTTP, peakSSE, baseline, worst)
	const limit = 256 << 10
	if peakHTTP > limit || peakSSE > limit {
		t.Errorf("peak RSS over 256 MiB: http %d KiB, sse %d KiB", peakHTTP, peakSSE)
	}
	if len(failures) > 0 {
		t.Errorf("%d legitimate calls failed during the attacks, first: %s", len(failures), failures[0])
	}
	if worst > baseline+2*time.Second {
		t.Errorf("a legitimate call took %v during the attacks (baseline %v)", worst, baseline)
	}
}
