// Package jsonstr writes JSON strings exactly as encoding/json does, for the few hot paths
// that write JSON by hand (tool results, the history's and write-ahead log's lines): one
// pass over the string, straight into the caller's buffer, no reflection.
package jsonstr
