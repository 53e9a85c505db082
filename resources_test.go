package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notes collects the resource notifications a client receives.
type notes struct {
	updated     chan string
	listChanged chan struct{}
	logs        chan map[string]any
	acked       chan string     // what acknowledged subscriptions/listen streams follow: URIs, and "list"
	seen        map[string]bool // what of it subscribe has taken
}

func newNotes() *notes {
	return &notes{updated: make(chan string, 100), listChanged: make(chan struct{}, 100), logs: make(chan map[string]any, 100),
		acked: make(chan string, 100), seen: map[string]bool{}}
}

// client is a client whose notifications n collects.
func (n *notes) client() *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, n.options())
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok {
				if p.Notifications.ResourcesListChanged {
					n.acked <- "list"
				}
				for _, uri := range p.Notifications.ResourceSubscriptions {
					n.acked <- uri
				}
			}
			return next(ctx, method, req)
		}
	})
	return c
}

// subscribe subscribes cs (a session of n.client()) to uri, and returns once the server
// follows it and the list: a 2025-era resources/subscribe is answered then, while the SDK
// opens 2026-07-28 subscriptions/listen streams (for the list at connect, for uri now) in
// the background, and the server acknowledges each.
func (n *notes) subscribe(t *testing.T, cs *mcp.ClientSession, uri string) {
	t.Helper()
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if cs.InitializeResult().ProtocolVersion < "2026-07-28" {
		return
	}
	for _, want := range []string{"list", uri} {
		for !n.seen[want] {
			select {
			case got := <-n.acked:
				n.seen[got] = true
			case <-time.After(10 * time.Second):
				t.Fatalf("no subscriptions/listen stream for %s was acknowledged", want)
			}
		}
	}
}

func (n *notes) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			n.updated <- r.Params.URI
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { n.listChanged <- struct{}{} },
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			if m, ok := r.Params.Data.(map[string]any); ok {
				n.logs <- m
			}
		},
	}
}

// waitUpdated waits at most a second (the acceptance bound) for an update of uri.
func (n *notes) waitUpdated(t *testing.T, uri, why string) {
	t.Helper()
	deadline := time.After(time.Second)
	for {
		select {
		case got := <-n.updated:
			if got == uri {
				return
			}
		case <-deadline:
			t.Fatalf("no notifications/resources/updated for %s within 1 s of %s", uri, why)
		}
	}
}

func (n *notes) waitListChanged(t *testing.T, why string) {
	t.Helper()
	select {
	case <-n.listChanged:
	case <-time.After(time.Second):
		t.Fatalf("no notifications/resources/list_changed within 1 s of %s", why)
	}
}

// quiet fails if any resource notification arrives within d.
func (n *notes) quiet(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case uri := <-n.updated:
		t.Errorf("%s: notifications/resources/updated for %s", why, uri)
	case <-n.listChanged:
		t.Errorf("%s: notifications/resources/list_changed", why)
	case <-time.After(d):
	}
}

func (n *notes) drain() {
	for {
		select {
		case <-n.updated:
		case <-n.listChanged:
		default:
			return
		}
	}
}

// resourceNames are the file names whose URIs need percent-encoding.
var resourceNames = map[string]string{
	"a b.md":           "memory:///memories/a%20b.md",
	"hash#1.md":        "memory:///memories/hash%231.md",
	"100%.txt":         "memory:///memories/100%25.txt",
	"why?.md":          "memory:///memories/why%3F.md",
	"ünïcødé 日本.md":    "memory:///memories/%C3%BCn%C3%AFc%C3%B8d%C3%A9%20%E6%97%A5%E6%9C%AC.md",
	"dir x/y+z&w=1.md": "memory:///memories/dir%20x/y+z&w=1.md",
}

// seedResources writes n numbered files and the awkward names straight into root, plus a
// hidden file that is no resource.
func seedResources(t *testing.T, root string, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%04d.md", i))
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name := range resourceNames {
		p := filepath.Join(root, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte("content of "+name+"\n"), 0o600)
	}
	os.WriteFile(filepath.Join(root, ".hidden.md"), []byte("not listed\n"), 0o600)
	os.WriteFile(filepath.Join(root, "notes.md"), []byte("# Notes\nfirst\n"), 0o600)
}

