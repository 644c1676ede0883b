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

// The flow unit (flowState and its evaluator): where variables get their
// values, and the text (constant parts and holes) a string expression may
// hold at run time. It lives in eval.go (and tmpl.go, the templates it
// computes with); a newcomer can read and change it without the rest of
// the checker.
//
// What it computes. The AST evaluator computes, without SSA, the strings
// an expression may hold: flow-insensitively (every assignment of a
// variable is one alternative), with a function's string parameters as
// parameter holes; concatenations, fmt.Sprintf, strings.Builder and
// bytes.Buffer contents, conversions, run-time edits (an unknown call of
// string arguments), sqlc's slice expansion, embedded files and what
// helpers return. It marks as flow (SSA decides) what it can only
// approximate: several assignments, a variable whose address is taken,
// maps, channels, builders. Its results decide the facts (which functions
// are sinks, what helpers return) and whether a package needs SSA, which
// judges the sinks precisely. It judges nothing itself.
//
// Inputs: the function types, assignments, range statements, var
// declarations and & expressions met by the checker's walk (funcParams,
// assignment, rangeStmt, valueSpec, addressOf); the package (pass); and,
// through narrow interfaces, the value of constants and embedded files
// (flowText: the SQL text unit), sqlc's slice markers (flowSinks: the
// sinks unit) and what functions of the package or their facts return
// (flowFuncs: the wrappers unit).
//
// Outputs: evalExpr (the alternatives an expression may hold, and whether
// SSA must decide), evalCallOf (a wrapper's templates with a call's
// arguments filled in) and varDefs (a variable's assignments, for the
// builders unit). No findings, no facts.
//
// How it plugs into the checker: newChecker makes one flowState per pass
// (checker.flow); the walk feeds it; the wrappers unit, the builders unit
// (through builderHost) and SSA's call forms ask it.
type flowState struct {
	pass  *analysis.Pass
	cfg   *sqlcheck.Config
	strs  flowText
	sinks flowSinks
	funcs flowFuncs

	params    map[*types.Var]paramInfo
	defs      map[*types.Var][]def
	addrTaken map[*types.Var]bool
	varBusy   map[*types.Var]bool
	varBase   map[*types.Var][]template

	// Calls that take a strings.Builder or bytes.Buffer variable.
	builderCalls map[*types.Var][]*ast.CallExpr
}

// flowText is what the flow unit asks of the SQL text unit.
type flowText interface {
	// static is the value of a constant string expression.
	static(e ast.Expr) (string, bool)
	// embedded is what the //go:embed variable v holds, or nil.
	embedded(v *types.Var) *embedInfo
	// embedRead is the text a call reads from an embedded file system.
	embedRead(call *ast.CallExpr, fn *types.Func) (string, bool)
}

// flowSinks is what the flow unit asks of the sinks unit.
type flowSinks interface {
	// sqlcSlice is the marker when call is sqlc's expansion of one.
	sqlcSlice(call *ast.CallExpr, fn *types.Func) (string, bool)
}

// flowFuncs is what the flow unit asks of the wrappers unit.
type flowFuncs interface {
	// returnsOf is what a function returns as its first result, with its
	// parameters as parameter holes (a summary, or an imported fact).
	returnsOf(fn *types.Func) ([]template, bool)
	// boundReturns is the same for the function literal bound to v, when v
	// is assigned nothing else and the literal returns a query.
	boundReturns(v *types.Var) ([]template, bool)
}

func newFlowState(pass *analysis.Pass, cfg *sqlcheck.Config, strs flowText, sinks flowSinks) *flowState {
	return &flowState{
		pass:         pass,
		cfg:          cfg,
		strs:         strs,
		sinks:        sinks,
		params:       map[*types.Var]paramInfo{},
		defs:         map[*types.Var][]def{},
		addrTaken:    map[*types.Var]bool{},
		varBusy:      map[*types.Var]bool{},
		varBase:      map[*types.Var][]template{},
		builderCalls: map[*types.Var][]*ast.CallExpr{},
	}
}

