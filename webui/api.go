package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// api serves /ui/api/NAME. The order of checks: method, login (which needs no session),
// session, origin and CSRF token for a change, room, and only then the body.
func (h *Handler) api(w http.ResponseWriter, r *http.Request, name string) {
	change := r.Method == http.MethodPost
	if !change && r.Method != http.MethodGet {
		apiError(w, http.StatusMethodNotAllowed, "use GET to read and POST to change")
		return
	}
	if change && !h.sameOrigin(r) {
		apiError(w, http.StatusForbidden, "this request does not come from the page itself")
		return
	}
	if name == "login" && change {
		h.login(w, r)
		return
	}
	s, mem := h.session(r)
	if s == nil {
		apiError(w, http.StatusUnauthorized, "log in first")
		return
	}
	if change && !validToken(r.Header.Get(csrfHeader), s.csrf) {
		apiError(w, http.StatusForbidden, "the request lacks the page's CSRF token: reload the page")
		return
	}
	if change && name != "logout" && mem.ReadOnlyStore() {
		apiError(w, http.StatusForbidden, "this memory is read-only: it can be looked at, not changed")
		return
	}
	if name == "events" {
		h.events(w, r, s, mem)
		return
	}
	release, ok := h.hold(s, false)
	if !ok {
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusServiceUnavailable, "the server is busy; try again in a moment")
		return
	}
	defer release()
	ctx := vfs.WithActor(r.Context(), vfs.ActorWeb)
	q := r.URL.Query()
	var (
		out any
		err error
	)
	switch {
	case name == "session" && !change:
		out = map[string]any{
			"memory": s.memory, "read_only": mem.ReadOnlyStore(), "mounts": mountsJSON(mem), "history": mem.KeepsHistory(ctx),
			"csrf": s.csrf, "max_file_bytes": mem.MaxFileBytes(),
		}
	case name == "logout" && change:
		h.logout(r)
		out = map[string]bool{"ok": true}
	case name == "tree" && !change:
		root, truncated, e := mem.Files(ctx)
		out, err = map[string]any{"root": root, "truncated": truncated}, e
	case name == "file" && !change:
		data, digest, e := mem.Read(ctx, q.Get("path"))
		out, err = fileJSON(q.Get("path"), data, digest), e
	case name == "show" && !change:
		seq, e := seqArg(q.Get("seq"))
		if e == nil {
			var data []byte
			data, e = mem.Show(ctx, q.Get("path"), seq)
			out = fileJSON(q.Get("path"), data, vfs.DigestOf(data))
		}
		err = e
	case name == "diff" && !change:
		var seqs []uint64
		for _, k := range []string{"a", "b"} {
			if v := q.Get(k); v != "" {
				seq, e := seqArg(v)
				if e != nil {
					err = e
				}
				seqs = append(seqs, seq)
			}
		}
		if err == nil {
			var diff string
			diff, err = mem.Diff(ctx, q.Get("path"), seqs...)
			out = map[string]string{"diff": diff}
		}
	case name == "log" && !change:
		lq := handlers.LogQuery{Path: q.Get("path"), Actor: q.Get("actor"), N: 200}
		if n, e := strconv.Atoi(q.Get("n")); e == nil && n > 0 && n < lq.N {
			lq.N = n
		}
		vs, e := mem.Log(ctx, lq)
		var left *handlers.MountsLeftOut
		if errors.As(e, &left) {
			e = nil // the rest, as the tree shows it
		}
		if vs == nil {
			vs = []vfs.Version{}
		}
		out, err = map[string]any{"versions": vs}, e
	case name == "search" && !change:
		matches, more, e := mem.Search(ctx, q.Get("q"))
		if matches == nil {
			matches = []handlers.Match{}
		}
		out, err = map[string]any{"matches": matches, "more": more}, e
	case change && (name == "save" || name == "delete" || name == "restore"):
		var req changeRequest
		if !h.readBody(w, r, &req) {
			return
		}
		out, err = h.change(ctx, s, mem, name, req)
	default:
		apiError(w, http.StatusNotFound, "no such request: "+r.Method+" "+name)
		return
	}
	if err != nil {
		status, msg := h.errStatus(err, r)
		apiError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// changeRequest is the body of save, delete and restore.
type changeRequest struct {
	Path string `json:"path"`
	// Text is the new content (save).
	Text *string `json:"text"`
	// SHA256 is the digest of the content the person saw ("" for a file that did not
	// exist); absent, the change is unconditional.
	SHA256 *string `json:"sha256"`
	// Seq or At is what restore puts back.
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
}

// badRequest is a change request the page would never send (400).
type badRequest string

func (b badRequest) Error() string { return string(b) }

// change makes a change the page asked for, its body read.
func (h *Handler) change(ctx context.Context, s *session, mem *handlers.Memory, name string, req changeRequest) (any, error) {
	var expect *vfs.Digest
	if req.SHA256 != nil {
		expect = new(vfs.Digest)
		if *req.SHA256 != "" {
			if err := expect.UnmarshalText([]byte(*req.SHA256)); err != nil {
				return nil, badRequest("sha256 must be 64 hexadecimal digits")
			}
		}
	}
	log := h.cfg.Logger.Info().Str("memory", s.memory).Str("actor", vfs.ActorWeb).Str("command", name).Str("path", req.Path)
	var (
		out any
		err error
	)
	switch name {
	case "save":
		if req.Text == nil {
			return nil, badRequest("save needs the file's text")
		}
		var b *vfs.Batch
		b, err = mem.Write(ctx, req.Path, []byte(*req.Text), expect)
		out = batchJSON(b)
	case "delete":
		var b *vfs.Batch
		b, err = mem.Remove(ctx, req.Path, expect)
		out = batchJSON(b)
	case "restore":
		var res handlers.Restored
		if req.At.IsZero() {
			res, err = mem.Restore(ctx, req.Path, req.Seq)
		} else {
			res, err = mem.RestoreAt(ctx, req.Path, req.At)
		}
		out = res
	}
	if err == nil {
		log.Msg("web page: change")
	}
	return out, err
}

// readBody decodes a JSON body of at most MaxBodyBytes, arriving within bodyTimeout; it
// answers and returns false when it cannot.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		apiError(w, http.StatusUnsupportedMediaType, "send JSON (Content-Type: application/json)")
		return false
	}
	if r.ContentLength > h.cfg.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		apiError(w, http.StatusRequestEntityTooLarge, "the request is too large")
		return false
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apiError(w, http.StatusRequestEntityTooLarge, "the request is too large")
		} else {
			apiError(w, http.StatusBadRequest, "the request is not the JSON this page sends")
		}
		return false
	}
	return true
}

