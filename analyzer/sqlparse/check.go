package sqlparse

import (
	"sync"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal and placeholder nodes
)

var parsers = sync.Pool{New: func() any { return parser.New() }}

// eachStmt parses s after rewriting named and numbered placeholders and
// calls f on each statement. It does nothing when s is not SQL. The statements belong to a
// pooled parser (it reuses its result slice), so f must not keep them. The
// TiDB parser may panic on inputs it was never meant to see; such text is
// treated as not SQL.
func eachStmt(s string, f func(ast.StmtNode)) (parsed bool) {
	p := parsers.Get().(*parser.Parser)
	defer func() {
		if recover() != nil {
			parsed = false
			p = parser.New() // state unknown: do not reuse
		}
		parsers.Put(p)
	}()
	stmts, _, err := p.ParseSQL(sqlcheck.ReplaceNamedParams(s))
	if err != nil {
		return false
	}
	for _, st := range stmts {
		f(st)
	}
	return true
}

// check judges the SQL text s. It returns nil when s is not SQL, reads only,
// inserts new rows only, writes no fenced table, or writes them fenced.
// When s does not parse, each of its statements is judged alone: those
// that parse by the grammar, the others by their shape (sqlcheck.Unprovable when
// they look like a write of a fenced table).
func check(s string, cfg *sqlcheck.Config) []sqlcheck.Problem {
	if !cfg.Mentions(s) {
		return nil
	}
	var out []sqlcheck.Problem
	if eachStmt(s, func(st ast.StmtNode) { out = append(out, checkStmt(st, cfg, false)...) }) {
		return out
	}
	out = out[:0]
	off := 0
	for _, piece := range splitStatements(s) {
		start := off
		off += len(piece) + 1
		if !cfg.Mentions(piece) {
			continue
		}
		judge := func(st ast.StmtNode) { out = append(out, checkStmt(st, cfg, false)...) }
		if eachStmt(piece, judge) {
			continue
		}
		if fixed, ok := repairMySQL(piece); ok && eachStmt(fixed, judge) {
			continue
		}
		out = append(out, lexUnreadable(piece, start, cfg)...)
	}
	return out
}

// splitStatements splits s at semicolons outside quotes and comments.
func splitStatements(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		if j, ok := sqlcheck.SkipNonCode(s, i); ok {
			i = j
			continue
		}
		if s[i] == ';' {
			out = append(out, s[start:i])
			start = i + 1
		}
		i++
	}
	return append(out, s[start:])
}

// binding is one occurrence of a fenced table in a statement's table list.
type binding struct {
	table  *sqlcheck.Table
	schema string // lower case, may be empty
	name   string // lower case
	alias  string // lower case, may be empty
}

func (b binding) ref() string {
	if b.alias != "" {
		return b.alias
	}
	return b.name
}

// names reports whether col is qualified by b. An unqualified column
// matches when unqualified is true.
func (b binding) names(col *ast.ColumnName, unqualified bool) bool {
	if col.Table.L == "" {
		return unqualified
	}
	if b.alias != "" {
		return col.Table.L == b.alias
	}
	return col.Table.L == b.name && (col.Schema.L == "" || b.schema == "" || col.Schema.L == b.schema)
}

// sources lists the table sources of a FROM/UPDATE table list: fenced
// bindings, and the count of all sources (derived tables included).
func sources(n ast.ResultSetNode, cfg *sqlcheck.Config, out *[]binding, count *int) {
	switch x := n.(type) {
	case *ast.Join:
		if x.Left != nil {
			sources(x.Left, cfg, out, count)
		}
		if x.Right != nil {
			sources(x.Right, cfg, out, count)
		}
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok {
			*count++
			if t := cfg.Table(tn.Name.L); t != nil {
				*out = append(*out, binding{table: t, schema: tn.Schema.L, name: tn.Name.L, alias: x.AsName.L})
			}
			return
		}
		if j, ok := x.Source.(*ast.Join); ok {
			sources(j, cfg, out, count)
			return
		}
		*count++
	case *ast.TableName:
		*count++
		if t := cfg.Table(x.Name.L); t != nil {
			*out = append(*out, binding{table: t, schema: x.Schema.L, name: x.Name.L})
		}
	}
}

func tableRefs(c *ast.TableRefsClause, cfg *sqlcheck.Config) (bs []binding, count int) {
	if c != nil && c.TableRefs != nil {
		sources(c.TableRefs, cfg, &bs, &count)
	}
	return bs, count
}

