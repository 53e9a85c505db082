package jsonstr

import (
	"encoding/json"
	"unicode/utf8"
)

// Append appends s quoted as encoding/json encodes a string: '"', '\\' and control
// characters escaped (\b \f \n \r \t in short, the others as \u00XX), U+2028 and U+2029
// escaped, each invalid byte of UTF-8 as U+FFFD (escaped by encoding/json, written as it is
// under its jsonv2 experiment: see invalid), and, with html, '<', '>' and '&' as \u003c,
// \u003e and \u0026 (json.Marshal does; an Encoder with SetEscapeHTML(false) does not).
func Append(dst []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	plain := &plainText
	if html {
		plain = &plainHTML
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if plain[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, invalid...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// invalid is what encoding/json writes for a byte of invalid UTF-8 in a string.
var invalid = func() string {
	b, _ := json.Marshal("\xff")
	return string(b[1 : len(b)-1])
}()

// plainText and plainHTML mark the ASCII bytes a JSON string holds as they are, without
// and with HTML escaping.
var plainText, plainHTML = func() (text, html [utf8.RuneSelf]bool) {
	for b := range text {
		text[b] = b >= 0x20 && b != '"' && b != '\\'
		html[b] = text[b] && b != '<' && b != '>' && b != '&'
	}
	return text, html
}()
