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

// The SQL text unit (sqlStrings): what a query's text is when Go can
// compute it without running the program. It lives in sqltext.go, embed.go
// (SQL in //go:embed files) and fix.go (the suggested fix of an unfenced
// constant UPDATE); a newcomer can read and change it without the rest of
// the checker.
//
// What it judges. Every maximal static string of the package (a string
// constant, a concatenation of constants, fmt.Sprintf of constants, static
// writes into a strings.Builder or bytes.Buffer) that mentions a fenced
// table, by its use (context): alone (judged where it stands, with a
// suggested fix when it is the query of a sink call), as a fragment of a
// longer run-time string (judged there by the evaluators), stored in a
// local (SSA decides: locals) or in a package variable (globals, judged by
// judgeGlobals unless only ever a head of longer strings). Text in a
// message (errors.New, log.Printf, …) that the parser could not read is
// prose, not SQL. The files of //go:embed variables are judged at their
// declaration, and their text is what FS.ReadFile returns.
//
// Inputs: the expressions, identifiers and var declarations met by the
// checker's walk, with the walk's stack of enclosing nodes; the package
// (pass) and the configuration of fenced tables; and, through the narrow
// sinkIndexer interface, which argument of a sink call is its query (the
// sinks unit), for the suggested fixes.
//
// Outputs: findings (through the shared findingList), the value of a
// static expression (static, for every other unit), the text of embedded
// files (embedded, embedRead), and what the checker's settle needs: the
// locals and astRoots that SSA must decide, and the lexical evidence
// (mentionTable, mentionWrite, fragmentTable, fragmentWrite) that a
// run-time string may write a fenced table.
//
// How it plugs into the checker: newChecker makes one sqlStrings per pass
// (checker.strs). The walk calls static on each expression (staticExpr
// when it is one), globalUse on each use of a package variable and
// embedDecl on each declaration; settle calls judgeGlobals once.
type sqlStrings struct {
	pass      *analysis.Pass
	cfg       *sqlcheck.Config
	sinks     sinkIndexer
	out       *findingList
	notStatic map[ast.Expr]bool // memo of non-static concatenations

	// Needs SSA to decide.
	locals   []localConst // constants stored in a local variable
	astRoots map[token.Pos]bool

	// Package variables: unexported ones used only as fragments are judged
	// in the longer strings.
	globals    []globalConst
	globalUses map[*types.Var]*useCount

	// The //go:embed variables of the package.
	embeds map[*types.Var]*embedInfo

	// Lexical evidence that a run-time string may write a fenced table.
	mentionTable, mentionWrite bool
	// The same, among strings that may be parts of longer run-time strings.
	fragmentTable, fragmentWrite bool

	// Tests' expectations (expectations.go): whether the file walked is
	// a test file, the findings of SQL in test tables' fields, and the
	// fields some read takes elsewhere than to an expectation's use.
	testFile  bool
	expected  []expectedConst
	fieldUsed map[*types.Var]bool
}

// expectedConst is the finding of SQL in a test table's field.
type expectedConst struct {
	finding finding
	field   *types.Var
}

// sinkIndexer is what the SQL text unit asks of the sinks unit.
type sinkIndexer interface {
	// sinkQueryIndex is the index of the query parameter of a sink, or -1.
	sinkQueryIndex(fn *types.Func) int
}

func newSQLStrings(pass *analysis.Pass, cfg *sqlcheck.Config, sinks sinkIndexer, out *findingList) *sqlStrings {
	return &sqlStrings{
		pass:       pass,
		cfg:        cfg,
		sinks:      sinks,
		out:        out,
		notStatic:  map[ast.Expr]bool{},
		astRoots:   map[token.Pos]bool{},
		globalUses: map[*types.Var]*useCount{},
		embeds:     map[*types.Var]*embedInfo{},
	}
}

// embedded is what the //go:embed variable v holds, or nil.
func (ss *sqlStrings) embedded(v *types.Var) *embedInfo { return ss.embeds[v] }