// addressOf records a variable whose address is taken (&v): its value is
// SSA's to follow.
func (fl *flowState) addressOf(u *ast.UnaryExpr) {
	if u.Op == token.AND {
		if id, ok := ast.Unparen(u.X).(*ast.Ident); ok {
			if v, ok := fl.pass.TypesInfo.Uses[id].(*types.Var); ok {
				fl.addrTaken[v] = true
			}
		}
	}
}

// evalCallOf is ts (a wrapper's templates) with call's arguments, as far
// as they are known, in place of its parameter holes; flow tells whether
// SSA must decide.
func (fl *flowState) evalCallOf(ts []template, call *ast.CallExpr) (out []template, flow bool) {
	ev := &evaluator{fl: fl}
	out = substitute(ts, func(i int) []template {
		if a := callArg(fl.pass.TypesInfo, call, i); a != nil {
			return ev.eval(a, 0)
		}
		return nil
	})
	return out, ev.flow
}

// evalFirstElem is the text the first element of the slice e may hold
// (a query passed in a spread ...any slice): of a slice literal, of
// append's first operand (or its first appended value), of a variable's
// only assignment; else a hole.
func (fl *flowState) evalFirstElem(e ast.Expr) []template {
	ev := &evaluator{fl: fl}
	return ev.firstElem(e, 0)
}

func (ev *evaluator) firstElem(e ast.Expr, depth int) []template {
	info := ev.fl.pass.TypesInfo
	if depth > maxDepth {
		return holeTemplate
	}
	switch x := ast.Unparen(e).(type) {
	case *ast.CompositeLit:
		if len(x.Elts) > 0 {
			if _, kv := x.Elts[0].(*ast.KeyValueExpr); !kv {
				return ev.eval(x.Elts[0], depth+1)
			}
		}
	case *ast.CallExpr:
		if b, ok := typeutil.Callee(info, x).(*types.Builtin); ok && b.Name() == "append" && len(x.Args) > 0 {
			if lit, ok := ast.Unparen(x.Args[0]).(*ast.CompositeLit); ok && len(lit.Elts) == 0 && len(x.Args) > 1 && !x.Ellipsis.IsValid() {
				return ev.eval(x.Args[1], depth+1)
			}
			return ev.firstElem(x.Args[0], depth+1)
		}
	case *ast.Ident:
		if v, ok := info.Uses[x].(*types.Var); ok {
			if ds := ev.fl.defs[v]; len(ds) == 1 && !ds[0].add && ds[0].expr != nil {
				return ev.firstElem(ds[0].expr, depth+1)
			}
		}
	}
	return holeTemplate
}

// varDefs returns the assignments of v seen by the walk (for the builders
// unit, through builderHost).
func (fl *flowState) varDefs(v *types.Var) []def { return fl.defs[v] }

// def is one assignment of a variable: expr (nil when unknown: a range
// variable, a multi-value call, …), or x += expr.
type def struct {
	expr ast.Expr
	add  bool
}

// evaluator is the state of one top-level evaluation.
type evaluator struct {
	fl    *flowState
	steps int
	flow  bool
}

func (fl *flowState) evalExpr(e ast.Expr) ([]template, bool) {
	ev := &evaluator{fl: fl}
	ts := ev.eval(e, 0)
	return ts, ev.flow
}

