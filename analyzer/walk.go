package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// checker holds the state of one pass: the pass and its findings, and one
// embedded unit of state per concern, each declared beside the code that
// owns it (issue 20: a first step of splitting the checker):
//
//   - sqlStrings (walk.go): maximal static strings, where they are used,
//     and the lexical evidence that decides whether SSA is needed;
//   - flowState (eval.go): where variables get their values, for the AST
//     evaluator;
//   - wrapperState (eval.go): function declarations, bound literals and
//     sink sites, from which wrappers' summaries and facts are computed;
//   - walkPos (walk.go): where the walk is.
//
// The builders unit (builderState, builders.go) is a separate value that
// the walk calls into (builderCall, entBuilder, judgeBuilders); it reaches
// back only through the narrow builderHost interface.
//
// The call forms' state is built with SSA (callGraph, callforms.go).
type checker struct {
	pass *analysis.Pass
	cfg  *sqlcheck.Config
	opts *options
	out  *findingList

	strs  *sqlStrings
	sinks *sinkUnit
	flowState
	wrapperState
	walkPos

	builders *builderState
}

// walkPos is where the walk is: the enclosing function (declaration or
// bound literal), how many other function literals deep the walk is
// inside it, and the enclosing functions outside it; and the calls of go
// and defer statements, by the statement's keyword (where SSA places its
// Go or Defer instruction).
type walkPos struct {
	cur      *funcInfo
	litDepth int
	outer    []outerFunc
	goDefer  map[token.Pos]*ast.CallExpr
}

type outerFunc struct {
	fi       *funcInfo
	litDepth int
}

func newChecker(pass *analysis.Pass, o *options) *checker {
	c := &checker{
		pass:         pass,
		cfg:          o.sql,
		opts:         o,
		out:          &findingList{},
		flowState:    newFlowState(),
		wrapperState: newWrapperState(),
	}
	c.sinks = newSinkUnit(pass.TypesInfo, o.sinks)
	c.strs = newSQLStrings(pass, o.sql, c.sinks, c.out)
	c.sinks.strs = c.strs
	c.builders = newBuilderState(c, pass.TypesInfo, pass.Pkg, o.sql)
	return c
}

// findingList is where every unit reports its findings, in the order
// found (report sorts them by position).
type findingList struct{ list []finding }

func (l *findingList) add(pos token.Pos, msg string) {
	l.list = append(l.list, finding{pos: pos, msg: msg})
}

func (l *findingList) addFinding(f finding) { l.list = append(l.list, f) }

func (c *checker) add(pos token.Pos, msg string) { c.out.add(pos, msg) }

// walk visits every file once: maximal static strings, sink calls, query
// builders, Ent builder calls, uses of package string variables, and what
// the AST evaluator needs (parameters, assignments, returns).
func (c *checker) walk() {
	for _, f := range c.pass.Files {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				switch top := top.(type) {
				case *ast.FuncDecl:
					if c.cur != nil && c.cur.decl == top {
						c.cur = nil
					}
				case *ast.FuncLit:
					if fi := c.litOf[top]; fi != nil && c.cur == fi {
						o := c.outer[len(c.outer)-1]
						c.outer = c.outer[:len(c.outer)-1]
						c.cur, c.litDepth = o.fi, o.litDepth
					} else {
						c.litDepth--
					}
				}
				return true
			}
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false // import paths are not expressions
			case *ast.FuncDecl:
				c.funcDecl(n)
			case *ast.FuncLit:
				if fi := c.litOf[n]; fi != nil {
					c.outer = append(c.outer, outerFunc{c.cur, c.litDepth})
					c.cur, c.litDepth = fi, 0
				} else {
					c.litDepth++
				}
			case *ast.FuncType:
				c.funcParams(n, stack)
				return false // nor are struct tags in parameter lists
			case *ast.Field:
				if n.Tag != nil {
					return false
				}
			case *ast.GenDecl:
				c.strs.embedDecl(n)
			case *ast.GoStmt:
				c.goDeferCall(n.Go, n.Call)
			case *ast.DeferStmt:
				c.goDeferCall(n.Defer, n.Call)
			case *ast.AssignStmt:
				c.assignment(n)
				c.bindLiterals(n)
			case *ast.ValueSpec:
				c.valueSpec(n)
			case *ast.RangeStmt:
				c.rangeStmt(n)
			case *ast.ReturnStmt:
				if c.cur != nil && c.litDepth == 0 {
					c.cur.returns = append(c.cur.returns, n)
				}
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					if id, ok := ast.Unparen(n.X).(*ast.Ident); ok {
						if v, ok := c.pass.TypesInfo.Uses[id].(*types.Var); ok {
							c.addrTaken[v] = true
						}
					}
				}
			case *ast.BasicLit, *ast.Ident, *ast.SelectorExpr, *ast.BinaryExpr, *ast.ParenExpr, *ast.CallExpr:
				e := n.(ast.Expr)
				if s, ok := c.static(e); ok {
					c.strs.staticExpr(e, s, stack)
					if call, ok := e.(*ast.CallExpr); ok {
						c.strs.astRoots[call.Lparen] = true
					} else if be, ok := ast.Unparen(e).(*ast.BinaryExpr); ok && c.pass.TypesInfo.Types[be].Value == nil {
						c.strs.astRoots[be.OpPos] = true
					}
					return false
				}
				switch n := n.(type) {
				case *ast.BasicLit:
					return false
				case *ast.Ident:
					switch obj := c.pass.TypesInfo.Uses[n].(type) {
					case *types.Var:
						c.strs.globalUse(n, obj, stack)
						c.litUse(n, obj, stack)
					case *types.Func:
						c.funcUse(n, obj, stack)
					}
					return false
				case *ast.SelectorExpr:
					c.builders.entBuilder(n)
				case *ast.CallExpr:
					c.call(n, stack)
				}
			}
			stack = append(stack, n)
			return true
		})
	}
}

