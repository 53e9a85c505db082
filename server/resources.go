package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs"
)

// Memory files as MCP resources: every file under /memories that a listing shows (hidden
// files left out) is memory:///memories/<path>, each path segment percent-encoded as RFC
// 3986 requires. The list is computed per request from the request's memory (a tenant's
// own), so mcp-go's registry of static resources stays empty; reads go through the
// template memory:///memories/{+path}.

// Resource URIs.
const (
	resourceScheme   = "memory"
	resourceTemplate = "memory:///memories/{+path}"
	// resourcesPageSize is how many resources one resources/list page holds.
	resourcesPageSize = 200
	// maxCompletions is how many values one completion returns.
	maxCompletions = 100
)

// fileURI is the resource URI of a memory path ("/memories/a b.md" → "memory:///memories/a%20b.md").
func fileURI(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return resourceScheme + ":///" + strings.Join(segs, "/")
}

// errNoResource is a URI that names no memory file.
var errNoResource = errors.New("resource not found")

// uriPath is the memory path a resource URI names, validated.
func uriPath(uri string) (vfs.Path, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != resourceScheme || u.Host != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return vfs.Path{}, fmt.Errorf("%w: %s is not a memory:///memories/… URI", errNoResource, uri)
	}
	p, err := vfs.Resolve(u.Path)
	if err != nil || p.IsRoot() {
		return vfs.Path{}, fmt.Errorf("%w: %s names no memory file", errNoResource, uri)
	}
	return p, nil
}

// mimeType of a memory file, from its name.
func mimeType(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".md", ".markdown":
		return "text/markdown"
	}
	return "text/plain"
}

// resourceOf describes a memory file as a resource.
func resourceOf(f handlers.FileNode) mcp.Resource {
	size := f.Size
	r := mcp.Resource{URI: fileURI(f.Path), Name: f.Path, MIMEType: mimeType(f.Path), Size: &size}
	if !f.Changed.IsZero() {
		r.Annotations = &mcp.Annotations{LastModified: f.Changed.UTC().Format(time.RFC3339)}
	}
	return r
}

// resourcesTemplate is the template every memory file's URI matches.
func resourcesTemplate() mcp.ResourceTemplate {
	return mcp.NewResourceTemplate(resourceTemplate, "memory file",
		mcp.WithTemplateTitle("Memory file"),
		mcp.WithTemplateDescription("A file of the /memories directory, as text (markdown for .md files). The path completes."))
}

// listResources fills a resources/list result with a page of the request's memory's files,
// sorted by path. The cursor is the last path of the previous page (base64, as mcp-go's own
// cursors, which it checks first): a page starts after it, so files created or deleted
// meanwhile neither repeat nor shift the files of later pages.
func (s *Server) listResources(ctx context.Context, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
	res.Resources, res.NextCursor = []mcp.Resource{}, ""
	h := s.handlersFor(ctx)
	if h == nil {
		return
	}
	files, err := h.FileList(ctx)
	var left *handlers.MountsLeftOut
	if err != nil {
		s.log.Error().Err(err).Msg("resources/list: cannot list the memory")
		if !errors.As(err, &left) {
			return
		}
	}
	after := ""
	if req.Params.Cursor != "" {
		if b, err := base64.StdEncoding.DecodeString(string(req.Params.Cursor)); err == nil {
			after = string(b)
		}
	}
	i, found := slices.BinarySearchFunc(files, after, func(f handlers.FileNode, p string) int { return strings.Compare(f.Path, p) })
	if found {
		i++
	}
	page := files[i:min(len(files), i+resourcesPageSize)]
	for _, f := range page {
		res.Resources = append(res.Resources, resourceOf(f))
	}
	if i+len(page) < len(files) {
		res.NextCursor = mcp.Cursor(base64.StdEncoding.EncodeToString([]byte(page[len(page)-1].Path)))
	}
}

// readResource returns a memory file's whole content: text, or base64 for a file that is
// not UTF-8 text.
func (s *Server) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	p, err := uriPath(req.Params.URI)
	if err != nil {
		return nil, err
	}
	h := s.handlersFor(ctx)
	if h == nil {
		return nil, fmt.Errorf("%w: %s", errNoResource, req.Params.URI)
	}
	data, _, err := h.Read(ctx, p.String())
	var refusal *handlers.Refusal
	if errors.As(err, &refusal) {
		return nil, fmt.Errorf("%w: %s: %s", errNoResource, req.Params.URI, refusal.Msg)
	}
	if err != nil {
		s.log.Error().Err(err).Str("uri", req.Params.URI).Msg("resources/read: storage failure")
		return nil, errors.New("the storage failed; the server's log says why")
	}
	uri := fileURI(p.String())
	if !utf8.Valid(data) {
		return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: "application/octet-stream", Blob: base64.StdEncoding.EncodeToString(data)}}, nil
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mimeType(p.String()), Text: string(data)}}, nil
}

// CompleteResourceArgument completes the path of the template: the files and directories
// (as "dir/") of the request's memory whose path below /memories starts with what was
// typed, sorted, at most maxCompletions of them.
func (s *Server) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	done := &mcp.Completion{Values: []string{}}
	h := s.handlersFor(ctx)
	if uri != resourceTemplate || arg.Name != "path" || h == nil {
		return done, nil
	}
	files, err := h.FileList(ctx)
	var left *handlers.MountsLeftOut
	if err != nil && !errors.As(err, &left) {
		return nil, err
	}
	seen := map[string]bool{}
	var all []string
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, vfs.Root+"/")
		// Each directory on the way, then the file.
		for i := range len(rel) {
			if dir := rel[:i+1]; rel[i] == '/' && !seen[dir] && strings.HasPrefix(dir, arg.Value) {
				seen[dir] = true
				all = append(all, dir)
			}
		}
		if strings.HasPrefix(rel, arg.Value) {
			all = append(all, rel)
		}
	}
	slices.Sort(all)
	done.Total = len(all)
	if len(all) > maxCompletions {
		all, done.HasMore = all[:maxCompletions], true
	}
	done.Values = all
	return done, nil
}
