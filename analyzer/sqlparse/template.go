package sqlparse

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// checkTemplate judges a query built at run time from constant fragments and
// holes. It returns a sqlcheck.Dynamic problem for each write of a fenced table that
// the constant fragments reveal, whatever the visible WHERE clause says: a
// hole may add an OR or drop the fence. Reads, plain inserts and fragments
// that name no fenced table give nil.
func checkTemplate(parts []sqlcheck.Part, cfg *sqlcheck.Config) []sqlcheck.Problem {
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
	if ps, ok := checkSetHoles(parts, cfg); ok {
		return ps
	}
	// Holes in value positions (the usual case) leave a statement that
	// parses; judge it with the grammar.
	var out []sqlcheck.Problem
	if !eachStmt(b.String(), func(st ast.StmtNode) { out = append(out, checkStmt(st, cfg, true)...) }) {
		out = lexTemplate(parts, cfg)
	}
	return attribute(parts, out)
}

// attribute names, in each sqlcheck.Dynamic problem of an UPDATE or DELETE, the
// clause a named hole completes and what the hole stands for: the first
// named hole of a WHERE clause, else the first of a SET list. A problem
// whose holes have no name (a builder's unknown condition, a template's
// action) keeps the general message.
func attribute(parts []sqlcheck.Part, ps []sqlcheck.Problem) []sqlcheck.Problem {
	clause, from := holeClause(parts)
	if from == "" {
		return ps
	}
	for i := range ps {
		if ps[i].Kind == sqlcheck.Dynamic && (ps[i].Verb == "UPDATE" || ps[i].Verb == "DELETE") {
			ps[i].Clause, ps[i].From = clause, from
		}
	}
	return ps
}

// holeClause finds the clause of the first statement's first named hole
// in its WHERE clause ("WHERE"), else in its SET list ("SET" when a
// constant WHERE follows, "SET+WHERE" when none does: the hole may hold
// it), and the hole's name. It reads the text itself, since a hole may
// sit inside a quoted string (SET note = '" + note + "'), which splits
// no token: quotes and comments are skipped, keywords count outside
// parentheses.
func holeClause(parts []sqlcheck.Part) (clause, from string) {
	const (
		before = iota
		inSet
		inWhere
		after
	)
	region, depth := before, 0
	setHole, whereSeen := "", false
	quote := byte(0)
	first := true // the statement's first word
	hole := func(name string) bool {
		switch {
		case name == "":
		case region == inWhere:
			return true
		case region == inSet && setHole == "":
			setHole = name
		}
		return false
	}
	for _, p := range parts {
		if p.Hole {
			if hole(p.Name) {
				return "WHERE", p.Name
			}
			continue
		}
		t := p.Text
		for i := 0; i < len(t); i++ {
			c := t[i]
			if quote != 0 {
				switch {
				case c == '\\' && quote != '`':
					i++
				case c == quote:
					quote = 0
				}
				continue
			}
			switch {
			case c == '\'' || c == '"' || c == '`':
				quote = c
			case c == '(':
				depth++
			case c == ')':
				depth--
			case c == ';' && depth == 0:
				return setClause(setHole, whereSeen)
			case c == '#' || c == '-' && strings.HasPrefix(t[i:], "-- "):
				if j := strings.IndexByte(t[i:], '\n'); j >= 0 {
					i += j
				} else {
					i = len(t)
				}
			case c == '/' && strings.HasPrefix(t[i:], "/*"):
				if j := strings.Index(t[i+2:], "*/"); j >= 0 {
					i += j + 3
				} else {
					i = len(t)
				}
			case sqlcheck.IsWordByte(c):
				j := i
				for j < len(t) && sqlcheck.IsWordByte(t[j]) {
					j++
				}
				w := strings.ToLower(t[i:j])
				i = j - 1
				if first {
					first = false
					if w != "update" && w != "delete" {
						return "", ""
					}
					continue
				}
				if depth != 0 {
					continue
				}
				switch w {
				case "set":
					if region == before {
						region = inSet
					}
				case "where":
					region, whereSeen = inWhere, true
				case "order", "limit":
					region = after
				}
			}
		}
	}
	return setClause(setHole, whereSeen)
}

