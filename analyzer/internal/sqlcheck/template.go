package sqlcheck

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Part is a piece of a query built at run time: constant text, or a hole
// whose value is not known statically.
type Part struct {
	Text string
	Hole bool
}

// CheckTemplate judges a query built at run time from constant fragments and
// holes. It returns a Dynamic problem for each write of a fenced table that
// the constant fragments reveal, whatever the visible WHERE clause says: a
// hole may add an OR or drop the fence. Reads, plain inserts and fragments
// that name no fenced table give nil.
func CheckTemplate(parts []Part, cfg *Config) []Problem {
	mentions := false
	var b strings.Builder
	for _, p := range parts {
		if p.Hole {
			b.WriteString("?")
			continue
		}
		if cfg.Mentions(p.Text) {
			mentions = true
		}
		b.WriteString(p.Text)
	}
	if !mentions {
		return nil
	}
	// Holes in value positions (the usual case) leave a statement that
	// parses; judge it with the grammar.
	var out []Problem
	if eachStmt(b.String(), func(st ast.StmtNode) { out = append(out, checkStmt(st, cfg, true)...) }) {
		return out
	}
	return lexTemplate(parts, cfg)
}

// hole is the token standing for a hole in the lexical fallback.
const hole = "\x00hole"

// lexTemplate is the fallback for templates whose holes sit where no value
// may (a column list, a table name, a whole clause): it reads the tokens
// of the constant fragments, as produced by the TiDB lexer.
func lexTemplate(parts []Part, cfg *Config) []Problem {
	var toks []string
	for _, p := range parts {
		if p.Hole {
			toks = append(toks, hole)
			continue
		}
		toks = append(toks, tokens(parser.Normalize(ReplaceNamedParams(p.Text), "ON"))...)
	}
	var out []Problem
	for len(toks) > 0 {
		end := len(toks)
		for i, t := range toks {
			if t == ";" {
				end = i
				break
			}
		}
		out = append(out, lexStmt(toks[:end], cfg)...)
		if end == len(toks) {
			break
		}
		toks = toks[end+1:]
	}
	return out
}

// tokens splits the output of parser.Normalize: tokens separated by single
// spaces, identifiers back-quoted (and possibly holding spaces).
func tokens(norm string) []string {
	var out []string
	for i := 0; i < len(norm); {
		switch {
		case norm[i] == ' ':
			i++
		case norm[i] == '`':
			j := skipQuoted(norm, i)
			out = append(out, norm[i:j])
			i = j
		default:
			j := strings.IndexByte(norm[i:], ' ')
			if j < 0 {
				j = len(norm) - i
			}
			out = append(out, norm[i:i+j])
			i += j
		}
	}
	return out
}

func ident(tok string) (string, bool) {
	if len(tok) >= 2 && tok[0] == '`' && tok[len(tok)-1] == '`' {
		return strings.ToLower(strings.ReplaceAll(tok[1:len(tok)-1], "``", "`")), true
	}
	return "", false
}

// lexStmt finds the fenced tables one statement writes.
func lexStmt(toks []string, cfg *Config) []Problem {
	if len(toks) == 0 {
		return nil
	}
	var verb string
	var region []string // tokens that name the written tables
	switch toks[0] {
	case "update":
		verb = "UPDATE"
		region = until(toks[1:], "set")
	case "replace":
		verb = "REPLACE"
		region = until(toks[1:], "(", "values", "value", "set", "select")
	case "insert":
		if !hasSeq(toks, "on", "duplicate", "key", "update") {
			return nil
		}
		verb = "INSERT … ON DUPLICATE KEY UPDATE"
		region = until(toks[1:], "(", "values", "value", "set", "select")
	case "delete":
		if !cfg.Delete {
			return nil
		}
		verb = "DELETE"
		region = until(toks[1:], "where")
	default:
		return nil
	}
	var out []Problem
	seen := map[string]bool{}
	for i, t := range region {
		name, ok := ident(t)
		if !ok || i+1 < len(region) && region[i+1] == "." || seen[name] {
			continue
		}
		if tb := cfg.Table(name); tb != nil {
			seen[name] = true
			out = append(out, Problem{Kind: Dynamic, Verb: verb, Table: *tb, Ref: name})
		}
	}
	return out
}

func until(toks []string, stop ...string) []string {
	depth := 0
	for i, t := range toks {
		switch t {
		case "(":
			if depth == 0 && contains(stop, "(") {
				return toks[:i]
			}
			depth++
		case ")":
			depth--
		}
		if depth == 0 && contains(stop, t) {
			return toks[:i]
		}
	}
	return toks
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasSeq(toks []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(toks); i++ {
		ok := true
		for j, s := range seq {
			if toks[i+j] != s {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
