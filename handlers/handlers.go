package handlers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// Limits are the configurable limits of SPEC §5.
type Limits struct {
	MaxViewChars  int   // characters (code points) one view may return, truncation note excluded
	MaxFileBytes  int64 // bytes of one memory file after a change
	MaxStoreBytes int64 // bytes of all memory files after a change
}

// DefaultLimits returns SPEC §5's defaults: 16,000 characters, 1 MiB, 100 MiB.
func DefaultLimits() Limits {
	return Limits{MaxViewChars: 16000, MaxFileBytes: 1 << 20, MaxStoreBytes: 100 << 20}
}

// Result is what the model gets back from a command: a text, and whether it is an error.
type Result struct {
	Text    string
	IsError bool
	// Err is the storage failure or panic behind an error result, with whatever detail
	// (host paths included) the operator needs; it goes to the log, never to the model.
	Err error
	// Before and After are, for a change that was made, the bytes at the path before and
	// after it (a directory counts the files below it), for the operator's audit log.
	Before, After int64
}

// Commands are the memory_20250818 commands, in the order the messages list them.
var Commands = []string{"view", "create", "str_replace", "insert", "delete", "rename"}

// Handlers runs the six memory commands against one store.
type Handlers struct {
	store         *vfs.Store
	limits        Limits
	readOnly      bool
	rejectSecrets bool
}

// An Option changes how the handlers treat changes.
type Option func(*Handlers)

// ReadOnly refuses every command but view with "Error: The memory store is read-only".
func ReadOnly() Option { return func(h *Handlers) { h.readOnly = true } }

// RejectSecrets refuses create, str_replace and insert when the text they would write
// (file_text, new_str, insert_text) contains what looks like a credential; nothing is written.
func RejectSecrets() Option { return func(h *Handlers) { h.rejectSecrets = true } }

// New returns the command handlers over store. A zero field of limits takes its default.
func New(store *vfs.Store, limits Limits, opts ...Option) *Handlers {
	def := DefaultLimits()
	if limits.MaxViewChars <= 0 {
		limits.MaxViewChars = def.MaxViewChars
	}
	if limits.MaxFileBytes <= 0 {
		limits.MaxFileBytes = def.MaxFileBytes
	}
	if limits.MaxStoreBytes <= 0 {
		limits.MaxStoreBytes = def.MaxStoreBytes
	}
	h := &Handlers{store: store, limits: limits}
	for _, o := range opts {
		o(h)
	}
	return h
}

// ReadOnlyStore reports whether the handlers refuse changes.
func (h *Handlers) ReadOnlyStore() bool { return h.readOnly }

// Exec runs one native memory_20250818 input: "command" plus that command's arguments.
func (h *Handlers) Exec(ctx context.Context, input map[string]any) Result {
	v, ok := input["command"]
	if !ok || v == nil {
		return errorf("Error: Missing required parameter `command`")
	}
	command, ok := v.(string)
	if !ok {
		return errorf("Error: Parameter `command` must be a string")
	}
	return h.Call(ctx, command, input)
}

// Call runs command with its arguments as decoded from JSON. Argument problems, refused
// paths and storage failures all come back as error results; a panic becomes SPEC §4's
// internal error and is reported in Result.Err.
func (h *Handlers) Call(ctx context.Context, command string, args map[string]any) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = internalError(command, args, fmt.Errorf("panic in %s: %v\n%s", command, r, debug.Stack()))
		}
	}()
	if err := ctx.Err(); err != nil {
		return internalError(command, args, err)
	}
	if h.readOnly && command != "view" && slices.Contains(Commands, command) {
		return errorf("Error: The memory store is read-only")
	}
	switch command {
	case "view":
		a, bad := parseView(args)
		if bad != "" {
			return errorf("%s", bad)
		}
		return h.View(a)
	case "create":
		a, bad := parseCreate(args)
		if bad != "" {
			return errorf("%s", bad)
		}
		return h.Create(a)
	case "str_replace":
		a, bad := parseStrReplace(args)
		if bad != "" {
			return errorf("%s", bad)
		}
		return h.StrReplace(a)
	case "insert":
		a, bad := parseInsert(args)
		if bad != "" {
			return errorf("%s", bad)
		}
		return h.Insert(a)
	case "delete":
		a, bad := parseDelete(args)
		if bad != "" {
			return errorf("%s", bad)
		}
		return h.Delete(a)
	case "rename":
		a, bad := parseRename(args)
		if bad != "" {
			return errorf("%s", bad)
		}
		return h.Rename(a)
	}
	return errorf("Error: Unknown command %s. Use one of: %s", command, strings.Join(Commands, ", "))
}

