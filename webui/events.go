package webui

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/memory-mcp/memory-mcp/handlers"
)

// Live activity stream timing.
const (
	keepAlive    = 20 * time.Second // a comment line this often keeps proxies from closing the stream
	writeTimeout = 10 * time.Second // a browser that does not read its stream this long is dropped
)

// events streams the memory's change feed to the page as server-sent events: one "change"
// event per committed change (the batch as JSON), and "resync" when the stream fell behind
// and the page should load what it shows again. While it runs, the memory is checked every
// WatchInterval for changes made by other processes (an agent's own memory-mcp), which
// arrive as changes by actor "external". The stream ends with its session.
func (h *Handler) events(w http.ResponseWriter, r *http.Request, s *session, mem *handlers.Memory) {
	release, ok := h.hold(s, true)
	if !ok {
		w.Header().Set("Retry-After", "5")
		apiError(w, http.StatusServiceUnavailable, "too many live streams are open; close a tab")
		return
	}
	defer release()

	sub := mem.Subscribe(64)
	defer sub.Close()
	// The watch reads the memory: it is over before this returns, and so before whoever
	// serves the page closes the store.
	ctx, cancel := context.WithCancel(r.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		mem.Watch(ctx, h.cfg.WatchInterval)
	}()
	defer func() { cancel(); <-watched }()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	send := func(event string, data []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		msg := make([]byte, 0, len(data)+32)
		if event != "" {
			msg = append(append(append(msg, "event: "...), event...), '\n')
			msg = append(append(append(msg, "data: "...), data...), "\n\n"...)
		} else {
			msg = append(msg, ": keep-alive\n\n"...)
		}
		if _, err := w.Write(msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("hello", []byte(`{}`)) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	missed := sub.Missed()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cancelled:
			return
		case <-tick.C:
			if !send("", nil) {
				return
			}
		case b := <-sub.C:
			if m := sub.Missed(); m != missed {
				missed = m
				if !send("resync", []byte(`{}`)) {
					return
				}
			}
			data, _ := json.Marshal(b) // one line: JSON escapes every newline
			if !send("change", data) {
				return
			}
		}
	}
}
