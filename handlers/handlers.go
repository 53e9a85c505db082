package handlers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs"
)

// Limits are the configurable limits of docs/behaviour.md §5.
type Limits struct {
	MaxViewChars  int   // characters (code points) one view may return, truncation note excluded
	MaxFileBytes  int64 // bytes of one memory file after a change
	MaxStoreBytes int64 // bytes of all memory files after a change
}

// DefaultLimits returns docs/behaviour.md §5's defaults: 16,000 characters, 1 MiB, 100 MiB.
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
	// Batch is what the command changed, as the store's change feed published it, with
	// the paths the model sees (nil when it changed nothing): the audit log's account of
	// the call.
	Batch *vfs.Batch
	// Code names the kind of error, for logs and metrics; "" for a success.
	Code string
}

// Error codes of results: every error result carries one.
const (
	CodeInvalid      = "invalid"       // an argument is missing, of the wrong type or out of range; an unknown command
	CodeInvalidPath  = "invalid_path"  // a path that breaks docs/behaviour.md §1 (other than escaping)
	CodeEscape       = "escape"        // a path that leaves /memories
	CodeNotFound     = "not_found"     // the path does not exist (or is not what the command needs)
	CodeExists       = "exists"        // create or rename onto an existing path
	CodeNotDirectory = "not_directory" // a parent of the path is a file
	CodeNotRegular   = "not_regular"   // a special file (fifo, socket, device)
	CodeNoMatch      = "no_match"      // str_replace: old_str does not occur
	CodeAmbiguous    = "ambiguous"     // str_replace: old_str occurs more than once
	CodeLimit        = "limit"         // over a file, store or line limit (docs/behaviour.md §5)
	CodeSecret       = "secret"        // a credential in the text or a path
	CodeReadOnly     = "read_only"     // a change on a read-only store
	CodeMount        = "mount"         // delete or move a mount point, or move between stores
	CodeStorage      = "storage"       // a storage failure (docs/behaviour.md §4)
	CodeInternal     = "internal"      // a panic or a call that was cancelled
)

// Commands are the memory_20250818 commands, in the order the messages list them.
var Commands = []string{"view", "create", "str_replace", "insert", "delete", "rename"}

// command is one row of the command table: everything the entry point needs to know about
// a command. A new command is one more row.
type command struct {
	name    string
	changes bool // refused on a read-only store
	// run parses the arguments as decoded from JSON and runs the command; an argument
	// problem is an error result.
	run func(h *Memory, ctx context.Context, args map[string]any) Result
}

// typed adapts a parser and a typed command to the table's run.
func typed[A any](parse func(map[string]any) (A, string), do func(*Memory, context.Context, A) Result) func(*Memory, context.Context, map[string]any) Result {
	return func(h *Memory, ctx context.Context, args map[string]any) Result {
		a, bad := parse(args)
		if bad != "" {
			return fail(CodeInvalid, "%s", bad)
		}
		return do(h, ctx, a)
	}
}

var commandTable = []command{
	{name: "view", run: typed(parseView, (*Memory).view)},
	{name: "create", changes: true, run: typed(parseCreate, (*Memory).create)},
	{name: "str_replace", changes: true, run: typed(parseStrReplace, (*Memory).strReplace)},
	{name: "insert", changes: true, run: typed(parseInsert, (*Memory).insert)},
	{name: "delete", changes: true, run: typed(parseDelete, (*Memory).delete)},
	{name: "rename", changes: true, run: typed(parseRename, (*Memory).rename)},
}

func lookup(name string) *command {
	for i := range commandTable {
		if commandTable[i].name == name {
			return &commandTable[i]
		}
	}
	return nil
}

// Memory runs the six memory commands against one store.
type Memory struct {
	store         *vfs.Store
	limits        Limits
	readOnly      bool
	rejectSecrets bool
	timeout       time.Duration
	top           string  // where the store appears when it is mounted ("": /memories)
	mounts        []Mount // other memories placed under /memories (see WithMounts)
}

// An Option changes how the handlers treat changes.
type Option func(*Memory)

// ReadOnly refuses every command but view with "Error: The memory store is read-only".
func ReadOnly() Option { return func(h *Memory) { h.readOnly = true } }

// RejectSecrets refuses create, str_replace and insert when the file would then contain
// what looks like a credential where the change put text, or when a path does; nothing is
// written. It is on by default, as in the command.
func RejectSecrets() Option { return func(h *Memory) { h.rejectSecrets = true } }

// AllowSecrets turns the secret guard off (the command's -secrets off).
func AllowSecrets() Option { return func(h *Memory) { h.rejectSecrets = false } }

// Timeout bounds every call: one that runs longer (waiting for the storage lock, or on a
// slow disk) gives up with docs/behaviour.md §4's error and releases what it held. Default: DefaultTimeout.
func Timeout(d time.Duration) Option { return func(h *Memory) { h.timeout = d } }

// Timeout returns how long a call may take: the Timeout option's, or DefaultTimeout; zero
// leaves calls unbounded.
func (h *Memory) Timeout() time.Duration { return h.timeout }

