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
func (b *builderState) dbrMethod(m *bmodel, fn *types.Func, args []ast.Expr, cond bool) {
	arg := func(i int) ast.Expr {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch fn.Name() {
	case "Set":
		if len(args) == 2 {
			m.sets = append(m.sets, b.assign(args[0], args[1]))
		}
	case "SetMap":
		m.sets = append(m.sets, b.mapAssigns(arg(0))...)
	case "Where":
		m.where = append(m.where, bterm{ts: b.dbrPred(arg(0)), cond: cond})
	}
}

// dbrPred renders a dbr condition: SQL text, dbr.Expr(text, …),
// dbr.Eq/Neq/Gt/Gte/Lt/Lte(col, v), dbr.And/Or(conds…). Anything else is
// a hole.
func (b *builderState) dbrPred(e ast.Expr) []template {
	if e == nil {
		return holeTemplate
	}
	if t := b.info.TypeOf(e); t != nil && isString(t) {
		return b.textOf(e)
	}
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return holeTemplate
	}
	fn, ok := typeutil.Callee(b.info, call).(*types.Func)
	if !ok || fn.Pkg() == nil || !isDBRPath(fn.Pkg().Path()) || fn.Signature().Recv() != nil {
		return holeTemplate
	}
	ops := map[string]string{"Eq": " = ", "Neq": " != ", "Gt": " > ", "Gte": " >= ", "Lt": " < ", "Lte": " <= "}
	switch name := fn.Name(); {
	case name == "Expr" && len(call.Args) > 0:
		return b.textOf(call.Args[0])
	case ops[name] != "" && len(call.Args) == 2:
		col, ok := b.host.static(call.Args[0])
		if !ok {
			return holeTemplate
		}
		op := ops[name]
		if t := b.info.TypeOf(call.Args[1]); t != nil && (name == "Eq" || name == "Neq") && !stringish(t) {
			switch t.Underlying().(type) {
			case *types.Slice, *types.Array: // Eq(col, []T): col IN (…)
				op = map[string]string{"Eq": " IN ", "Neq": " NOT IN "}[name]
				return textTemplate(quoteIdent(col) + op + "(?)")
			}
		}
		if tv := b.info.Types[call.Args[1]]; tv.IsNil() {
			return textTemplate(quoteIdent(col) + map[string]string{"Eq": " IS NULL", "Neq": " IS NOT NULL"}[name])
		}
		return concat(textTemplate(quoteIdent(col)+op), b.value(call.Args[1]))
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
			out = concat(concat(concat(out, textTemplate("(")), b.dbrPred(a)), textTemplate(")"))
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
func (b *builderState) bunMethod(m *bmodel, fn *types.Func, args []ast.Expr, cond bool) {
	arg := func(i int) ast.Expr {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch fn.Name() {
	case "Model":
		if t := b.info.TypeOf(arg(0)); t != nil {
			m.table, m.alias = bunTable(t)
		}
	case "Table":
		m.alias = ""
		b.retable(m, arg(0))
	case "TableExpr", "ModelTableExpr", "With", "WithRecursive":
		m.table = ""
	case "Set":
		m.sets = append(m.sets, bunText(m, b.textOf(arg(0))))
	case "SetColumn":
		if col, ok := b.host.static(arg(0)); ok {
			m.sets = append(m.sets, concat(textTemplate(quoteIdent(col)+" = "), bunText(m, b.textOf(arg(1)))))
		} else {
			m.sets = append(m.sets, holeTemplate)
		}
	case "Where":
		m.where = append(m.where, bterm{ts: bunText(m, b.textOf(arg(0))), cond: cond})
	case "WhereOr":
		m.where = append(m.where, bterm{ts: bunText(m, b.textOf(arg(0))), cond: cond, or: true})
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
		fn, ok := types.Unalias(f.Type()).(*types.Named)
		if !ok || fn.Obj().Name() != "BaseModel" || fn.Obj().Pkg() == nil ||
			fn.Obj().Pkg().Path() != bunPath && fn.Obj().Pkg().Path() != bunPath+"/schema" { // bun.BaseModel = schema.BaseModel
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

// xorm's update chain, followed back from the writing method as gorm's:
// engine.Table("refund_jobs").Where("id = ?", id).Update(map…),
// sess.ID(id).Cols("state").Update(&job) (Engine, Session, EngineGroup,
// xorm.Interface). The table: Table("t"), else the bean's TableName
// method, else xorm's default mapper (snake case, singular). Where, And,
// Or (SQL text; a builder.Cond is unprovable), ID (the primary key), In,
// SetExpr, Incr, Decr; condition beans (Update(bean, &Job{…})) drop their
// zero fields, so they are unprovable. Delete with -delete.

const (
	xormPath  = "xorm.io/xorm"
	xorm0Path = "github.com/go-xorm/xorm"
)

func isXormPath(path string) bool { return path == xormPath || path == xorm0Path }

// xormWrite models a write of xorm's chain ending at call.
func (b *builderState) xormWrite(call *ast.CallExpr, fn *types.Func) {
	verb := map[string]string{"Update": "UPDATE", "Delete": "DELETE"}[fn.Name()]
	if verb == "" || fn.Signature().Recv() == nil || verb == "DELETE" && !b.cfg.Delete {
		return
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return
	}
	m := &bmodel{kind: "xorm", lib: "xorm " + fn.Name(), verb: verb, pos: sel.Sel.Pos(), paren: true}
	g := &gormChain{}
	if len(call.Args) > 0 {
		bean := call.Args[0]
		t := b.info.TypeOf(bean)
		if t != nil {
			if _, isMap := t.Underlying().(*types.Map); isMap {
				if verb == "UPDATE" {
					m.sets = append(m.sets, b.mapAssigns(bean)...)
				}
			} else {
				g.arg = b.xormTable(t)
				if verb == "UPDATE" {
					m.sets = append(m.sets, textTemplate("`fencelint_columns` = ?"))
				}
			}
		}
	}
	if verb == "UPDATE" && len(call.Args) > 1 || verb == "DELETE" && len(call.Args) > 0 && g.arg != "" {
		// Condition beans (and Delete's bean): their non-zero fields.
		if verb == "UPDATE" || !b.zeroBean(call.Args[0]) {
			m.where = append(m.where, bterm{ts: holeTemplate})
		}
	}
	b.xormReceiver(m, g, sel.X, 0)
	for i, j := 0, len(g.terms)-1; i < j; i, j = i+1, j-1 {
		g.terms[i], g.terms[j] = g.terms[j], g.terms[i]
	}
	m.where = append(g.terms, m.where...)
	switch {
	case g.table != "":
		m.table = g.table
	default:
		m.table = g.arg
	}
	if m.table == "\x00" || m.table == "" {
		return // a table named at run time
	}
	if len(m.where) > 0 && m.where[0].or {
		m.where[0].or = false
	}
	b.gormWrites = append(b.gormWrites, m)
}

// zeroBean reports whether e is a composite literal with no fields set
// (new(Job), &Job{}): it adds no condition.
func (b *builderState) zeroBean(e ast.Expr) bool {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = ast.Unparen(u.X)
	}
	lit, ok := e.(*ast.CompositeLit)
	return ok && len(lit.Elts) == 0
}

// xormTable is the table of an xorm bean: its TableName method's constant,
// else xorm's default SnakeMapper (snake case, singular).
func (b *builderState) xormTable(t types.Type) string {
	table := b.modelTable(t) // TableName, or gorm's plural naming
	if table == "" || table == "\x00" {
		return table
	}
	for {
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
			continue
		}
		break
	}
	if n, ok := t.(*types.Named); ok && table == pluralize(snake(n.Obj().Name())) {
		return snake(n.Obj().Name()) // no TableName: xorm's default mapper
	}
	return table
}

// xormReceiver walks back from x, the receiver of an xorm call: chained
// calls, and local variables assigned once.
func (b *builderState) xormReceiver(m *bmodel, g *gormChain, x ast.Expr, depth int) {
	if depth > maxDepth {
		return
	}
	switch x := ast.Unparen(x).(type) {
	case *ast.Ident:
		v := b.host.objVar(x)
		if v == nil {
			return
		}
		if ds := b.host.varDefs(v); len(ds) == 1 && ds[0].expr != nil && !ds[0].add {
			b.xormReceiver(m, g, ds[0].expr, depth+1)
		}
	case *ast.CallExpr:
		fn, ok := typeutil.Callee(b.info, x).(*types.Func)
		sel, ok2 := ast.Unparen(x.Fun).(*ast.SelectorExpr)
		if !ok || !ok2 || fn.Pkg() == nil || !isXormPath(fn.Pkg().Path()) || fn.Signature().Recv() == nil {
			return
		}
		args := x.Args
		arg := func(i int) ast.Expr {
			if i < len(args) {
				return args[i]
			}
			return nil
		}
		switch fn.Name() {
		case "Table":
			if g.table == "" && len(args) == 1 {
				if t, ok := b.host.static(args[0]); ok {
					g.table = strings.ToLower(t)
				} else if tt := b.info.TypeOf(args[0]); tt != nil && !isString(tt) {
					g.table = b.xormTable(tt)
				} else {
					g.table = "\x00"
				}
			}
		case "Where", "And", "Or":
			ts := holeTemplate
			if t := b.info.TypeOf(arg(0)); t != nil && isString(t) {
				ts = b.textOf(arg(0))
			}
			g.terms = append(g.terms, bterm{ts: ts, or: fn.Name() == "Or"})
		case "ID":
			g.terms = append(g.terms, bterm{ts: textTemplate("`fencelint_pk` = ?")})
		case "In", "NotIn":
			if col, ok := b.host.static(arg(0)); ok {
				op := map[string]string{"In": " IN (?)", "NotIn": " NOT IN (?)"}[fn.Name()]
				g.terms = append(g.terms, bterm{ts: textTemplate(quoteIdent(col) + op)})
			} else {
				g.terms = append(g.terms, bterm{ts: holeTemplate})
			}
		case "SetExpr":
			col, ok := b.host.static(arg(0))
			if !ok {
				m.sets = append(m.sets, holeTemplate)
			} else if t := b.info.TypeOf(arg(1)); t != nil && isString(t) {
				m.sets = append(m.sets, concat(textTemplate(quoteIdent(col)+" = "), b.textOf(arg(1))))
			} else {
				m.sets = append(m.sets, concat(textTemplate(quoteIdent(col)+" = "), holeTemplate))
			}
		case "Incr", "Decr":
			if col, ok := b.host.static(arg(0)); ok {
				op := map[string]string{"Incr": " + ?", "Decr": " - ?"}[fn.Name()]
				m.sets = append(m.sets, textTemplate(quoteIdent(col)+" = "+quoteIdent(col)+op))
			}
		case "SQL", "Exec", "Query":
			return
		}
		b.xormReceiver(m, g, sel.X, depth+1)
	}
}