func (ev *evaluator) eval(e ast.Expr, depth int) []template {
	fl := ev.fl
	ev.steps++
	if depth > maxDepth || ev.steps > maxSteps {
		ev.flow = true
		return holeTemplate
	}
	e = ast.Unparen(e)
	if s, ok := fl.strs.static(e); ok {
		return textTemplate(s)
	}
	switch x := e.(type) {
	case *ast.Ident:
		if v, ok := fl.pass.TypesInfo.Uses[x].(*types.Var); ok {
			return ev.evalVar(v, depth)
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			return concat(ev.eval(x.X, depth+1), ev.eval(x.Y, depth+1))
		}
	case *ast.CallExpr:
		return ev.evalCall(x, depth)
	case *ast.SliceExpr:
		return edited(ev.eval(x.X, depth+1), fl.cfg)
	case *ast.IndexExpr:
		if _, ok := fl.pass.TypesInfo.TypeOf(x.X).Underlying().(*types.Map); ok {
			ev.flow = true // SSA follows what the package stores in such maps
		}
	case *ast.UnaryExpr:
		if x.Op == token.ARROW {
			ev.flow = true // SSA follows what the package sends on such channels
		}
	case *ast.SelectorExpr:
		if sel := fl.pass.TypesInfo.Selections[x]; sel != nil && sel.Kind() == types.FieldVal {
			ev.flow = true // SSA follows a struct received from a channel
		}
	}
	return holeTemplate
}

func (ev *evaluator) evalVar(v *types.Var, depth int) []template {
	fl := ev.fl
	if e := fl.strs.embedded(v); e != nil && e.text != "" {
		return textTemplate(e.text)
	}
	if v.Pkg() != fl.pass.Pkg || v.IsField() {
		return holeTemplate
	}
	ds := fl.defs[v]
	p, isParam := fl.params[v]
	if isParam && p.fn == nil {
		return holeTemplate // a function literal's parameter
	}
	if fl.addrTaken[v] {
		ev.flow = true
		return holeTemplate
	}
	if isParam && len(ds) == 0 {
		return paramTemplate(p.index)
	}
	if len(ds) == 1 && !ds[0].add && !isParam && ds[0].expr != nil {
		return ev.eval(ds[0].expr, depth+1)
	}
	// Several assignments: each is an alternative. An assignment that
	// reads the variable itself (q += …, q = "/* x */ " + q) sees the
	// other alternatives, once.
	ev.flow = true
	if fl.varBusy[v] {
		if b, ok := fl.varBase[v]; ok {
			return b
		}
		return holeTemplate
	}
	fl.varBusy[v] = true
	defer delete(fl.varBusy, v)
	var base []template
	if isParam {
		base = paramTemplate(p.index)
	}
	var self []def
	for _, d := range ds {
		switch {
		case d.expr == nil:
			base = union(base, holeTemplate)
		case d.add || refersTo(fl.pass.TypesInfo, d.expr, v):
			self = append(self, d)
		default:
			base = union(base, ev.eval(d.expr, depth+1))
		}
	}
	if base == nil {
		base = holeTemplate
	}
	fl.varBase[v] = base
	out := base
	for _, d := range self {
		ts := ev.eval(d.expr, depth+1)
		if d.add {
			ts = concat(base, ts)
		}
		out = union(out, ts)
	}
	delete(fl.varBase, v)
	return out
}

// refersTo reports whether e mentions v.
func refersTo(info *types.Info, e ast.Expr, v *types.Var) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && info.Uses[id] == v {
			found = true
		}
		return !found
	})
	return found
}

