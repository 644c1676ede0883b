package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// suggestFix returns the mechanical fix of an unfenced UPDATE, or nil. It
// offers one only when the fix is certain to fence on the right values:
//
//   - the query is a string literal written directly as the query argument
//     of a SQL sink whose arguments follow it (db.ExecContext(ctx,
//     "UPDATE …", a, b)), not spread (args...), "?" placeholders only and
//     as many as the arguments;
//   - its one problem is a single-table UPDATE of a fenced table, without
//     an alias, whose WHERE lacks the state and/or token predicate, and the
//     query with " AND state = ? AND attempt = ?" (or the missing one)
//     appended is fenced by fencelint's own judgement (so the text was the
//     end of an AND chain: not after an OR, ORDER BY or LIMIT);
//   - every argument of the WHERE clause reads a field of one variable v
//     of the enclosing function (v.ID: the row written is v's), a struct
//     (or pointer to one) with fields named after the missing columns
//     (state -> State or state, attempt -> Attempt or attempt), and every use of v in the
//     function reads a field: it is never assigned, addressed, passed on
//     or sent a method, so its State and Attempt are still the values read
//     with the row.
//
// Then the fix appends the predicate to the literal and v.State, v.Attempt
// to the arguments. A pointer could still be changed through another
// alias the function cannot see; a value cannot.
func (ss *sqlStrings) suggestFix(e ast.Expr, s string, ps []sqlcheck.Problem, stack []ast.Node) []analysis.SuggestedFix {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING || len(ps) != 1 || len(stack) == 0 {
		return nil
	}
	p := ps[0]
	if p.Kind != sqlcheck.Unfenced || p.Verb != "UPDATE" || p.Multi || !strings.EqualFold(p.Ref, p.Table.Name) || len(p.Missing) == 0 {
		return nil
	}
	call, ok := stack[len(stack)-1].(*ast.CallExpr)
	if !ok || call.Ellipsis.IsValid() {
		return nil
	}
	qi := -1
	for i, a := range call.Args {
		if a == e {
			qi = i
		}
	}
	fn, _ := typeutil.Callee(ss.pass.TypesInfo, call).(*types.Func)
	if qi < 0 || fn == nil || ss.sinks.sinkQueryIndex(fn) != qi {
		return nil
	}
	sig := fn.Signature()
	if !sig.Variadic() || sig.Params().Len() != qi+2 {
		return nil // the query must be followed by its arguments, ...any
	}
	if sl, ok := sig.Params().At(qi + 1).Type().(*types.Slice); !ok || !types.IsInterface(sl.Elem()) {
		return nil // ...Option, not bound values
	}
	n, ok := sqlcheck.Placeholders(s)
	args := call.Args[qi+1:]
	if !ok || n != len(args) || len(args) == 0 {
		return nil
	}
	var pred []string
	for _, col := range p.Missing {
		pred = append(pred, col+" = ?")
	}
	suffix := " AND " + strings.Join(pred, " AND ")
	if len(sqlcheck.Check(s+suffix, ss.cfg)) != 0 {
		return nil // the text does not end in the WHERE's AND chain
	}
	decl := outermostDecl(stack)
	if decl == nil || decl.Body == nil {
		return nil
	}
	w, ok := sqlcheck.WhereStart(s)
	if !ok || w >= len(args) {
		return nil
	}
	v, fields := ss.fenceValue(decl, args[w:], p.Missing)
	if v == nil {
		return nil
	}
	var vals []string
	for _, f := range fields {
		vals = append(vals, v.Name()+"."+f)
	}
	raw := lit.Value
	if raw[len(raw)-1] != '"' && raw[len(raw)-1] != '`' {
		return nil
	}
	return []analysis.SuggestedFix{{
		Message: "fence the UPDATE on " + strings.Join(vals, " and ") + ": add" + suffix,
		TextEdits: []analysis.TextEdit{
			{Pos: lit.End() - 1, End: lit.End() - 1, NewText: []byte(suffix)},
			{Pos: args[len(args)-1].End(), End: args[len(args)-1].End(), NewText: []byte(", " + strings.Join(vals, ", "))},
		},
	}}
}

