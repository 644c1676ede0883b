package analyzer

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// checker holds the state of one pass.
type checker struct {
	pass     *analysis.Pass
	cfg      *sqlcheck.Config
	findings []finding

	notStatic map[ast.Expr]bool // memo of non-static concatenations

	// Needs SSA to decide.
	locals   []localConst // constants stored in a local variable
	sinks    []sink       // sink calls whose query is not static
	astRoots map[token.Pos]bool

	// Package variables: unexported ones used only as fragments are judged
	// in the longer strings.
	globals    []globalConst
	globalUses map[*types.Var]*useCount

	// Where local string variables get their values, to drop sinks whose
	// query can only be a hole (an unassigned parameter, or a value
	// returned by another package such as Ent's sql.Selector.Query).
	params  map[*types.Var]bool
	assigns map[*types.Var][]bool // per assignment: from another package's call

	// Lexical evidence that a run-time string may write a fenced table.
	mentionTable, mentionWrite bool
	// The same, among strings that may be parts of longer run-time strings.
	fragmentTable, fragmentWrite bool
}

type localConst struct {
	expr     ast.Expr
	ident    *ast.Ident
	problems []sqlcheck.Problem
}

type globalConst struct {
	expr     ast.Expr
	v        *types.Var
	problems []sqlcheck.Problem
}

type useCount struct{ all, fragment int }

type sink struct {
	call  *ast.CallExpr
	query ast.Expr
}

func newChecker(pass *analysis.Pass, cfg *sqlcheck.Config) *checker {
	return &checker{
		pass:       pass,
		cfg:        cfg,
		notStatic:  map[ast.Expr]bool{},
		astRoots:   map[token.Pos]bool{},
		globalUses: map[*types.Var]*useCount{},
		params:     map[*types.Var]bool{},
		assigns:    map[*types.Var][]bool{},
	}
}

func (c *checker) add(pos token.Pos, msg string) {
	c.findings = append(c.findings, finding{pos, msg})
}

// walk visits every file once: maximal static strings, sink calls, Ent
// builder calls and uses of package string variables.
func (c *checker) walk() {
	for _, f := range c.pass.Files {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false // import paths are not expressions
			case *ast.FuncType:
				c.funcParams(n)
				return false // nor are struct tags in parameter lists
			case *ast.Field:
				if n.Tag != nil {
					return false
				}
			case *ast.AssignStmt:
				c.assignment(n)
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					if id, ok := ast.Unparen(n.X).(*ast.Ident); ok {
						if v, ok := c.pass.TypesInfo.Uses[id].(*types.Var); ok {
							c.assigns[v] = append(c.assigns[v], false) // address taken
						}
					}
				}
			case *ast.BasicLit, *ast.Ident, *ast.SelectorExpr, *ast.BinaryExpr, *ast.ParenExpr, *ast.CallExpr:
				e := n.(ast.Expr)
				if s, ok := c.static(e); ok {
					c.staticExpr(e, s, stack)
					if call, ok := e.(*ast.CallExpr); ok {
						c.astRoots[call.Lparen] = true
					} else if be, ok := ast.Unparen(e).(*ast.BinaryExpr); ok && c.pass.TypesInfo.Types[be].Value == nil {
						c.astRoots[be.OpPos] = true
					}
					return false
				}
				switch n := n.(type) {
				case *ast.BasicLit:
					return false
				case *ast.Ident:
					c.globalUse(n, stack)
					return false
				case *ast.SelectorExpr:
					c.entBuilder(n)
				case *ast.CallExpr:
					c.sinkCall(n)
				}
			}
			stack = append(stack, n)
			return true
		})
	}
}

func (c *checker) funcParams(ft *ast.FuncType) {
	if ft.Params == nil {
		return
	}
	for _, f := range ft.Params.List {
		for _, id := range f.Names {
			if v, ok := c.pass.TypesInfo.Defs[id].(*types.Var); ok {
				c.params[v] = true
			}
		}
	}
}