// The memory as resources over every transport and both protocol eras: a paginated list of
// 1,000+ files, reads of awkward names, template completion, subscriptions with an updated
// notification within a second of a change by the same session, by exec in another process
// and by another client, and list_changed on create and delete.
func TestResources(t *testing.T) {
	const files = 1000
	for eraName, version := range eras {
		for _, transport := range []string{"stdio", "http", "sse"} {
			t.Run(transport+"/"+eraName, func(t *testing.T) {
				root := filepath.Join(t.TempDir(), "m")
				seedResources(t, root, files)
				n := newNotes()
				var cs, other *mcp.ClientSession
				client := func(c *mcp.Client) *mcp.ClientSession {
					var so *mcp.ClientSessionOptions
					if version != "" {
						so = &mcp.ClientSessionOptions{ProtocolVersion: version}
					}
					var tr mcp.Transport
					switch transport {
					case "stdio":
						cmd := exec.Command(binary, "-root", root)
						cmd.Env = testEnv(t)
						tr = &mcp.CommandTransport{Command: cmd}
					case "http":
						tr = &mcp.StreamableClientTransport{Endpoint: serverURL(t, transport, root) + "/mcp", MaxRetries: -1}
					case "sse":
						tr = &mcp.SSEClientTransport{Endpoint: serverURL(t, transport, root) + "/sse"}
					}
					s, err := c.Connect(t.Context(), tr, so)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				}
				cs = client(n.client())
				ctx := context.Background()

				// The list, page by page.
				var all []*mcp.Resource
				pages := 0
				for cursor := ""; ; pages++ {
					res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, res.Resources...)
					if cursor = res.NextCursor; cursor == "" {
						break
					}
				}
				if want := files + len(resourceNames) + 1; len(all) != want || pages < 5 {
					t.Fatalf("%d resources in %d pages, want %d in several", len(all), pages+1, want)
				}
				names := make([]string, len(all))
				for i, r := range all {
					names[i] = r.Name
					if r.MIMEType != "text/markdown" && !strings.HasSuffix(r.Name, ".txt") || r.Size == 0 || r.URI == "" {
						t.Errorf("resource %+v", r)
					}
				}
				if !slices.IsSorted(names) || slices.Contains(names, "/memories/.hidden.md") {
					t.Errorf("the list is not sorted, or shows a hidden file")
				}
				for name, uri := range resourceNames {
					i := slices.Index(names, "/memories/"+name)
					if i < 0 || all[i].URI != uri {
						t.Errorf("%s: listed as %v, want URI %s", name, i >= 0 && all[i] != nil, uri)
						continue
					}
					res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					if err != nil {
						t.Fatalf("read %s: %v", uri, err)
					}
					if c := res.Contents[0]; c.Text != "content of "+name+"\n" || c.URI != uri {
						t.Errorf("read %s: %+v", uri, c)
					}
				}
				if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory:///memories/missing.md"}); err == nil {
					t.Error("reading a missing file did not fail")
				}

				// Completion of the template's path.
				comp, err := cs.Complete(ctx, &mcp.CompleteParams{
					Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: "memory:///memories/{+path}"},
					Argument: mcp.CompleteParamsArgument{Name: "path", Value: "d3/f00"},
				})
				if err != nil {
					t.Fatal(err)
				}
				if c := comp.Completion; c.Total != 10 || len(c.Values) != 10 || c.Values[0] != "d3/f0003.md" {
					t.Errorf("completion of d3/f00: %+v", c)
				}
				if comp, _ := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "memory:///memories/{+path}"}, Argument: mcp.CompleteParamsArgument{Name: "path", Value: "d"}}); !comp.Completion.HasMore || comp.Completion.Values[0] != "d0/" {
					t.Errorf("completion of d: %+v", comp.Completion)
				}

				notes := "memory:///memories/notes.md"
				n.subscribe(t, cs, notes)
				n.drain()

				// (a) this session's tool call.
				if out, isErr := callText(t, cs, "memory_str_replace", map[string]any{"path": "/memories/notes.md", "old_str": "first", "new_str": "second"}); isErr {
					t.Fatal(out)
				}
				n.waitUpdated(t, notes, "this session's str_replace")
				res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: notes})
				if err != nil || res.Contents[0].Text != "# Notes\nsecond\n" {
					t.Errorf("read after the change: %v %v", res, err)
				}

				// (b) memory-mcp exec in another process.
				in, _ := json.Marshal(map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "second", "new_str": "third"})
				cmd := exec.Command(binary, "exec", "-root", root, string(in))
				cmd.Env = testEnv(t)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("exec: %v\n%s", err, out)
				}
				n.waitUpdated(t, notes, "memory-mcp exec in another process")

				// (c) another client's session.
				other = client(mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil))
				if out, isErr := callText(t, other, "memory_str_replace", map[string]any{"path": "/memories/notes.md", "old_str": "third", "new_str": "fourth"}); isErr {
					t.Fatal(out)
				}
				n.waitUpdated(t, notes, "another client's str_replace")

				// list_changed on create and delete.
				n.drain()
				callText(t, cs, "memory_create", map[string]any{"path": "/memories/new.md", "file_text": "new\n"})
				n.waitListChanged(t, "a create")
				callText(t, other, "memory_delete", map[string]any{"path": "/memories/new.md"})
				n.waitListChanged(t, "another client's delete")
			})
		}
	}
}