// goName is the Go field name of a column: attempt -> Attempt,
// writer_attempt -> WriterAttempt.
func goName(col string) string {
	var b strings.Builder
	for _, part := range strings.Split(col, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func outermostDecl(stack []ast.Node) *ast.FuncDecl {
	for _, n := range stack {
		if d, ok := n.(*ast.FuncDecl); ok {
			return d
		}
	}
	return nil
}

// fenceValue is the variable v of decl of which every argument of the
// WHERE clause (where) reads a field (v.ID: the row written is v's), whose
// type has fields for the columns cols, and which decl only reads, with
// the names of those fields; nil otherwise.
func (ss *sqlStrings) fenceValue(decl *ast.FuncDecl, where []ast.Expr, cols []string) (*types.Var, []string) {
	info := ss.pass.TypesInfo
	var found *types.Var
	var fields []string
	for _, a := range where {
		sel, ok := ast.Unparen(a).(*ast.SelectorExpr)
		if !ok {
			return nil, nil // a bare id: whose row, and so whose attempt, is unclear
		}
		id, ok := ast.Unparen(sel.X).(*ast.Ident)
		if !ok {
			return nil, nil
		}
		v, ok := info.Uses[id].(*types.Var)
		if !ok || v.Pos() < decl.Pos() || v.Pos() >= decl.End() {
			return nil, nil
		}
		if s := info.Selections[sel]; s == nil || s.Kind() != types.FieldVal {
			return nil, nil
		}
		if found != nil && found != v {
			return nil, nil // two jobs: which one is unclear
		}
		found = v
	}
	if found == nil {
		return nil, nil
	}
	if fields = ss.fieldNames(found.Type(), cols); fields == nil || !ss.onlyFieldReads(decl, found) {
		return nil, nil
	}
	return found, fields
}

// fieldNames names the fields of t (a struct or a pointer to one) for the
// columns: attempt -> Attempt, or attempt in the same package; nil when
// one is missing.
func (ss *sqlStrings) fieldNames(t types.Type, cols []string) []string {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	if _, ok := t.Underlying().(*types.Struct); !ok {
		return nil
	}
	var names []string
	for _, col := range cols {
		name := ""
		exported := goName(col)
		if exported == "" {
			return nil
		}
		for _, f := range []string{exported, strings.ToLower(exported[:1]) + exported[1:]} {
			obj, _, _ := types.LookupFieldOrMethod(t, true, ss.pass.Pkg, f)
			if v, ok := obj.(*types.Var); ok && v.IsField() {
				name = f
				break
			}
		}
		if name == "" {
			return nil
		}
		names = append(names, name)
	}
	return names
}

// onlyFieldReads reports whether every use of v in decl reads a field of
// it (v.F, v.F.G, v.F[i]), never writing, addressing or calling a method
// on what it reaches, and v itself is never used bare (assigned, passed
// on, redeclared by :=).
func (ss *sqlStrings) onlyFieldReads(decl *ast.FuncDecl, v *types.Var) bool {
	info := ss.pass.TypesInfo
	ok := true
	var stack []ast.Node
	ast.Inspect(decl, func(n ast.Node) bool {
		if !ok {
			return false
		}
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		id, isID := n.(*ast.Ident)
		if !isID || info.Uses[id] != v {
			return true
		}
		// Climb the chain of field reads rooted at v.
		var top ast.Node = id
		i := len(stack) - 2
		for ; i >= 0; i-- {
			switch p := stack[i].(type) {
			case *ast.SelectorExpr:
				if p.X != top {
					ok = false
					return false
				}
				if s := info.Selections[p]; s == nil || s.Kind() != types.FieldVal {
					ok = false // a method: it may change what it is called on
					return false
				}
				top = p
				continue
			case *ast.ParenExpr:
				top = p
				continue
			case *ast.IndexExpr:
				if p.X == top {
					top = p
					continue
				}
			}
			break
		}
		if top == ast.Node(id) {
			ok = false // v used bare
			return false
		}
		if i < 0 {
			return true
		}
		switch p := stack[i].(type) {
		case *ast.AssignStmt:
			for _, l := range p.Lhs {
				if l == top {
					ok = false
				}
			}
		case *ast.IncDecStmt:
			ok = false
		case *ast.UnaryExpr:
			if p.Op == token.AND {
				ok = false
			}
		case *ast.RangeStmt:
			if p.Key == top || p.Value == top {
				ok = false
			}
		}
		return ok
	})
	return ok
}
