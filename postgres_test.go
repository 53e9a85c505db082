package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		if err != nil || string(out) != "The database's schema is at version 4.\n" {
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
// str_replace calls on distinct lines of one file, and 2 × 25 inserts into another, all
// land, and each replica sees the other's changes at once.
func TestPostgresTwoReplicas(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	store := vfstest.UniqueName(t)
	args := []string{"-backend", "postgres", "-dsn", dsn, "-store", store} // default flags: a burst waits its turn
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
	// And 2 × 25 inserts into another file, at once with the str_replace calls.
	if out, isErr := callText(t, ca, "memory_create", map[string]any{"path": "/memories/log.md", "file_text": "# log\n"}); isErr {
		t.Fatal(out)
	}
	for i := range 50 {
		cs := ca
		if i%2 == 1 {
			cs = cb
		}
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_insert", Arguments: map[string]any{
				"path": "/memories/log.md", "insert_line": 1, "insert_text": fmt.Sprintf("entry %02d", i)}})
			if err != nil || res.IsError {
				t.Errorf("insert %d: %v %+v", i, err, res)
			}
		})
	}
	// A rename racing a create of its destination, through the two replicas: one of them
	// wins, the other is told why; neither is refused for being busy.
	if out, isErr := callText(t, ca, "memory_create", map[string]any{"path": "/memories/from.md", "file_text": "moved\n"}); isErr {
		t.Fatal(out)
	}
	var renamed, created string
	var renameErr, createErr bool
	wg.Go(func() {
		renamed, renameErr = callText(t, ca, "memory_rename", map[string]any{"old_path": "/memories/from.md", "new_path": "/memories/to.md"})
	})
	wg.Go(func() {
		created, createErr = callText(t, cb, "memory_create", map[string]any{"path": "/memories/to.md", "file_text": "created\n"})
	})
	wg.Wait()
	switch {
	case !renameErr && createErr && created == "Error: File /memories/to.md already exists":
	case renameErr && !createErr && renamed == "Error: The destination /memories/to.md already exists":
	default:
		t.Errorf("rename racing create: rename %q, create %q; want one to win and the other to say why", renamed, created)
	}
	for _, cs := range []*mcp.ClientSession{ca, cb} {
		out, _ := callText(t, cs, "memory_view", map[string]any{"path": "/memories/shared.md"})
		if n := strings.Count(out, " done"); n != 50 {
			t.Errorf("%d of 50 changes present:\n%s", n, out)
		}
		out, _ = callText(t, cs, "memory_view", map[string]any{"path": "/memories/log.md"})
		for i := range 50 {
			if !strings.Contains(out, fmt.Sprintf("entry %02d\n", i)) {
				t.Errorf("insert %d is missing:\n%s", i, out)
			}
		}
	}
}

