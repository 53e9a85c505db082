module github.com/memory-mcp/memory-mcp

go 1.25.5

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mark3labs/mcp-go v1.2.1 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	github.com/spf13/afero v1.15.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	golang.org/x/tools v0.42.0 // indirect
)
