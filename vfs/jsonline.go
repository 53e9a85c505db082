package vfs

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/memory-mcp/memory-mcp/internal/jsonstr"
)

// The history log's and the write-ahead log's common lines, written by hand: every change
// writes three (its versions to both logs, then its outcome), and encoding/json's reflection
// was about 3% of the server's CPU with 32 writers. Each append function writes what an
// Encoder with SetEscapeHTML(false) writes, newline included, and reports false for a line
// it leaves to the encoder (headers, redactions, times outside years 0–9999); the write
// functions take either way. TestLinesAsEncodingJSON holds them to the encoder's bytes.

// writeLogLine appends l to buf, by hand where appendLogLine can, else with the encoder.
func writeLogLine(buf *bytes.Buffer, l *logLine) error {
	if b, ok := appendLogLine(buf.AvailableBuffer(), l); ok {
		buf.Write(b)
		return nil
	}
	return encodeLine(buf, l)
}

// writeWALLine appends l to buf, by hand where appendWALLine can, else with the encoder.
func writeWALLine(buf *bytes.Buffer, l *walLine) error {
	if b, ok := appendWALLine(buf.AvailableBuffer(), l); ok {
		buf.Write(b)
		return nil
	}
	return encodeLine(buf, l)
}

// encodeLine appends line to buf as the logs' encoder writes it: HTML left as it is, a
// newline after.
func encodeLine(buf *bytes.Buffer, line any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(line)
}

// appendLogLine appends l as the history log's encoder writes it.
func appendLogLine(dst []byte, l *logLine) ([]byte, bool) {
	if l.History != 0 || l.Epoch != "" {
		return dst, false
	}
	n := len(dst) // a line left to the encoder leaves dst as it was
	switch {
	case l.G != 0 && l.V != nil && l.Settle == 0 && !l.Partial && len(l.Only) == 0:
		dst = append(dst, `{"g":`...)
		dst = strconv.AppendUint(dst, l.G, 10)
		dst = append(dst, `,"v":`...)
		var ok bool
		if dst, ok = appendVersion(dst, l.V); !ok {
			return dst[:n], false
		}
	case l.G == 0 && l.V == nil && l.Settle != 0:
		dst = append(dst, `{"settle":`...)
		dst = strconv.AppendUint(dst, l.Settle, 10)
		if l.Partial {
			dst = append(dst, `,"partial":true`...)
		}
		dst = appendOnly(dst, l.Only)
	default:
		return dst, false
	}
	return append(dst, '}', '\n'), true
}

// appendWALLine appends l as the write-ahead log's encoder writes it.
func appendWALLine(dst []byte, l *walLine) ([]byte, bool) {
	if l.WAL != 0 || l.Boot != "" || l.From != 0 || l.Cycle != "" {
		return dst, false
	}
	n := len(dst) // a line left to the encoder leaves dst as it was
	switch {
	case l.G != 0 && l.Settle == 0 && len(l.Only) == 0:
		dst = append(dst, `{"g":`...)
		dst = strconv.AppendUint(dst, l.G, 10)
		if len(l.V) > 0 {
			dst = append(dst, `,"v":[`...)
			for i := range l.V {
				if i > 0 {
					dst = append(dst, ',')
				}
				var ok bool
				if dst, ok = appendVersion(dst, &l.V[i]); !ok {
					return dst[:n], false
				}
			}
			dst = append(dst, ']')
		}
		if len(l.C) > 0 {
			dst = append(dst, `,"c":[`...)
			for i, c := range l.C {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"d":`...)
				dst = appendDigest(dst, c.D)
				dst = append(dst, `,"b":`...)
				if c.B == nil {
					dst = append(dst, "null"...)
				} else {
					dst = append(dst, '"')
					dst = base64.StdEncoding.AppendEncode(dst, c.B)
					dst = append(dst, '"')
				}
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
	case l.G == 0 && len(l.V) == 0 && len(l.C) == 0 && l.Settle != 0:
		dst = append(dst, `{"settle":`...)
		dst = strconv.AppendUint(dst, l.Settle, 10)
		dst = appendOnly(dst, l.Only)
	default:
		return dst, false
	}
	return append(dst, '}', '\n'), true
}

// appendVersion appends v as encoding/json encodes it (HTML left as it is); false for a
// redaction, or a time json.Marshal refuses.
func appendVersion(dst []byte, v *Version) ([]byte, bool) {
	if v.Redacted != nil || v.Time.Year() < 0 || v.Time.Year() > 9999 {
		return dst, false
	}
	if _, off := v.Time.Zone(); off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		return dst, false // an offset in seconds, or of a day or more: left to the encoder
	}
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, v.Seq, 10)
	dst = append(dst, `,"time":"`...)
	dst = v.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","actor":`...)
	dst = jsonstr.Append(dst, v.Actor, false)
	dst = append(dst, `,"command":`...)
	dst = jsonstr.Append(dst, v.Command, false)
	dst = append(dst, `,"kind":`...)
	dst = jsonstr.Append(dst, string(v.Kind), false)
	dst = append(dst, `,"path":`...)
	dst = jsonstr.Append(dst, v.Path, false)
	if v.NewPath != "" {
		dst = append(dst, `,"new_path":`...)
		dst = jsonstr.Append(dst, v.NewPath, false)
	}
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, v.Size, 10)
	if !v.SHA256.IsZero() {
		dst = append(dst, `,"sha256":`...)
		dst = appendDigest(dst, v.SHA256)
	}
	if v.PrevSize != 0 {
		dst = append(dst, `,"prev_size":`...)
		dst = strconv.AppendInt(dst, v.PrevSize, 10)
	}
	if !v.Prev.IsZero() {
		dst = append(dst, `,"prev_sha256":`...)
		dst = appendDigest(dst, v.Prev)
	}
	if v.PrevRedacted {
		dst = append(dst, `,"prev_redacted":true`...)
	}
	return append(dst, '}'), true
}

func appendDigest(dst []byte, d Digest) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, d[:])
	return append(dst, '"')
}

func appendOnly(dst []byte, only []int) []byte {
	if len(only) == 0 {
		return dst
	}
	dst = append(dst, `,"only":[`...)
	for i, n := range only {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(n), 10)
	}
	return append(dst, ']')
}
