package server

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// stdioLine is a line the server wrote, with the time the test read it.
type stdioLine struct {
	text string
	at   time.Time
}

// serveStdioTest serves s over stdio, reading in, and returns the lines it writes as they
// come (closed once its output ends) and what ServeStdio returned.
func serveStdioTest(s *Server, in io.Reader) (<-chan stdioLine, <-chan error) {
	return serveStdioTestCtx(context.Background(), s, in)
}

// serveStdioTestCtx is serveStdioTest until ctx ends.
func serveStdioTestCtx(ctx context.Context, s *Server, in io.Reader) (<-chan stdioLine, <-chan error) {
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(ctx, in, outW, 1<<20)
		outW.Close()
	}()
	lines := make(chan stdioLine, 1000)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- stdioLine{sc.Text(), time.Now()}
		}
		close(lines)
	}()
	return lines, done
}

// awaitAnswer returns the answer to request id, passing the lines before it to other.
func awaitAnswer(t *testing.T, lines <-chan stdioLine, id string, other func(stdioLine)) stdioLine {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("no answer to %s: the output ended", id)
			}
			if strings.Contains(l.text, `"id":`+id+`,`) {
				return l
			}
			other(l)
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %s", id)
		}
	}
}