func (ev *evaluator) evalCall(call *ast.CallExpr, depth int) []template {
	fl := ev.fl
	info := fl.pass.TypesInfo
	if tv, ok := info.Types[call.Fun]; ok && tv.IsType() {
		if len(call.Args) == 1 && stringish(info.TypeOf(call.Args[0])) {
			return ev.eval(call.Args[0], depth+1) // string(b), State(s)
		}
		return holeTemplate
	}
	callee := typeutil.Callee(info, call)
	if v, ok := callee.(*types.Var); ok {
		if rs, ok := fl.funcs.boundReturns(v); ok {
			return substitute(rs, func(i int) []template {
				if a := callArg(fl.pass.TypesInfo, call, i); a != nil {
					return ev.eval(a, depth+1)
				}
				return nil
			})
		}
	}
	fn, _ := callee.(*types.Func)
	if fn == nil {
		return ev.editArgs(call, depth)
	}
	switch {
	case isSprintf(info, call):
		if len(call.Args) == 0 || call.Ellipsis.IsValid() {
			return holeTemplate
		}
		return ev.sprintf(call.Args[0], call.Args[1:], depth)
	case isStringsReplace(fn):
		if marker, ok := fl.sinks.sqlcSlice(call, fn); ok {
			return expandSlice(ev.eval(call.Args[0], depth+1), marker)
		}
	case identityArg(fn) >= 0:
		if i := identityArg(fn); i < len(call.Args) {
			return ev.eval(call.Args[i], depth+1)
		}
		return holeTemplate
	case fn.Name() == "String" && fn.Signature().Recv() != nil && isBuilderType(fn.Signature().Recv().Type()):
		ev.flow = true // SSA follows the builder's control flow
		return ev.builder(call, depth)
	}
	if text, ok := fl.strs.embedRead(call, fn); ok {
		return textTemplate(text)
	}
	if rs, ok := fl.funcs.returnsOf(fn); ok {
		return substitute(rs, func(i int) []template {
			if a := callArg(fl.pass.TypesInfo, call, i); a != nil {
				return ev.eval(a, depth+1)
			}
			return nil
		})
	}
	return ev.editArgs(call, depth)
}

// sprintf evaluates fmt.Sprintf(format, args...).
func (ev *evaluator) sprintf(format ast.Expr, args []ast.Expr, depth int) []template {
	info := ev.fl.pass.TypesInfo
	var out []template
	for _, f := range ev.eval(format, depth+1) {
		text, ok := f.static()
		if !ok {
			out = union(out, []template{f})
			continue
		}
		out = union(out, formatTemplates(text, true, func(i int, spec string, verb byte) []template {
			if i >= len(args) {
				return holeTemplate
			}
			a := args[i]
			t := info.TypeOf(a)
			if t == nil {
				return holeTemplate
			}
			if tv := info.Types[a]; tv.Value != nil {
				if gv, ok := goValue(tv.Value, tv.Type); ok {
					return textTemplate(sprintf("%"+spec+string(verb), []any{gv}))
				}
			}
			if intVerb(spec, verb, t) {
				return textTemplate("0")
			}
			if (verb == 's' || verb == 'v') && spec == "" && isString(t) && !hasMethods(t) {
				return ev.eval(a, depth+1)
			}
			return holeTemplate
		}))
	}
	return out
}

// builder approximates what a strings.Builder or bytes.Buffer local holds
// when its String method is called: its writes in source order, then a
// hole.
func (ev *evaluator) builder(call *ast.CallExpr, depth int) []template {
	fl := ev.fl
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return holeTemplate
	}
	id, ok := ast.Unparen(sel.X).(*ast.Ident)
	if !ok {
		return holeTemplate
	}
	v := objVar(fl.pass.TypesInfo, id)
	out := []template{{}}
	for _, w := range fl.builderVarCalls(v) {
		if w == call {
			continue
		}
		info := fl.pass.TypesInfo
		fn, _ := typeutil.Callee(info, w).(*types.Func)
		switch {
		case fn == nil:
		case fn.Name() == "WriteString" && len(w.Args) == 1:
			out = concat(out, ev.eval(w.Args[0], depth+1))
		case fn.Name() == "Fprintf" && fn.Pkg() != nil && fn.Pkg().Path() == "fmt" && len(w.Args) >= 2 && !w.Ellipsis.IsValid():
			out = concat(out, ev.sprintf(w.Args[1], w.Args[2:], depth))
		case fn.Signature().Recv() != nil && isBuilderType(fn.Signature().Recv().Type()) && !strings.HasPrefix(fn.Name(), "Write"):
		default:
			var args []template
			for _, a := range w.Args {
				if stringish(info.TypeOf(a)) {
					args = union(args, ev.eval(a, depth+1))
				}
			}
			out = concat(out, edited(args, nil))
		}
	}
	return concat(out, holeTemplate)
}