// internalError is SPEC §4's message for a failure that is the server's, not the caller's;
// err, for the log, says what happened.
func internalError(command string, args map[string]any, err error) Result {
	return Result{Text: fmt.Sprintf("Error: Could not %s %s: %s", command, sentPath(args), vfs.ReasonInternal), IsError: true, Err: err}
}

// sentPath is the path a command was about, as sent, for messages about failures.
func sentPath(args map[string]any) string {
	for _, k := range []string{"path", "old_path"} {
		if s, ok := args[k].(string); ok {
			return s
		}
	}
	return vfs.Root
}

func ok(text string) Result { return Result{Text: text} }

func errorf(format string, a ...any) Result {
	return Result{Text: fmt.Sprintf(format, a...), IsError: true}
}

// failure turns an error from the store into the model's message: a symbolic link leading
// outside is the escape message (SPEC §1, P4); anything else a neutral failure (SPEC §4).
func failure(command, sent string, err error) Result {
	if errors.Is(err, vfs.ErrEscape) {
		return escapes(sent)
	}
	return Result{
		Text:    fmt.Sprintf("Error: Could not %s %s: %s", command, sent, vfs.Reason(err)),
		IsError: true,
		Err:     err,
	}
}

// secretIn refuses text that contains what looks like a credential, when the guard is on.
func (h *Handlers) secretIn(text string) (Result, bool) {
	if !h.rejectSecrets {
		return Result{}, false
	}
	kind, line, found := findSecret(text)
	if !found {
		return Result{}, false
	}
	return errorf("Error: The text contains what looks like a %s on line %d; memory files must not store credentials. Remove it and try again.", kind, line), true
}

func escapes(sent string) Result {
	return errorf("%s", (&vfs.PathError{Path: sent, Kind: vfs.Escapes}).Error())
}

// read runs fn in a read transaction; update in a change transaction. fn returns the
// result for the model, or an error for a storage failure.
func (h *Handlers) read(command, sent string, fn func(tx *vfs.Tx) (Result, error)) Result {
	var res Result
	err := h.store.View(func(tx *vfs.Tx) (err error) {
		res, err = fn(tx)
		return err
	})
	if err != nil {
		return failure(command, sent, err)
	}
	return res
}

func (h *Handlers) update(command, sent string, fn func(tx *vfs.Tx) (Result, error)) Result {
	var res Result
	err := h.store.Update(func(tx *vfs.Tx) (err error) {
		res, err = fn(tx)
		return err
	})
	if err != nil {
		return failure(command, sent, err)
	}
	return res
}

// parentIsFile reports whether an ancestor of p is a file (a symbolic link counts as a
// directory here: the storage resolves it, inside the root, when the path is used).
func parentIsFile(tx *vfs.Tx, p vfs.Path) (bool, error) {
	var chain []vfs.Path
	for q := p.Parent(); !q.IsRoot(); q = q.Parent() {
		chain = append(chain, q)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		fi, err := tx.Stat(chain[i])
		if vfs.IsNotExist(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			return true, nil
		}
	}
	return false, nil
}

// checkSize applies the file and store limits to a change that makes a file newSize bytes
// long (it was oldSize, 0 for a new file). A change that grows neither is always allowed,
// so a file or store that is already over its limit can still be trimmed.
func (h *Handlers) checkSize(tx *vfs.Tx, sent string, oldSize, newSize int64) (Result, bool, error) {
	if newSize > h.limits.MaxFileBytes && newSize > oldSize {
		return errorf("Error: %s would be %d bytes, over the limit of %d bytes per memory file", sent, newSize, h.limits.MaxFileBytes), false, nil
	}
	if newSize <= oldSize {
		return Result{}, true, nil
	}
	usage, err := tx.Usage()
	if err != nil {
		return Result{}, false, err
	}
	if total := usage - oldSize + newSize; total > h.limits.MaxStoreBytes {
		return errorf("Error: The memory store is full: this change would bring it to %d bytes, over its limit of %d bytes", total, h.limits.MaxStoreBytes), false, nil
	}
	return Result{}, true, nil
}
