package analyzer

import (
	"go/ast"
	"go/types"
	"reflect"
	"regexp"
	"strings"

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

// uptrace/bun's update builder: db.NewUpdate() (DB, Tx, Conn, IDB), then
// Model(x) (the table and alias of x's type: its bun.BaseModel tag
// `bun:"table:refund_jobs,alias:j"`, else bun's naming, snake case plural
// and the singular as alias) or Table("t"), Set("col = ?", v),
// SetColumn(col, "?", v), Where/WhereOr("…", args…) (each in parentheses),
// WherePK(); NewDelete with -delete. bun's query placeholders ?TableAlias,
// ?TableName, ?PKs, ?0 and ?name are rendered as the alias, the table, a
// primary-key column and bound values. WhereGroup, Apply, With and
// TableExpr make the statement unprovable.

const (
	bunPath = "github.com/uptrace/bun"
	bunLib  = "bun"
)

// bunCtor returns a model for db.NewUpdate() / NewDelete(), table unknown
// until Model or Table.
func bunCtor(call *ast.CallExpr, fn *types.Func) *bmodel {
	verb := map[string]string{"NewUpdate": "UPDATE", "NewDelete": "DELETE"}[fn.Name()]
	if verb == "" || fn.Signature().Recv() == nil {
		return nil
	}
	return &bmodel{verb: verb, pos: call.Pos(), kind: bunLib, lib: "bun." + fn.Name(), paren: true}
}

var bunPlaceholder = regexp.MustCompile(`\?(TableAlias|TableName|PKs|[0-9]+|[A-Za-z_][A-Za-z0-9_]*)`)

// bunText renders bun's query placeholders in the text of ts.
func bunText(m *bmodel, ts []template) []template {
	out := make([]template, 0, len(ts))
	for _, t := range ts {
		nt := make(template, len(t))
		for i, p := range t {
			if !p.Hole {
				p.Text = bunPlaceholder.ReplaceAllStringFunc(p.Text, func(s string) string {
					switch s[1:] {
					case "TableAlias":
						return quoteIdent(m.ref())
					case "TableName":
						return quoteIdent(m.table)
					case "PKs":
						return "`fencelint_pk`"
					}
					return "?"
				})
			}
			nt[i] = p
		}
		out = append(out, nt)
	}
	return out
}

// bunMethod applies one chained method of bun's UpdateQuery/DeleteQuery.
func (c *checker) bunMethod(m *bmodel, fn *types.Func, args []ast.Expr, cond bool) {
	arg := func(i int) ast.Expr {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch fn.Name() {
	case "Model":
		if t := c.pass.TypesInfo.TypeOf(arg(0)); t != nil {
			m.table, m.alias = bunTable(t)
		}
	case "Table":
		m.alias = ""
		c.retable(m, arg(0))
	case "TableExpr", "ModelTableExpr", "With", "WithRecursive":
		m.table = ""
	case "Set":
		m.sets = append(m.sets, bunText(m, c.textOf(arg(0))))
	case "SetColumn":
		if col, ok := c.static(arg(0)); ok {
			m.sets = append(m.sets, concat(textTemplate(quoteIdent(col)+" = "), bunText(m, c.textOf(arg(1)))))
		} else {
			m.sets = append(m.sets, holeTemplate)
		}
	case "Where":
		m.where = append(m.where, bterm{ts: bunText(m, c.textOf(arg(0))), cond: cond})
	case "WhereOr":
		m.where = append(m.where, bterm{ts: bunText(m, c.textOf(arg(0))), cond: cond, or: true})
	case "WherePK":
		m.where = append(m.where, bterm{ts: textTemplate("`fencelint_pk` = ?"), cond: cond})
	case "WhereGroup", "Apply":
		m.where = append(m.where, bterm{ts: holeTemplate, cond: cond})
	}
}

// bunTable is the table and alias of a bun model type.
func bunTable(t types.Type) (table, alias string) {
	for {
		switch u := t.(type) {
		case *types.Pointer:
			t = u.Elem()
			continue
		case *types.Slice:
			t = u.Elem()
			continue
		case *types.Array:
			t = u.Elem()
			continue
		}
		break
	}
	n, ok := t.(*types.Named)
	if !ok {
		return "", ""
	}
	st, ok := n.Underlying().(*types.Struct)
	if !ok {
		return "", ""
	}
	alias = snake(n.Obj().Name())
	table = pluralize(alias)
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		fn, ok := f.Type().(*types.Named)
		if !ok || fn.Obj().Name() != "BaseModel" || fn.Obj().Pkg() == nil || fn.Obj().Pkg().Path() != bunPath {
			continue
		}
		tag := reflect.StructTag(st.Tag(i)).Get("bun")
		named := ""
		for j, item := range strings.Split(tag, ",") {
			k, v, ok := strings.Cut(item, ":")
			switch {
			case j == 0 && !ok && item != "":
				named = item
			case ok && k == "table":
				named = v
			case ok && k == "alias":
				alias = v
			}
		}
		if named != "" {
			if k := strings.LastIndexByte(named, '.'); k >= 0 {
				named = named[k+1:]
			}
			table = named
			if !strings.Contains(tag, "alias:") {
				alias = ""
			}
		}
	}
	return strings.ToLower(table), strings.ToLower(alias)
}
