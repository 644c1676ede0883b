package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// The wrappers unit (wrapperState): the functions of the package that
// send a query they are given, or return one, so that the query is judged
// where it is complete: at their callers (and, across packages, through
// facts). It lives in wrappers.go; a newcomer can read and change it
// without the rest of the checker.
//
// What it computes. Each function declaration, and each function literal
// bound to a local variable that is only called (settle := func(…) {…}),
// gets a summary: the queries its sinks run that depend on its
// parameters (sinks), and the strings it returns (returns), computed once
// on demand with the flow unit's evaluator. A call of such a function is
// a site whose query is the wrapper's template with the call's arguments
// filled in; a call of a sink (the sinks unit decides which) is a site
// whose query is an argument. A function is deferrable when every call of
// it is in sight (unexported, never used as a value, or in a command):
// only then may its sinks be judged at its calls alone. A call of an
// imported function is a site when its sinkFact says it is a wrapper; what
// an imported function returns is its returnFact.
//
// Inputs: the function declarations, bound literals, uses of functions
// and of bound literals' variables, and the calls met by the checker's
// walk, each with the function the walk is in (cur); the package (pass,
// for the facts of imported functions) and the table config; and, through
// the narrow wrapperFlow interface, the flow unit's evaluation of
// expressions and a variable's assignments.
//
// Outputs: the sites (settleSites: every site of the package, its queries
// evaluated), summaries (summary, sinksOf, returnsOf, boundReturns),
// deferrable and command, and funcOrder / litOf / funcs, which the
// checker's facts and SSA's call forms read. No findings, no facts of its
// own: the checker exports the summaries as facts.
//
// How it plugs into the checker: newChecker makes one wrapperState per
// pass (checker.wrappers). The walk calls funcDecl, bindLiterals, funcUse,
// litUse, and, for calls, pendingCall, addSite or wrapperCall; settle calls
// settleSites once.
type wrapperState struct {
	pass *analysis.Pass
	cfg  *sqlcheck.Config
	flow wrapperFlow

	funcs      map[*types.Func]*funcInfo
	funcOrder  []*funcInfo
	sites      []*site         // sink calls outside function declarations
	pending    []*ast.CallExpr // same-package calls outside declarations
	nonCallUse map[*types.Func]bool

	litFuncs   map[*types.Var]*funcInfo
	litOf      map[*ast.FuncLit]*funcInfo
	nonCallVar map[*types.Var]bool
}

// wrapperFlow is what the wrappers unit asks of the flow unit.
type wrapperFlow interface {
	// evalExpr is the SQL text a string expression may hold at run time,
	// and whether SSA must decide.
	evalExpr(e ast.Expr) ([]template, bool)
	// evalCallOf is a wrapper's templates with call's arguments filled in.
	evalCallOf(ts []template, call *ast.CallExpr) ([]template, bool)
	// varDefs are the assignments of a variable seen by the walk.
	varDefs(v *types.Var) []def
	// evalFirstElem is what the first element of a slice may hold.
	evalFirstElem(e ast.Expr) []template
}

func newWrapperState(pass *analysis.Pass, cfg *sqlcheck.Config, flow wrapperFlow) *wrapperState {
	return &wrapperState{
		pass:       pass,
		cfg:        cfg,
		flow:       flow,
		funcs:      map[*types.Func]*funcInfo{},
		nonCallUse: map[*types.Func]bool{},
		litFuncs:   map[*types.Var]*funcInfo{},
		litOf:      map[*ast.FuncLit]*funcInfo{},
		nonCallVar: map[*types.Var]bool{},
	}
}

// boundReturns is what the function literal bound to v returns, when v is
// assigned nothing else and the literal returns a query.
func (w *wrapperState) boundReturns(v *types.Var) ([]template, bool) {
	if fi := w.bound(v); fi != nil {
		if rs := w.summary(fi).returns; rs != nil {
			return rs, true
		}
	}
	return nil, false
}

// litBound reports whether v is the variable of a bound function literal.
func (w *wrapperState) litBound(v *types.Var) bool { return w.litFuncs[v] != nil }

// pendingCall records a call, in cur (nil at package level), of a
// same-package function or bound literal that may be a wrapper: decided
// when the summaries are.
func (w *wrapperState) pendingCall(call *ast.CallExpr, cur *funcInfo) {
	if cur != nil {
		cur.pending = append(cur.pending, call)
	} else {
		w.pending = append(w.pending, call)
	}
}

