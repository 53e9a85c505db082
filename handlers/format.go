package handlers

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// appendSize appends a size as docs/behaviour.md §3 asks: "{n}B" below 1024, otherwise one
// decimal in K, M, G or T, rounded half away from zero. Integer arithmetic keeps 1280 →
// "1.3K" exact. (Appended, not returned: a listing writes one per line.)
func appendSize(b []byte, n int64) []byte {
	if n < 1024 {
		return append(strconv.AppendInt(b, n, 10), 'B')
	}
	const units = "KMGT"
	d, u := int64(1024), 0
	for u < len(units)-1 && n/d >= 1024 {
		d *= 1024
		u++
	}
	q, r := n/d, n%d
	// r*20 cannot overflow: r < d <= 2^40.
	tenths := q*10 + (r*20/d+1)/2
	b = strconv.AppendInt(b, tenths/10, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, tenths%10, 10)
	return append(b, units[u])
}

// appendLineNumber appends n right-aligned in six characters and a TAB ("%6d\t").
func appendLineNumber(b []byte, n int) []byte {
	var num [20]byte
	s := strconv.AppendInt(num[:0], int64(n), 10)
	for i := len(s); i < 6; i++ {
		b = append(b, ' ')
	}
	b = append(b, s...)
	return append(b, '\t')
}

// validUTF8 returns text with every byte that is not part of a valid UTF-8 sequence shown as
// one U+FFFD, so that the model sees one replacement per bad byte.
func validUTF8(text []byte) []byte {
	if utf8.Valid(text) {
		return text
	}
	out := make([]byte, 0, len(text)+len(text)/4)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, text[i:i+size]...)
		}
		i += size
	}
	return out
}

// countLines is the number of lines of docs/behaviour.md §3: the text split on "\n".
func countLines(text []byte) int { return bytes.Count(text, []byte{'\n'}) + 1 }

// lineOffset returns the byte offset where line n (1-based) starts; n must exist.
func lineOffset(text []byte, n int) int {
	off := 0
	for ; n > 1; n-- {
		off += bytes.IndexByte(text[off:], '\n') + 1
	}
	return off
}

// numberLines appends lines first..last of text (which starts at line first) in view's
// numbered format, joined with "\n".
func numberLines(b []byte, text []byte, first, last int) []byte {
	for n := first; n <= last; n++ {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		}
		if n > first {
			b = append(b, '\n')
		}
		b = appendLineNumber(b, n)
		b = append(b, line...)
	}
	return b
}

// prefixRunes returns the longest prefix of s with at most n code points.
func prefixRunes(s []byte, n int) []byte {
	if n <= 0 {
		return nil
	}
	for i := range string(s) {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
