package analyzer

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"golang.org/x/tools/go/types/typeutil"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// The builders unit (builderState): writes of a fenced table made with a
// query builder. It lives in builders.go, builders_libs.go (gocraft/dbr,
// uptrace/bun, xorm) and ent.go (entBuilder); a newcomer can read and
// change it without the rest of the checker.
//
// What it judges. A builder of a write of a fenced table, whose table name
// is a constant, is turned into a model of the statement it would send
// (bmodel), rendered as SQL and judged like any other: unfenced unless its
// WHERE clause provably holds the state and attempt equalities
// (squirrel.Eq{"state": …, "attempt": …}, goqu.Ex{…}, gorm's
// Where("state = ? AND attempt = ?", …), sql.EQ(…), …).
//
//   - squirrel, goqu, Ent's dialect/sql, dbr and bun are followed from
//     their constructor (squirrel.Update("refund_jobs")) through the chain
//     of calls, and through a local variable that holds the builder in the
//     same function. A WHERE added only on some paths (inside an if) does
//     not prove the fence, but whatever it adds is judged (an OR, a lease
//     check). A builder that goes elsewhere (returned, passed on) cannot be
//     proven unless its visible part is fenced.
//   - gorm and xorm are followed back from their writing methods (gorm's
//     Update, Updates, UpdateColumn(s), Save, Create with an upsert clause;
//     xorm's Update; Delete with -delete) through the chain that leads to
//     them, and through local variables assigned once (as far as the walk
//     has seen them when it meets the writing call).
//   - Ent's generated generic update and upsert builders of a fenced entity
//     (RefundJobClient.UpdateOneID, RefundJobCreate.OnConflict, …) are
//     reported at their use, outside the generated package (entBuilder).
//
// Inputs: the calls and selector expressions met by the checker's walk,
// with the walk's stack of enclosing nodes; the package's type
// information and package; the configuration of fenced tables; and,
// through the narrow builderHost interface, what the checker's other units
// know: the value of constant strings and the run-time text of string
// expressions (the flow unit's evaluator), the variable an identifier
// denotes and its assignments, what a function returns (summaries and
// facts).
//
// Outputs: findings only, reported through builderHost.add, each message
// prefixed with the builder ("squirrel.Update: …", "gorm DB.Save: …").
// The unit exports no facts and no other unit reads its state.
//
// How it plugs into the checker: newChecker makes one builderState per
// pass, with the checker as its host (checker.builders). The checker calls
// it at three points, its whole API:
//
//   - entBuilder(sel), for each selector expression of the walk;
//   - builderCall(call, fn, stack), for each call of a named function or
//     method (fn): it starts a model at a constructor, or at gorm's and
//     xorm's writing methods;
//   - judgeBuilders(), once, from settle after the walk of every file: it
//     follows the builders held in variables and judges every model.

const (
	squirrelPath = "github.com/Masterminds/squirrel"
	goquPath     = "github.com/doug-martin/goqu/v9"
	goquExpPath  = "github.com/doug-martin/goqu/v9/exp"
	entSQLPath   = "entgo.io/ent/dialect/sql"
	gormClause   = "gorm.io/gorm/clause"
)

// bterm is one condition of a builder's WHERE clause.
type bterm struct {
	ts   []template
	or   bool // joined with OR (gorm's Or)
	cond bool // added on some paths only
}

// bmodel is the statement a builder would send.
type bmodel struct {
	lib     string // named in the message: "squirrel.Update"
	verb    string // UPDATE, INSERT, REPLACE, DELETE
	table   string
	sets    [][]template
	where   []bterm
	suffix  []template
	upsert  bool   // ON CONFLICT / ON DUPLICATE KEY UPDATE
	save    bool   // gorm's Save: an UPDATE, then an upsert when no row matched
	escaped bool   // the builder goes where fencelint does not follow
	paren   bool   // each condition is parenthesized when there are several
	alias   string // the table's alias (bun's models)
	pos     token.Pos
	kind    string // library: squirrel, goqu, ent, gorm
}

// builderHost is what the builders unit asks of the rest of the checker:
// the evaluation of expressions (the flow unit) and the findings. The
// checker implements it.
type builderHost interface {
	// static is the value of a constant string expression.
	static(e ast.Expr) (string, bool)
	// evalExpr is the SQL text a string expression may hold at run time.
	evalExpr(e ast.Expr) ([]template, bool)
	// objVar is the variable an identifier denotes or declares, or nil.
	objVar(id *ast.Ident) *types.Var
	// varDefs are the assignments of a variable seen by the walk.
	varDefs(v *types.Var) []def
	// returnsOf is what a function returns as its first result: from the
	// summary of a function of the package, or from the fact of an
	// imported one.
	returnsOf(fn *types.Func) ([]template, bool)
	// add reports a finding.
	add(pos token.Pos, msg string)
}

// builderState is the builders unit: the query builders (squirrel, goqu,
// gorm, Ent's dialect/sql, dbr, bun, xorm, Ent's generic builders) of the
// package, and what it needs to judge them.
type builderState struct {
	host builderHost
	info *types.Info
	pkg  *types.Package
	cfg  *sqlcheck.Config

	uses       []*builderUse // followed from their constructor (squirrel, goqu, Ent, dbr, bun)
	gormWrites []*bmodel     // followed back from their writing method (gorm, xorm)
}