// login opens a session for a bearer token (a tenant's) or a login link's token, sent as
// {"token": …}.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	if !h.loginAllowed(w, "address "+clientAddress(r)) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !h.readBody(w, r, &req) {
		return
	}
	token := strings.TrimSpace(req.Token)
	memory, ok := h.linkToken(token)
	if !ok && h.cfg.Login != nil && token != "" {
		memory, ok = h.cfg.Login(token)
	}
	if !ok || h.cfg.Memory(memory) == nil {
		h.fails.Warn().Str("remote", r.RemoteAddr).Msg("web page: login refused")
		apiError(w, http.StatusUnauthorized, "this token opens no memory here")
		return
	}
	if !h.loginAllowed(w, "memory "+memory) {
		return
	}
	h.startSession(w, r, memory)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// linkToken accepts a login link's token (consuming a one-time one).
func (h *Handler) linkToken(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	key := sha256Sum(token)
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.links[key]
	if ok && l.once {
		delete(h.links, key)
	}
	return l.memory, ok
}

func (h *Handler) logout(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		h.mu.Lock()
		h.endLocked(sha256Sum(c.Value))
		h.mu.Unlock()
	}
}

// fileJSON is a file's content for the page: as text, with whether it is text at all.
func fileJSON(path string, data []byte, d vfs.Digest) map[string]any {
	return map[string]any{
		"path": path, "text": string(data), "size": len(data), "sha256": d,
		"binary": !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0,
	}
}

func batchJSON(b *vfs.Batch) map[string]any {
	if b == nil {
		return map[string]any{"changed": false}
	}
	return map[string]any{"changed": true, "version": b.Version}
}

func seqArg(v string) (uint64, error) {
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, &handlers.Refusal{Msg: "a version number is needed"}
	}
	return seq, nil
}

// mountsJSON describes the memory's mounts for the page: where each is, and whether it
// is read-only.
func mountsJSON(mem *handlers.Memory) []map[string]any {
	out := []map[string]any{}
	for _, m := range mem.Mounts() {
		out = append(out, map[string]any{"name": m.Name, "path": m.Memory.Top(), "read_only": m.Memory.ReadOnlyStore()})
	}
	return out
}
