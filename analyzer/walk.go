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

// checker is the orchestration of one pass: it walks every file once and
// hands each node to the units that own its concern, settles what needs
// the whole package, exports the facts and collects the findings. It
// judges nothing itself. Its units (issue 20), each a value with its own
// state, documented at the top of its file:
//
//   - strs, sqlStrings (sqltext.go, embed.go, fix.go): the SQL text of
//     constant strings and embedded files, judged where they are used,
//     with the suggested fix of an unfenced constant UPDATE;
//   - sinks, sinkUnit (sinks.go, sqlc.go): which calls send a query, and
//     which argument it is;
//   - flow, flowState (eval.go): where variables get their values, and the
//     text a string expression may hold at run time (the AST evaluator);
//   - wrappers, wrapperState (wrappers.go): functions that send or return
//     a query they are given, their summaries, and the sites of the
//     package;
//   - builders, builderState (builders.go, builders_libs.go, ent.go): query
//     builders rendered to the SQL they would send.
//
// The units ask each other through narrow interfaces (sinkIndexer,
// staticEval, flowText, flowSinks, flowFuncs, wrapperFlow, builderHost),
// which the peer unit implements (builderHost: the checker, by one-line
// delegations). SSA (runSSA, ssa.go, with the call forms of callforms.go)
// is built by settle only when a candidate needs it, and reads the units
// through ssaInputs. Every unit reports into the one findingList.
//
// walkPos is the walk's own state: where it is.
type checker struct {
	pass *analysis.Pass
	cfg  *sqlcheck.Config
	out  *findingList

	strs     *sqlStrings
	sinks    *sinkUnit
	flow     *flowState
	wrappers *wrapperState
	builders *builderState

	walkPos
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
		pass: pass,
		cfg:  o.sql,
		out:  &findingList{},
	}
	c.sinks = newSinkUnit(pass.TypesInfo, o.sinks)
	c.strs = newSQLStrings(pass, o.sql, c.sinks, c.out)
	c.sinks.strs = c.strs
	c.flow = newFlowState(pass, o.sql, c.strs, c.sinks)
	c.wrappers = newWrapperState(pass, o.sql, c.flow)
	c.flow.funcs = c.wrappers
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
		c.strs.testFile = strings.HasSuffix(c.pass.Fset.File(f.Pos()).Name(), "_test.go")
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
					if fi := c.wrappers.litOf[top]; fi != nil && c.cur == fi {
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
				if fi := c.wrappers.funcDecl(n); fi != nil {
					c.cur, c.litDepth = fi, 0
				}
			case *ast.FuncLit:
				if fi := c.wrappers.litOf[n]; fi != nil {
					c.outer = append(c.outer, outerFunc{c.cur, c.litDepth})
					c.cur, c.litDepth = fi, 0
				} else {
					c.litDepth++
				}
			case *ast.FuncType:
				c.flow.funcParams(n, stack, c.cur)
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
				c.flow.assignment(n)
				c.wrappers.bindLiterals(n)
			case *ast.ValueSpec:
				c.flow.valueSpec(n)
			case *ast.RangeStmt:
				c.flow.rangeStmt(n)
			case *ast.ReturnStmt:
				if c.cur != nil && c.litDepth == 0 {
					c.cur.returns = append(c.cur.returns, n)
				}
			case *ast.UnaryExpr:
				c.flow.addressOf(n)
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
						c.wrappers.litUse(n, obj, stack)
					case *types.Func:
						c.wrappers.funcUse(n, obj, stack)
					}
					return false
				case *ast.SelectorExpr:
					c.builders.entBuilder(n)
					c.strs.fieldRead(n, stack)
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

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// call records sink calls (direct ones, and calls of wrappers in other
// packages), calls of same-package functions that may be wrappers, and
// query builders.
func (c *checker) call(call *ast.CallExpr, stack []ast.Node) {
	callee := typeutil.Callee(c.pass.TypesInfo, call)
	if v, ok := callee.(*types.Var); ok && c.wrappers.litBound(v) {
		c.wrappers.pendingCall(call, c.cur)
		return
	}
	fn, ok := callee.(*types.Func)
	if !ok {
		return
	}
	c.builders.builderCall(call, fn, stack)
	if i, sink := c.sinks.directSite(call, fn); sink {
		if i >= 0 {
			c.wrappers.addSite(&site{call: call, query: i}, c.cur)
		}
		return
	}
	c.wrappers.wrapperCall(call, fn, c.cur)
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
	c.strs.judgeExpected()
	sites := c.wrappers.settleSites()
	// A site needs SSA when a query it may send names a fenced table.
	needSites := false
	for _, st := range sites {
		if anyMentions(st.ts, c.cfg) {
			needSites = true
		}
	}
	c.builders.judgeBuilders()
	needSSA := len(c.strs.locals) > 0 || needSites || c.strs.fragmentTable && c.strs.fragmentWrite
	if needSSA {
		runSSA(&ssaInputs{
			pass: c.pass, cfg: c.cfg, out: c.out,
			strs: c.strs, sinks: c.sinks, flow: c.flow, wrappers: c.wrappers,
			goDefer: c.goDefer,
		}, sites)
	}
}

// static is the value of a constant string expression (the SQL text
// unit's), for builderHost.
func (c *checker) static(e ast.Expr) (string, bool) { return c.strs.static(e) }

// objVar is the variable an identifier denotes or declares, or nil, for
// builderHost.
func (c *checker) objVar(id *ast.Ident) *types.Var { return objVar(c.pass.TypesInfo, id) }

// evalExpr is the SQL text a string expression may hold at run time (the
// flow unit's), for builderHost.
func (c *checker) evalExpr(e ast.Expr) ([]template, bool) { return c.flow.evalExpr(e) }

// varDefs are the assignments of a variable seen by the walk (the flow
// unit's), for builderHost.
func (c *checker) varDefs(v *types.Var) []def { return c.flow.varDefs(v) }

// returnsOf is what a function returns as its first result (the wrappers
// unit's), for builderHost.
func (c *checker) returnsOf(fn *types.Func) ([]template, bool) { return c.wrappers.returnsOf(fn) }