func newBuilderState(host builderHost, info *types.Info, pkg *types.Package, cfg *sqlcheck.Config) *builderState {
	return &builderState{host: host, info: info, pkg: pkg, cfg: cfg}
}

// builderUse is a builder, held in a local variable (v, declared by def in
// block; followed after the walk) or not (v nil).
type builderUse struct {
	m     *bmodel
	v     *types.Var
	block *ast.BlockStmt
	def   ast.Stmt
}

// builderCall starts a model at a builder's constructor (squirrel, goqu,
// Ent's dialect/sql) or at gorm's writing method.
func (b *builderState) builderCall(call *ast.CallExpr, fn *types.Func, stack []ast.Node) {
	if fn.Pkg() == nil {
		return
	}
	switch fn.Pkg().Path() {
	case squirrelPath, goquPath, entSQLPath, dbrPath, dbr1Path, bunPath:
	case gormPath:
		b.gormWrite(call, fn, stack)
		return
	case xormPath, xorm0Path:
		b.xormWrite(call, fn)
		return
	default:
		return
	}
	m := b.builderCtor(call, fn)
	if m == nil || m.kind != bunLib && b.cfg.Table(m.table) == nil {
		return // bun's table comes later, from Model or Table
	}
	end, parent := b.applyChain(m, call, stack, len(stack)-1, false)
	b.builderFate(m, end, parent, stack)
}

// builderCtor recognises a constructor of a write builder with a constant
// table.
func (b *builderState) builderCtor(call *ast.CallExpr, fn *types.Func) *bmodel {
	var verb string
	if fn.Pkg().Path() == bunPath {
		return bunCtor(call, fn)
	}
	if isDBRPath(fn.Pkg().Path()) {
		verb = dbrCtor(fn.Name())
		if verb == "" || len(call.Args) != 1 {
			return nil
		}
		t, ok := b.host.static(call.Args[0])
		if !ok {
			return nil
		}
		return &bmodel{verb: verb, pos: call.Pos(), kind: dbrLib, lib: "dbr." + fn.Name(), paren: true, table: strings.ToLower(t)}
	}
	switch fn.Name() {
	case "Update":
		verb = "UPDATE"
	case "Insert":
		verb = "INSERT"
	case "Replace":
		verb = "REPLACE"
	case "Delete":
		verb = "DELETE"
	default:
		return nil
	}
	m := &bmodel{verb: verb, pos: call.Pos()}
	var tableArg ast.Expr
	if len(call.Args) > 0 {
		tableArg = call.Args[0]
	}
	switch fn.Pkg().Path() {
	case squirrelPath:
		m.kind, m.lib = "squirrel", "squirrel."+fn.Name()
	case entSQLPath:
		if verb == "REPLACE" {
			return nil
		}
		m.kind, m.lib, m.paren = "ent", "sql."+fn.Name(), true
	case goquPath:
		if verb == "REPLACE" {
			return nil
		}
		m.kind, m.lib, m.paren = "goqu", "goqu."+fn.Name(), true
		if recv := fn.Signature().Recv(); recv != nil && typeName(recv.Type()) == "SelectDataset" {
			tableArg = b.goquFrom(call)
		}
	}
	if tableArg == nil {
		return nil
	}
	t, ok := b.goquIdent(tableArg)
	if !ok {
		return nil
	}
	m.table = strings.ToLower(t)
	return m
}

// goquFrom finds the table of goqu.From("t").Update().
func (b *builderState) goquFrom(call *ast.CallExpr) ast.Expr {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	from, ok := ast.Unparen(sel.X).(*ast.CallExpr)
	if !ok || len(from.Args) != 1 {
		return nil
	}
	if fn, ok := typeutil.Callee(b.info, from).(*types.Func); ok && fn.Name() == "From" {
		return from.Args[0]
	}
	return nil
}

// goquIdent is the constant name of a table: "t", goqu.T("t"), goqu.I("t").
func (b *builderState) goquIdent(e ast.Expr) (string, bool) {
	if s, ok := b.host.static(e); ok {
		return s, true
	}
	if call, ok := ast.Unparen(e).(*ast.CallExpr); ok && len(call.Args) == 1 {
		if fn, ok := typeutil.Callee(b.info, call).(*types.Func); ok && fn.Pkg() != nil &&
			fn.Pkg().Path() == goquPath && (fn.Name() == "T" || fn.Name() == "I") {
			return b.host.static(call.Args[0])
		}
	}
	return "", false
}

// applyChain applies the method calls chained on e (found in stack from
// index i down) to m. It returns the last expression of the chain and the
// node that uses it.
func (b *builderState) applyChain(m *bmodel, e ast.Expr, stack []ast.Node, i int, cond bool) (ast.Expr, ast.Node) {
	for i >= 1 {
		sel, ok := stack[i].(*ast.SelectorExpr)
		if !ok || sel.X != e {
			break
		}
		call, ok := stack[i-1].(*ast.CallExpr)
		if !ok || call.Fun != sel {
			break
		}
		fn, _ := typeutil.Callee(b.info, call).(*types.Func)
		if fn == nil || !b.builderMethod(m, fn, call, cond) {
			return call, nil // a terminal: Exec, ToSql, Query, Executor, …
		}
		e, i = call, i-2
	}
	if i >= 0 {
		return e, stack[i]
	}
	return e, nil
}