// editArgs is the value of an unknown call that returns a string: an edit
// of its string arguments (see edited), or a hole.
func (ev *evaluator) editArgs(call *ast.CallExpr, depth int) []template {
	info := ev.fl.pass.TypesInfo
	if !stringish(resultType(info.TypeOf(call))) {
		return holeTemplate
	}
	var args []template
	for _, a := range call.Args {
		if stringish(info.TypeOf(a)) {
			args = union(args, ev.eval(a, depth+1))
		}
	}
	return edited(args, ev.fl.cfg)
}

// callArg returns the argument for parameter i, or nil for a variadic one.
// A method expression's call, (*T).M(x, a), has the receiver first.
func callArg(info *types.Info, call *ast.CallExpr, i int) ast.Expr {
	if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
		if s := info.Selections[sel]; s != nil && s.Kind() == types.MethodExpr {
			i++
		}
	}
	if i >= 0 && i < len(call.Args) && !(call.Ellipsis.IsValid() && i == len(call.Args)-1) {
		return call.Args[i]
	}
	return nil
}

func stringish(t types.Type) bool {
	if t == nil {
		return false
	}
	if isString(t) {
		return true
	}
	s, ok := t.Underlying().(*types.Slice)
	if !ok {
		return false
	}
	b, ok := s.Elem().Underlying().(*types.Basic)
	return ok && b.Kind() == types.Byte
}

// resultType is the type of a call's first result.
func resultType(t types.Type) types.Type {
	if tu, ok := t.(*types.Tuple); ok {
		if tu.Len() == 0 {
			return nil
		}
		return tu.At(0).Type()
	}
	return t
}

func hasMethods(t types.Type) bool {
	return types.NewMethodSet(t).Len() > 0 || types.NewMethodSet(types.NewPointer(t)).Len() > 0
}

// intVerb reports whether a printf verb prints an argument of type t as
// decimal digits: %d, or %v of an integer type with no methods.
func intVerb(spec string, verb byte, t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	if !ok || b.Info()&types.IsInteger == 0 || spec != "" && spec != "-" && !allDigits(spec) {
		return false
	}
	switch verb {
	case 'd':
		ms := types.NewMethodSet(t)
		return ms.Lookup(nil, "Format") == nil && types.NewMethodSet(types.NewPointer(t)).Lookup(nil, "Format") == nil
	case 'v':
		return !hasMethods(t)
	}
	return false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// funcParams records parameters: string parameters of a declaration
// become parameter holes for the evaluator.
func (fl *flowState) funcParams(ft *ast.FuncType, stack []ast.Node, cur *funcInfo) {
	if ft.Params == nil {
		return
	}
	var owner *funcInfo
	if len(stack) > 0 && cur != nil && (cur.decl != nil && stack[len(stack)-1] == cur.decl ||
		cur.lit != nil && stack[len(stack)-1] == cur.lit) {
		owner = cur
	}
	i := 0
	for _, f := range ft.Params.List {
		names := f.Names
		if len(names) == 0 {
			i++
			continue
		}
		for _, id := range names {
			if v, ok := fl.pass.TypesInfo.Defs[id].(*types.Var); ok && isString(v.Type()) {
				if owner != nil && !(owner.sig.Variadic() && i == owner.sig.Params().Len()-1) {
					fl.params[v] = paramInfo{fn: owner, index: i}
				} else {
					fl.params[v] = paramInfo{}
				}
			}
			i++
		}
	}
}

// assignment records the values assigned to variables.
func (fl *flowState) assignment(as *ast.AssignStmt) {
	for i, lhs := range as.Lhs {
		id, ok := ast.Unparen(lhs).(*ast.Ident)
		if !ok || id.Name == "_" {
			continue
		}
		v := objVar(fl.pass.TypesInfo, id)
		if v == nil || !followed(v.Type()) {
			continue
		}
		d := def{add: as.Tok == token.ADD_ASSIGN}
		if len(as.Rhs) == len(as.Lhs) {
			d.expr = as.Rhs[i]
		} else if i == 0 && len(as.Rhs) == 1 {
			if call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr); ok {
				d.expr = call // the first result of a multi-value call
			}
		}
		if as.Tok != token.ASSIGN && as.Tok != token.DEFINE && as.Tok != token.ADD_ASSIGN {
			d.expr = nil
		}
		fl.defs[v] = append(fl.defs[v], d)
	}
}

