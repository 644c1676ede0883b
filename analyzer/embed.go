package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// SQL in embedded files (//go:embed) is judged like a constant: a string
// or []byte variable holds one file, judged at its declaration; each file
// of an embed.FS is judged at the declaration too, and FS.ReadFile (or
// fs.ReadFile) with a constant name returns its text to the evaluators.
// The files are read from the package's directory: drivers give analyzers
// no access to embedded files.

// maxEmbedSize bounds the files read.
const maxEmbedSize = 1 << 20

type embedInfo struct {
	files map[string]string // slash path relative to the package directory → text
	text  string            // the one file of a string or []byte variable
}

// embedDecl records the variables of a var declaration with //go:embed
// directives, and judges their files.
func (ss *sqlStrings) embedDecl(gd *ast.GenDecl) {
	if gd.Tok != token.VAR {
		return
	}
	for _, spec := range gd.Specs {
		vs, ok := spec.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 {
			continue
		}
		doc := vs.Doc
		if doc == nil && len(gd.Specs) == 1 {
			doc = gd.Doc
		}
		patterns := embedPatterns(doc)
		if len(patterns) == 0 {
			continue
		}
		v, ok := ss.pass.TypesInfo.Defs[vs.Names[0]].(*types.Var)
		if !ok {
			continue
		}
		dir := filepath.Dir(ss.pass.Fset.File(vs.Pos()).Name())
		e := &embedInfo{files: embedFiles(dir, patterns)}
		names := make([]string, 0, len(e.files))
		for name := range e.files {
			names = append(names, name)
		}
		sort.Strings(names)
		if stringish(v.Type()) && len(names) == 1 {
			e.text = e.files[names[0]]
		}
		ss.embeds[v] = e
		for _, name := range names {
			text := e.files[name]
			if !ss.cfg.Mentions(text) {
				continue
			}
			ss.mentionTable = true
			ss.mentionWrite = ss.mentionWrite || ss.cfg.MentionsWrite(text)
			if ps := sqlcheck.Check(text, ss.cfg); len(ps) > 0 {
				ss.out.add(vs.Names[0].Pos(), name+": "+problemsMessage(ps))
			}
		}
	}
}

// embedPatterns returns the patterns of the //go:embed lines of doc.
func embedPatterns(doc *ast.CommentGroup) []string {
	if doc == nil {
		return nil
	}
	var out []string
	for _, cm := range doc.List {
		rest, ok := strings.CutPrefix(cm.Text, "//go:embed")
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '\t' {
			continue
		}
		rest = strings.TrimSpace(rest)
		for rest != "" {
			var p string
			switch rest[0] {
			case '"', '`':
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					return out
				}
				p, _ = strconv.Unquote(q)
				rest = rest[len(q):]
			default:
				i := strings.IndexAny(rest, " \t")
				if i < 0 {
					i = len(rest)
				}
				p, rest = rest[:i], rest[i:]
			}
			out = append(out, p)
			rest = strings.TrimSpace(rest)
		}
	}
	return out
}

// embedFiles resolves embed patterns as the go command does: a pattern
// matches files, or directories whose files are all embedded (except
// names starting with . or _, unless the pattern starts with all:).
func embedFiles(dir string, patterns []string) map[string]string {
	files := map[string]string{}
	add := func(p string) {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return
		}
		if info, err := os.Stat(p); err != nil || !info.Mode().IsRegular() || info.Size() > maxEmbedSize {
			return
		}
		if b, err := os.ReadFile(p); err == nil {
			files[filepath.ToSlash(rel)] = string(b)
		}
	}
	for _, pat := range patterns {
		all := strings.HasPrefix(pat, "all:")
		pat = strings.TrimPrefix(pat, "all:")
		matches, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(pat)))
		if err != nil {
			continue
		}
		for _, m := range matches {
			info, err := os.Stat(m)
			if err != nil {
				continue
			}
			if !info.IsDir() {
				add(m)
				continue
			}
			filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return nil
				}
				if p != m && !all && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
				if !d.IsDir() {
					add(p)
				}
				return nil
			})
		}
	}
	return files
}

// embedRead returns the text that call reads from an embedded file system:
// fsys.ReadFile(name) or fs.ReadFile(fsys, name) with a constant name.
func (ss *sqlStrings) embedRead(call *ast.CallExpr, fn *types.Func) (string, bool) {
	if fn.Name() != "ReadFile" || fn.Pkg() == nil {
		return "", false
	}
	var fsys, name ast.Expr
	switch {
	case fn.Pkg().Path() == "embed" && len(call.Args) == 1:
		sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		fsys, name = sel.X, call.Args[0]
	case fn.Pkg().Path() == "io/fs" && len(call.Args) == 2:
		fsys, name = call.Args[0], call.Args[1]
	default:
		return "", false
	}
	id, ok := ast.Unparen(fsys).(*ast.Ident)
	if !ok {
		return "", false
	}
	e := ss.embeds[objVar(ss.pass.TypesInfo, id)]
	n, ok := ss.static(name)
	if e == nil || !ok {
		return "", false
	}
	text, ok := e.files[path.Clean(n)]
	return text, ok
}

// objVar is the variable an identifier denotes or declares, or nil.
func objVar(info *types.Info, id *ast.Ident) *types.Var {
	v, _ := info.ObjectOf(id).(*types.Var)
	return v
}