// builderMethod applies one chained method. It returns false when the
// method ends the chain (its result is not the builder).
func (b *builderState) builderMethod(m *bmodel, fn *types.Func, call *ast.CallExpr, cond bool) bool {
	sig := fn.Signature()
	if sig.Recv() == nil || sig.Results().Len() != 1 || typeName(sig.Results().At(0).Type()) != typeName(sig.Recv().Type()) {
		return false
	}
	args := call.Args
	arg := func(i int) ast.Expr {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch m.kind {
	case "squirrel":
		switch fn.Name() {
		case "Set":
			if len(args) == 2 {
				m.sets = append(m.sets, b.assign(args[0], args[1]))
			}
		case "SetMap":
			m.sets = append(m.sets, b.mapAssigns(arg(0))...)
		case "Where":
			m.where = append(m.where, bterm{ts: b.squirrelPred(arg(0), len(args) > 1), cond: cond})
		case "Suffix", "Prefix":
			m.suffix = cat(cat(m.suffix, textTemplate(" ")), b.textOf(arg(0)))
		case "SuffixExpr", "PrefixExpr", "From", "FromSelect":
			m.suffix = cat(m.suffix, holeTemplate)
		case "Table", "Into":
			b.retable(m, arg(0))
		}
	case "goqu":
		switch fn.Name() {
		case "Set":
			m.sets = append(m.sets, b.mapAssigns(arg(0))...)
		case "Where":
			for _, a := range args {
				m.where = append(m.where, bterm{ts: b.goquExpr(a), cond: cond})
			}
		case "ClearWhere":
			m.where = nil
		case "OnConflict":
			if !b.isCall(arg(0), goquPath, "DoNothing") {
				m.upsert = true
			}
		case "From", "With", "WithRecursive", "FromQuery":
			m.suffix = cat(m.suffix, holeTemplate)
		case "Table", "Into":
			b.retable(m, arg(0))
		}
	case dbrLib:
		b.dbrMethod(m, fn, args, cond)
	case bunLib:
		b.bunMethod(m, fn, args, cond)
	case "ent":
		switch fn.Name() {
		case "Set":
			if len(args) == 2 {
				m.sets = append(m.sets, b.assign(args[0], args[1]))
			}
		case "Add":
			if col, ok := b.host.static(arg(0)); ok {
				m.sets = append(m.sets, textTemplate(quoteIdent(col)+" = "+quoteIdent(col)+" + ?"))
			}
		case "SetNull":
			if col, ok := b.host.static(arg(0)); ok {
				m.sets = append(m.sets, textTemplate(quoteIdent(col)+" = NULL"))
			}
		case "Where":
			m.where = append(m.where, bterm{ts: b.entPred(arg(0)), cond: cond})
		case "OnConflict":
			for _, a := range args {
				if !b.isCall(a, entSQLPath, "DoNothing") && !b.isCall(a, entSQLPath, "ConflictColumns") {
					m.upsert = true
				}
			}
		case "FromSelect", "Prefix":
			m.suffix = cat(m.suffix, holeTemplate)
		}
	}
	return true
}

// retable changes the table of a builder: a non-constant or other table
// ends the judgement.
func (b *builderState) retable(m *bmodel, e ast.Expr) {
	if t, ok := b.goquIdent(e); ok {
		m.table = strings.ToLower(t)
		return
	}
	m.table = ""
}

// builderFate decides what happens to the builder after its chain: run
// here (a terminal or a discarded value), stored in a local variable
// (followed after the walk), or gone elsewhere.
func (b *builderState) builderFate(m *bmodel, end ast.Expr, parent ast.Node, stack []ast.Node) {
	switch p := parent.(type) {
	case nil, *ast.ExprStmt:
	case *ast.AssignStmt:
		if v, ok := b.localOf(p.Lhs, p.Rhs, end); ok {
			if block, def := enclosingBlock(stack, p); block != nil {
				b.uses = append(b.uses, &builderUse{m: m, v: v, block: block, def: def})
				return
			}
		}
		m.escaped = true
	case *ast.ValueSpec:
		var lhs []ast.Expr
		for _, n := range p.Names {
			lhs = append(lhs, n)
		}
		if v, ok := b.localOf(lhs, p.Values, end); ok {
			if block, def := enclosingBlock(stack, p); block != nil {
				b.uses = append(b.uses, &builderUse{m: m, v: v, block: block, def: def})
				return
			}
		}
		m.escaped = true
	default:
		m.escaped = true
	}
	b.uses = append(b.uses, &builderUse{m: m})
}

// localOf returns the local variable that an assignment gives end to.
func (b *builderState) localOf(lhs, rhs []ast.Expr, end ast.Expr) (*types.Var, bool) {
	if len(lhs) != len(rhs) {
		return nil, false
	}
	for i, r := range rhs {
		if r != end {
			continue
		}
		id, ok := ast.Unparen(lhs[i]).(*ast.Ident)
		if !ok {
			return nil, false
		}
		v := b.host.objVar(id)
		return v, v != nil && v.Parent() != b.pkg.Scope()
	}
	return nil, false
}

// enclosingBlock returns the block whose statement list holds the
// statement that contains n.
func enclosingBlock(stack []ast.Node, n ast.Node) (*ast.BlockStmt, ast.Stmt) {
	child := n
	for i := len(stack) - 1; i >= 0; i-- {
		if b, ok := stack[i].(*ast.BlockStmt); ok {
			if s, ok := child.(ast.Stmt); ok {
				return b, s
			}
			return nil, nil
		}
		child = stack[i]
	}
	return nil, nil
}

// judgeBuilders follows the builders held in variables, then judges every
// builder.
func (b *builderState) judgeBuilders() {
	for _, u := range b.uses {
		if u.v != nil {
			b.followBuilder(u)
		}
		b.judgeBuilder(u.m)
	}
	for _, m := range b.gormWrites {
		b.judgeBuilder(m)
	}
}

// followBuilder applies the uses of a builder variable: v = v.Where(…)
// extends it (unconditionally when the statement sits in the declaring
// block), v.Where(…).Exec() runs it, anything else lets it escape.
func (b *builderState) followBuilder(u *builderUse) {
	var stack []ast.Node
	ast.Inspect(u.block, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if id, ok := n.(*ast.Ident); ok && b.info.Uses[id] == u.v && len(stack) > 0 {
			b.builderVarUse(u, id, stack)
		}
		stack = append(stack, n)
		return true
	})
}

