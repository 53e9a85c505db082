// Package webui is the web page where people see, search, fix and undo what their agents
// remember: the tree of /memories, a file's content and its timeline of versions with diffs,
// restore of a file, a directory or the whole memory, edits and deletes (recorded as actor
// "web"), text search, and the change feed live.
//
// The page is static (assets/, embedded: it works offline) and talks to a JSON API under
// /ui/api/. It is served alone by memory-mcp ui (Serve) or under /ui/ by the HTTP
// transports (package server mounts Handler).
//
// Security, in the order a request meets it: the Host is checked by whoever mounts the
// handler (DNS rebinding); every response carries a strict Content-Security-Policy (no
// inline script, own origin only) and framing is refused; the API needs a session, opened by
// a login link's token (memory-mcp ui prints a one-time one) or a tenant's bearer token, and
// kept in an HttpOnly, SameSite=Strict cookie; a change also needs the session's CSRF token
// in a header and a request from the page's own origin; bodies are read only then, capped
// in size and time. Memory content is only ever put into the page as text
// (textContent), never as HTML, so a file holding markup or javascript: links runs nothing.
//
// The page does the history's operations through package handlers, with the actor
// vfs.ActorWeb.
package webui