// assignment records, for each local variable assigned, whether the value
// comes from a call of another package's function (not fmt, strings or
// bytes, which build strings from their arguments).
func (c *checker) assignment(as *ast.AssignStmt) {
	for i, lhs := range as.Lhs {
		id, ok := ast.Unparen(lhs).(*ast.Ident)
		if !ok {
			continue
		}
		v, ok := c.pass.TypesInfo.ObjectOf(id).(*types.Var)
		if !ok || v.Parent() == c.pass.Pkg.Scope() || !isString(v.Type()) {
			continue
		}
		rhs := as.Rhs[0]
		if len(as.Rhs) == len(as.Lhs) {
			rhs = as.Rhs[i]
		}
		c.assigns[v] = append(c.assigns[v], as.Tok != token.ADD_ASSIGN && c.foreignCall(rhs))
	}
}

func (c *checker) foreignCall(e ast.Expr) bool {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	fn, ok := typeutil.Callee(c.pass.TypesInfo, call).(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg() == c.pass.Pkg {
		return false
	}
	switch fn.Pkg().Path() {
	case "fmt", "strings", "bytes":
		return false
	}
	return true
}

// opaque reports whether a sink's query can only be a hole: a parameter
// never assigned, or a local only ever set from another package's call.
func (c *checker) opaque(query ast.Expr) bool {
	id, ok := ast.Unparen(query).(*ast.Ident)
	if !ok {
		return false
	}
	v, ok := c.pass.TypesInfo.Uses[id].(*types.Var)
	if !ok || v.Parent() == c.pass.Pkg.Scope() {
		return false
	}
	as := c.assigns[v]
	if c.params[v] {
		return len(as) == 0
	}
	if len(as) == 0 {
		return false
	}
	for _, foreign := range as {
		if !foreign {
			return false
		}
	}
	return true
}

// static returns the value of e when it is a static string expression: a
// Go string constant, or a concatenation / fmt.Sprintf whose parts are all
// static. It runs on most nodes, so it avoids the Types map (keyed by
// interface) where a cheaper lookup decides. A constant conversion such as
// State("…") is not static itself: its operand is.
func (c *checker) static(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		return c.constString(x)
	case *ast.Ident:
		return constOf(c.pass.TypesInfo.Uses[x])
	case *ast.SelectorExpr:
		return constOf(c.pass.TypesInfo.Uses[x.Sel])
	case *ast.ParenExpr:
		return c.static(x.X)
	case *ast.BinaryExpr:
		if x.Op != token.ADD || c.notStatic[x] {
			return "", false
		}
		tv := c.pass.TypesInfo.Types[x]
		if tv.Value != nil {
			if tv.Value.Kind() == constant.String {
				return constant.StringVal(tv.Value), true
			}
			return "", false
		}
		if tv.Type != nil && isString(tv.Type) {
			if l, ok := c.static(x.X); ok {
				if r, ok := c.static(x.Y); ok {
					return l + r, true
				}
			}
		}
		c.notStatic[x] = true
	case *ast.CallExpr:
		if isSprintf(c.pass.TypesInfo, x) && !c.notStatic[x] {
			if s, ok := c.staticSprintf(x); ok {
				return s, true
			}
			c.notStatic[x] = true
		}
	}
	return "", false
}

func (c *checker) constString(e ast.Expr) (string, bool) {
	if tv := c.pass.TypesInfo.Types[e]; tv.Value != nil && tv.Value.Kind() == constant.String {
		return constant.StringVal(tv.Value), true
	}
	return "", false
}

func constOf(obj types.Object) (string, bool) {
	if k, ok := obj.(*types.Const); ok && k.Val().Kind() == constant.String {
		return constant.StringVal(k.Val()), true
	}
	return "", false
}

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// isBuilderWrite reports whether call writes into a strings.Builder or
// bytes.Buffer (WriteString, or fmt.Fprintf to one): its strings are parts
// of the builder's content, judged where that content is used.
func (c *checker) isBuilderWrite(call *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(c.pass.TypesInfo, call).(*types.Func)
	if !ok {
		return false
	}
	sig := fn.Type().(*types.Signature)
	if sig.Recv() != nil {
		return fn.Name() == "WriteString" && isBuilderType(sig.Recv().Type())
	}
	return fn.Name() == "Fprintf" && fn.Pkg() != nil && fn.Pkg().Path() == "fmt" &&
		len(call.Args) > 0 && isBuilderType(c.pass.TypesInfo.TypeOf(call.Args[0]))
}