func (b *builderState) builderVarUse(u *builderUse, id *ast.Ident, stack []ast.Node) {
	if as, ok := stack[len(stack)-1].(*ast.AssignStmt); ok {
		for _, l := range as.Lhs {
			if l == id {
				return // assigned: its value is the use on the right
			}
		}
	}
	// Conditional when nested in a compound statement or a closure of the
	// declaring block.
	cond, inside := false, false
	for _, n := range stack {
		if n == u.block {
			inside = true
			continue
		}
		if !inside {
			continue
		}
		switch n.(type) {
		case *ast.BlockStmt, *ast.FuncLit, *ast.CaseClause, *ast.CommClause, *ast.IfStmt, *ast.ForStmt,
			*ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt, *ast.DeferStmt, *ast.GoStmt:
			cond = true
		}
	}
	end, parent := b.applyChain(u.m, id, stack, len(stack)-1, cond)
	switch p := parent.(type) {
	case nil, *ast.ExprStmt:
	case *ast.AssignStmt:
		if v, ok := b.localOf(p.Lhs, p.Rhs, end); ok && v == u.v {
			return
		}
		u.m.escaped = true
	default:
		u.m.escaped = true
	}
}

// judgeBuilder renders the statement and judges it: the conditions on
// every path must fence it; any condition may break it.
func (b *builderState) judgeBuilder(m *bmodel) {
	tb := b.cfg.Table(m.table)
	if tb == nil {
		return
	}
	if m.save {
		b.host.add(m.pos, m.lib+": "+problemsMessage([]sqlcheck.Problem{{
			Kind: sqlcheck.Unfenceable, Verb: "Save (an UPDATE by primary key, then an upsert when no row matched)", Table: *tb, Ref: tb.Name,
		}}))
		return
	}
	if m.verb == "INSERT" && !m.upsert && m.suffix == nil {
		return // enqueue
	}
	// The conditions that hold on every path must fence the write; every
	// condition together must not break it (an OR, a lease check).
	var all, unfenced, sure []sqlcheck.Problem
	for _, t := range m.render(true) {
		for _, p := range judgeTemplate(t, b.cfg) {
			if p.Kind == sqlcheck.Unfenced {
				unfenced = append(unfenced, p)
			} else {
				all = append(all, p)
			}
		}
	}
	for _, t := range m.render(false) {
		for _, p := range judgeTemplate(t, b.cfg) {
			if p.Kind == sqlcheck.Unfenced {
				sure = append(sure, p)
			}
		}
	}
	if len(sure) > 0 {
		unfenced = sure
	}
	for i := range unfenced {
		if m.escaped {
			unfenced[i].Kind, unfenced[i].Missing = sqlcheck.Dynamic, nil
		}
	}
	ps := append(unfenced, all...)
	if len(ps) > 0 {
		b.host.add(m.pos, m.lib+": "+problemsMessage(ps))
	}
}

func judgeTemplate(t template, cfg *sqlcheck.Config) []sqlcheck.Problem {
	if text, ok := t.static(); ok {
		return sqlcheck.Check(text, cfg)
	}
	return sqlcheck.CheckTemplate(t, cfg)
}