func setClause(name string, whereSeen bool) (string, string) {
	switch {
	case name == "":
		return "", ""
	case whereSeen:
		return "SET", name
	}
	return "SET+WHERE", name
}

// hole is the token standing for a hole in the lexical fallback.
const hole = "\x00hole"

// lexTemplate is the fallback for templates whose holes sit where no value
// may (a column list, a table name, a whole clause): it reads the tokens
// of the constant fragments, as produced by the TiDB lexer.
func lexTemplate(parts []sqlcheck.Part, cfg *sqlcheck.Config) []sqlcheck.Problem {
	var toks []string
	for _, p := range parts {
		if p.Hole {
			toks = append(toks, hole)
			continue
		}
		toks = append(toks, lex(p.Text)...)
	}
	var out []sqlcheck.Problem
	for len(toks) > 0 {
		end := len(toks)
		for i, t := range toks {
			if t == ";" {
				end = i
				break
			}
		}
		out = append(out, lexStmt(toks[:end], cfg, false)...)
		if end == len(toks) {
			break
		}
		toks = toks[end+1:]
	}
	return out
}

// lexUnreadable judges one statement that the grammar does not read by
// its tokens. Only text shaped like a write of a fenced table is reported
// (UPDATE t … SET col =, INSERT … ON DUPLICATE KEY UPDATE col =, REPLACE
// INTO t (…), DELETE FROM t, MERGE INTO t): a log line such as "UPDATE
// refund_jobs failed" is not.
//
// REPLACE, LOAD DATA … REPLACE and INSERT … ON DUPLICATE KEY UPDATE are
// unfenceable whatever the rest of the statement holds (MySQL 8.0.19's row
// alias, VALUES ROW(…), MariaDB's RETURNING): they are reported as such.
// Any other write names where the parser stopped: the construct it does
// not read, at its offset in the string (start is stmt's offset there).
func lexUnreadable(stmt string, start int, cfg *sqlcheck.Config) []sqlcheck.Problem {
	if hasVerb(stmt) {
		return nil // a printf format ("SET state = %q failed: %w"), not SQL
	}
	ps := lexStmt(lex(stmt), cfg, true)
	if len(ps) == 0 {
		return nil
	}
	stop := ""
	for i := range ps {
		ps[i].Unread = true
		switch ps[i].Verb {
		case "REPLACE", "INSERT … ON DUPLICATE KEY UPDATE", "LOAD DATA … REPLACE":
			ps[i].Kind = sqlcheck.Unfenceable
			continue
		}
		if stop == "" {
			stop = stopConstruct(stmt, start)
		}
		ps[i].Kind = sqlcheck.Unprovable
		ps[i].Stop = stop
	}
	return ps
}

// stopConstruct parses stmt again and names where the parser stopped:
// "SOUNDS LIKE at offset 29", "near \", 2\" at offset 87".
func stopConstruct(stmt string, start int) string {
	text, orig := sqlcheck.ReplaceParamsMapped(stmt)
	off, near := stopOffset(text)
	if off < 0 {
		return "its parser stops"
	}
	off = min(orig(off), len(stmt))
	near = stmt[off:]
	before := strings.ToUpper(stmt[:min(off, len(stmt))])
	word := strings.ToUpper(firstWord(near))
	prev := strings.ToUpper(lastWord(before))
	name := ""
	switch {
	case word == "SOUNDS":
		name = "SOUNDS LIKE"
	case prev == "JSON_TABLE":
		name = "JSON_TABLE"
		off = len(strings.TrimRight(stmt[:off], " \t\n\r")) - len(prev)
	case word == "RETURNING" && strings.Contains(before, "JSON_VALUE"):
		name = "JSON_VALUE … RETURNING"
	case word == "RETURNING":
		name = "RETURNING, PostgreSQL or MariaDB syntax,"
	case strings.Contains(firstN(near, 16), "::"):
		name = "a PostgreSQL :: cast"
		if i := strings.Index(near, "::"); i >= 0 {
			off += i
		}
	case word == "CONFLICT" && prev == "ON":
		name = "ON CONFLICT, PostgreSQL syntax,"
		off -= len("ON ")
	case word == "FROM" && strings.HasPrefix(strings.TrimSpace(before), "UPDATE"):
		name = "UPDATE … FROM, PostgreSQL syntax,"
	case word == "MERGE":
		name = "MERGE, not MySQL syntax,"
	default:
		name = fmt.Sprintf("near %q", firstN(near, 24))
	}
	return fmt.Sprintf("%s at offset %d", name, start+off)
}

