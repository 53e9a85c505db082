package server

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// A call that waits (here 100 ms for the storage lock) passes the reading of stdin on only
// once a next line is there, where stdin is a pipe the loop can poll: a client that waits
// for each answer wakes no other worker. Any other reader is passed on unasked.
// (TestStdioCancelAndReadWhileACallWaits checks that a line sent meanwhile is read.)
func TestStdioPassesTheReadingOnForALineOnly(t *testing.T) {
	for _, osPipe := range []bool{true, false} {
		name := map[bool]string{true: "os-pipe", false: "io-pipe"}[osPipe]
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			st, err := vfs.OpenOSStore(root)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			lock, err := vfs.NewOSFs(root)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			s := New(handlers.New(st, handlers.DefaultLimits()), Config{Tools: "split", Version: "test"})

			var inR io.Reader
			var inW io.WriteCloser
			if osPipe {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				inR, inW = r, w
			} else {
				inR, inW = io.Pipe()
			}
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- s.ServeStdio(context.Background(), inR, outW, 1<<20)
				outW.Close()
			}()
			answers := make(chan string, 10)
			go func() {
				sc := bufio.NewScanner(outR)
				for sc.Scan() {
					if strings.Contains(sc.Text(), `"id":`) { // not the notifications
						answers <- sc.Text()
					}
				}
				close(answers)
			}()
			call := func(line, id string) string {
				t.Helper()
				if _, err := io.WriteString(inW, line+"\n"); err != nil {
					t.Fatal(err)
				}
				select {
				case a := <-answers:
					if !strings.Contains(a, `"id":`+id+`,`) {
						t.Fatalf("got %s, want the answer to %s", a, id)
					}
					return a
				case <-time.After(10 * time.Second):
					t.Fatalf("no answer to %s", id)
				}
				return ""
			}
			call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "0")
			io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "2")
			s.handoffs.Store(0) // a slow first call may have passed it on with the notification waiting

			if _, err := lock.LockStorage(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			unlocked := make(chan struct{})
			time.AfterFunc(100*time.Millisecond, func() { lock.UnlockStorage(); close(unlocked) })
			defer func() { <-unlocked }() // before lock.Close
			if a := call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_create","arguments":{"path":"/memories/a.md","file_text":"x"}}}`, "1"); strings.Contains(a, `"isError":true`) {
				t.Fatalf("the call failed: %s", a)
			}
			n := s.handoffs.Load()
			if osPipe && n != 0 {
				t.Errorf("the reading was passed on %d times with nothing to read", n)
			}
			if !osPipe && n == 0 {
				t.Error("the reading of an input that cannot be polled was not passed on")
			}
			inW.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
