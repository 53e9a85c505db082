// Command noopturns times a no-op tool call over stdio from a Go client against several
// stdio servers at once, in turns: each server answers a block of calls, then the next,
// round after round, and it prints each server's median time per call and the median of
// its per-round ratios to the first server's. Taking turns block by block puts every
// server in the same minutes of a shared machine, where BenchmarkStdio's runs, one server
// after the other, drift by tens of percent from run to run. Many short turns resolve
// more than a few long ones: client and server tend to stay in one state (quick or slow
// hand-overs) for a whole turn, so on this project's machine two identical servers came
// out at 0.83–1.21× each other in 20 turns of 5,000 calls and at 0.92–1.01× in 150 turns
// of 1,000 (the defaults).
//
//	go build -o /tmp/responder ./testdata/responder
//	GOEXPERIMENT=jsonv2 go build -o /tmp/memory-mcp .
//	go run ./scripts/noopturns \
//	  'responder=/tmp/responder' \
//	  'default=/tmp/memory-mcp -backend memory -log-level error' \
//	  'look=MEMORY_MCP_STDIO_POLL=100us /tmp/memory-mcp -backend memory -log-level error'
//
// Each argument is NAME=COMMAND: the command's leading NAME=VALUE words are set in its
// environment. The call is memory_view with no arguments, which memory-mcp answers with
// an error and the responder with a fixed result: no storage is touched.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "noopturns:", err)
		os.Exit(1)
	}
}

// run parses the arguments, lets the servers take their turns and writes the results.
func run(args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("noopturns", flag.ContinueOnError)
	rounds := flags.Int("rounds", 150, "rounds of turns")
	calls := flags.Int("calls", 1000, "timed calls in each turn")
	warm := flags.Int("warm", 100, "untimed calls before each turn's timed ones")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() == 0 || *rounds < 1 || *calls < 1 || *warm < 0 {
		return errors.New("usage: noopturns [-rounds N] [-calls N] [-warm N] NAME=COMMAND...")
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, arg := range flags.Args() {
		s, err := start(arg)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_view","arguments":{}}}` + "\n")
	for r := range *rounds {
		for k := range servers {
			s := servers[(r+k)%len(servers)] // a different server first in each round
			for range *warm {
				s.roundTrip(req)
			}
			t := time.Now()
			for range *calls {
				s.roundTrip(req)
			}
			s.perCall = append(s.perCall, float64(time.Since(t).Nanoseconds())/1e3/float64(*calls))
		}
	}
	for _, s := range servers {
		if s.err != nil {
			return fmt.Errorf("%s: %w", s.name, s.err)
		}
	}
	first := servers[0]
	for _, s := range servers {
		ratios := make([]float64, len(s.perCall))
		for i := range ratios {
			ratios[i] = s.perCall[i] / first.perCall[i]
		}
		fmt.Fprintf(stdout, "%-12s %6.1f µs/call  %.3f× %s (per-round ratios %.2f–%.2f)\n",
			s.name, median(s.perCall), median(ratios), first.name, slices.Min(ratios), slices.Max(ratios))
	}
	return nil
}

// server is one stdio server under test.
type server struct {
	name    string
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	err     error     // the first failure; later round trips do nothing
	perCall []float64 // µs per call in each round
}

// start starts NAME=COMMAND and initializes an MCP session with it.
func start(arg string) (*server, error) {
	name, command, ok := strings.Cut(arg, "=")
	words := strings.Fields(command)
	for len(words) > 0 && strings.Contains(words[0], "=") {
		words = words[1:]
	}
	if !ok || name == "" || len(words) == 0 {
		return nil, fmt.Errorf("%q: want NAME=COMMAND", arg)
	}
	fields := strings.Fields(command)
	env := fields[:len(fields)-len(words)]
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	s.roundTrip([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"noopturns","version":"1"}}}` + "\n"))
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil && s.err == nil {
		s.err = err
	}
	if s.err != nil {
		s.stop()
		return nil, fmt.Errorf("%s: %w", name, s.err)
	}
	return s, nil
}

// roundTrip sends one request line and reads lines up to its response.
func (s *server) roundTrip(req []byte) {
	if s.err != nil {
		return
	}
	if _, err := s.in.Write(req); err != nil {
		s.err = err
		return
	}
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			s.err = errors.Join(errors.New("no response"), err)
			return
		}
		if bytes.Contains(line, []byte(`"id":`)) {
			return
		}
	}
}

func (s *server) stop() {
	s.in.Close()
	s.cmd.Wait()
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
