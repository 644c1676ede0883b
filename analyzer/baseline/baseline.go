// Package baseline reads, writes and updates fencelint's baseline: the
// findings a codebase accepts as debt when it adopts fencelint, so that CI
// fails only on new unfenced writes while the old ones are fixed one by one.
//
// A baseline is a text file, one entry a line, sorted:
//
//	# comments and blank lines are ignored
//	<package> <file> <function> <count> <message>
//
// package is the import path; file is the file's path relative to its
// module's root, in slash form (its base name outside a module); function is the enclosing function
// declaration (Func, or Type.Method; "-" at package level; a function
// literal counts as the declaration around it); count is how many findings
// with that message the function holds; message is the finding's message,
// to the end of the line. No line number: an entry survives edits elsewhere
// in the file. A field that holds white space (or starts with '"' or '#')
// is written as a Go string literal.
package baseline

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Key identifies a kind of finding in one function of one file.
type Key struct {
	Package string // import path
	File    string // module-relative, slash form
	Func    string // Func, Type.Method, or "-" at package level
	Message string
}

// PackageLevel is the Func of a finding outside any function declaration.
const PackageLevel = "-"

// Entry is one line of a baseline: Count findings of Key are accepted.
type Entry struct {
	Key
	Count int
	Line  int // the line it was read from; 0 for an entry not read from a file
}

// String renders the entry as a line of the file, without its newline.
func (e Entry) String() string {
	return strings.Join([]string{field(e.Package), field(e.File), field(e.Func), strconv.Itoa(e.Count), message(e.Message)}, " ")
}

// Baseline is a parsed baseline file.
type Baseline struct {
	Path    string
	Entries []Entry // in file order
}

// SyntaxError is a malformed line of a baseline file. Read and Parse never
// return a partial baseline: a file with one bad line is an error, never
// fewer entries.
type SyntaxError struct {
	File    string
	Line    int
	Problem string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("fencelint baseline %s:%d: %s", e.File, e.Line, e.Problem)
}

// Read reads and parses the baseline file at path. A missing file is an
// error satisfying errors.Is(err, fs.ErrNotExist).
func Read(path string) (*Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fencelint baseline: %w", err)
	}
	return Parse(path, data)
}

// Parse parses the text of a baseline file named name. Errors are
// *SyntaxError, naming the file, the line and the problem; an entry given
// twice is an error too (its count says how many).
func Parse(name string, data []byte) (*Baseline, error) {
	b := &Baseline{Path: name}
	seen := map[Key]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		e, problem := parseLine(line)
		if problem != "" {
			return nil, &SyntaxError{name, n, problem}
		}
		e.Line = n
		if prev, ok := seen[e.Key]; ok {
			return nil, &SyntaxError{name, n, fmt.Sprintf("entry repeats line %d (one line per package, file, function and message; its count says how many)", prev)}
		}
		seen[e.Key] = n
		b.Entries = append(b.Entries, e)
	}
	return b, nil
}

const wantLine = "want <package> <file> <function> <count> <message>"

func parseLine(line string) (Entry, string) {
	var e Entry
	rest := line
	var fields [4]string
	names := [4]string{"package", "file", "function", "count"}
	for i := range fields {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return e, fmt.Sprintf("missing %s: %s", names[i], wantLine)
		}
		f, r, err := nextField(rest)
		if err != "" {
			return e, names[i] + ": " + err
		}
		if f == "" {
			return e, fmt.Sprintf("empty %s: %s", names[i], wantLine)
		}
		fields[i], rest = f, r
	}
	count, err := strconv.Atoi(fields[3])
	if err != nil || count < 1 {
		return e, fmt.Sprintf("count %q is not a positive integer: %s", fields[3], wantLine)
	}
	if rest == "" || rest[0] != ' ' && rest[0] != '\t' {
		return e, "missing message: " + wantLine
	}
	msg := strings.TrimLeft(rest, " \t")
	if strings.HasPrefix(msg, `"`) {
		s, err := strconv.Unquote(strings.TrimRight(msg, " \t"))
		if err != nil {
			return e, fmt.Sprintf("message starts with '\"' but is not a Go string literal: %v", err)
		}
		msg = s
	}
	if strings.TrimSpace(msg) == "" {
		return e, "missing message: " + wantLine
	}
	e.Key = Key{Package: fields[0], File: fields[1], Func: fields[2], Message: msg}
	e.Count = count
	return e, ""
}

// nextField splits off one field: a Go string literal, or text up to white
// space.
func nextField(s string) (field, rest, problem string) {
	if s[0] == '"' {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", "starts with '\"' but is not a Go string literal"
		}
		v, _ := strconv.Unquote(q)
		rest = s[len(q):]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return "", "", "text after the closing quote"
		}
		return v, rest, ""
	}
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, "", ""
	}
	return s[:i], s[i:], ""
}

func field(s string) string {
	if s == "" || strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "#") || strings.IndexFunc(s, unicode.IsSpace) >= 0 || !strconv.CanBackquote(s) {
		return strconv.Quote(s)
	}
	return s
}