func (c *checker) goDeferCall(kw token.Pos, call *ast.CallExpr) {
	if c.goDefer == nil {
		c.goDefer = map[token.Pos]*ast.CallExpr{}
	}
	c.goDefer[kw] = call
}

func (c *checker) funcDecl(fd *ast.FuncDecl) {
	fn, ok := c.pass.TypesInfo.Defs[fd.Name].(*types.Func)
	if !ok || fd.Body == nil {
		return
	}
	fi := &funcInfo{fn: fn, sig: fn.Signature(), decl: fd}
	c.funcs[fn] = fi
	c.funcOrder = append(c.funcOrder, fi)
	c.cur, c.litDepth = fi, 0
}

// funcParams records parameters: string parameters of a declaration
// become parameter holes for the evaluator.
func (c *checker) funcParams(ft *ast.FuncType, stack []ast.Node) {
	if ft.Params == nil {
		return
	}
	var owner *funcInfo
	if len(stack) > 0 && c.cur != nil && (c.cur.decl != nil && stack[len(stack)-1] == c.cur.decl ||
		c.cur.lit != nil && stack[len(stack)-1] == c.cur.lit) {
		owner = c.cur
	}
	i := 0
	for _, f := range ft.Params.List {
		names := f.Names
		if len(names) == 0 {
			i++
			continue
		}
		for _, id := range names {
			if v, ok := c.pass.TypesInfo.Defs[id].(*types.Var); ok && isString(v.Type()) {
				if owner != nil && !(owner.sig.Variadic() && i == owner.sig.Params().Len()-1) {
					c.params[v] = paramInfo{fn: owner, index: i}
				} else {
					c.params[v] = paramInfo{}
				}
			}
			i++
		}
	}
}

// assignment records the values assigned to variables.
func (c *checker) assignment(as *ast.AssignStmt) {
	for i, lhs := range as.Lhs {
		id, ok := ast.Unparen(lhs).(*ast.Ident)
		if !ok || id.Name == "_" {
			continue
		}
		v := c.objVar(id)
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
		c.defs[v] = append(c.defs[v], d)
	}
}

// rangeStmt records range variables: the elements of a slice or array
// literal for the value, else unknown.
func (c *checker) rangeStmt(rs *ast.RangeStmt) {
	if id, ok := rs.Key.(*ast.Ident); ok {
		if v := c.objVar(id); v != nil && followed(v.Type()) {
			c.defs[v] = append(c.defs[v], def{})
		}
	}
	id, ok := rs.Value.(*ast.Ident)
	if !ok {
		return
	}
	v := c.objVar(id)
	if v == nil || !followed(v.Type()) {
		return
	}
	if lit, ok := ast.Unparen(rs.X).(*ast.CompositeLit); ok && isString(v.Type()) {
		if _, ok := c.pass.TypesInfo.TypeOf(lit).Underlying().(*types.Map); !ok {
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Value
				}
				c.defs[v] = append(c.defs[v], def{expr: e})
			}
			return
		}
	}
	c.defs[v] = append(c.defs[v], def{})
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
func (c *checker) valueSpec(vs *ast.ValueSpec) {
	for i, id := range vs.Names {
		v, ok := c.pass.TypesInfo.Defs[id].(*types.Var)
		if !ok || id.Name == "_" || !followed(v.Type()) {
			continue
		}
		switch {
		case len(vs.Values) == len(vs.Names):
			c.defs[v] = append(c.defs[v], def{expr: vs.Values[i]})
		case len(vs.Values) == 0 && c.strs.embedded(v) == nil:
			c.defs[v] = append(c.defs[v], def{expr: emptyString})
		default:
			c.defs[v] = append(c.defs[v], def{})
		}
	}
}

var emptyString = &ast.BasicLit{Kind: token.STRING, Value: `""`}