// wrapperCall records a call, in cur, of a function fn that is not a sink:
// pending when fn is of this package and takes a string, a site when fn
// is an imported wrapper (its sinkFact).
func (w *wrapperState) wrapperCall(call *ast.CallExpr, fn *types.Func, cur *funcInfo) {
	if fn.Pkg() == w.pass.Pkg {
		if hasStringParam(fn.Signature()) {
			w.pendingCall(call, cur)
		}
		return
	}
	if ws := w.sinksOf(fn); len(ws) > 0 {
		w.addSite(&site{call: call, query: -1, wrapper: ws}, cur)
	}
}

// settleSites decides the wrappers (the pending calls, the summaries of
// the functions with sites or pending calls) and returns every site of
// the package, its queries evaluated.
func (w *wrapperState) settleSites() []*site {
	for _, call := range w.pending {
		w.wrapperSite(call, nil)
	}
	w.pending = nil
	sites := w.sites
	for _, fi := range w.funcOrder {
		if len(fi.pending) > 0 || len(fi.sites) > 0 {
			w.summary(fi)
			sites = append(sites, fi.sites...)
		}
	}
	for _, st := range sites {
		w.siteTemplates(st)
	}
	return sites
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

// returnsOf returns what fn returns as its first result, with its
// parameters as parameter holes: from the summary of a function of this
// package, or from the fact of an imported one.
func (w *wrapperState) returnsOf(fn *types.Func) ([]template, bool) {
	fn = fn.Origin()
	if fn.Pkg() == w.pass.Pkg {
		fi := w.funcs[fn]
		if fi == nil {
			return nil, false
		}
		s := w.summary(fi)
		return s.returns, s.returns != nil
	}
	var f returnFact
	if fn.Pkg() != nil && w.pass.ImportObjectFact(fn, &f) {
		return f.Returns, true
	}
	return nil, false
}

// sinksOf returns the sink templates of a wrapper function.
func (w *wrapperState) sinksOf(fn *types.Func) []template {
	fn = fn.Origin()
	if fn.Pkg() == w.pass.Pkg {
		if fi := w.funcs[fn]; fi != nil {
			return w.summary(fi).sinks
		}
		return nil
	}
	var f sinkFact
	if fn.Pkg() != nil && w.pass.ImportObjectFact(fn, &f) {
		return f.Queries
	}
	return nil
}

// summary computes, once, what fi does with queries. A cycle of calls
// sees an empty summary for the function being computed.
func (w *wrapperState) summary(fi *funcInfo) *summary {
	if fi.sum != nil {
		return fi.sum
	}
	if fi.busy {
		return emptySummary
	}
	fi.busy = true
	defer func() { fi.busy = false }()
	for _, call := range fi.pending {
		w.wrapperSite(call, fi)
	}
	fi.pending = nil
	s := &summary{}
	for _, st := range fi.sites {
		w.siteTemplates(st)
		for _, t := range st.ts {
			if !t.params() || len(s.sinks) == maxTemplates {
				continue
			}
			if ps := sqlcheck.CheckTemplate(t, w.cfg); len(ps) > 0 && (t.opaque() || !holesOnly(ps)) {
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
			ts, _ := w.flow.evalExpr(r.Results[0])
			s.returns = union(s.returns, ts)
		}
		if !anyParams(s.returns) && !anyMentions(s.returns, w.cfg) {
			s.returns = nil // nothing a caller could use
		}
	}
	fi.sum = s
	return s
}

// wrapperSite makes a site of a call of a same-package function (or bound
// literal) when that function is a sink.
func (w *wrapperState) wrapperSite(call *ast.CallExpr, in *funcInfo) {
	var ws []template
	switch fn := typeutil.Callee(w.pass.TypesInfo, call).(type) {
	case *types.Func:
		ws = w.sinksOf(fn)
	case *types.Var:
		if fi := w.bound(fn); fi != nil {
			ws = w.summary(fi).sinks
		}
	}
	if len(ws) > 0 {
		st := &site{call: call, fn: in, query: -1, wrapper: ws}
		if in != nil {
			in.sites = append(in.sites, st)
		} else {
			w.sites = append(w.sites, st)
		}
	}
}

// siteTemplates evaluates the queries a site may send.
func (w *wrapperState) siteTemplates(st *site) {
	if st.done {
		return
	}
	st.done = true
	if st.query >= 0 {
		a := st.call.Args[st.query]
		if st.call.Ellipsis.IsValid() && st.query == len(st.call.Args)-1 {
			st.ts, st.flow = w.flow.evalFirstElem(a), true // SSA decides
			return
		}
		st.ts, st.flow = w.flow.evalExpr(a)
		return
	}
	st.ts, st.flow = w.flow.evalCallOf(st.wrapper, st.call)
}

// bound returns the function literal that v holds, when v is assigned
// nothing else.
func (w *wrapperState) bound(v *types.Var) *funcInfo {
	if fi := w.litFuncs[v]; fi != nil && len(w.flow.varDefs(v)) == 1 {
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
func (w *wrapperState) deferrable(fi *funcInfo) bool {
	if fi != nil && fi.lit != nil {
		return !w.nonCallVar[fi.v]
	}
	return fi != nil && (!fi.fn.Exported() || w.command()) && !w.nonCallUse[fi.fn]
}

// command reports whether the package is a command (package main): no
// package imports it, so every call of its functions is in sight. This is
// the only proof fencelint accepts that every caller of an exported
// function is seen: facts flow from a package to its importers, never
// back, so no fact can speak for callers outside the build.
func (w *wrapperState) command() bool { return w.pass.Pkg.Name() == "main" }

// funcDecl records a function declaration with a body, and returns it
// (the function the walk is now in), or nil.
func (w *wrapperState) funcDecl(fd *ast.FuncDecl) *funcInfo {
	fn, ok := w.pass.TypesInfo.Defs[fd.Name].(*types.Func)
	if !ok || fd.Body == nil {
		return nil
	}
	fi := &funcInfo{fn: fn, sig: fn.Signature(), decl: fd}
	w.funcs[fn] = fi
	w.funcOrder = append(w.funcOrder, fi)
	return fi
}

// bindLiterals records function literals bound to a new local variable
// (f := func(…) {…}): their parameters are followed like a function's,
// and their calls judged.
func (w *wrapperState) bindLiterals(as *ast.AssignStmt) {
	if as.Tok != token.DEFINE || len(as.Lhs) != len(as.Rhs) {
		return
	}
	for i, r := range as.Rhs {
		lit, ok := ast.Unparen(r).(*ast.FuncLit)
		if !ok {
			continue
		}
		id, ok := as.Lhs[i].(*ast.Ident)
		if !ok {
			continue
		}
		v, ok := w.pass.TypesInfo.Defs[id].(*types.Var)
		if !ok {
			continue
		}
		sig, ok := w.pass.TypesInfo.TypeOf(lit).(*types.Signature)
		if !ok {
			continue
		}
		fi := &funcInfo{sig: sig, lit: lit, v: v}
		w.litFuncs[v] = fi
		w.litOf[lit] = fi
		w.funcOrder = append(w.funcOrder, fi)
	}
}

// litUse records uses of bound literals' variables other than calls (and
// their reassignment, which ends the binding).
func (w *wrapperState) litUse(id *ast.Ident, v *types.Var, stack []ast.Node) {
	if w.litFuncs[v] == nil {
		return
	}
	if len(stack) > 0 {
		if call, ok := stack[len(stack)-1].(*ast.CallExpr); ok && call.Fun == id {
			return
		}
	}
	w.nonCallVar[v] = true
}

// funcUse records uses of same-package functions other than calls.
func (w *wrapperState) funcUse(id *ast.Ident, fn *types.Func, stack []ast.Node) {
	if fn.Pkg() != w.pass.Pkg {
		return
	}
	var callee ast.Node = id
	i := len(stack) - 1
	if i >= 0 {
		if se, ok := stack[i].(*ast.SelectorExpr); ok && se.Sel == id {
			callee, i = se, i-1
		}
	}
	for i >= 0 {
		if ix, ok := stack[i].(*ast.IndexExpr); ok && ix.X == callee { // generic instantiation
			callee, i = ix, i-1
			continue
		}
		break
	}
	if i >= 0 {
		if call, ok := stack[i].(*ast.CallExpr); ok && call.Fun == callee {
			return
		}
	}
	w.nonCallUse[fn.Origin()] = true
}

// addSite records a site found in cur (nil at package level).
func (w *wrapperState) addSite(st *site, cur *funcInfo) {
	st.fn = cur
	if cur != nil {
		cur.sites = append(cur.sites, st)
	} else {
		w.sites = append(w.sites, st)
	}
}

func hasStringParam(sig *types.Signature) bool {
	for i := 0; i < sig.Params().Len(); i++ {
		if isString(sig.Params().At(i).Type()) {
			return true
		}
	}
	return false
}