// judgeGlobals reports the package variables that hold an unfenced
// constant, except unexported ones only ever used as the head of longer
// strings (judged there).
func (ss *sqlStrings) judgeGlobals() {
	for _, g := range ss.globals {
		u := ss.globalUses[g.v]
		if !g.v.Exported() && u != nil && u.all > 0 && u.all == u.fragment {
			continue // only ever the head of longer strings: judged there
		}
		ss.out.add(g.expr.Pos(), problemsMessage(g.problems))
	}
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

// static returns the value of e when it is a static string expression: a
// Go string constant, or a concatenation / fmt.Sprintf whose parts are all
// static. It runs on most nodes, so it avoids the Types map (keyed by
// interface) where a cheaper lookup decides. A constant conversion such as
// State("…") is not static itself: its operand is.
func (ss *sqlStrings) static(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		return ss.constString(x)
	case *ast.Ident:
		return constOf(ss.pass.TypesInfo.Uses[x])
	case *ast.SelectorExpr:
		return constOf(ss.pass.TypesInfo.Uses[x.Sel])
	case *ast.ParenExpr:
		return ss.static(x.X)
	case *ast.BinaryExpr:
		if x.Op != token.ADD || ss.notStatic[x] {
			return "", false
		}
		tv := ss.pass.TypesInfo.Types[x]
		if tv.Value != nil {
			if tv.Value.Kind() == constant.String {
				return constant.StringVal(tv.Value), true
			}
			return "", false
		}
		if tv.Type != nil && isString(tv.Type) {
			if l, ok := ss.static(x.X); ok {
				if r, ok := ss.static(x.Y); ok {
					return l + r, true
				}
			}
		}
		ss.notStatic[x] = true
	case *ast.CallExpr:
		if isSprintf(ss.pass.TypesInfo, x) && !ss.notStatic[x] {
			if s, ok := ss.staticSprintf(x); ok {
				return s, true
			}
			ss.notStatic[x] = true
		}
	}
	return "", false
}