// DefaultTimeout is how long a call may take before it gives up.
const DefaultTimeout = 30 * time.Second

// New returns the command handlers over store. A zero field of limits takes its default.
// A read-only store makes the handlers read-only.
func New(store *vfs.Store, limits Limits, opts ...Option) *Memory {
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
	h := &Memory{store: store, limits: limits, readOnly: store.ReadOnly(), rejectSecrets: true, timeout: DefaultTimeout}
	for _, o := range opts {
		o(h)
	}
	return h
}

// ReadOnlyStore reports whether the handlers refuse changes.
func (h *Memory) ReadOnlyStore() bool { return h.readOnly }

// Exec runs one native memory_20250818 input: "command" plus that command's arguments.
func (h *Memory) Exec(ctx context.Context, input map[string]any) Result {
	v, ok := input["command"]
	if !ok || v == nil {
		return fail(CodeInvalid, "Error: Missing required parameter `command`")
	}
	command, ok := v.(string)
	if !ok {
		return fail(CodeInvalid, "Error: Parameter `command` must be a string")
	}
	return h.Call(ctx, command, input)
}

// Call runs command with its arguments as decoded from JSON. Argument problems, refused
// paths and storage failures all come back as error results; a panic becomes docs/behaviour.md §4's
// internal error and is reported in Result.Err.
func (h *Memory) Call(ctx context.Context, command string, args map[string]any) Result {
	c := lookup(command)
	if c == nil {
		return fail(CodeInvalid, "Error: Unknown command %s. Use one of: %s", Echo(command), strings.Join(Commands, ", "))
	}
	var paths []string
	for _, k := range []string{"path", "old_path", "new_path"} {
		if s, ok := args[k].(string); ok {
			paths = append(paths, s)
		}
	}
	if c.name == "rename" && len(paths) != 2 || c.name != "rename" && len(paths) != 1 {
		// A missing argument: the command reports it.
		return h.guard(ctx, c, sentPath(args), func(ctx context.Context) Result { return c.run(h, ctx, args) })
	}
	return h.typedCall(ctx, c.name, paths, func(m *Memory, ctx context.Context) Result { return c.run(m, ctx, args) })
}

// The typed commands. Each goes through the same guard as Call.

// View shows a directory listing (two levels deep, with sizes) or a file with line numbers.
func (h *Memory) View(ctx context.Context, a ViewArgs) Result {
	return h.typedCall(ctx, "view", []string{a.Path}, func(m *Memory, ctx context.Context) Result { return m.view(ctx, a) })
}

// Create writes a new file; it never overwrites, and creates missing parent directories.
func (h *Memory) Create(ctx context.Context, a CreateArgs) Result {
	return h.typedCall(ctx, "create", []string{a.Path}, func(m *Memory, ctx context.Context) Result { return m.create(ctx, a) })
}

// StrReplace replaces the one occurrence of OldStr in the file with NewStr.
func (h *Memory) StrReplace(ctx context.Context, a StrReplaceArgs) Result {
	return h.typedCall(ctx, "str_replace", []string{a.Path}, func(m *Memory, ctx context.Context) Result { return m.strReplace(ctx, a) })
}

// Insert puts InsertText after line InsertLine (0 = before the first line).
func (h *Memory) Insert(ctx context.Context, a InsertArgs) Result {
	return h.typedCall(ctx, "insert", []string{a.Path}, func(m *Memory, ctx context.Context) Result { return m.insert(ctx, a) })
}

// Delete removes a file, or a directory with everything in it.
func (h *Memory) Delete(ctx context.Context, a DeleteArgs) Result {
	return h.typedCall(ctx, "delete", []string{a.Path}, func(m *Memory, ctx context.Context) Result { return m.delete(ctx, a) })
}

// Rename moves a file or directory; it never overwrites, and creates missing parents of
// the destination.
func (h *Memory) Rename(ctx context.Context, a RenameArgs) Result {
	return h.typedCall(ctx, "rename", []string{a.OldPath, a.NewPath}, func(m *Memory, ctx context.Context) Result { return m.rename(ctx, a) })
}

// typedCall runs a command on the memory that holds its paths (see pick).
func (h *Memory) typedCall(ctx context.Context, name string, paths []string, run func(*Memory, context.Context) Result) Result {
	c := lookup(name)
	m, refused := h.pick(c, paths...)
	if refused != nil {
		return *refused
	}
	return m.guard(ctx, c, paths[0], func(ctx context.Context) Result { return run(m, ctx) })
}

// guard is the one entry point every command goes through: it refuses changes on a
// read-only store and calls whose context is already done, bounds the call's time, and
// turns a panic into docs/behaviour.md §4's internal error.
func (h *Memory) guard(ctx context.Context, c *command, sent string, run func(context.Context) Result) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = internalError(c.name, sent, fmt.Errorf("panic in %s: %v\n%s", c.name, r, debug.Stack()))
		}
	}()
	if err := ctx.Err(); err != nil {
		return internalError(c.name, sent, err)
	}
	if h.readOnly && c.changes {
		return h.readOnlyResult()
	}
	// A context with a deadline no later than the call's own keeps it, and the call needs
	// no timer of its own: the stdio loop gives each call its deadline with the context it
	// cancels the call by (a timer and a context here cost a sixth of a no-op call's CPU).
	if dl, ok := ctx.Deadline(); h.timeout > 0 && (!ok || time.Until(dl) > h.timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	return run(ctx)
}