// rangeStmt records range variables: the elements of a slice or array
// literal for the value, else unknown.
func (fl *flowState) rangeStmt(rs *ast.RangeStmt) {
	if id, ok := rs.Key.(*ast.Ident); ok {
		if v := objVar(fl.pass.TypesInfo, id); v != nil && followed(v.Type()) {
			fl.defs[v] = append(fl.defs[v], def{})
		}
	}
	id, ok := rs.Value.(*ast.Ident)
	if !ok {
		return
	}
	v := objVar(fl.pass.TypesInfo, id)
	if v == nil || !followed(v.Type()) {
		return
	}
	if lit, ok := ast.Unparen(rs.X).(*ast.CompositeLit); ok && isString(v.Type()) {
		if _, ok := fl.pass.TypesInfo.TypeOf(lit).Underlying().(*types.Map); !ok {
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Value
				}
				fl.defs[v] = append(fl.defs[v], def{expr: e})
			}
			return
		}
	}
	fl.defs[v] = append(fl.defs[v], def{})
}

// followed reports whether the evaluators follow the values of variables
// of type t: strings and bytes, functions (bound literals), gorm's *DB and
// xorm's *Session.
func followed(t types.Type) bool {
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return u.Info()&types.IsString != 0
	case *types.Slice, *types.Signature:
		return stringish(t) || isSig(u)
	case *types.Pointer:
		return typeName(t) == "DB" || typeName(t) == "Session"
	}
	return false
}

func isSig(t types.Type) bool {
	_, ok := t.(*types.Signature)
	return ok
}

// valueSpec records var declarations: a value, or the zero value.
func (fl *flowState) valueSpec(vs *ast.ValueSpec) {
	for i, id := range vs.Names {
		v, ok := fl.pass.TypesInfo.Defs[id].(*types.Var)
		if !ok || id.Name == "_" || !followed(v.Type()) {
			continue
		}
		switch {
		case len(vs.Values) == len(vs.Names):
			fl.defs[v] = append(fl.defs[v], def{expr: vs.Values[i]})
		case len(vs.Values) == 0 && fl.strs.embedded(v) == nil:
			fl.defs[v] = append(fl.defs[v], def{expr: emptyString})
		default:
			fl.defs[v] = append(fl.defs[v], def{})
		}
	}
}

var emptyString = &ast.BasicLit{Kind: token.STRING, Value: `""`}

// builderVarCalls returns the calls whose receiver or an argument is the
// strings.Builder or bytes.Buffer variable v (b.WriteString(s),
// fmt.Fprintf(&b, …), helper(&b)), found in v's scope when first needed.
func (fl *flowState) builderVarCalls(v *types.Var) []*ast.CallExpr {
	if calls, ok := fl.builderCalls[v]; ok {
		return calls
	}
	var calls []*ast.CallExpr
	scope := v.Parent()
	for _, f := range fl.pass.Files {
		if scope == nil || f.FileStart > v.Pos() || v.Pos() > f.FileEnd {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil || n.End() < scope.Pos() || n.Pos() > scope.End() {
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var xs []ast.Expr
			if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
				xs = append(xs, sel.X)
			}
			for _, x := range append(xs, call.Args...) {
				x = ast.Unparen(x)
				if u, ok := x.(*ast.UnaryExpr); ok && u.Op == token.AND {
					x = ast.Unparen(u.X)
				}
				if id, ok := x.(*ast.Ident); ok && fl.pass.TypesInfo.Uses[id] == v {
					calls = append(calls, call)
					break
				}
			}
			return true
		})
	}
	fl.builderCalls[v] = calls
	return calls
}