// checkStmt judges one statement. With writesOnly it reports every write of
// a fenced table as sqlcheck.Dynamic, whatever its WHERE clause.
func checkStmt(st ast.StmtNode, cfg *sqlcheck.Config, writesOnly bool) []sqlcheck.Problem {
	var out []sqlcheck.Problem
	switch s := st.(type) {
	case *ast.UpdateStmt:
		bs, n := tableRefs(s.TableRefs, cfg)
		multi := n > 1
		for _, b := range bs {
			if !writes(s.List, b, multi) {
				continue
			}
			out = append(out, judgeWhere("UPDATE", s.Where, b, multi, writesOnly)...)
			if selfDeclares(s.List, b) {
				out = append(out, sqlcheck.Problem{Kind: sqlcheck.SelfDeclared, Verb: "UPDATE", Table: *b.table, Ref: b.ref(), Multi: multi})
			}
		}
	case *ast.DeleteStmt:
		if !cfg.Delete {
			return nil
		}
		bs, n := tableRefs(s.TableRefs, cfg)
		multi := n > 1
		for _, b := range bs {
			if s.IsMultiTable && s.Tables != nil && !deletes(s.Tables.Tables, b) {
				continue
			}
			out = append(out, judgeWhere("DELETE", s.Where, b, multi, writesOnly)...)
		}
	case *ast.LoadDataStmt:
		// LOAD DATA … REPLACE INTO TABLE t overwrites the rows whose keys
		// the file repeats, like REPLACE. IGNORE (and LOCAL's default)
		// skips them, and without either a duplicate is an error: both
		// insert new rows only, like INSERT IGNORE.
		if s.OnDuplicate != ast.OnDuplicateKeyHandlingReplace || s.Table == nil {
			return nil
		}
		if t := cfg.Table(s.Table.Name.L); t != nil {
			p := sqlcheck.Problem{Kind: sqlcheck.Unfenceable, Verb: "LOAD DATA … REPLACE", Table: *t, Ref: s.Table.Name.L}
			if writesOnly {
				p.Kind = sqlcheck.Dynamic
			}
			out = append(out, p)
		}
	case *ast.InsertStmt:
		if !s.IsReplace && len(s.OnDuplicate) == 0 {
			return nil // enqueue: new rows only
		}
		bs, _ := tableRefs(s.Table, cfg)
		verb := "INSERT … ON DUPLICATE KEY UPDATE"
		if s.IsReplace {
			verb = "REPLACE"
		}
		for _, b := range bs {
			p := sqlcheck.Problem{Kind: sqlcheck.Unfenceable, Verb: verb, Table: *b.table, Ref: b.ref()}
			if writesOnly {
				p.Kind = sqlcheck.Dynamic
			}
			out = append(out, p)
		}
	}
	return out
}

// writes reports whether the SET list assigns a column of b. In a
// multi-table statement an unqualified column may belong to b.
func writes(list []*ast.Assignment, b binding, multi bool) bool {
	for _, a := range list {
		if a.Column != nil && b.names(a.Column, true) {
			return true
		}
	}
	return false
}

// selfDeclares reports whether the SET list assigns b's writer column an
// expression that reads b's token column (writer_attempt = attempt, = j.attempt,
// = attempt + 0, a subquery of it, …).
func selfDeclares(list []*ast.Assignment, b binding) bool {
	for _, a := range list {
		if a.Column == nil || a.Expr == nil || a.Column.Name.L != b.table.Writer || !b.names(a.Column, true) {
			continue
		}
		v := tokenReader{b: b}
		a.Expr.Accept(&v)
		if v.found {
			return true
		}
	}
	return false
}

// tokenReader finds a reference to b's token column: unqualified, or
// qualified by b's alias or name.
type tokenReader struct {
	b     binding
	found bool
}

func (v *tokenReader) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnNameExpr); ok && c.Name.Name.L == v.b.table.Token {
		if q := c.Name.Table.L; q == "" || q == v.b.ref() || q == v.b.name {
			v.found = true
		}
	}
	return n, v.found
}

func (v *tokenReader) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func deletes(names []*ast.TableName, b binding) bool {
	for _, tn := range names {
		if tn.Name.L == b.ref() || tn.Name.L == b.name {
			return true
		}
	}
	return false
}

