package analyzer

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/types/typeutil"
)

// gocraft/dbr's update builder: sess.Update("refund_jobs") (also on Tx,
// the SessionRunner interface and the package function), then
// Set(col, v), SetMap(map), Where(query string or dbr.Builder, args...),
// joined as "(a) AND (b)"; DeleteFrom(table) with -delete.

const (
	dbrPath   = "github.com/gocraft/dbr/v2"
	dbr1Path  = "github.com/gocraft/dbr"
	dbrLib    = "dbr"
	dbrUpdate = "Update"
)

func isDBRPath(path string) bool { return path == dbrPath || path == dbr1Path }

// dbrCtor returns the verb of a dbr constructor of a write, or "".
func dbrCtor(name string) string {
	switch name {
	case dbrUpdate:
		return "UPDATE"
	case "DeleteFrom":
		return "DELETE"
	}
	return ""
}

// dbrMethod applies one chained method of dbr's UpdateStmt or DeleteStmt.
func (c *checker) dbrMethod(m *bmodel, fn *types.Func, args []ast.Expr, cond bool) {
	arg := func(i int) ast.Expr {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch fn.Name() {
	case "Set":
		if len(args) == 2 {
			m.sets = append(m.sets, c.assign(args[0], args[1]))
		}
	case "SetMap":
		m.sets = append(m.sets, c.mapAssigns(arg(0))...)
	case "Where":
		m.where = append(m.where, bterm{ts: c.dbrPred(arg(0)), cond: cond})
	}
}

// dbrPred renders a dbr condition: SQL text, dbr.Expr(text, …),
// dbr.Eq/Neq/Gt/Gte/Lt/Lte(col, v), dbr.And/Or(conds…). Anything else is
// a hole.
func (c *checker) dbrPred(e ast.Expr) []template {
	if e == nil {
		return holeTemplate
	}
	if t := c.pass.TypesInfo.TypeOf(e); t != nil && isString(t) {
		return c.textOf(e)
	}
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return holeTemplate
	}
	fn, ok := typeutil.Callee(c.pass.TypesInfo, call).(*types.Func)
	if !ok || fn.Pkg() == nil || !isDBRPath(fn.Pkg().Path()) || fn.Signature().Recv() != nil {
		return holeTemplate
	}
	ops := map[string]string{"Eq": " = ", "Neq": " != ", "Gt": " > ", "Gte": " >= ", "Lt": " < ", "Lte": " <= "}
	switch name := fn.Name(); {
	case name == "Expr" && len(call.Args) > 0:
		return c.textOf(call.Args[0])
	case ops[name] != "" && len(call.Args) == 2:
		col, ok := c.static(call.Args[0])
		if !ok {
			return holeTemplate
		}
		op := ops[name]
		if t := c.pass.TypesInfo.TypeOf(call.Args[1]); t != nil && (name == "Eq" || name == "Neq") && !stringish(t) {
			switch t.Underlying().(type) {
			case *types.Slice, *types.Array: // Eq(col, []T): col IN (…)
				op = map[string]string{"Eq": " IN ", "Neq": " NOT IN "}[name]
				return textTemplate(quoteIdent(col) + op + "(?)")
			}
		}
		if tv := c.pass.TypesInfo.Types[call.Args[1]]; tv.IsNil() {
			return textTemplate(quoteIdent(col) + map[string]string{"Eq": " IS NULL", "Neq": " IS NOT NULL"}[name])
		}
		return concat(textTemplate(quoteIdent(col)+op), c.value(call.Args[1]))
	case (name == "And" || name == "Or") && !call.Ellipsis.IsValid():
		sep := " AND "
		if name == "Or" {
			sep = " OR "
		}
		out := textTemplate("(")
		for i, a := range call.Args {
			if i > 0 {
				out = concat(out, textTemplate(sep))
			}
			out = concat(concat(concat(out, textTemplate("(")), c.dbrPred(a)), textTemplate(")"))
		}
		return concat(out, textTemplate(")"))
	}
	return holeTemplate
}