// The database restarted (-m fast), killed and restarted (-m immediate), and stopped for a
// while, as 4 clients keep creating files through one replica: every call ends within its
// deadline; a call that fails is a tool result with a neutral reason; no acknowledged
// change is lost; and memory-mcp serves again by itself once the database is back.
func TestPostgresFaults(t *testing.T) {
	db := vfstest.NewPostgresCluster(t)
	p := startHTTP(t, "http", "-backend", "postgres", "-dsn", db.DSN, "-call-timeout", "5s", "-max-inflight", "64")
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1}, "")
	failure := regexp.MustCompile(`^Error: Could not create /memories/w\d+/f\d+\.md: (storage unavailable|the storage did not answer in time, try again)$`)

	var (
		mu        sync.Mutex
		acked     []string
		refused   []string // refused as storage unavailable: the database said it did not land
		failures  int
		successes [4]int
		next      [4]int // each writer's next file, across the phases
	)
	write := func(ctx context.Context, w int) {
		for ; ctx.Err() == nil; next[w]++ {
			path := fmt.Sprintf("/memories/w%d/f%d.md", w, next[w])
			start := time.Now()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_create", Arguments: map[string]any{"path": path, "file_text": path}})
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("create %s took %v, past its 5 s deadline", path, took)
			}
			if err != nil {
				t.Errorf("create %s: not a tool result: %v", path, err)
				return
			}
			text := res.Content[0].(*mcp.TextContent).Text
			mu.Lock()
			switch {
			case !res.IsError:
				acked = append(acked, path)
				successes[w]++
			case failure.MatchString(text):
				failures++
				if strings.HasSuffix(text, "storage unavailable") {
					refused = append(refused, path)
				}
			default:
				t.Errorf("create %s: %q", path, text)
			}
			mu.Unlock()
			if res.IsError {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	// phase runs the writers around fault, until each has had 3 more successes after it.
	phase := func(name string, fault func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() { write(ctx, w) })
		}
		time.Sleep(200 * time.Millisecond)
		fault()
		mu.Lock()
		after := successes
		mu.Unlock()
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			done := true
			for w := range 4 {
				done = done && successes[w] >= after[w]+3
			}
			mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: memory-mcp did not serve again within 60 s of the database's return", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		wg.Wait()
	}
	phase("restart -m fast", func() { db.Restart(t, "fast") })
	phase("restart -m immediate", func() { db.Restart(t, "immediate") })
	phase("stopped for a second", func() {
		db.Stop(t, "immediate")
		mu.Lock()
		before := failures
		mu.Unlock()
		for met := false; !met; { // at least one call meets the outage
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			met = failures > before
			mu.Unlock()
		}
		time.Sleep(time.Second)
		db.Start(t)
	})
	if failures == 0 {
		t.Error("no call met the outage")
	}
	// Every acknowledged create is there, with its content.
	for _, path := range acked {
		if out, isErr := callText(t, cs, "memory_view", map[string]any{"path": path}); isErr || !strings.Contains(out, path) {
			t.Errorf("acknowledged %s: %q", path, out)
		}
	}
	// A create refused as unavailable changed nothing, though the connection may have been
	// lost during its commit.
	for _, path := range refused {
		if out, isErr := callText(t, cs, "memory_view", map[string]any{"path": path}); !isErr {
			t.Errorf("refused %s is there: %q", path, out)
		}
	}
	t.Logf("%d creates acknowledged, %d refused during the outages (%d as unavailable)", len(acked), failures, len(refused))
	if strings.Contains(p.stderr.String(), `"level":"panic"`) {
		t.Error("a panic was logged")
	}
}

// roundRobin balances a client's HTTP requests over the replicas with no sticky routing:
// each request goes to the next replica in turn. It sits in the client's transport rather
// than in a proxy process, so that what the test sees is the replicas' doing alone. It
// counts, per replica, the requests that carried a session id.
type roundRobin struct {
	hosts  []string
	token  string
	next   atomic.Uint64
	mu     sync.Mutex
	seen   []map[string]int // per replica: session id → requests
	served []int
}