// serverURLs are the HTTP servers the resources test started, by transport and root: each
// subtest starts one and its second client connects to the same.
var serverURLs = map[string]string{}

func serverURL(t *testing.T, transport, root string) string {
	if u, ok := serverURLs[transport+root]; ok {
		return u
	}
	p := startHTTP(t, transport, "-root", root)
	serverURLs[transport+root] = p.url
	return p.url
}

// A tenant hears only of its own memory's changes, even for the same path; a read-only
// tenant can read and subscribe.
func TestResourcesTenants(t *testing.T) {
	for eraName, version := range eras {
		t.Run(eraName, func(t *testing.T) {
			ts, file := setupTenants(t)
			srv := startHTTP(t, "http", "-tenants", file, "-root", ts.root)
			connectAs := func(token string, n *notes) *mcp.ClientSession {
				c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
				if n != nil {
					c = n.client()
				}
				var so *mcp.ClientSessionOptions
				if version != "" {
					so = &mcp.ClientSessionOptions{ProtocolVersion: version}
				}
				s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}, so)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			ctx := context.Background()
			an, cn := newNotes(), newNotes()
			alice, bob, carol := connectAs(ts.alice, an), connectAs(ts.bob, nil), connectAs(ts.carol, cn)
			uri := "memory:///memories/secret.md"
			an.subscribe(t, alice, uri)
			cn.subscribe(t, carol, uri)
			res, err := carol.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || res.Contents[0].Text != "carol's notes\n" {
				t.Fatalf("carol reads %v %v", res, err)
			}
			list, err := bob.ListResources(ctx, nil)
			if err != nil || len(list.Resources) != 1 || list.Resources[0].Name != "/memories/secret.md" {
				t.Fatalf("bob's list: %+v %v", list, err)
			}
			an.drain()
			cn.drain()
			callText(t, bob, "memory_str_replace", map[string]any{"path": "/memories/secret.md", "old_str": "own", "new_str": "changed"})
			callText(t, bob, "memory_create", map[string]any{"path": "/memories/bob.md", "file_text": "bob\n"})
			an.quiet(t, 1500*time.Millisecond, "alice, after bob's changes")
			cn.quiet(t, 0, "carol, after bob's changes")
			callText(t, alice, "memory_str_replace", map[string]any{"path": "/memories/secret.md", "old_str": "secret", "new_str": "note"})
			an.waitUpdated(t, uri, "alice's own change")
			cn.quiet(t, 300*time.Millisecond, "carol, after alice's change")
		})
	}
}

