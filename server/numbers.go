package server

import (
	"bytes"
	"errors"
	"strconv"
)

// quoteHugeNumbers returns msg (a JSON text) with every number that does not fit in a
// float64, such as 1e400, written as a string instead, and whether there was one. mcp-go
// decodes arguments into float64 and refuses the whole message over such a number; as a
// string it reaches the command, which names the argument in a tool error.
func quoteHugeNumbers(msg []byte) ([]byte, bool) {
	var out []byte
	last := 0
	for i := 0; i < len(msg); i++ {
		switch c := msg[i]; {
		case c == '"':
			// Jump to the closing quote: the next quote not escaped by an odd run of
			// backslashes. Strings are most of a large body, and IndexByte is fast.
			for i++; i < len(msg); i++ {
				j := bytes.IndexByte(msg[i:], '"')
				if j < 0 {
					i = len(msg)
					break
				}
				i += j
				k := i
				for k > 0 && msg[k-1] == '\\' {
					k--
				}
				if (i-k)%2 == 0 {
					break
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(msg) && isNumberByte(msg[j]) {
				j++
			}
			tok := string(msg[i:j])
			if _, err := strconv.ParseFloat(tok, 64); errors.Is(err, strconv.ErrRange) {
				out = append(out, msg[last:i]...)
				out = strconv.AppendQuote(out, tok)
				last = j
			}
			i = j - 1
		}
	}
	if out == nil {
		return msg, false
	}
	return append(out, msg[last:]...), true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
