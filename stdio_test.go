package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// stdioBatch is a client that writes its requests and closes stdin at once: an initialize,
// the initialized notification, and five creates.
func stdioBatch() (input []byte, files []string) {
	lines := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"batch","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("f%d.md", i)
		files = append(files, name)
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/%s","file_text":"content %d"}}}`, i, name, i))
	}
	return []byte(strings.Join(lines, "\n") + "\n"), files
}

// checkBatch checks that every request got its response and every create succeeded.
func checkBatch(t *testing.T, out []byte, files []string) {
	t.Helper()
	got := map[int]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var msg struct {
			ID     *int   `json:"id"`
			Method string `json:"method"`
			Result struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			} `json:"result"`
		}
		err := json.Unmarshal(line, &msg)
		if err == nil && msg.ID == nil && msg.Method == "notifications/resources/list_changed" {
			continue // the creates change the list of resources
		}
		if err != nil || msg.ID == nil {
			t.Fatalf("not a response: %q (%v)", line, err)
		}
		text := ""
		if len(msg.Result.Content) > 0 {
			text = msg.Result.Content[0].Text
		}
		got[*msg.ID] = text
	}
	if _, ok := got[0]; !ok {
		t.Errorf("no initialize response in %q", out)
	}
	for i, name := range files {
		if want := "File created successfully at: /memories/" + name; got[i+1] != want {
			t.Errorf("request %d: %q, want %q", i+1, got[i+1], want)
		}
	}
}

// Closing stdin right after writing requests loses none of them: every call already read
// runs to completion and is answered before the server exits, on every backend, 200 times
// each (this failed 198 of 200 times when the server stopped at end of input).
func TestStdioEOFAnswersEverything(t *testing.T) {
	input, files := stdioBatch()
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	for _, backend := range []string{"os", "memory", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			for round := range rounds {
				dir := t.TempDir()
				args := []string{"-backend", backend}
				switch backend {
				case "os":
					args = append(args, "-root", dir)
				case "overlay":
					os.MkdirAll(filepath.Join(dir, "lower"), 0o700)
					args = append(args, "-lower", filepath.Join(dir, "lower"), "-root", filepath.Join(dir, "upper"))
				}
				var out bytes.Buffer
				var errOut syncBuffer // the log is written from several goroutines
				code := run(context.Background(), args, func(string) string { return "" }, bytes.NewReader(input), &out, &errOut)
				if code != 0 {
					t.Fatalf("round %d: exit %d: %s", round, code, errOut.String())
				}
				checkBatch(t, out.Bytes(), files)
				if backend != "memory" {
					where := dir
					if backend == "overlay" {
						where = filepath.Join(dir, "upper")
					}
					for i, name := range files {
						if data, err := os.ReadFile(filepath.Join(where, name)); err != nil || string(data) != fmt.Sprintf("content %d", i+1) {
							t.Errorf("round %d: %s not written: %q %v", round, name, data, err)
						}
					}
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// The same through the real process, whose exit ends everything it did not finish.
func TestStdioEOFProcess(t *testing.T) {
	input, files := stdioBatch()
	for range 20 {
		dir := t.TempDir()
		cmd := exec.Command(binary, "-root", dir)
		cmd.Env = testEnv(t)
		cmd.Stdin = bytes.NewReader(input)
		cmd.Stderr = io.Discard
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, out, files)
		for _, name := range files {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("%s not written", name)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// Over stdio too, a number beyond a float64's range is a tool error naming the argument.
func TestStdioHugeNumbers(t *testing.T) {
	input := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_view","arguments":{"path":"/memories","view_range":[1e400,2]}}}` + "\n"
	var out bytes.Buffer
	var errOut syncBuffer // the log is written from several goroutines
	if code := run(context.Background(), []string{"-backend", "memory"}, func(string) string { return "" }, strings.NewReader(input), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Error: Invalid ` + "`view_range`" + `. It should be a list of two integers."}],"isError":true}}`
	if !strings.Contains(out.String(), want) {
		t.Errorf("got\n%s\nwant a line\n%s", out.String(), want)
	}
}

// A tool call that waits (here for the storage lock, held by another process) passes the
// reading of stdin on: the next request is answered meanwhile, and notifications/cancelled
// ends the waiting call at once, with a tool error, long before its timeout. Standard
// input as an operating system's pipe, which the loop polls before it passes the reading
// on, and as any other reader, whose reading it passes on unasked.
func TestStdioCancelAndReadWhileACallWaits(t *testing.T) {
	t.Run("os-pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cancelAndReadWhileACallWaits(t, r, w)
	})
	t.Run("io-pipe", func(t *testing.T) {
		r, w := io.Pipe()
		cancelAndReadWhileACallWaits(t, r, w)
	})
}

func cancelAndReadWhileACallWaits(t *testing.T, inR io.Reader, inW io.WriteCloser) {
	root := t.TempDir()
	lock, err := files.NewOSFs(root)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	outR, outW := io.Pipe()
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"-root", root, "-call-timeout", "2m"}, func(string) string { return "" }, inR, outW, &errOut)
		outW.Close()
	}()
	answers := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":`) {
				answers <- sc.Text()
			}
		}
		close(answers)
	}()
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	await := func(id string) string {
		select {
		case a := <-answers:
			if !strings.Contains(a, `"id":`+id+`,`) {
				t.Fatalf("got %s, want the answer to %s", a, id)
			}
			return a
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %s: %s", id, errOut.String())
		}
		return ""
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	await("0")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	if _, err := lock.LockStorage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`)
	awaitLockWaiter(t, lock)
	send(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	await("8") // while 7 waits
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"the user gave up"}}`)
	a := await("7")
	if !strings.Contains(a, `"isError":true`) {
		t.Errorf("the cancelled call's answer: %s", a)
	}
	lock.UnlockStorage()
	if _, err := os.Stat(filepath.Join(root, "a.md")); err == nil {
		t.Error("the cancelled create happened")
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// Over stdio, a create of 32 MiB gets the per-file limit's tool result, with its id, and
// nothing is written; a line over -max-line-bytes gets a JSON-RPC error that names the
// bound and carries the request's id, and the session goes on.
func TestStdioOversizedCalls(t *testing.T) {
	root := filepath.Join(t.TempDir(), "m")
	cmd := exec.Command(binary, "-root", root, "-max-line-bytes", "40000000")
	cmd.Env = testEnv(t)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang fails, rather than waits for the client's own timeout
	defer cancel()
	big := strings.Repeat("x", 32<<20)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_create", Arguments: map[string]any{"path": "/memories/big.md", "file_text": big}})
	if err != nil {
		t.Fatalf("a 32 MiB create: %v", err)
	}
	want := "Error: /memories/big.md would be 33554432 bytes, over the limit of 1048576 bytes per memory file"
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || text != want {
		t.Errorf("a 32 MiB create: %q, want %q", text, want)
	}
	if _, err := os.Stat(filepath.Join(root, "big.md")); err == nil {
		t.Error("the refused file exists")
	}

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_create", Arguments: map[string]any{"path": "/memories/huge.md", "file_text": strings.Repeat("y", 41<<20)}})
	if err == nil || !strings.Contains(err.Error(), "Request too large: a line may hold at most 40000000 bytes") {
		t.Errorf("a line over the bound: %v, want the JSON-RPC error, matched to the call", err)
	}
	if text, isErr := callText(t, cs, "memory_create", map[string]any{"path": "/memories/after.md", "file_text": "still here\n"}); isErr {
		t.Errorf("after an oversized line the session does not work: %s", text)
	}
}