// stopOffset parses s and returns the offset where the parser stopped and
// the text from there, or -1.
func stopOffset(s string) (int, string) {
	p := parsers.Get().(*parser.Parser)
	defer parsers.Put(p)
	_, _, err := p.ParseSQL(s)
	if err == nil {
		return -1, ""
	}
	msg := strings.TrimRight(err.Error(), " ")
	i := strings.Index(msg, ` near "`)
	if i < 0 || !strings.HasSuffix(msg, `"`) {
		return -1, ""
	}
	near := msg[i+len(` near "`) : len(msg)-1]
	if !strings.HasSuffix(s, near) {
		return -1, ""
	}
	return len(s) - len(near), near
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t\n\r")
	i := 0
	for i < len(s) && sqlcheck.IsWordByte(s[i]) {
		i++
	}
	return s[:i]
}

func lastWord(s string) string {
	s = strings.TrimRight(s, " \t\n\r")
	i := len(s)
	for i > 0 && sqlcheck.IsWordByte(s[i-1]) {
		i--
	}
	return s[i:]
}

// firstN returns s cut to at most n bytes at a rune boundary, with "…"
// when cut.
func firstN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// hasVerb reports whether s holds a printf verb (%v, %q, %-5d, …) outside
// quotes.
func hasVerb(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"' || c == '`':
			i = sqlcheck.SkipQuoted(s, i) - 1
		case c == '%':
			j := i + 1
			for j < len(s) && strings.IndexByte("+-#0123456789.", s[j]) >= 0 {
				j++
			}
			if j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				return true
			}
		}
	}
	return false
}

func lex(s string) []string { return tokens(parser.Normalize(sqlcheck.ReplaceNamedParams(s), "ON")) }

