package vfs

import (
	"fmt"
	"path"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Root is the virtual directory the model sees. Every virtual path is Root or below it.
const Root = "/memories"

// Limits on path length. Linux refuses longer names anyway, but with an errno that would
// surface as an opaque storage failure; refusing them up front gives the model a clear message.
const (
	MaxNameBytes = 255
	MaxPathBytes = 4096
)

// BookkeepingPrefix starts the name of every file the server keeps for itself in the storage
// (temporary files of atomic writes, the lock file, the overlay's whiteout list). No virtual
// path may name one: Resolve refuses them with the escape message (docs/behaviour.md §1).
const BookkeepingPrefix = ".memory-mcp"

// Path is a virtual path that passed Resolve: it is Root or lies below it, and its storage
// name is local to the storage root.
type Path struct {
	clean string // cleaned virtual path, e.g. "/memories/notes/a.txt"
}

// String returns the cleaned virtual path ("/memories/a/../b.txt" gives "/memories/b.txt").
func (p Path) String() string { return p.clean }

// Name returns the storage name: the cleaned path relative to the root, "" for the root itself.
func (p Path) Name() string { return strings.TrimPrefix(strings.TrimPrefix(p.clean, Root), "/") }

// IsRoot reports whether p is Root itself.
func (p Path) IsRoot() bool { return p.clean == Root }

// Parent returns the directory that holds p; the parent of Root is Root.
func (p Path) Parent() Path {
	if p.IsRoot() {
		return p
	}
	return Path{clean: path.Dir(p.clean)}
}

// Base returns the last element of p.
func (p Path) Base() string { return path.Base(p.clean) }

// Join returns the path of the child called name. name must be a single element taken from
// a directory listing of the storage.
func (p Path) Join(name string) Path { return Path{clean: p.clean + "/" + name} }

// Contains reports whether q lies strictly below p.
func (p Path) Contains(q Path) bool { return strings.HasPrefix(q.clean, p.clean+"/") }

// PathErrorKind says which rule of docs/behaviour.md §1 a path broke.
type PathErrorKind int

// The rules, in the order Resolve checks them.
const (
	BadCharacters PathErrorKind = iota + 1 // P1: control characters, backslash, invisible characters
	NotUnderRoot                           // P2: not /memories and not below /memories/
	Escapes                                // P3/P4: leaves /memories, or names bookkeeping
	TooLong                                // a name over MaxNameBytes or a path over MaxPathBytes
	WindowsName                            // a name Windows cannot hold (only on Windows)
)

// PathError is a refused virtual path; package handlers words it for the model.
type PathError struct {
	Path   string // the path as the caller sent it
	Kind   PathErrorKind
	Detail string // for WindowsName: what is wrong with the name
}

var kindNames = map[PathErrorKind]string{
	BadCharacters: "characters that are not allowed",
	NotUnderRoot:  "not under " + Root,
	Escapes:       "escapes " + Root,
	TooLong:       "too long",
	WindowsName:   "a name Windows cannot hold",
}

func (e *PathError) Error() string {
	return fmt.Sprintf("vfs: path %q refused: %s", e.Path, kindNames[e.Kind])
}

// Resolve validates a virtual path as sent by the model and returns it cleaned. It is a pure
// function: it does not look at any storage (symbolic links, rule P4, are the Store's job).
//
// The rules, checked in order, are docs/behaviour.md §1's P1–P3, tightened where a path could fool a person
// or another filesystem:
//   - P1 also refuses invalid UTF-8, Unicode control and format characters (bidirectional
//     overrides, zero-width characters, byte order marks) and line/paragraph separators,
//     because they make a listing lie about names.
//   - P3 also refuses a path whose elements, percent-decoded and NFKC-normalised, would be
//     "..", "." or contain a slash or backslash (fullwidth dots and solidi, the two-dot
//     leader, division and fraction slashes): Windows' best-fit mapping and some
//     normalising filesystems turn those into real separators.
//   - P3 also refuses every element that starts with ".memory-mcp" (any case): that prefix
//     is reserved for the server's bookkeeping files.
//   - Last, an element over 255 bytes or a path over 4096 bytes is refused as too long.
func Resolve(vpath string) (Path, error) { return resolve(vpath, runtime.GOOS == "windows") }

// resolve is Resolve, with Windows' name rules applied when windowsNames is set (so that
// they are tested on every platform).
func resolve(vpath string, windowsNames bool) (Path, error) {
	if hasBadCharacters(vpath) {
		return Path{}, &PathError{Path: vpath, Kind: BadCharacters}
	}
	if vpath != Root && !strings.HasPrefix(vpath, Root+"/") {
		return Path{}, &PathError{Path: vpath, Kind: NotUnderRoot}
	}
	clean := path.Clean(vpath)
	if clean != Root && !strings.HasPrefix(clean, Root+"/") {
		return Path{}, &PathError{Path: vpath, Kind: Escapes}
	}
	if decodedEscapes(vpath) || hasLookalikeOrReserved(clean) {
		return Path{}, &PathError{Path: vpath, Kind: Escapes}
	}
	if len(clean) > MaxPathBytes {
		return Path{}, &PathError{Path: vpath, Kind: TooLong}
	}
	for _, elem := range strings.Split(clean, "/") {
		if len(elem) > MaxNameBytes {
			return Path{}, &PathError{Path: vpath, Kind: TooLong}
		}
	}
	if windowsNames {
		for _, elem := range strings.Split(strings.TrimPrefix(clean, Root+"/"), "/") {
			if reason := WindowsNameProblem(elem); reason != "" && clean != Root {
				return Path{}, &PathError{Path: vpath, Kind: WindowsName, Detail: reason}
			}
		}
	}
	return Path{clean: clean}, nil
}

// WindowsNameProblem says why Windows cannot hold a file or directory named name, or ""
// if it can: a reserved device name (CON, PRN, AUX, NUL, COM0–COM9, LPT0–LPT9, with any
// extension and in any case, the superscript digits included), a name that ends with a dot
// or a space, or one of the characters < > : " | ? *.
func WindowsNameProblem(name string) string {
	if i := strings.IndexAny(name, `<>:"|?*`); i >= 0 {
		return fmt.Sprintf("names may not contain %q", name[i:i+1])
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return "names may not end with a dot or a space"
	}
	stem := strings.ToUpper(name)
	if i := strings.IndexByte(stem, '.'); i >= 0 {
		stem = stem[:i]
	}
	stem = strings.TrimRight(stem, " ")
	switch stem {
	case "CON", "PRN", "AUX", "NUL":
		return fmt.Sprintf("%q is a reserved device name", name)
	}
	if len(stem) >= 4 && (strings.HasPrefix(stem, "COM") || strings.HasPrefix(stem, "LPT")) {
		if d := stem[3:]; len(d) == 1 && d[0] >= '0' && d[0] <= '9' || d == "¹" || d == "²" || d == "³" {
			return fmt.Sprintf("%q is a reserved device name", name)
		}
	}
	return ""
}

// MustResolve is Resolve for paths known to be valid (tests, constants); it panics otherwise.
func MustResolve(vpath string) Path {
	p, err := Resolve(vpath)
	if err != nil {
		panic(err)
	}
	return p
}

// ValidName reports whether a path may end in the directory entry name. A name made
// outside memory-mcp may break the rules, and then no path can name its file: listings and
// exports leave it out, and a delete or rename of a directory holding it is refused.
func ValidName(name string) bool {
	if name == "" || name == "." || len(name) > MaxNameBytes {
		return false
	}
	plain := true // printable ASCII without '%': Resolve would check nothing more
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '/':
			return false
		case c < 0x20 || c >= 0x7f || c == '\\' || c == '%':
			plain = false
		}
	}
	if plain && name != ".." && !IsBookkeeping(name) && runtime.GOOS != "windows" {
		return true
	}
	_, err := Resolve(Root + "/" + name)
	return err == nil
}

