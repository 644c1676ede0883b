package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/types/typeutil"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// The AST evaluator computes, without SSA, the strings an expression may
// hold: flow-insensitively (every assignment of a variable is one
// alternative), with a function's string parameters as parameter holes.
// It decides the facts (which functions are sinks, what helpers return)
// and whether a package needs SSA, which judges the sinks precisely.

// flowState is where variables get their values, for the AST evaluator.
type flowState struct {
	params    map[*types.Var]paramInfo
	defs      map[*types.Var][]def
	addrTaken map[*types.Var]bool
	varBusy   map[*types.Var]bool
	varBase   map[*types.Var][]template

	// Calls that take a strings.Builder or bytes.Buffer variable.
	builderCalls map[*types.Var][]*ast.CallExpr
}

func newFlowState() flowState {
	return flowState{
		params:       map[*types.Var]paramInfo{},
		defs:         map[*types.Var][]def{},
		addrTaken:    map[*types.Var]bool{},
		varBusy:      map[*types.Var]bool{},
		varBase:      map[*types.Var][]template{},
		builderCalls: map[*types.Var][]*ast.CallExpr{},
	}
}

// varDefs returns the assignments of v seen by the walk (for the builders
// unit, through builderHost).
func (c *checker) varDefs(v *types.Var) []def { return c.defs[v] }

// wrapperState is what makes wrappers and their calls visible: function
// declarations, function literals bound to a local variable (and such
// variables used other than as a callee), and the sink sites.
type wrapperState struct {
	funcs      map[*types.Func]*funcInfo
	funcOrder  []*funcInfo
	sites      []*site         // sink calls outside function declarations
	pending    []*ast.CallExpr // same-package calls outside declarations
	nonCallUse map[*types.Func]bool

	litFuncs   map[*types.Var]*funcInfo
	litOf      map[*ast.FuncLit]*funcInfo
	nonCallVar map[*types.Var]bool
}

func newWrapperState() wrapperState {
	return wrapperState{
		funcs:      map[*types.Func]*funcInfo{},
		nonCallUse: map[*types.Func]bool{},
		litFuncs:   map[*types.Var]*funcInfo{},
		litOf:      map[*ast.FuncLit]*funcInfo{},
		nonCallVar: map[*types.Var]bool{},
	}
}

// def is one assignment of a variable: expr (nil when unknown: a range
// variable, a multi-value call, …), or x += expr.
type def struct {
	expr ast.Expr
	add  bool
}

// paramInfo locates a string parameter of a function declaration.
type paramInfo struct {
	fn    *funcInfo // nil for a function literal's parameter
	index int
}

// funcInfo is what the walk records about one function declaration, or a
// function literal bound to a local variable that is only called
// (settle := func(key, age string) { … }).
type funcInfo struct {
	fn      *types.Func // nil for a literal
	sig     *types.Signature
	decl    *ast.FuncDecl
	lit     *ast.FuncLit
	v       *types.Var        // the literal's variable
	returns []*ast.ReturnStmt // its own, not those of nested literals
	sites   []*site           // sink calls in it (nested literals included)
	pending []*ast.CallExpr   // calls of same-package functions taking a string
	sum     *summary
	busy    bool
}

// summary is what a function does with queries: the queries its sinks run
// that depend on its parameters, and the strings it returns.
type summary struct {
	sinks   []template
	returns []template // nil: returns no string, or nothing known
}

var emptySummary = &summary{}

// site is one call that sends a query to the database.
type site struct {
	call    *ast.CallExpr
	fn      *funcInfo  // the enclosing declaration, nil at package level
	query   int        // the query argument of a direct sink; -1 for a wrapper
	wrapper []template // a wrapper's sink templates (its parameters are the call's arguments)
	ts      []template // AST alternatives
	flow    bool       // ts is approximate: SSA decides
	done    bool
}

// evaluator is the state of one top-level evaluation.
type evaluator struct {
	c     *checker
	steps int
	flow  bool
}

func (c *checker) evalExpr(e ast.Expr) ([]template, bool) {
	ev := &evaluator{c: c}
	ts := ev.eval(e, 0)
	return ts, ev.flow
}