func isSprintf(info *types.Info, call *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(info, call).(*types.Func)
	return ok && fn.Name() == "Sprintf" && fn.Pkg() != nil && fn.Pkg().Path() == "fmt"
}

func (c *checker) staticSprintf(call *ast.CallExpr) (string, bool) {
	if len(call.Args) == 0 || call.Ellipsis.IsValid() {
		return "", false
	}
	format, ok := c.static(call.Args[0])
	if !ok {
		return "", false
	}
	args := make([]any, 0, len(call.Args)-1)
	for _, a := range call.Args[1:] {
		tv := c.pass.TypesInfo.Types[a]
		if tv.Value == nil {
			if s, ok := c.static(a); ok {
				args = append(args, s)
				continue
			}
			return "", false
		}
		v, ok := goValue(tv.Value, tv.Type)
		if !ok {
			return "", false
		}
		args = append(args, v)
	}
	return sprintf(format, args), true
}

// goValue converts a constant to the value fmt would see at run time. A
// constant of a type with methods (a String method, say) is not static.
func goValue(v constant.Value, t types.Type) (any, bool) {
	if t == nil {
		return nil, false
	}
	t = types.Default(t)
	if types.NewMethodSet(t).Len() > 0 || types.NewMethodSet(types.NewPointer(t)).Len() > 0 {
		return nil, false
	}
	b, ok := t.Underlying().(*types.Basic)
	if !ok {
		return nil, false
	}
	switch {
	case b.Info()&types.IsString != 0:
		return constant.StringVal(v), true
	case b.Info()&types.IsBoolean != 0:
		return constant.BoolVal(v), true
	case b.Kind() == types.Int32: // rune: %c must see a rune
		i, _ := constant.Int64Val(v)
		return int32(i), true
	case b.Kind() == types.Uint8:
		i, _ := constant.Uint64Val(v)
		return uint8(i), true
	case b.Info()&types.IsUnsigned != 0:
		i, exact := constant.Uint64Val(v)
		return i, exact
	case b.Info()&types.IsInteger != 0:
		i, exact := constant.Int64Val(v)
		return i, exact
	case b.Info()&types.IsFloat != 0:
		f, _ := constant.Float64Val(v)
		return f, true
	}
	return nil, false
}

// context is how a maximal static string is used.
type context int

const (
	ctxAlone    context = iota // judged here
	ctxFragment                // part of a longer run-time string
	ctxLocal                   // stored in a local variable: SSA decides
	ctxGlobal                  // stored in a package variable
	ctxSkip                    // a constant declaration, or discarded
)

func (c *checker) context(e ast.Expr, stack []ast.Node) (context, *ast.Ident) {
	if len(stack) == 0 {
		return ctxAlone, nil
	}
	switch p := stack[len(stack)-1].(type) {
	case *ast.BinaryExpr:
		if p.Op == token.ADD {
			return ctxFragment, nil
		}
	case *ast.CallExpr:
		if isSprintf(c.pass.TypesInfo, p) || c.isBuilderWrite(p) {
			return ctxFragment, nil
		}
	case *ast.AssignStmt:
		if p.Tok == token.ADD_ASSIGN {
			return ctxFragment, nil
		}
		if len(p.Lhs) != len(p.Rhs) {
			return ctxAlone, nil
		}
		for i, r := range p.Rhs {
			if r == e {
				return c.storeContext(p.Lhs[i])
			}
		}
	case *ast.ValueSpec:
		if len(stack) >= 2 {
			if gd, ok := stack[len(stack)-2].(*ast.GenDecl); ok && gd.Tok == token.CONST {
				return ctxSkip, nil
			}
		}
		if len(p.Names) != len(p.Values) {
			return ctxAlone, nil
		}
		for i, v := range p.Values {
			if v == e {
				return c.storeContext(p.Names[i])
			}
		}
	}
	return ctxAlone, nil
}

func (c *checker) storeContext(lhs ast.Expr) (context, *ast.Ident) {
	id, ok := ast.Unparen(lhs).(*ast.Ident)
	if !ok {
		return ctxAlone, nil
	}
	if id.Name == "_" {
		return ctxSkip, nil
	}
	v, ok := c.pass.TypesInfo.ObjectOf(id).(*types.Var)
	if !ok {
		return ctxAlone, nil
	}
	if v.Parent() == c.pass.Pkg.Scope() {
		return ctxGlobal, id
	}
	return ctxLocal, id
}