// render writes the statement: with all conditions, or with those that
// hold on every path.
func (m *bmodel) render(all bool) []template {
	table := quoteIdent(m.table)
	out := textTemplate("")
	switch m.verb {
	case "UPDATE":
		out = textTemplate("UPDATE " + table + m.as() + " SET ")
		if len(m.sets) == 0 {
			out = concat(out, textTemplate("`fencelint_columns` = ?"))
		}
		for i, s := range m.sets {
			if i > 0 {
				out = concat(out, textTemplate(", "))
			}
			out = concat(out, s)
		}
	case "DELETE":
		out = textTemplate("DELETE FROM " + table + m.as())
	case "INSERT", "REPLACE":
		out = textTemplate(m.verb + " INTO " + table + " (`fencelint_columns`) VALUES (?)")
		if m.upsert {
			out = concat(out, textTemplate(" ON DUPLICATE KEY UPDATE `fencelint_columns` = ?"))
		}
		return cat(out, m.suffix)
	}
	var terms []bterm
	for _, t := range m.where {
		if all || !t.cond {
			terms = append(terms, t)
		}
	}
	if len(terms) > 0 {
		out = concat(out, textTemplate(" WHERE "))
		for i, t := range terms {
			if i > 0 {
				if t.or {
					out = concat(out, textTemplate(" OR "))
				} else {
					out = concat(out, textTemplate(" AND "))
				}
			}
			if m.paren && len(terms) > 1 {
				out = concat(concat(concat(out, textTemplate("(")), t.ts), textTemplate(")"))
			} else {
				out = concat(out, t.ts)
			}
		}
	}
	return cat(out, m.suffix)
}

// as is " AS alias" when the builder aliases its table.
func (m *bmodel) as() string {
	if m.alias == "" || m.alias == m.table {
		return ""
	}
	return " AS " + quoteIdent(m.alias)
}

// ref is the name the statement's conditions use for the table.
func (m *bmodel) ref() string {
	if m.alias != "" {
		return m.alias
	}
	return m.table
}

// cat is concat where nil stands for the empty string.
func cat(a, b []template) []template {
	if a == nil {
		a = []template{{}}
	}
	if b == nil {
		return a
	}
	return concat(a, b)
}

func quoteIdent(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(parts, ".")
}

// textOf is the SQL text of a string argument.
func (b *builderState) textOf(e ast.Expr) []template {
	if e == nil {
		return holeTemplate
	}
	ts, _ := b.host.evalExpr(e)
	return ts
}

// isCall reports whether e calls the named function of a package.
func (b *builderState) isCall(e ast.Expr, path, name string) bool {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	fn, ok := typeutil.Callee(b.info, call).(*types.Func)
	return ok && fn.Name() == name && fn.Pkg() != nil && fn.Pkg().Path() == path
}

// rawExpr returns the SQL text of a raw expression value:
// squirrel.Expr("…"), goqu.L("…"), gorm.Expr("…"), sql.Expr("…").
func (b *builderState) rawExpr(e ast.Expr) ([]template, bool) {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return nil, false
	}
	fn, ok := typeutil.Callee(b.info, call).(*types.Func)
	if !ok || fn.Pkg() == nil {
		return nil, false
	}
	switch {
	case fn.Pkg().Path() == squirrelPath && fn.Name() == "Expr",
		fn.Pkg().Path() == goquPath && fn.Name() == "L",
		fn.Pkg().Path() == gormPath && fn.Name() == "Expr",
		fn.Pkg().Path() == entSQLPath && (fn.Name() == "Expr" || fn.Name() == "ExprP"):
		return b.textOf(call.Args[0]), true
	}
	return nil, false
}

// value renders a value compared or assigned: a raw expression's text,
// NULL, or a placeholder.
func (b *builderState) value(e ast.Expr) []template {
	if e == nil {
		return textTemplate("?")
	}
	if ts, ok := b.rawExpr(e); ok {
		return ts
	}
	if tv := b.info.Types[e]; tv.IsNil() {
		return textTemplate("NULL")
	}
	return textTemplate("?")
}

// assign renders "col = value".
func (b *builderState) assign(col, val ast.Expr) []template {
	name, ok := b.host.static(col)
	if !ok {
		return holeTemplate
	}
	return concat(textTemplate(quoteIdent(name)+" = "), b.value(val))
}

// mapAssigns renders the assignments of a map or record literal.
func (b *builderState) mapAssigns(e ast.Expr) [][]template {
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	if !ok {
		return [][]template{holeTemplate}
	}
	if _, ok := b.info.TypeOf(lit).Underlying().(*types.Map); !ok {
		return [][]template{textTemplate("`fencelint_columns` = ?")} // a struct: its fields
	}
	var out [][]template
	for _, kv := range sortedPairs(b, lit) {
		out = append(out, concat(textTemplate(quoteIdent(kv.key)+" = "), b.value(kv.value)))
	}
	return out
}

type pair struct {
	key   string
	value ast.Expr
}

