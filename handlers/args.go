package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
)

// The typed arguments of each command, named after the memory_20250818 input fields.
type (
	// ViewArgs are view's arguments. ViewRange is nil when not given; otherwise it must
	// hold exactly two integers, [start, end], 1-based and inclusive, end -1 for the last line.
	ViewArgs struct {
		Path      string
		ViewRange []int
	}
	// CreateArgs are create's arguments.
	CreateArgs struct {
		Path     string
		FileText string
	}
	// StrReplaceArgs are str_replace's arguments; NewStr "" deletes OldStr.
	StrReplaceArgs struct {
		Path   string
		OldStr string
		NewStr string
	}
	// InsertArgs are insert's arguments: InsertText goes after line InsertLine (0 = before the first).
	InsertArgs struct {
		Path       string
		InsertLine int
		InsertText string
	}
	// DeleteArgs are delete's arguments.
	DeleteArgs struct {
		Path string
	}
	// RenameArgs are rename's arguments.
	RenameArgs struct {
		OldPath string
		NewPath string
	}
)

// DecodeInput decodes a native memory_20250818 input, a JSON object. Numbers stay
// json.Number, so that one beyond a float64's range reaches its command, which names the
// argument, rather than failing the whole input.
func DecodeInput(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var input map[string]any
	if err := dec.Decode(&input); err != nil {
		return nil, err
	}
	if input == nil {
		return nil, errors.New("null is not an object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more follows the object")
	}
	return input, nil
}

const badViewRange = "Error: Invalid `view_range`. It should be a list of two integers."

// Each parser returns the typed arguments, or the message for the first argument problem
// (missing, wrong type), checking the arguments in the order of the tool's schema. Unknown
// arguments are ignored: the native tool sends one input shape for all commands.

func parseView(args map[string]any) (a ViewArgs, bad string) {
	if a.Path, bad = stringArg(args, "path", true); bad != "" {
		return a, bad
	}
	v, ok := args["view_range"]
	if !ok || v == nil {
		return a, ""
	}
	items, ok := v.([]any)
	if !ok || len(items) != 2 {
		return a, badViewRange
	}
	a.ViewRange = make([]int, 2)
	for i, item := range items {
		n, ok := toInt(item)
		if !ok {
			return a, badViewRange
		}
		a.ViewRange[i] = n
	}
	return a, ""
}

func parseCreate(args map[string]any) (a CreateArgs, bad string) {
	if a.Path, bad = stringArg(args, "path", true); bad != "" {
		return a, bad
	}
	a.FileText, bad = stringArg(args, "file_text", true)
	return a, bad
}

func parseStrReplace(args map[string]any) (a StrReplaceArgs, bad string) {
	if a.Path, bad = stringArg(args, "path", true); bad != "" {
		return a, bad
	}
	if a.OldStr, bad = stringArg(args, "old_str", true); bad != "" {
		return a, bad
	}
	a.NewStr, bad = stringArg(args, "new_str", false)
	return a, bad
}

func parseInsert(args map[string]any) (a InsertArgs, bad string) {
	if a.Path, bad = stringArg(args, "path", true); bad != "" {
		return a, bad
	}
	v, present := args["insert_line"]
	if !present || v == nil {
		return a, missing("insert_line")
	}
	n, ok := toInt(v)
	if !ok {
		return a, "Error: Parameter `insert_line` must be an integer"
	}
	a.InsertLine = n
	a.InsertText, bad = stringArg(args, "insert_text", true)
	return a, bad
}

func parseDelete(args map[string]any) (a DeleteArgs, bad string) {
	a.Path, bad = stringArg(args, "path", true)
	return a, bad
}

func parseRename(args map[string]any) (a RenameArgs, bad string) {
	if a.OldPath, bad = stringArg(args, "old_path", true); bad != "" {
		return a, bad
	}
	a.NewPath, bad = stringArg(args, "new_path", true)
	return a, bad
}

func missing(name string) string { return "Error: Missing required parameter `" + name + "`" }

// stringArg reads a string argument; JSON null counts as absent.
func stringArg(args map[string]any, name string, required bool) (string, string) {
	v, present := args[name]
	if !present || v == nil {
		if required {
			return "", missing(name)
		}
		return "", ""
	}
	s, ok := v.(string)
	if !ok {
		return "", "Error: Parameter `" + name + "` must be a string"
	}
	return s, ""
}

// toInt accepts a whole number in any of the forms a JSON decoder or a Go caller produces
// (3 and 3.0 alike), within the range of int.
func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || n < math.MinInt64 || n >= math.MaxInt64 {
			return 0, false
		}
		return int(n), true
	case int:
		return n, true
	case int64:
		return int(n), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(i), true
		}
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		return toInt(f)
	}
	return 0, false
}
