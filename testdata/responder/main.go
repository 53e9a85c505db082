// Command responder is the floor of the stdio benchmarks: a minimal MCP server in Go that
// answers initialize and every tool call with a fixed result, doing no more than reading
// a line, finding its id and writing a line. memory-mcp's no-op call is measured against
// its round trip (BenchmarkStdio/floor).
package main

import (
	"bufio"
	"encoding/json"
	"os"
)

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
			continue // a notification
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"responder","version":"1"}}`
		case "tools/call":
			result = `{"content":[{"type":"text","text":"Error: The path parameter is required."}],"isError":true}`
		default:
			result = `{}`
		}
		out.WriteString(`{"jsonrpc":"2.0","id":`)
		out.Write(msg.ID)
		out.WriteString(`,"result":` + result + "}\n")
		out.Flush()
	}
}