// sortedPairs returns the constant keys of a map literal, sorted as the
// libraries render them; a non-constant key gives the pair key "".
func sortedPairs(b *builderState, lit *ast.CompositeLit) []pair {
	var out []pair
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		k, _ := b.host.static(kv.Key)
		out = append(out, pair{k, kv.Value})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// comparison renders the conditions of a map of columns to values: equal
// (or IN for a slice, IS NULL for nil) by default, op otherwise.
func (b *builderState) comparison(lit *ast.CompositeLit, op, join string) []template {
	pairs := sortedPairs(b, lit)
	if len(pairs) == 0 {
		return textTemplate("(1=1)")
	}
	out := textTemplate("")
	for i, kv := range pairs {
		if kv.key == "" {
			return holeTemplate
		}
		if i > 0 {
			out = concat(out, textTemplate(join))
		}
		out = concat(out, b.compare(kv.key, op, kv.value))
	}
	return out
}

func (b *builderState) compare(col, op string, val ast.Expr) []template {
	t := b.info.TypeOf(val)
	if t != nil {
		switch t.Underlying().(type) {
		case *types.Slice, *types.Array:
			if op == "=" {
				op = "IN"
			} else if op == "<>" {
				op = "NOT IN"
			}
			if op == "IN" || op == "NOT IN" {
				return textTemplate(quoteIdent(col) + " " + op + " (?)")
			}
		}
	}
	if tv := b.info.Types[val]; tv.IsNil() && (op == "=" || op == "<>") {
		if op == "=" {
			return textTemplate(quoteIdent(col) + " IS NULL")
		}
		return textTemplate(quoteIdent(col) + " IS NOT NULL")
	}
	return concat(textTemplate(quoteIdent(col)+" "+op+" "), b.value(val))
}

// squirrelPred renders a squirrel Where predicate.
func (b *builderState) squirrelPred(e ast.Expr, hasArgs bool) []template {
	if e == nil {
		return holeTemplate
	}
	t := b.info.TypeOf(e)
	if t != nil && isString(t) {
		return b.textOf(e)
	}
	if ts, ok := b.rawExpr(e); ok {
		return ts
	}
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	if !ok {
		return holeTemplate
	}
	name := ""
	if n, ok := b.info.TypeOf(lit).(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == squirrelPath {
		name = n.Obj().Name()
	} else if _, ok := b.info.TypeOf(lit).Underlying().(*types.Map); ok {
		name = "Eq" // a plain map is an Eq
	}
	switch name {
	case "Eq":
		return b.comparison(lit, "=", " AND ")
	case "NotEq":
		return b.comparison(lit, "<>", " AND ")
	case "Lt":
		return b.comparison(lit, "<", " AND ")
	case "LtOrEq":
		return b.comparison(lit, "<=", " AND ")
	case "Gt":
		return b.comparison(lit, ">", " AND ")
	case "GtOrEq":
		return b.comparison(lit, ">=", " AND ")
	case "Like", "NotLike", "ILike", "NotILike":
		return b.comparison(lit, "LIKE", " AND ")
	case "And", "Or":
		sep := " AND "
		if name == "Or" {
			sep = " OR "
		}
		out := textTemplate("(")
		for i, el := range lit.Elts {
			if i > 0 {
				out = concat(out, textTemplate(sep))
			}
			out = concat(out, b.squirrelPred(el, false))
		}
		return concat(out, textTemplate(")"))
	}
	return holeTemplate
}

// goquExpr renders a goqu expression.
func (b *builderState) goquExpr(e ast.Expr) []template {
	e = ast.Unparen(e)
	if ts, ok := b.rawExpr(e); ok {
		return ts
	}
	if lit, ok := e.(*ast.CompositeLit); ok {
		join := " AND "
		if typeName(b.info.TypeOf(lit)) == "ExOr" {
			join = " OR "
		}
		pairs := sortedPairs(b, lit)
		if len(pairs) == 0 {
			return textTemplate("(1=1)")
		}
		out := textTemplate("(")
		for i, kv := range pairs {
			if kv.key == "" {
				return holeTemplate
			}
			if i > 0 {
				out = concat(out, textTemplate(join))
			}
			if op, ok := ast.Unparen(kv.value).(*ast.CompositeLit); ok && typeName(b.info.TypeOf(op)) == "Op" {
				out = concat(out, textTemplate("("))
				for j, o := range sortedPairs(b, op) {
					if j > 0 {
						out = concat(out, textTemplate(" AND "))
					}
					if goquOp(o.key) == "" {
						return holeTemplate
					}
					out = concat(out, b.compare(kv.key, goquOp(o.key), o.value))
				}
				out = concat(out, textTemplate(")"))
				continue
			}
			out = concat(out, b.compare(kv.key, "=", kv.value))
		}
		return concat(out, textTemplate(")"))
	}
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return holeTemplate
	}
	fn, ok := typeutil.Callee(b.info, call).(*types.Func)
	if !ok || fn.Pkg() == nil {
		return holeTemplate
	}
	switch {
	case fn.Pkg().Path() == goquPath && (fn.Name() == "And" || fn.Name() == "Or"):
		sep := " AND "
		if fn.Name() == "Or" {
			sep = " OR "
		}
		out := textTemplate("(")
		for i, a := range call.Args {
			if i > 0 {
				out = concat(out, textTemplate(sep))
			}
			out = concat(out, b.goquExpr(a))
		}
		return concat(out, textTemplate(")"))
	case fn.Pkg().Path() == goquExpPath || fn.Pkg().Path() == goquPath:
		// goqu.C("state").Eq(v): a comparison on an identifier.
		sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
		if !ok {
			return holeTemplate
		}
		ident, ok := ast.Unparen(sel.X).(*ast.CallExpr)
		if !ok || len(ident.Args) != 1 {
			return holeTemplate
		}
		idFn, ok := typeutil.Callee(b.info, ident).(*types.Func)
		if !ok || idFn.Pkg() == nil || idFn.Pkg().Path() != goquPath || idFn.Name() != "C" && idFn.Name() != "I" {
			return holeTemplate
		}
		col, ok := b.host.static(ident.Args[0])
		if !ok {
			return holeTemplate
		}
		op := goquOp(strings.ToLower(fn.Name()[:1]) + fn.Name()[1:])
		if op == "" {
			return holeTemplate
		}
		if op == "IS NULL" || op == "IS NOT NULL" {
			return textTemplate("(" + quoteIdent(col) + " " + op + ")")
		}
		var val ast.Expr
		if len(call.Args) > 0 {
			val = call.Args[0]
		}
		return concat(concat(textTemplate("("), b.compare(col, op, val)), textTemplate(")"))
	}
	return holeTemplate
}

// goquOp maps goqu's operator names to SQL.
func goquOp(name string) string {
	switch name {
	case "eq":
		return "="
	case "neq":
		return "<>"
	case "gt":
		return ">"
	case "gte":
		return ">="
	case "lt":
		return "<"
	case "lte":
		return "<="
	case "in":
		return "IN"
	case "notIn":
		return "NOT IN"
	case "isNull":
		return "IS NULL"
	case "isNotNull":
		return "IS NOT NULL"
	case "like", "iLike":
		return "LIKE"
	}
	return ""
}

// entPred renders a predicate of Ent's dialect/sql.
func (b *builderState) entPred(e ast.Expr) []template {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return holeTemplate
	}
	fn, ok := typeutil.Callee(b.info, call).(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != entSQLPath || fn.Signature().Recv() != nil {
		return holeTemplate
	}
	ops := map[string]string{"EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}
	switch name := fn.Name(); {
	case ops[name] != "" && len(call.Args) == 2:
		col, ok := b.host.static(call.Args[0])
		if !ok {
			return holeTemplate
		}
		return b.compare(col, ops[name], call.Args[1])
	case name == "And" || name == "Or":
		sep := " AND "
		if name == "Or" {
			sep = " OR "
		}
		out := textTemplate("(")
		for i, a := range call.Args {
			if i > 0 {
				out = concat(out, textTemplate(sep))
			}
			out = concat(out, b.entPred(a))
		}
		return concat(out, textTemplate(")"))
	case name == "Not" && len(call.Args) == 1:
		return concat(concat(textTemplate("(NOT ("), b.entPred(call.Args[0])), textTemplate("))"))
	case name == "IsNull" || name == "NotNull":
		if col, ok := b.host.static(call.Args[0]); ok {
			return textTemplate(quoteIdent(col) + map[string]string{"IsNull": " IS NULL", "NotNull": " IS NOT NULL"}[name])
		}
	case name == "ExprP" && len(call.Args) > 0:
		return b.textOf(call.Args[0])
	}
	return holeTemplate
}

// typeName is the name of a named type, pointers removed.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	if a, ok := t.(*types.Alias); ok {
		return a.Obj().Name()
	}
	return ""
}

