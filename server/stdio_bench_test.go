package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// BenchmarkServeStdioNoop is the stdio loop's own cost for a tool call refused before it
// touches storage, in this process over two OS pipes (as a client's process talks to the
// server's): what BenchmarkStdio/memory/noop measures without a process between, so that
// a CPU profile (-cpuprofile) and allocation counts show the loop and its decoding alone.
func BenchmarkServeStdioNoop(b *testing.B) {
	st := files.NewMemoryStore()
	defer st.Close()
	s := New(handlers.New(st, handlers.DefaultLimits()), Config{Version: "bench"})
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(context.Background(), inR, outW, 1<<20)
		outW.Close()
	}()
	out := bufio.NewReaderSize(outR, 1<<16)
	roundTrip := func(line string) {
		if _, err := io.WriteString(inW, line); err != nil {
			b.Fatal(err)
		}
		for {
			answer, err := out.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(answer, []byte(`"id":`)) {
				return
			}
		}
	}
	roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n")
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_view","arguments":{}}}` + "\n")
	}
	b.StopTimer()
	inW.Close()
	if err := <-done; err != nil {
		b.Error(err)
	}
	inR.Close()
	outR.Close()
}

// BenchmarkServeStdioNoopCPU is the stdio loop's CPU for the same call with nothing to wait
// for: the lines are all in memory and the answers go nowhere, so that no system call or
// wake-up is counted, only the loop's decoding, dispatch and encoding.
func BenchmarkServeStdioNoopCPU(b *testing.B) {
	st := files.NewMemoryStore()
	defer st.Close()
	s := New(handlers.New(st, handlers.DefaultLimits()), Config{Version: "bench"})
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_view","arguments":{}}}` + "\n"
	in.Grow(b.N * len(line))
	for range b.N {
		in.WriteString(line)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.ServeStdio(context.Background(), &in, io.Discard, 1<<20); err != nil {
		b.Fatal(err)
	}
}