// bindLiterals records function literals bound to a new local variable
// (f := func(…) {…}): their parameters are followed like a function's,
// and their calls judged.
func (c *checker) bindLiterals(as *ast.AssignStmt) {
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
		v, ok := c.pass.TypesInfo.Defs[id].(*types.Var)
		if !ok {
			continue
		}
		sig, ok := c.pass.TypesInfo.TypeOf(lit).(*types.Signature)
		if !ok {
			continue
		}
		fi := &funcInfo{sig: sig, lit: lit, v: v}
		c.litFuncs[v] = fi
		c.litOf[lit] = fi
		c.funcOrder = append(c.funcOrder, fi)
	}
}

// litUse records uses of bound literals' variables other than calls (and
// their reassignment, which ends the binding).
func (c *checker) litUse(id *ast.Ident, v *types.Var, stack []ast.Node) {
	if c.litFuncs[v] == nil {
		return
	}
	if len(stack) > 0 {
		if call, ok := stack[len(stack)-1].(*ast.CallExpr); ok && call.Fun == id {
			return
		}
	}
	c.nonCallVar[v] = true
}

// funcUse records uses of same-package functions other than calls.
func (c *checker) funcUse(id *ast.Ident, fn *types.Func, stack []ast.Node) {
	if fn.Pkg() != c.pass.Pkg {
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
	c.nonCallUse[fn.Origin()] = true
}

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// call records sink calls (direct ones, and calls of wrappers in other
// packages), calls of same-package functions that may be wrappers, and
// query builders.
func (c *checker) call(call *ast.CallExpr, stack []ast.Node) {
	callee := typeutil.Callee(c.pass.TypesInfo, call)
	if v, ok := callee.(*types.Var); ok && c.litFuncs[v] != nil {
		if c.cur != nil {
			c.cur.pending = append(c.cur.pending, call)
		} else {
			c.pending = append(c.pending, call)
		}
		return
	}
	fn, ok := callee.(*types.Func)
	if !ok {
		return
	}
	c.builders.builderCall(call, fn, stack)
	if i, sink := c.sinks.directSite(call, fn); sink {
		if i >= 0 {
			c.addSite(&site{call: call, query: i})
		}
		return
	}
	if fn.Pkg() == c.pass.Pkg {
		if hasStringParam(fn.Signature()) {
			if c.cur != nil {
				c.cur.pending = append(c.cur.pending, call)
			} else {
				c.pending = append(c.pending, call)
			}
		}
		return
	}
	if ws := c.sinksOf(fn); len(ws) > 0 {
		c.addSite(&site{call: call, query: -1, wrapper: ws})
	}
}

// builderVarCalls returns the calls whose receiver or an argument is the
// strings.Builder or bytes.Buffer variable v (b.WriteString(s),
// fmt.Fprintf(&b, …), helper(&b)), found in v's scope when first needed.
func (c *checker) builderVarCalls(v *types.Var) []*ast.CallExpr {
	if calls, ok := c.builderCalls[v]; ok {
		return calls
	}
	var calls []*ast.CallExpr
	scope := v.Parent()
	for _, f := range c.pass.Files {
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
				if id, ok := x.(*ast.Ident); ok && c.pass.TypesInfo.Uses[id] == v {
					calls = append(calls, call)
					break
				}
			}
			return true
		})
	}
	c.builderCalls[v] = calls
	return calls
}

func (c *checker) addSite(st *site) {
	st.fn = c.cur
	if c.cur != nil {
		c.cur.sites = append(c.cur.sites, st)
	} else {
		c.sites = append(c.sites, st)
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

func isContext(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Context" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context"
}

// settle decides what needed the whole package: package variables, the
// summaries of its functions, the query builders, and with SSA the locals,
// the run-time concatenations and the sinks.
func (c *checker) settle() {
	c.strs.judgeGlobals()
	for _, call := range c.pending {
		c.wrapperSite(call, nil)
	}
	c.pending = nil
	sites := c.sites
	for _, fi := range c.funcOrder {
		if len(fi.pending) > 0 || len(fi.sites) > 0 {
			c.summary(fi)
			sites = append(sites, fi.sites...)
		}
	}
	// A site needs SSA when a query it may send names a fenced table.
	needSites := false
	for _, st := range sites {
		c.siteTemplates(st)
		if anyMentions(st.ts, c.cfg) {
			needSites = true
		}
	}
	c.builders.judgeBuilders()
	needSSA := len(c.strs.locals) > 0 || needSites || c.strs.fragmentTable && c.strs.fragmentWrite
	if needSSA {
		c.runSSA(sites)
	}
}

// static is the value of a constant string expression (the SQL text
// unit's), for builderHost.
func (c *checker) static(e ast.Expr) (string, bool) { return c.strs.static(e) }

// objVar is the variable an identifier denotes or declares, or nil, for
// builderHost.
func (c *checker) objVar(id *ast.Ident) *types.Var { return objVar(c.pass.TypesInfo, id) }