func newRoundRobin(token string, urls ...string) *roundRobin {
	rr := &roundRobin{token: token}
	for _, u := range urls {
		rr.hosts = append(rr.hosts, strings.TrimPrefix(u, "http://"))
		rr.seen = append(rr.seen, map[string]int{})
		rr.served = append(rr.served, 0)
	}
	return rr
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(rr.next.Add(1) % uint64(len(rr.hosts)))
	rr.mu.Lock()
	rr.served[i]++
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		rr.seen[i][id]++
	}
	rr.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = rr.hosts[i], rr.hosts[i]
	r.Header.Set("Authorization", "Bearer "+rr.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A client behind a round-robin balancer over two replicas runs the end-to-end scenario in
// both protocol eras, with tenants: its successive requests land on both replicas, the
// 2025-era session included, and nobody else's token can use that session on either.
func TestPostgresRoundRobin(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	ts, file := setupTenants(t)
	// Each tenant's store has a name of this test's own.
	var doc map[string][]map[string]any
	data, _ := os.ReadFile(file)
	json.Unmarshal(data, &doc)
	for _, spec := range doc["tenants"] {
		spec["dir"] = vfstest.UniqueName(t) + "-" + spec["name"].(string)
	}
	data, _ = json.Marshal(doc)
	os.WriteFile(file, data, 0o600)

	args := []string{"-backend", "postgres", "-dsn", dsn, "-tenants", file}
	a, b := startHTTP(t, "http", args...), startHTTP(t, "http", args...)
	for _, c := range []struct{ era, version, token string }{{"2026-07-28", "", ts.alice}, {"2025-11-25", "2025-11-25", ts.bob}} {
		t.Run(c.era, func(t *testing.T) {
			rr := newRoundRobin(c.token, a.url, b.url)
			cs := connect(t, &mcp.StreamableClientTransport{Endpoint: "http://balanced/mcp", HTTPClient: &http.Client{Transport: rr}, MaxRetries: -1}, c.version)
			checkSession(t, cs, c.version)
			checkTools(t, cs)
			runScenario(t, cs, false)
			rr.mu.Lock()
			defer rr.mu.Unlock()
			for i := range rr.served {
				if rr.served[i] < 5 {
					t.Errorf("replica %d served %d requests of the scenario", i, rr.served[i])
				}
			}
			if id := cs.ID(); c.version != "" {
				if id == "" || rr.seen[0][id] == 0 || rr.seen[1][id] == 0 {
					t.Errorf("session %q: %d requests on replica 0, %d on replica 1", id, rr.seen[0][id], rr.seen[1][id])
				}
				// Alice's token with bob's session is refused on both replicas.
				for _, u := range []string{a.url, b.url} {
					req, _ := http.NewRequest(http.MethodPost, u+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
					req.Header.Set("Authorization", "Bearer "+ts.alice)
					req.Header.Set("Mcp-Session-Id", id)
					req.Header.Set("Mcp-Protocol-Version", c.version)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode < 400 {
						t.Errorf("%s: another tenant's token used bob's session: %s", u, resp.Status)
					}
				}
			}
		})
	}
}

// Two replicas on one store agree, for both protocol eras of the watching client:
//   - a client on one replica hears of the other's changes (list_changed, and updated for a
//     subscribed file) within a second;
//   - renames racing creates of one destination, across replicas: exactly one lands, and
//     nothing is overwritten;
//   - a directory renamed back and forth on one replica is never seen half-moved by a reader
//     on the other;
//   - the history holds both replicas' changes, and a restore by a third process is what
//     both then serve.
func TestPostgresReplicasAgree(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	for eraName, version := range eras {
		t.Run(eraName, func(t *testing.T) {
			store := vfstest.UniqueName(t)
			args := []string{"-backend", "postgres", "-dsn", dsn, "-store", store, "-max-inflight", "128"}
			a, b := startHTTP(t, "http", args...), startHTTP(t, "http", args...)
			ca := connect(t, &mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", MaxRetries: -1}, version)
			n := newNotes()
			client := n.client()
			var so *mcp.ClientSessionOptions
			if version != "" {
				so = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cb, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp", MaxRetries: -1}, so)
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Close()
			ctx := context.Background()
			call := func(cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Errorf("%s %v: %v", name, args, err)
					return "", true
				}
				return res.Content[0].(*mcp.TextContent).Text, res.IsError
			}

			// The change feed, across replicas.
			const uri = "memory:///memories/feed.md"
			n.subscribe(t, cb, uri)
			call(ca, "memory_create", map[string]any{"path": "/memories/feed.md", "file_text": "first\n"})
			n.waitListChanged(t, "a create on the other replica")
			call(ca, "memory_str_replace", map[string]any{"path": "/memories/feed.md", "old_str": "first", "new_str": "second"})
			n.waitUpdated(t, uri, "a str_replace on the other replica")

			// Renames racing creates of one destination.
			const races = 20
			for i := range races {
				call(ca, "memory_create", map[string]any{"path": fmt.Sprintf("/memories/src%d.md", i), "file_text": "moved\n"})
			}
			var renamed, created [races]bool
			var wg sync.WaitGroup
			for i := range races {
				dst := fmt.Sprintf("/memories/dst%d.md", i)
				wg.Go(func() {
					_, isErr := call(ca, "memory_rename", map[string]any{"old_path": fmt.Sprintf("/memories/src%d.md", i), "new_path": dst})
					renamed[i] = !isErr
				})
				wg.Go(func() {
					_, isErr := call(cb, "memory_create", map[string]any{"path": dst, "file_text": "created\n"})
					created[i] = !isErr
				})
			}
			wg.Wait()
			for i := range races {
				out, _ := call(cb, "memory_view", map[string]any{"path": fmt.Sprintf("/memories/dst%d.md", i)})
				_, srcGone := call(ca, "memory_view", map[string]any{"path": fmt.Sprintf("/memories/src%d.md", i)})
				switch {
				case renamed[i] == created[i]:
					t.Errorf("race %d: rename landed %v, create landed %v: want exactly one", i, renamed[i], created[i])
				case renamed[i] && (!strings.Contains(out, "moved") || !srcGone):
					t.Errorf("race %d: the rename landed but dst holds %q (source gone: %v)", i, out, srcGone)
				case created[i] && (!strings.Contains(out, "created") || srcGone):
					t.Errorf("race %d: the create landed but dst holds %q (source gone: %v)", i, out, srcGone)
				}
			}

			// A directory renamed back and forth, watched from the other replica.
			for i := range 20 {
				call(ca, "memory_create", map[string]any{"path": fmt.Sprintf("/memories/dir/f%02d.md", i), "file_text": "x\n"})
			}
			stop := make(chan struct{})
			var seen atomic.Int64
			var reader sync.WaitGroup
			reader.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					out, _ := call(cb, "memory_view", map[string]any{"path": "/memories"})
					inDir, inMoved := strings.Count(out, "/memories/dir/f"), strings.Count(out, "/memories/moved/f")
					if !(inDir == 20 && inMoved == 0 || inDir == 0 && inMoved == 20) {
						t.Errorf("a listing saw the directory half-moved: %d in dir, %d in moved:\n%s", inDir, inMoved, out)
						return
					}
					seen.Add(1)
				}
			})
			for i := range 10 {
				from, to := "/memories/dir", "/memories/moved"
				if i%2 == 1 {
					from, to = to, from
				}
				if out, isErr := call(ca, "memory_rename", map[string]any{"old_path": from, "new_path": to}); isErr {
					t.Errorf("rename %s: %s", from, out)
				}
			}
			close(stop)
			reader.Wait()
			if seen.Load() < 3 {
				t.Errorf("the reader looked only %d times", seen.Load())
			}

			// History and restore: a third process reads the log and restores; both
			// replicas serve the restored file.
			cliArgs := []string{"-backend", "postgres", "-dsn", dsn, "-store", store}
			log := mustCLI(t, append(cliArgs, "log", "/memories/feed.md")...)
			if !strings.Contains(log, "created") || !strings.Contains(log, "str_replace") {
				t.Fatalf("log of feed.md:\n%s", log)
			}
			mustCLI(t, append(cliArgs, "restore", "/memories/feed.md@"+firstSeq(t, cliArgs))...)
			for _, cs := range []*mcp.ClientSession{ca, cb} {
				if out, _ := call(cs, "memory_view", map[string]any{"path": "/memories/feed.md"}); !strings.Contains(out, "first") {
					t.Errorf("after the restore a replica serves %q", out)
				}
			}
		})
	}
}