// constInt returns the value of an integer constant expression.
func (b *builderState) constInt(e ast.Expr) (int64, bool) {
	tv := b.info.Types[e]
	if tv.Value == nil || tv.Value.Kind() != constant.Int {
		return 0, false
	}
	return constant.Int64Val(tv.Value)
}

// gormWriters are gorm's methods that write rows, and the statement each
// sends.
var gormWriters = map[string]string{
	"Update": "UPDATE", "Updates": "UPDATE", "UpdateColumn": "UPDATE", "UpdateColumns": "UPDATE",
	"Save": "UPDATE", "Create": "INSERT", "CreateInBatches": "INSERT", "Delete": "DELETE",
}

// gormWrite models a gorm write from its method back through the chain
// that leads to it.
func (b *builderState) gormWrite(call *ast.CallExpr, fn *types.Func, stack []ast.Node) {
	verb, ok := gormWriters[fn.Name()]
	recv := fn.Signature().Recv()
	if !ok || recv == nil || typeName(recv.Type()) != "DB" || verb == "DELETE" && !b.cfg.Delete {
		return
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return
	}
	m := &bmodel{kind: "gorm", lib: "gorm DB." + fn.Name(), verb: verb, pos: sel.Sel.Pos(), paren: true}
	g := &gormChain{}
	args := call.Args
	switch fn.Name() {
	case "Update", "UpdateColumn":
		if len(args) == 2 {
			m.sets = append(m.sets, b.assign(args[0], args[1]))
		}
	case "Updates", "UpdateColumns":
		if len(args) == 1 {
			m.sets = append(m.sets, b.mapAssigns(args[0])...)
			g.arg = b.modelTable(b.info.TypeOf(args[0]))
		}
	case "Save":
		m.save = true
		if len(args) == 1 {
			g.arg = b.modelTable(b.info.TypeOf(args[0]))
		}
	case "Create", "CreateInBatches", "Delete":
		if len(args) > 0 {
			g.arg = b.modelTable(b.info.TypeOf(args[0]))
		}
		if fn.Name() == "Delete" && len(args) > 1 {
			m.where = append(m.where, bterm{ts: b.gormCond(args[1], args[2:])})
		}
	}
	b.gormReceiver(m, g, sel.X, 0)
	for i, j := 0, len(g.terms)-1; i < j; i, j = i+1, j-1 {
		g.terms[i], g.terms[j] = g.terms[j], g.terms[i]
	}
	m.where = append(g.terms, m.where...)
	switch {
	case g.table != "":
		m.table = g.table
	case g.model != "":
		m.table = g.model
	default:
		m.table = g.arg
	}
	if m.table == "\x00" {
		return // a table named at run time
	}
	if verb == "INSERT" {
		if !g.upsert {
			return
		}
		m.upsert = true
	}
	if len(m.where) > 0 && m.where[0].or {
		m.where[0].or = false
	}
	b.gormWrites = append(b.gormWrites, m)
}