func message(s string) string {
	if strings.HasPrefix(s, `"`) || strings.ContainsAny(s, "\r\n") || strings.TrimSpace(s) != s || !strconv.CanBackquote(s) {
		return strconv.Quote(s)
	}
	return s
}

// Header opens every file Format writes.
const Header = `# fencelint baseline: findings accepted as debt, to be fixed one by one.
# fencelint does not report these; it reports an entry that no longer matches
# a finding, so that this file shrinks in the change that fixes one.
# Shrink it with: fencelint -write-baseline <this file> ./...
# Adding debt is explicit: fencelint -write-baseline <this file> -baseline-add ./...
# <package> <file> <function> <count> <message>
`

// Format renders entries as a baseline file: the header, then one line an
// entry, sorted by package, file, function and message, so that the same
// findings always give the same bytes. Entries with a count below 1 are
// left out.
func Format(entries []Entry) []byte {
	es := append([]Entry(nil), entries...)
	Sort(es)
	var b bytes.Buffer
	b.WriteString(Header)
	for _, e := range es {
		if e.Count < 1 {
			continue
		}
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Sort sorts entries by package, file, function and message.
func Sort(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return Less(es[i].Key, es[j].Key) })
}

// Less orders keys by package, file, function and message.
func Less(a, b Key) bool {
	if a.Package != b.Package {
		return a.Package < b.Package
	}
	if a.File != b.File {
		return a.File < b.File
	}
	if a.Func != b.Func {
		return a.Func < b.Func
	}
	return a.Message < b.Message
}

// Found is one finding of the whole run that -write-baseline sees.
type Found struct {
	Key
	Pos token.Position // for messages
}

// Update is the result of rewriting a baseline with today's findings.
type Update struct {
	Entries  []Entry // the new baseline
	Removed  []Entry // entries (or parts of their counts) fixed since: dropped
	NotAdded []Found // findings not in the old baseline, left out without add
	Added    []Found // findings added (a new file, or add)
}

// Rewrite computes the new baseline from the old one (nil for a new file)
// and the findings of a run. judged reports whether the run saw the file
// of a key's package and file: an entry it did not see (a package outside
// the patterns, a test file without -test) is kept as it is, and gone
// reports whether an unseen entry's file no longer exists (then it is
// removed). Without add, a finding beyond the old baseline is not added:
// the baseline only shrinks, and a new file takes every finding.
func Rewrite(old *Baseline, found []Found, judged func(Key) bool, gone func(Key) bool, add bool) Update {
	var u Update
	byKey := map[Key][]Found{}
	var order []Key
	for _, f := range found {
		if byKey[f.Key] == nil {
			order = append(order, f.Key)
		}
		byKey[f.Key] = append(byKey[f.Key], f)
	}
	add = add || old == nil
	kept := map[Key]bool{}
	if old != nil {
		for _, e := range old.Entries {
			kept[e.Key] = true
			if !judged(e.Key) {
				if gone(e.Key) {
					u.Removed = append(u.Removed, e)
					continue
				}
				u.Entries = append(u.Entries, Entry{Key: e.Key, Count: e.Count})
				continue
			}
			fs := byKey[e.Key]
			n := len(fs)
			switch {
			case n < e.Count:
				u.Removed = append(u.Removed, Entry{Key: e.Key, Count: e.Count - n, Line: e.Line})
			case n > e.Count && add:
				u.Added = append(u.Added, fs[e.Count:]...)
			case n > e.Count:
				u.NotAdded = append(u.NotAdded, fs[e.Count:]...)
				n = e.Count
			}
			if n > 0 {
				u.Entries = append(u.Entries, Entry{Key: e.Key, Count: n})
			}
		}
	}
	for _, k := range order {
		if kept[k] {
			continue
		}
		if add {
			u.Entries = append(u.Entries, Entry{Key: k, Count: len(byKey[k])})
			u.Added = append(u.Added, byKey[k]...)
		} else {
			u.NotAdded = append(u.NotAdded, byKey[k]...)
		}
	}
	Sort(u.Entries)
	sortFound(u.NotAdded)
	sortFound(u.Added)
	return u
}

func sortFound(fs []Found) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i].Pos, fs[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// ModuleRoot returns the directory of the go.mod nearest above dir
// (dir itself included), or "" when there is none.
func ModuleRoot(dir string) string {
	for {
		if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Locate resolves the path of a baseline file as the -baseline flag gives
// it, for a package in directory dir. An absolute path is itself. A
// relative path is looked up in dir, then in each parent directory, and the
// first that holds it wins, so that go vet (which runs the tool in each
// package's directory) and the standalone command find the same file from
// any package of a module: commit it at the module's (or workspace's)
// root. A relative path found nowhere is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func Locate(path, dir string) (string, error) {
	if filepath.IsAbs(path) {
		return path, nil
	}
	for d := dir; ; {
		p := filepath.Join(d, path)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("locate fencelint baseline: %w", err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("locate fencelint baseline %s: not in %s or any parent directory: %w", path, dir, fs.ErrNotExist)
		}
		d = parent
	}
}
