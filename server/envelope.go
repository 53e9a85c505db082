package server

import (
	"encoding/json"
	"unicode/utf8"
)

// scanRequest decodes line into req as json.Unmarshal does, for the lines clients send
// most: a request or notification whose keys are exactly the ones rpcRequest names (each
// once, without escapes), whose method, version and tool name are plain ASCII strings,
// and whose params, if any, are an object. It reports false for any other line, which the
// caller then gives to json.Unmarshal: a key it does not know (an initialize's params,
// which json.Unmarshal would skip or match without regard to case), a duplicate, an escape
// in a name or method, a value of the wrong type, or anything that is not valid JSON.
//
// Why: decoding the envelope with encoding/json took over a quarter of the stdio loop's
// CPU for a no-op call (about 0.85 µs of 3.1); this scan takes a fifth of that. The raw
// values it gives (id, arguments, _meta, task, requestId) are the exact bytes of each
// value in line, validated as JSON, as json.RawMessage receives them; they share line's
// memory, which the caller owns. FuzzScanRequestAsUnmarshal checks that a line it takes
// decodes the same way with json.Unmarshal.
func scanRequest(line []byte, req *rpcRequest) bool {
	s := scanner{b: line}
	var r rpcRequest
	ok := s.object(func(key []byte) int {
		switch string(key) {
		case "jsonrpc":
			r.JSONRPC = s.plainString()
			return 1
		case "id":
			r.ID = s.raw()
			return 2
		case "method":
			r.Method = s.plainString()
			return 4
		case "params":
			s.params(&r.Params)
			return 8
		}
		return 0
	})
	if !ok || !s.end() {
		return false
	}
	*req = r
	return true
}

// scanner reads JSON values from b at i; ok turns false at the first thing it does not
// take, and stays false.
type scanner struct {
	b  []byte
	i  int
	ok bool
}

// maxScanDepth bounds the nesting of a raw value the scanner takes (encoding/json takes
// 10,000 levels; a deeper value goes to it).
const maxScanDepth = 100

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.ok && s.i == len(s.b)
}

// object reads an object whose keys are among those member knows, each once: member
// reads the value of key (s is at it, after the colon) and returns the key's bit, a power
// of two of its own, or 0 for a key it does not know.
func (s *scanner) object(member func(key []byte) int) bool {
	s.ok = true
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	seen := 0
	return s.items('}', func() bool {
		key, ok := s.plainBytes()
		if !ok || !s.colon() {
			return false
		}
		bit := member(key)
		if bit == 0 || seen&bit != 0 || !s.ok {
			return false
		}
		seen |= bit
		return true
	})
}

// items reads the items of an object or array, whose opening byte was read, up to and
// including the closing byte end: item reads one (with no white space before it) and
// reports whether it was one.
func (s *scanner) items(end byte, item func() bool) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		return true
	}
	for {
		s.space()
		if !item() {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case end:
			s.i++
			return true
		default:
			return false
		}
	}
}

// colon reads the colon after a key, and the white space around it.
func (s *scanner) colon() bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return false
	}
	s.i++
	s.space()
	return true
}

// params reads a tool call's params object into p.
func (s *scanner) params(p *rpcParams) {
	s.ok = s.object(func(key []byte) int {
		switch string(key) {
		case "name":
			p.Name = s.plainString()
			return 1
		case "arguments":
			p.Arguments = s.raw()
			return 2
		case "task":
			p.Task = s.raw()
			return 4
		case "_meta":
			p.Meta = s.raw()
			return 8
		case "requestId":
			p.RequestID = s.raw()
			return 16
		}
		return 0
	})
}

// plainBytes reads a string of printable ASCII without escapes, and returns its bytes.
func (s *scanner) plainBytes() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// plainString is plainBytes as a string (see plainBytes).
func (s *scanner) plainString() string {
	b, ok := s.plainBytes()
	if !ok {
		s.ok = false
		return ""
	}
	return intern(b)
}

// intern returns b as a string, without allocating one for the version, the methods and
// the tool names that come in every call (TestInternedNames).
func intern(b []byte) string {
	switch string(b) { // no allocation: the compiler compares the bytes
	case "2.0":
		return "2.0"
	case "tools/call":
		return "tools/call"
	case "notifications/initialized":
		return "notifications/initialized"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "ping":
		return "ping"
	case "memory":
		return "memory"
	case "memory_view":
		return "memory_view"
	case "memory_create":
		return "memory_create"
	case "memory_str_replace":
		return "memory_str_replace"
	case "memory_insert":
		return "memory_insert"
	case "memory_delete":
		return "memory_delete"
	case "memory_rename":
		return "memory_rename"
	}
	return string(b)
}

// raw reads any JSON value and returns its bytes, as json.RawMessage receives them.
func (s *scanner) raw() json.RawMessage {
	start := s.i
	if !s.value(0) {
		s.ok = false
		return nil
	}
	return json.RawMessage(s.b[start:s.i:s.i])
}

// value skips one JSON value, checking it.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		return s.items('}', func() bool { return s.str() && s.colon() && s.value(depth+1) })
	case c == '[':
		s.i++
		return s.items(']', func() bool { return s.value(depth + 1) })
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// str skips a string: valid UTF-8, no control characters, valid escapes.
func (s *scanner) str() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n <= 1 {
				return false
			}
			s.i += n
		}
	}
	return false
}

// number skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	digits := func() bool {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > start
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return false
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if !digits() {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !digits() {
			return false
		}
	}
	return true
}