// gormChain collects what the calls before a gorm write set.
type gormChain struct {
	table, model, arg   string
	terms               []bterm // in reverse order
	upsert, upsertKnown bool
}

// gormReceiver walks back from x, the receiver of a gorm call: chained
// calls, and local variables assigned once.
func (b *builderState) gormReceiver(m *bmodel, g *gormChain, x ast.Expr, depth int) {
	if depth > maxDepth {
		return
	}
	x = ast.Unparen(x)
	switch x := x.(type) {
	case *ast.Ident:
		v := b.host.objVar(x)
		if v == nil {
			return
		}
		if ds := b.host.varDefs(v); len(ds) == 1 && ds[0].expr != nil && !ds[0].add {
			b.gormReceiver(m, g, ds[0].expr, depth+1)
		}
	case *ast.CallExpr:
		fn, ok := typeutil.Callee(b.info, x).(*types.Func)
		sel, ok2 := ast.Unparen(x.Fun).(*ast.SelectorExpr)
		if !ok || !ok2 || fn.Pkg() == nil || fn.Pkg().Path() != gormPath || fn.Signature().Recv() == nil {
			return
		}
		args := x.Args
		switch fn.Name() {
		case "Table":
			if g.table == "" && len(args) > 0 {
				if t, ok := b.host.static(args[0]); ok {
					g.table = strings.ToLower(t)
				} else {
					g.table = "\x00"
				}
			}
		case "Model":
			if g.model == "" && len(args) == 1 {
				g.model = b.modelTable(b.info.TypeOf(args[0]))
			}
		case "Where", "Or", "Not":
			if len(args) > 0 {
				ts := b.gormCond(args[0], args[1:])
				if fn.Name() == "Not" {
					ts = concat(concat(textTemplate("NOT ("), ts), textTemplate(")"))
				}
				g.terms = append(g.terms, bterm{ts: ts, or: fn.Name() == "Or"})
			}
		case "Scopes":
			g.terms = append(g.terms, bterm{ts: holeTemplate})
		case "Clauses":
			for _, a := range args {
				b.gormClause(g, a)
			}
		case "Raw", "Exec":
			return
		}
		b.gormReceiver(m, g, sel.X, depth+1)
	}
}

// gormClause notes an upsert clause: clause.OnConflict{…} that does
// more than nothing.
func (b *builderState) gormClause(g *gormChain, e ast.Expr) {
	t := b.info.TypeOf(e)
	if t == nil || typeName(t) != "OnConflict" {
		return
	}
	g.upsertKnown = true
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	if !ok {
		g.upsert = true
		return
	}
	nothing := false
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "DoNothing" {
			if tv := b.info.Types[kv.Value]; tv.Value != nil && tv.Value.Kind() == constant.Bool && constant.BoolVal(tv.Value) {
				nothing = true
			}
		}
	}
	if !nothing {
		g.upsert = true
	}
}

// gormCond renders a gorm condition: SQL text (a lone column name with one
// argument is an equality), a map of columns, or raw SQL. A struct
// condition is unknown: gorm leaves out its zero fields.
func (b *builderState) gormCond(q ast.Expr, args []ast.Expr) []template {
	t := b.info.TypeOf(q)
	if t != nil && isString(t) {
		if s, ok := b.host.static(q); ok && len(args) == 1 && isPlainName(s) {
			return b.compare(s, "=", args[0])
		}
		return b.textOf(q)
	}
	if ts, ok := b.rawExpr(q); ok {
		return ts
	}
	if lit, ok := ast.Unparen(q).(*ast.CompositeLit); ok {
		if _, ok := b.info.TypeOf(lit).Underlying().(*types.Map); ok {
			return b.comparison(lit, "=", " AND ")
		}
	}
	return holeTemplate
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWord(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}

func isWord(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// modelTable is the table of a gorm model type: its TableName method's
// constant result, else gorm's default naming (snake case, plural).
func (b *builderState) modelTable(t types.Type) string {
	for t != nil {
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
		return ""
	}
	if _, ok := n.Underlying().(*types.Struct); !ok {
		return ""
	}
	for _, mt := range []types.Type{n, types.NewPointer(n)} {
		if sel := types.NewMethodSet(mt).Lookup(n.Obj().Pkg(), "TableName"); sel != nil {
			if fn, ok := sel.Obj().(*types.Func); ok {
				if rs, ok := b.host.returnsOf(fn); ok && len(rs) == 1 {
					if text, ok := rs[0].static(); ok {
						return strings.ToLower(text)
					}
				}
				return "\x00" // named by code fencelint does not read
			}
		}
	}
	return pluralize(snake(n.Obj().Name()))
}