func judgeWhere(verb string, where ast.ExprNode, b binding, multi, writesOnly bool) []sqlcheck.Problem {
	base := sqlcheck.Problem{Verb: verb, Table: *b.table, Ref: b.ref(), Multi: multi}
	if writesOnly {
		base.Kind = sqlcheck.Dynamic
		return []sqlcheck.Problem{base}
	}
	var conj []ast.ExprNode
	if where != nil {
		conj = conjuncts(where, nil)
	}
	var hasState, hasToken, lease bool
	for _, c := range conj {
		if col := boundEquality(c); col != nil && b.names(col, !multi) {
			switch col.Name.L {
			case b.table.State:
				hasState = true
			case b.table.Token:
				hasToken = true
			}
		}
		if requiresLease(c, b) {
			lease = true
		}
	}
	var out []sqlcheck.Problem
	if !hasState || !hasToken {
		p := base
		p.Kind = sqlcheck.Unfenced
		if !hasState {
			p.Missing = append(p.Missing, b.table.State)
		}
		if !hasToken {
			p.Missing = append(p.Missing, b.table.Token)
		}
		out = append(out, p)
	}
	if lease {
		p := base
		p.Kind = sqlcheck.LeaseCheck
		out = append(out, p)
	}
	return out
}

// conjuncts flattens the AND chain of e, parentheses included. Anything
// under OR, XOR or NOT stays one opaque conjunct.
func conjuncts(e ast.ExprNode, out []ast.ExprNode) []ast.ExprNode {
	switch x := e.(type) {
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicAnd {
			return conjuncts(x.R, conjuncts(x.L, out))
		}
		// The row constructor (id, state, attempt) = (?, ?, ?) is the AND
		// of its pairs.
		l, lok := unparen(x.L).(*ast.RowExpr)
		r, rok := unparen(x.R).(*ast.RowExpr)
		if (x.Op == opcode.EQ || x.Op == opcode.NullEQ) && lok && rok && len(l.Values) == len(r.Values) {
			for i := range l.Values {
				out = conjuncts(&ast.BinaryOperationExpr{Op: x.Op, L: l.Values[i], R: r.Values[i]}, out)
			}
			return out
		}
	case *ast.ParenthesesExpr:
		return conjuncts(x.Expr, out)
	}
	return append(out, e)
}

func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// boundEquality returns the column of a conjunct "col = bound" or
// "bound = col", where bound is a placeholder or a literal.
func boundEquality(e ast.ExprNode) *ast.ColumnName {
	be, ok := e.(*ast.BinaryOperationExpr)
	if !ok || be.Op != opcode.EQ && be.Op != opcode.NullEQ {
		return nil
	}
	l, r := unparen(be.L), unparen(be.R)
	if c, ok := l.(*ast.ColumnNameExpr); ok && isBound(r) {
		return c.Name
	}
	if c, ok := r.(*ast.ColumnNameExpr); ok && isBound(l) {
		return c.Name
	}
	return nil
}

// isBound reports whether e is a bound value: a placeholder, a literal, a
// signed literal, or a user variable (@name, as gorm writes named
// arguments; the session holds its value).
func isBound(e ast.ExprNode) bool {
	switch x := e.(type) {
	case ast.ParamMarkerExpr, ast.ValueExpr:
		return true
	case *ast.VariableExpr:
		return !x.IsSystem && x.Value == nil
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Minus || x.Op == opcode.Plus {
			_, ok := unparen(x.V).(ast.ValueExpr)
			return ok
		}
	}
	return false
}

// requiresLease reports whether the conjunct demands that b's lease column
// be later than a value: lease > v, lease >= v, v < lease, v <= lease, where
// v names no column (NOW(), UTC_TIMESTAMP(6), a placeholder, …).
func requiresLease(e ast.ExprNode, b binding) bool {
	be, ok := e.(*ast.BinaryOperationExpr)
	if !ok {
		return false
	}
	var col, other ast.ExprNode
	switch be.Op {
	case opcode.GT, opcode.GE:
		col, other = unparen(be.L), be.R
	case opcode.LT, opcode.LE:
		col, other = unparen(be.R), be.L
	default:
		return false
	}
	c, ok := col.(*ast.ColumnNameExpr)
	return ok && c.Name.Name.L == b.table.Lease && b.names(c.Name, true) && columnFree(other)
}

type columnFinder struct{ found bool }

func (v *columnFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.ColumnNameExpr, *ast.SubqueryExpr:
		v.found = true
		return n, true
	}
	return n, v.found
}

func (v *columnFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func columnFree(e ast.ExprNode) bool {
	var v columnFinder
	e.Accept(&v)
	return !v.found
}