// internalError is docs/behaviour.md §4's message for a failure that is the server's, not the caller's;
// err, for the log, says what happened.
func internalError(command, sent string, err error) Result {
	return Result{Text: fmt.Sprintf("Error: Could not %s %s: %s", command, Echo(sent), ReasonInternal), IsError: true, Err: err, Code: CodeInternal}
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

// fail is an error result with its code.
func fail(code, format string, a ...any) Result {
	return Result{Text: fmt.Sprintf(format, a...), IsError: true, Code: code}
}

// failure turns an error from the store into the model's message: a symbolic link leading
// outside is the escape message (docs/behaviour.md §1, P4); anything else a neutral failure (docs/behaviour.md §4).
func failure(command, sent string, err error) Result {
	if errors.Is(err, vfs.ErrEscape) {
		return escapes(sent)
	}
	if errors.Is(err, vfs.ErrNotRegular) {
		return notRegular(sent)
	}
	return Result{
		Text:    fmt.Sprintf("Error: Could not %s %s: %s", command, Echo(sent), reason(err)),
		IsError: true,
		Err:     err,
		Code:    CodeStorage,
	}
}

// secretIn refuses a change whose path, or the text the change puts into the file, holds
// what looks like a credential, when the guard is on. content is the file as it would be
// after the change, and [from, to) the bytes the change wrote: a credential is refused if
// any of it lies in or touches that region, so one split over two changes is caught too,
// and one that was already in the file does not block unrelated edits.
func (h *Memory) secretIn(paths []string, content []byte, from, to int) (Result, bool) {
	if !h.rejectSecrets {
		return Result{}, false
	}
	for _, p := range paths {
		if kind, _, found := findSecret([]byte(p), 0, len(p)); found {
			return Result{Text: fmt.Sprintf("Error: The path contains what looks like %s; memory paths must not hold credentials. Choose another name.", article(kind)), IsError: true, Code: CodeSecret}, true
		}
	}
	if content == nil {
		return Result{}, false
	}
	kind, line, found := findSecret(content, from, to)
	if !found {
		return Result{}, false
	}
	return Result{Text: fmt.Sprintf("Error: The text contains what looks like %s on line %d; memory files must not store credentials. Remove it and try again.", article(kind), line), IsError: true, Code: CodeSecret}, true
}

func notRegular(sent string) Result {
	return fail(CodeNotRegular, "Error: The path %s is not a regular file or directory", sent)
}

// read runs fn in a read transaction; update in a change transaction. fn returns the
// result for the model, or an error for a storage failure.
func (h *Memory) read(ctx context.Context, command, sent string, fn func(tx *vfs.Tx) (Result, error)) Result {
	var res Result
	err := h.store.View(ctx, func(tx *vfs.Tx) (err error) {
		res, err = fn(tx)
		return err
	})
	if err != nil {
		return failure(command, sent, err)
	}
	return res
}

func (h *Memory) update(ctx context.Context, command, sent string, fn func(tx *vfs.Tx) (Result, error)) Result {
	var res Result
	batch, err := h.store.Apply(ctx, command, func(tx *vfs.Tx) (err error) {
		res, err = fn(tx)
		return err
	})
	if err != nil {
		return failure(command, sent, err)
	}
	res.Batch = h.shownBatchPtr(batch)
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
		if !fi.IsDir() && !fi.IsLink() {
			return true, nil
		}
	}
	return false, nil
}

// checkSize applies the file and store limits to a change that makes a file newSize bytes
// long (it was oldSize, 0 for a new file). A change that grows neither is always allowed,
// so a file or store that is already over its limit can still be trimmed.
func (h *Memory) checkSize(tx *vfs.Tx, sent string, oldSize, newSize int64) (Result, bool, error) {
	if newSize > h.limits.MaxFileBytes && newSize > oldSize {
		return fail(CodeLimit, "Error: %s would be %d bytes, over the limit of %d bytes per memory file", sent, newSize, h.limits.MaxFileBytes), false, nil
	}
	if newSize <= oldSize {
		return Result{}, true, nil
	}
	usage, err := tx.Usage()
	if err != nil {
		return Result{}, false, err
	}
	if total := usage - oldSize + newSize; total > h.limits.MaxStoreBytes {
		return fail(CodeLimit, "Error: The memory store is full: this change would bring it to %d bytes, over its limit of %d bytes", total, h.limits.MaxStoreBytes), false, nil
	}
	return Result{}, true, nil
}

// Ready reports whether the store answers: nil if its root can be looked at within ctx.
func (h *Memory) Ready(ctx context.Context) error {
	return h.store.View(ctx, func(tx *vfs.Tx) error {
		_, err := tx.Stat(vfs.MustResolve(vfs.Root))
		return err
	})
}
