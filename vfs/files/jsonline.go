package files

import (
	"bytes"
	"encoding/json"
)

// writeLogLine appends l to buf as one line of the history log.
func writeLogLine(buf *bytes.Buffer, l *logLine) error { return encodeLine(buf, l) }

// writeWALLine appends l to buf as one line of the write-ahead log.
func writeWALLine(buf *bytes.Buffer, l *walLine) error { return encodeLine(buf, l) }

// encodeLine appends line to buf as the logs' encoder writes it: HTML left as it is, a
// newline after.
func encodeLine(buf *bytes.Buffer, line any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(line)
}