// firstSeq is the version number of feed.md's first version.
func firstSeq(t *testing.T, cliArgs []string) string {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(mustCLI(t, append(cliArgs, "log", "-json", "/memories/feed.md")...)), "\n") {
		var e logEntry
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "created" {
			return fmt.Sprint(e.Seq)
		}
	}
	t.Fatal("no created version of feed.md in the log")
	return ""
}

// export and import move a store between a directory and PostgreSQL, both ways, byte for
// byte: the files, and the history with its contents, numbers, times and redactions.
func TestExportImport(t *testing.T) {
	dsn := vfstest.PostgresDSN(t)
	tmp := t.TempDir()
	root := filepath.Join(tmp, "os")
	for _, in := range []map[string]any{
		{"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\n"},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "gamma"},
		{"command": "create", "path": "/memories/projects/x/plan.md", "file_text": "the plan\n"},
		{"command": "create", "path": "/memories/.hidden.md", "file_text": "hidden\n"},
		{"command": "create", "path": "/memories/leak.md", "file_text": "password: hunter2\n"},
		{"command": "str_replace", "path": "/memories/leak.md", "old_str": "hunter2", "new_str": "(gone)"},
		{"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/archive"},
		{"command": "create", "path": "/memories/tmp.md", "file_text": "temporary\n"},
		{"command": "delete", "path": "/memories/tmp.md"},
	} {
		runExec(t, root, in)
	}
	var leakSeq string
	for _, line := range strings.Split(strings.TrimSpace(mustCLI(t, "-root", root, "log", "-json", "/memories/leak.md")), "\n") {
		var e logEntry
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "created" {
			leakSeq = fmt.Sprint(e.Seq)
		}
	}
	mustCLI(t, "-root", root, "redact", "/memories/leak.md@"+leakSeq)

	pgArgs := func(store string) []string { return []string{"-backend", "postgres", "-dsn", dsn, "-store", store} }
	store := vfstest.UniqueName(t)
	file := func(name string) string { return filepath.Join(tmp, name) }
	mustCLI(t, "-root", root, "export", file("from-os.tar"))
	out := mustCLI(t, append(pgArgs(store), "import", file("from-os.tar"))...)
	if !strings.HasPrefix(out, "Imported 4 files, ") {
		t.Errorf("import said %q", out)
	}
	mustCLI(t, append(pgArgs(store), "export", file("from-pg.tar"))...)
	root2 := filepath.Join(tmp, "os2")
	mustCLI(t, "-root", root2, "import", file("from-pg.tar"))
	mustCLI(t, "-root", root2, "export", file("back-on-os.tar"))
	first, _ := os.ReadFile(file("from-os.tar"))
	for _, name := range []string{"from-pg.tar", "back-on-os.tar"} {
		if data, _ := os.ReadFile(file(name)); !bytes.Equal(data, first) || len(first) < 1024 {
			t.Errorf("%s differs from the first export (%d and %d bytes)", name, len(data), len(first))
		}
	}
	if a, b := memoryFiles(t, root), memoryFiles(t, root2); !maps.Equal(a, b) || len(a) != 4 {
		t.Errorf("the files differ after the round trip:\n%v\n%v", a, b)
	}
	wantLog := mustCLI(t, "-root", root, "log", "-json")
	for _, args := range [][]string{pgArgs(store), {"-root", root2}} {
		if got := mustCLI(t, append(args, "log", "-json")...); got != wantLog {
			t.Errorf("%v: the history differs:\n got %s\nwant %s", args, got, wantLog)
		}
	}
	if !strings.Contains(wantLog, `"redacted"`) {
		t.Error("the redaction is not in the history")
	}
	// The history goes on where it stopped: the next change gets the next number.
	if out := mustCLI(t, append(pgArgs(store), "restore", "/memories/notes.md@1")...); !strings.Contains(out, "as version ") {
		t.Errorf("restore after import: %q", out)
	}

	// Without the history: only the files.
	mustCLI(t, append(pgArgs(store), "export", "-no-history", file("files.tar"))...)
	root3 := filepath.Join(tmp, "os3")
	if out := mustCLI(t, "-root", root3, "import", file("files.tar")); !strings.HasPrefix(out, "Imported 4 files, 0 versions and 0 history contents") {
		t.Errorf("import -no-history export: %q", out)
	}

	// Refused: a store that is not empty, and a stream with a path out of the memory.
	if code, _, errOut := cli(t, append(pgArgs(store), "import", file("from-os.tar"))...); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Errorf("import into a store with files: exit %d, %q", code, errOut)
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	for _, e := range [][2]string{{"memory-mcp-export.json", `{"format":1,"history":false}` + "\n"}, {"memories/../../escape.md", "x"}} {
		tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o600, Size: int64(len(e[1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(e[1]))
	}
	tw.Close()
	os.WriteFile(file("evil.tar"), evil.Bytes(), 0o600)
	if code, _, errOut := cli(t, append(pgArgs(vfstest.UniqueName(t)+"-evil"), "import", file("evil.tar"))...); code != 1 || !strings.Contains(errOut, "not a memory file's path") {
		t.Errorf("import of a path out of the memory: exit %d, %q", code, errOut)
	}
}

// memoryFiles returns the memory's files under root, by path, without the bookkeeping.
func memoryFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".memory-mcp") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			data, _ := os.ReadFile(p)
			files[rel] = string(data)
		}
		return nil
	})
	return files
}