// The logging capability: after logging/setLevel, each tool call's line reaches the client
// as notifications/message, without file contents.
func TestLoggingToClient(t *testing.T) {
	cmd := exec.Command(binary, "-root", filepath.Join(t.TempDir(), "m"))
	cmd.Env = testEnv(t)
	n := newNotes()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, n.options())
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callText(t, cs, "memory_create", map[string]any{"path": "/memories/quiet.md", "file_text": "before setLevel\n"})
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	callText(t, cs, "memory_create", map[string]any{"path": "/memories/a.md", "file_text": "top secret text\n"})
	select {
	case m := <-n.logs:
		if m["command"] != "create" || m["path"] != "/memories/a.md" || m["outcome"] != "ok" {
			t.Errorf("log message %v", m)
		}
		if data, _ := json.Marshal(m); strings.Contains(string(data), "top secret") || strings.Contains(string(data), "before setLevel") {
			t.Errorf("log message holds file contents: %s", data)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no log message after logging/setLevel info")
	}
	if len(n.logs) != 0 {
		t.Errorf("%d more log messages", len(n.logs))
	}
}

// The official MCP conformance suite (npm @modelcontextprotocol/conformance, found through
// NODE_PATH) against the Streamable HTTP server: the generic scenarios, logging, completion,
// resources and DNS-rebinding protection.
func TestConformanceSuite(t *testing.T) {
	node := needTool(t, "node", "Node.js")
	cli := ""
	for _, dir := range filepath.SplitList(os.Getenv("NODE_PATH")) {
		if p := filepath.Join(dir, "@modelcontextprotocol", "conformance", "dist", "index.js"); fileExists(p) {
			cli = p
		}
	}
	if cli == "" {
		missing(t, "@modelcontextprotocol/conformance", "npm install @modelcontextprotocol/conformance@0.1.13, and NODE_PATH set to its node_modules")
	}
	root := filepath.Join(t.TempDir(), "m")
	os.MkdirAll(root, 0o700)
	os.WriteFile(filepath.Join(root, "notes.md"), []byte("# Notes\n"), 0o600)
	srv := startHTTP(t, "http", "-root", root)
	for _, scenario := range []string{
		"server-initialize", "ping", "tools-list", "prompts-list", "resources-list", // the generic profile
		"logging-set-level", "completion-complete", "resources-subscribe", "resources-unsubscribe", "dns-rebinding-protection",
	} {
		t.Run(scenario, func(t *testing.T) {
			out, err := exec.Command(node, cli, "server", "--url", srv.url+"/mcp", "--scenario", scenario).CombinedOutput()
			if err != nil || !strings.Contains(string(out), " 0 failed, 0 warnings") {
				t.Errorf("conformance %s: %v\n%s", scenario, err, out[max(0, len(out)-3000):])
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A file over the per-file limit, placed in the storage by hand, is not read whole as a
// resource: resources/read refuses it with an error that says why and what to do.
func TestResourceOverTheFileLimit(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	os.MkdirAll(root, 0o700)
	os.WriteFile(filepath.Join(root, "huge.md"), []byte(strings.Repeat("x", 2<<20)), 0o600)
	os.WriteFile(filepath.Join(root, "small.md"), []byte("small\n"), 0o600)
	cmd := exec.Command(binary, "-root", root)
	cmd.Env = testEnv(t)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory:///memories/huge.md"})
	if err == nil || !strings.Contains(err.Error(), "/memories/huge.md is 2097152 bytes, over the limit of 1048576 bytes per memory file: view it in parts (memory_view with view_range)") {
		t.Errorf("resources/read of a 2 MiB file: %v", err)
	}
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory:///memories/small.md"})
	if err != nil || res.Contents[0].Text != "small\n" {
		t.Errorf("resources/read of a small file: %v", err)
	}
	if text, isErr := callText(t, cs, "memory_view", map[string]any{"path": "/memories/huge.md"}); isErr || !strings.Contains(text, "[Output truncated at 16000 characters: line 1 alone is longer than that; only its beginning is shown.]") {
		t.Errorf("view of the 2 MiB file: %.300q", text)
	}
}