// hasBadCharacters reports whether s holds a character that no path may hold (P1).
func hasBadCharacters(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return true
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return true
		}
		i += size
	}
	return false
}

// decodedEscapes reports whether percent-decoding vpath (repeatedly, until stable) yields a
// ".." element, a backslash or a control character that vpath itself does not have.
func decodedEscapes(vpath string) bool {
	if !strings.Contains(vpath, "%") {
		return false
	}
	decoded := vpath
	for {
		next := percentDecode(decoded)
		if next == decoded {
			break
		}
		decoded = next
	}
	if decoded == vpath {
		return false
	}
	for i := 0; i < len(decoded); i++ {
		if c := decoded[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return true
		}
	}
	if countDotDot(decoded) > countDotDot(vpath) {
		return true
	}
	// Decoded look-alikes count too: "%EF%BC%8E%EF%BC%8E" is a fullwidth "..".
	return hasLookalikeOrReserved(decoded)
}

func countDotDot(p string) int {
	n := 0
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			n++
		}
	}
	return n
}

// percentDecode decodes every well-formed %XX sequence once and keeps malformed ones as they are.
func percentDecode(s string) string {
	start := strings.IndexByte(s, '%')
	if start < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:start])
	for i := start; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// slashLookalikes are characters that look like a slash or backslash and that NFKC does not
// fold into one.
const slashLookalikes = "\u2215\u2044\u29f8\u29f9\u2216\u2571\u2572\u3033\u3035"

func hasLookalikeOrReserved(p string) bool {
	for _, elem := range strings.Split(p, "/") {
		if len(elem) >= len(BookkeepingPrefix) && strings.EqualFold(elem[:len(BookkeepingPrefix)], BookkeepingPrefix) {
			return true
		}
		ascii := true
		for i := 0; i < len(elem); i++ {
			if elem[i] >= utf8.RuneSelf {
				ascii = false
				break
			}
		}
		if ascii {
			continue
		}
		if strings.ContainsAny(elem, slashLookalikes) {
			return true
		}
		folded := norm.NFKC.String(elem)
		if folded == ".." || folded == "." || strings.ContainsAny(folded, `/\`) {
			return true
		}
		if len(folded) >= len(BookkeepingPrefix) && strings.EqualFold(folded[:len(BookkeepingPrefix)], BookkeepingPrefix) {
			return true
		}
	}
	return false
}

// IsBookkeeping reports whether a directory entry's name is one of the server's own files,
// which listings and size totals leave out.
func IsBookkeeping(name string) bool {
	return len(name) >= len(BookkeepingPrefix) && strings.EqualFold(name[:len(BookkeepingPrefix)], BookkeepingPrefix)
}