func (c *checker) staticExpr(e ast.Expr, s string, stack []ast.Node) {
	mentions := c.cfg.Mentions(s)
	write := c.cfg.MentionsWrite(s)
	c.mentionTable = c.mentionTable || mentions
	c.mentionWrite = c.mentionWrite || write
	ctx, id := c.context(e, stack)
	if ctx == ctxFragment || ctx == ctxLocal || ctx == ctxGlobal {
		c.fragmentTable = c.fragmentTable || mentions
		c.fragmentWrite = c.fragmentWrite || write
	}
	if !mentions || ctx == ctxFragment || ctx == ctxSkip {
		return
	}
	ps := sqlcheck.Check(s, c.cfg)
	if len(ps) == 0 {
		return
	}
	switch ctx {
	case ctxLocal:
		c.locals = append(c.locals, localConst{e, id, ps})
	case ctxGlobal:
		c.globals = append(c.globals, globalConst{e, c.pass.TypesInfo.ObjectOf(id).(*types.Var), ps})
	default:
		c.add(e.Pos(), problemsMessage(ps))
	}
}

// globalUse counts the uses of package string variables, and those that
// only extend a longer string.
func (c *checker) globalUse(id *ast.Ident, stack []ast.Node) {
	v, ok := c.pass.TypesInfo.Uses[id].(*types.Var)
	if !ok || v.Pkg() != c.pass.Pkg || v.Parent() != c.pass.Pkg.Scope() || !isString(v.Type()) {
		return
	}
	u := c.globalUses[v]
	if u == nil {
		u = &useCount{}
		c.globalUses[v] = u
	}
	u.all++
	if ctx, _ := c.context(id, stack); ctx == ctxFragment {
		u.fragment++
	}
}

// sinkCall records calls of SQL sinks whose query is not static.
func (c *checker) sinkCall(call *ast.CallExpr) {
	fn, ok := typeutil.Callee(c.pass.TypesInfo, call).(*types.Func)
	if !ok || fn.Type().(*types.Signature).Recv() == nil || !sinkName(fn.Name()) {
		return
	}
	i := sinkQueryIndex(fn)
	if i < 0 || i >= len(call.Args) {
		return
	}
	if _, ok := c.static(call.Args[i]); ok {
		return // judged as a constant
	}
	c.sinks = append(c.sinks, sink{call, call.Args[i]})
}

var sinkPrefixes = []string{"Exec", "Query", "Prepare", "MustExec"}

func sinkName(name string) bool {
	for _, p := range sinkPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// sinkQueryIndex returns the index of the query parameter of a SQL sink: a
// method in the Exec/Query/Prepare families whose first parameter, or
// second after a context.Context, is a string. It returns -1 otherwise.
func sinkQueryIndex(fn *types.Func) int {
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return -1
	}
	if !sinkName(fn.Name()) {
		return -1
	}
	params := sig.Params()
	i := 0
	if params.Len() > 0 && isContext(params.At(0).Type()) {
		i = 1
	}
	if params.Len() > i && isString(params.At(i).Type()) && !(sig.Variadic() && i == params.Len()-1) {
		return i
	}
	return -1
}

func isContext(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Context" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context"
}

// settle decides what needed the whole package: package variables, and
// with SSA the locals, the run-time concatenations and the sinks.
func (c *checker) settle() {
	for _, g := range c.globals {
		u := c.globalUses[g.v]
		if !g.v.Exported() && u != nil && u.all > 0 && u.all == u.fragment {
			continue // only ever the head of longer strings: judged there
		}
		c.add(g.expr.Pos(), problemsMessage(g.problems))
	}
	sinks := c.sinks[:0]
	for _, k := range c.sinks {
		if !c.opaque(k.query) {
			sinks = append(sinks, k)
		}
	}
	c.sinks = sinks
	needSSA := len(c.locals) > 0 ||
		len(c.sinks) > 0 && c.mentionTable && c.mentionWrite ||
		c.fragmentTable && c.fragmentWrite
	if needSSA {
		c.runSSA()
	}
}