func (ss *sqlStrings) constString(e ast.Expr) (string, bool) {
	if tv := ss.pass.TypesInfo.Types[e]; tv.Value != nil && tv.Value.Kind() == constant.String {
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

// isBuilderWrite reports whether call writes into a strings.Builder or
// bytes.Buffer (WriteString, or fmt.Fprintf to one): its strings are parts
// of the builder's content, judged where that content is used.
func (ss *sqlStrings) isBuilderWrite(call *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(ss.pass.TypesInfo, call).(*types.Func)
	if !ok {
		return false
	}
	sig := fn.Type().(*types.Signature)
	if sig.Recv() != nil {
		return fn.Name() == "WriteString" && isBuilderType(sig.Recv().Type())
	}
	return fn.Name() == "Fprintf" && fn.Pkg() != nil && fn.Pkg().Path() == "fmt" &&
		len(call.Args) > 0 && isBuilderType(ss.pass.TypesInfo.TypeOf(call.Args[0]))
}

func isSprintf(info *types.Info, call *ast.CallExpr) bool {
	fn, ok := typeutil.Callee(info, call).(*types.Func)
	return ok && fn.Name() == "Sprintf" && fn.Pkg() != nil && fn.Pkg().Path() == "fmt"
}

func (ss *sqlStrings) staticSprintf(call *ast.CallExpr) (string, bool) {
	if len(call.Args) == 0 || call.Ellipsis.IsValid() {
		return "", false
	}
	format, ok := ss.static(call.Args[0])
	if !ok {
		return "", false
	}
	args := make([]any, 0, len(call.Args)-1)
	for _, a := range call.Args[1:] {
		tv := ss.pass.TypesInfo.Types[a]
		if tv.Value == nil {
			if s, ok := ss.static(a); ok {
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

func (ss *sqlStrings) context(e ast.Expr, stack []ast.Node) (context, *ast.Ident) {
	if len(stack) == 0 {
		return ctxAlone, nil
	}
	switch p := stack[len(stack)-1].(type) {
	case *ast.BinaryExpr:
		if p.Op == token.ADD {
			return ctxFragment, nil
		}
	case *ast.CallExpr:
		if isSprintf(ss.pass.TypesInfo, p) || ss.isBuilderWrite(p) {
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
				return ss.storeContext(p.Lhs[i])
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
				return ss.storeContext(p.Names[i])
			}
		}
	}
	return ctxAlone, nil
}

func (ss *sqlStrings) storeContext(lhs ast.Expr) (context, *ast.Ident) {
	id, ok := ast.Unparen(lhs).(*ast.Ident)
	if !ok {
		return ctxAlone, nil
	}
	if id.Name == "_" {
		return ctxSkip, nil
	}
	v, ok := ss.pass.TypesInfo.ObjectOf(id).(*types.Var)
	if !ok {
		return ctxAlone, nil
	}
	if v.Parent() == ss.pass.Pkg.Scope() {
		return ctxGlobal, id
	}
	return ctxLocal, id
}

func (ss *sqlStrings) staticExpr(e ast.Expr, s string, stack []ast.Node) {
	mentions := ss.cfg.Mentions(s)
	write := ss.cfg.MentionsWrite(s)
	ss.mentionTable = ss.mentionTable || mentions
	ss.mentionWrite = ss.mentionWrite || write
	ctx, id := ss.context(e, stack)
	if ctx == ctxFragment || ctx == ctxLocal || ctx == ctxGlobal {
		ss.fragmentTable = ss.fragmentTable || mentions
		ss.fragmentWrite = ss.fragmentWrite || write
	}
	if !mentions || ctx == ctxFragment || ctx == ctxSkip {
		return
	}
	var field *types.Var
	if ctx == ctxAlone {
		f, ok := ss.expectation(e, stack)
		if ok && f == nil {
			return
		}
		field = f
	}
	var ps []sqlcheck.Problem
	if ctx == ctxAlone && strings.Contains(s, "{{") && ss.templateText(e, stack) {
		ps = sqlcheck.CheckTemplate(templateParts(s), ss.cfg)
	} else {
		ps = sqlcheck.Check(s, ss.cfg)
	}
	if ctx == ctxAlone && len(ps) > 0 && ss.inMessage(e, stack) {
		ps = dropUnprovable(ps)
	}
	if len(ps) == 0 {
		return
	}
	switch ctx {
	case ctxLocal:
		ss.locals = append(ss.locals, localConst{e, id, ps})
	case ctxGlobal:
		ss.globals = append(ss.globals, globalConst{e, ss.pass.TypesInfo.ObjectOf(id).(*types.Var), ps})
	default:
		f := finding{pos: e.Pos(), msg: problemsMessage(ps), fixes: ss.suggestFix(e, s, ps, stack)}
		if field != nil {
			ss.expected = append(ss.expected, expectedConst{f, field})
			return
		}
		ss.out.addFinding(f)
	}
}

// inMessage reports whether e is an argument of a call that formats a
// message (errors.New, fmt.Errorf, log.Printf, t.Fatalf, …).
func (ss *sqlStrings) inMessage(e ast.Expr, stack []ast.Node) bool {
	if len(stack) == 0 {
		return false
	}
	call, ok := stack[len(stack)-1].(*ast.CallExpr)
	if !ok || call.Fun == e {
		return false
	}
	return messageCall(typeutil.Callee(ss.pass.TypesInfo, call))
}

// dropUnprovable drops what was judged by its tokens alone (the parser did
// not read the text): in a message, it is prose.
func dropUnprovable(ps []sqlcheck.Problem) []sqlcheck.Problem {
	out := ps[:0]
	for _, p := range ps {
		if p.Kind != sqlcheck.Unprovable && !p.Unread {
			out = append(out, p)
		}
	}
	return out
}

// globalUse counts the uses of package string variables, and those that
// only extend a longer string.
func (ss *sqlStrings) globalUse(id *ast.Ident, v *types.Var, stack []ast.Node) {
	if v.Pkg() != ss.pass.Pkg || v.Parent() != ss.pass.Pkg.Scope() || !isString(v.Type()) {
		return
	}
	u := ss.globalUses[v]
	if u == nil {
		u = &useCount{}
		ss.globalUses[v] = u
	}
	u.all++
	if ctx, _ := ss.context(id, stack); ctx == ctxFragment {
		u.fragment++
	}
}

// templateText reports whether e is the text given to the Parse method of
// a text/template or html/template Template: its actions are values
// known at run time.
func (ss *sqlStrings) templateText(e ast.Expr, stack []ast.Node) bool {
	call, ok := stack[len(stack)-1].(*ast.CallExpr)
	if !ok || len(call.Args) != 1 || call.Args[0] != e {
		return false
	}
	fn, ok := typeutil.Callee(ss.pass.TypesInfo, call).(*types.Func)
	if !ok || fn.Name() != "Parse" || fn.Pkg() == nil || fn.Signature().Recv() == nil {
		return false
	}
	p := fn.Pkg().Path()
	return p == "text/template" || p == "html/template"
}

// templateParts splits a template's text at its actions ({{…}}), each a
// hole.
func templateParts(s string) []sqlcheck.Part {
	var out []sqlcheck.Part
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			break
		}
		if i > 0 {
			out = append(out, sqlcheck.Part{Text: s[:i]})
		}
		out = append(out, sqlcheck.Part{Hole: true})
		s = s[i+j+2:]
	}
	if s != "" {
		out = append(out, sqlcheck.Part{Text: s})
	}
	return out
}