// tokens splits the output of parser.Normalize: tokens separated by single
// spaces, identifiers back-quoted (and possibly holding spaces).
func tokens(norm string) []string {
	var out []string
	for i := 0; i < len(norm); {
		switch {
		case norm[i] == ' ':
			i++
		case norm[i] == '`':
			j := sqlcheck.SkipQuoted(norm, i)
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

// lexStmt finds the fenced tables one statement writes. With strict, the
// statement must also be shaped like SQL after the table (see
// lexUnreadable).
func lexStmt(toks []string, cfg *sqlcheck.Config, strict bool) []sqlcheck.Problem {
	if len(toks) == 0 {
		return nil
	}
	var verb string
	var region []string // tokens that name the written tables
	shaped := true
	switch toks[0] {
	case "update":
		verb = "UPDATE"
		region = until(toks[1:], "set")
		shaped = assigns(toks[1+len(region):], "set")
	case "replace":
		verb = "REPLACE"
		region = until(toks[1:], "(", "values", "value", "set", "select")
		shaped = len(region) < len(toks)-1
	case "insert":
		switch {
		case hasSeq(toks, "on", "duplicate", "key", "update"):
			verb = "INSERT … ON DUPLICATE KEY UPDATE"
			shaped = assigns(afterSeq(toks, "on", "duplicate", "key", "update"), "")
		case hasSeq(toks, "on", "`conflict`") && hasSeq(toks, "do", "update"):
			verb = "INSERT … ON CONFLICT DO UPDATE"
			shaped = assigns(afterSeq(toks, "do", "update"), "set")
		default:
			return nil
		}
		region = until(toks[1:], "(", "values", "value", "set", "select")
	case "delete":
		if !cfg.Delete {
			return nil
		}
		verb = "DELETE"
		region = until(toks[1:], "where")
		shaped = contains(region, "from")
	case "load":
		// LOAD DATA [LOW_PRIORITY|CONCURRENT] [LOCAL] INFILE 'f' REPLACE INTO TABLE t
		if !hasSeq(toks, "replace", "into", "table") {
			return nil
		}
		verb = "LOAD DATA … REPLACE"
		region = until(afterSeq(toks, "replace", "into", "table"), "(", "partition", "character", "fields", "columns", "lines", "ignore", "set", "format")
	case "merge":
		verb = "MERGE"
		region = until(toks[1:], "using")
		shaped = len(region) > 0 && region[0] == "into" && len(region) < len(toks)-1
	default:
		return nil
	}
	if strict && !shaped {
		return nil
	}
	var out []sqlcheck.Problem
	seen := map[string]bool{}
	for i, t := range region {
		name, ok := ident(t)
		if !ok || i+1 < len(region) && region[i+1] == "." || seen[name] {
			continue
		}
		if tb := cfg.Table(name); tb != nil {
			seen[name] = true
			out = append(out, sqlcheck.Problem{Kind: sqlcheck.Dynamic, Verb: verb, Table: *tb, Ref: name})
		}
	}
	return out
}

// assigns reports whether toks start with kw (unless empty) and then a
// column assignment: col = or tbl.col =.
func assigns(toks []string, kw string) bool {
	if kw != "" {
		if len(toks) == 0 || toks[0] != kw {
			return false
		}
		toks = toks[1:]
	}
	i := 0
	for i+1 < len(toks) && toks[i+1] == "." {
		if _, ok := ident(toks[i]); !ok {
			return false
		}
		i += 2
	}
	_, ok := ident(at(toks, i))
	return ok && at(toks, i+1) == "="
}

func at(toks []string, i int) string {
	if i < len(toks) {
		return toks[i]
	}
	return ""
}

// afterSeq returns the tokens after the first occurrence of seq.
func afterSeq(toks []string, seq ...string) []string {
	for i := 0; i+len(seq) <= len(toks); i++ {
		if hasSeq(toks[i:i+len(seq)], seq...) {
			return toks[i+len(seq):]
		}
	}
	return nil
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

// setHoleSubs are what a hole of an UPDATE's SET list is replaced by to
// parse: a value (SET state = <hole>), an assignment (SET <hole>, or
// strings.Join(sets, ", ")), which counts as writing the table, or nothing
// (a template's {{if .E}}, last_error = ?{{end}}).
var setHoleSubs = []string{"?", "`fencelint_hole` = ?", ""}

// checkSetHoles judges an UPDATE whose holes all sit in its SET list,
// before a constant WHERE clause: the run-time SET list (a partial update,
// strings.Join(sets, ", ")) cannot remove the fence of the WHERE, which is
// judged like a constant one. ok is false for any other template.
func checkSetHoles(parts []sqlcheck.Part, cfg *sqlcheck.Config) (ps []sqlcheck.Problem, ok bool) {
	var toks []string
	for _, p := range parts {
		if p.Hole {
			toks = append(toks, hole)
			continue
		}
		toks = append(toks, lex(p.Text)...)
	}
	if len(toks) == 0 || !strings.EqualFold(toks[0], "update") {
		return nil, false
	}
	set, where, depth := -1, -1, 0
	for i, t := range toks {
		switch {
		case t == "(":
			depth++
		case t == ")":
			depth--
		case t == ";":
			return nil, false
		case t == hole:
			if set < 0 || where >= 0 {
				return nil, false
			}
		case depth == 0 && set < 0 && strings.EqualFold(t, "set"):
			set = i
		case depth == 0 && set >= 0 && where < 0 && strings.EqualFold(t, "where"):
			where = i
		}
	}
	if set < 0 || where < 0 {
		return nil, false
	}
	for _, sub := range setHoleSubs {
		var b strings.Builder
		for _, p := range parts {
			if p.Hole {
				b.WriteString(sub)
				continue
			}
			b.WriteString(p.Text)
		}
		var upd *ast.UpdateStmt
		n := 0
		if eachStmt(b.String(), func(st ast.StmtNode) {
			n++
			upd, _ = st.(*ast.UpdateStmt)
		}) && n == 1 && upd != nil {
			return checkStmt(upd, cfg, false), true
		}
	}
	return nil, false
}