func (ev *evaluator) eval(e ast.Expr, depth int) []template {
	c := ev.c
	ev.steps++
	if depth > maxDepth || ev.steps > maxSteps {
		ev.flow = true
		return holeTemplate
	}
	e = ast.Unparen(e)
	if s, ok := c.static(e); ok {
		return textTemplate(s)
	}
	switch x := e.(type) {
	case *ast.Ident:
		if v, ok := c.pass.TypesInfo.Uses[x].(*types.Var); ok {
			return ev.evalVar(v, depth)
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			return concat(ev.eval(x.X, depth+1), ev.eval(x.Y, depth+1))
		}
	case *ast.CallExpr:
		return ev.evalCall(x, depth)
	case *ast.SliceExpr:
		return edited(ev.eval(x.X, depth+1), c.cfg)
	case *ast.IndexExpr:
		if _, ok := c.pass.TypesInfo.TypeOf(x.X).Underlying().(*types.Map); ok {
			ev.flow = true // SSA follows what the package stores in such maps
		}
	case *ast.UnaryExpr:
		if x.Op == token.ARROW {
			ev.flow = true // SSA follows what the package sends on such channels
		}
	}
	return holeTemplate
}

func (ev *evaluator) evalVar(v *types.Var, depth int) []template {
	c := ev.c
	if e := c.strs.embedded(v); e != nil && e.text != "" {
		return textTemplate(e.text)
	}
	if v.Pkg() != c.pass.Pkg || v.IsField() {
		return holeTemplate
	}
	ds := c.defs[v]
	p, isParam := c.params[v]
	if isParam && p.fn == nil {
		return holeTemplate // a function literal's parameter
	}
	if c.addrTaken[v] {
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
	if c.varBusy[v] {
		if b, ok := c.varBase[v]; ok {
			return b
		}
		return holeTemplate
	}
	c.varBusy[v] = true
	defer delete(c.varBusy, v)
	var base []template
	if isParam {
		base = paramTemplate(p.index)
	}
	var self []def
	for _, d := range ds {
		switch {
		case d.expr == nil:
			base = union(base, holeTemplate)
		case d.add || refersTo(c.pass.TypesInfo, d.expr, v):
			self = append(self, d)
		default:
			base = union(base, ev.eval(d.expr, depth+1))
		}
	}
	if base == nil {
		base = holeTemplate
	}
	c.varBase[v] = base
	out := base
	for _, d := range self {
		ts := ev.eval(d.expr, depth+1)
		if d.add {
			ts = concat(base, ts)
		}
		out = union(out, ts)
	}
	delete(c.varBase, v)
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
	c := ev.c
	info := c.pass.TypesInfo
	if tv, ok := info.Types[call.Fun]; ok && tv.IsType() {
		if len(call.Args) == 1 && stringish(info.TypeOf(call.Args[0])) {
			return ev.eval(call.Args[0], depth+1) // string(b), State(s)
		}
		return holeTemplate
	}
	callee := typeutil.Callee(info, call)
	if v, ok := callee.(*types.Var); ok && c.bound(v) != nil {
		if rs := c.summary(c.bound(v)).returns; rs != nil {
			return substitute(rs, func(i int) []template {
				if a := c.callArg(call, i); a != nil {
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
		if marker, ok := c.sinks.sqlcSlice(call, fn); ok {
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
	if text, ok := c.strs.embedRead(call, fn); ok {
		return textTemplate(text)
	}
	if rs, ok := c.returnsOf(fn); ok {
		return substitute(rs, func(i int) []template {
			if a := c.callArg(call, i); a != nil {
				return ev.eval(a, depth+1)
			}
			return nil
		})
	}
	return ev.editArgs(call, depth)
}

// sprintf evaluates fmt.Sprintf(format, args...).
func (ev *evaluator) sprintf(format ast.Expr, args []ast.Expr, depth int) []template {
	info := ev.c.pass.TypesInfo
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
	c := ev.c
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return holeTemplate
	}
	id, ok := ast.Unparen(sel.X).(*ast.Ident)
	if !ok {
		return holeTemplate
	}
	v := c.objVar(id)
	out := []template{{}}
	for _, w := range c.builderVarCalls(v) {
		if w == call {
			continue
		}
		info := c.pass.TypesInfo
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
	info := ev.c.pass.TypesInfo
	if !stringish(resultType(info.TypeOf(call))) {
		return holeTemplate
	}
	var args []template
	for _, a := range call.Args {
		if stringish(info.TypeOf(a)) {
			args = union(args, ev.eval(a, depth+1))
		}
	}
	return edited(args, ev.c.cfg)
}

// returnsOf returns what fn returns as its first result, with its
// parameters as parameter holes: from the summary of a function of this
// package, or from the fact of an imported one.
func (c *checker) returnsOf(fn *types.Func) ([]template, bool) {
	fn = fn.Origin()
	if fn.Pkg() == c.pass.Pkg {
		fi := c.funcs[fn]
		if fi == nil {
			return nil, false
		}
		s := c.summary(fi)
		return s.returns, s.returns != nil
	}
	var f returnFact
	if fn.Pkg() != nil && c.pass.ImportObjectFact(fn, &f) {
		return f.Returns, true
	}
	return nil, false
}

// sinksOf returns the sink templates of a wrapper function.
func (c *checker) sinksOf(fn *types.Func) []template {
	fn = fn.Origin()
	if fn.Pkg() == c.pass.Pkg {
		if fi := c.funcs[fn]; fi != nil {
			return c.summary(fi).sinks
		}
		return nil
	}
	var f sinkFact
	if fn.Pkg() != nil && c.pass.ImportObjectFact(fn, &f) {
		return f.Queries
	}
	return nil
}

// summary computes, once, what fi does with queries. A cycle of calls
// sees an empty summary for the function being computed.
func (c *checker) summary(fi *funcInfo) *summary {
	if fi.sum != nil {
		return fi.sum
	}
	if fi.busy {
		return emptySummary
	}
	fi.busy = true
	defer func() { fi.busy = false }()
	for _, call := range fi.pending {
		c.wrapperSite(call, fi)
	}
	fi.pending = nil
	s := &summary{}
	for _, st := range fi.sites {
		c.siteTemplates(st)
		for _, t := range st.ts {
			if !t.params() || len(s.sinks) == maxTemplates {
				continue
			}
			if t.opaque() && len(sqlcheck.CheckTemplate(t, c.cfg)) > 0 {
				continue // reported here: callers cannot do better
			}
			s.sinks = append(s.sinks, t)
		}
	}
	if res := fi.sig.Results(); res.Len() > 0 && stringish(res.At(0).Type()) {
		for _, r := range fi.returns {
			if len(r.Results) == 0 {
				s.returns = union(s.returns, holeTemplate) // named results
				continue
			}
			ts, _ := c.evalExpr(r.Results[0])
			s.returns = union(s.returns, ts)
		}
		if !anyParams(s.returns) && !anyMentions(s.returns, c.cfg) {
			s.returns = nil // nothing a caller could use
		}
	}
	fi.sum = s
	return s
}

// wrapperSite makes a site of a call of a same-package function (or bound
// literal) when that function is a sink.
func (c *checker) wrapperSite(call *ast.CallExpr, in *funcInfo) {
	var ws []template
	switch fn := typeutil.Callee(c.pass.TypesInfo, call).(type) {
	case *types.Func:
		ws = c.sinksOf(fn)
	case *types.Var:
		if fi := c.bound(fn); fi != nil {
			ws = c.summary(fi).sinks
		}
	}
	if len(ws) > 0 {
		st := &site{call: call, fn: in, query: -1, wrapper: ws}
		if in != nil {
			in.sites = append(in.sites, st)
		} else {
			c.sites = append(c.sites, st)
		}
	}
}

// siteTemplates evaluates the queries a site may send.
func (c *checker) siteTemplates(st *site) {
	if st.done {
		return
	}
	st.done = true
	if st.query >= 0 {
		st.ts, st.flow = c.evalExpr(st.call.Args[st.query])
		return
	}
	ev := &evaluator{c: c}
	st.ts = substitute(st.wrapper, func(i int) []template {
		if a := c.callArg(st.call, i); a != nil {
			return ev.eval(a, 0)
		}
		return nil
	})
	st.flow = ev.flow
}

// callArg returns the argument for parameter i, or nil for a variadic one.
// A method expression's call, (*T).M(x, a), has the receiver first.
func (c *checker) callArg(call *ast.CallExpr, i int) ast.Expr {
	if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
		if s := c.pass.TypesInfo.Selections[sel]; s != nil && s.Kind() == types.MethodExpr {
			i++
		}
	}
	if i >= 0 && i < len(call.Args) && !(call.Ellipsis.IsValid() && i == len(call.Args)-1) {
		return call.Args[i]
	}
	return nil
}

// bound returns the function literal that v holds, when v is assigned
// nothing else.
func (c *checker) bound(v *types.Var) *funcInfo {
	if fi := c.litFuncs[v]; fi != nil && len(c.defs[v]) == 1 {
		return fi
	}
	return nil
}

// deferrable reports whether the queries of fi's sinks may be judged at
// its calls only: every call of fi is visible (an unexported function,
// never used as a value). Calls through an interface are visible: an
// unexported method can only be named by an interface of its own
// package, whose calls SSA judges against the package's implementations
// (callforms.go).
func (c *checker) deferrable(fi *funcInfo) bool {
	if fi != nil && fi.lit != nil {
		return !c.nonCallVar[fi.v]
	}
	return fi != nil && (!fi.fn.Exported() || c.command()) && !c.nonCallUse[fi.fn]
}

// command reports whether the package is a command (package main): no
// package imports it, so every call of its functions is in sight. This is
// the only proof fencelint accepts that every caller of an exported
// function is seen: facts flow from a package to its importers, never
// back, so no fact can speak for callers outside the build.
func (c *checker) command() bool { return c.pass.Pkg.Name() == "main" }

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
