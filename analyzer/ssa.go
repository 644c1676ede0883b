package analyzer

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"path"
	"sort"
	"strings"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"
)

// ssaState is the SSA form of the package, built only when a candidate
// needs it (runSSA, from the checker's settle), and what it has resolved;
// c is what it reads of the checker's units (ssaInputs).
type ssaState struct {
	c         *ssaInputs
	pkg       *ssa.Package
	constUses map[*ssa.Const][]ssa.Instruction
	stores    map[*ssa.Global][]ssa.Value
	returns   map[*ssa.Function][]ssa.Value
	memo      map[ssa.Value][]template
	busy      map[ssa.Value]bool
	cycles    int                         // cycles cut so far
	steps     int                         // values resolved so far
	callExprs map[token.Pos]*ast.CallExpr // by parenthesis, for messages

	// Whether a value may hold text naming a fenced table (mention.go).
	mentionMemo, mentionSeen map[ssa.Value]bool

	callGraph // call forms (callforms.go)
}

// ssaSite is a site with its SSA call.
type ssaSite struct {
	st   *site
	call ssa.CallInstruction // a call, or a go or defer statement's
}

// root is a string built at run time, judged where the whole string is
// used: a concatenation, fmt.Sprintf, a builder's String, or the call of
// a helper that fills its parameters into a query.
type root struct {
	v   ssa.Value
	pos token.Pos
	raw []template // a helper's returns, before its arguments are filled in
}

// ssaInputs is what SSA reads: the package, the table config, where to
// report, the units whose results it refines (SQL text, sinks, flow,
// wrappers) and the walk's go and defer calls by keyword.
type ssaInputs struct {
	pass     *analysis.Pass
	cfg      *sqlcheck.Config
	out      *findingList
	strs     *sqlStrings
	sinks    *sinkUnit
	flow     *flowState
	wrappers *wrapperState
	goDefer  map[token.Pos]*ast.CallExpr
}

// runSSA builds the package's SSA form and judges with it the locals, the
// run-time strings and the sites (sinks called directly, wrappers, and
// sinks called other than by name: callforms.go).
func runSSA(c *ssaInputs, sites []*site) {
	pass := c.pass
	prog := ssa.NewProgram(pass.Fset, ssa.GlobalDebug)
	for _, p := range pass.Pkg.Imports() {
		prog.CreatePackage(p, nil, nil, true)
	}
	pkg := prog.CreatePackage(pass.Pkg, pass.Files, pass.TypesInfo, false)
	pkg.Build()

	var funcs []*ssa.Function
	var addAnons func(f *ssa.Function)
	addAnons = func(f *ssa.Function) {
		funcs = append(funcs, f)
		for _, a := range f.AnonFuncs {
			addAnons(a)
		}
	}
	if init := pkg.Func("init"); init != nil {
		addAnons(init)
	}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					if sf := prog.FuncValue(fn); sf != nil {
						addAnons(sf)
					}
				}
			}
		}
	}

	s := &ssaState{
		c:         c,
		pkg:       pkg,
		constUses: map[*ssa.Const][]ssa.Instruction{},
		stores:    map[*ssa.Global][]ssa.Value{},
		returns:   map[*ssa.Function][]ssa.Value{},
		memo:      map[ssa.Value][]template{},
		busy:      map[ssa.Value]bool{},

		callGraph: newCallGraph(),
	}
	localIdents := map[ast.Expr]int{}
	for i, l := range c.strs.locals {
		localIdents[l.ident] = i
	}
	localVals := make([]ssa.Value, len(c.strs.locals))
	siteCalls := map[token.Pos]*site{}
	for _, st := range sites {
		if st.flow || anyMentions(st.ts, c.cfg) {
			siteCalls[st.call.Lparen] = st
		}
	}
	var ssaSites []ssaSite
	var roots []root

	var ops []*ssa.Value
	for _, fn := range funcs {
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				switch in := instr.(type) {
				case *ssa.DebugRef:
					if i, ok := localIdents[in.Expr]; ok {
						localVals[i] = in.X
					}
					continue
				case *ssa.Store:
					if g, ok := in.Addr.(*ssa.Global); ok && g.Pkg == pkg {
						s.stores[g] = append(s.stores[g], in.Val)
					}
				case *ssa.Return:
					if len(in.Results) > 0 {
						s.returns[fn] = append(s.returns[fn], in.Results[0])
					}
				case *ssa.BinOp:
					if in.Op == token.ADD && isString(in.Type()) && !c.strs.astRoots[in.Pos()] {
						roots = append(roots, root{v: in, pos: in.Pos()})
					}
				case *ssa.Go, *ssa.Defer:
					ci := in.(ssa.CallInstruction)
					if call := c.goDefer[in.Pos()]; call != nil {
						if st, ok := siteCalls[call.Lparen]; ok && s.matches(ci, st) {
							ssaSites = append(ssaSites, ssaSite{st, ci})
						}
					}
					s.calls = append(s.calls, ci)
				case *ssa.Call:
					if st, ok := siteCalls[in.Pos()]; ok && s.matches(in, st) {
						ssaSites = append(ssaSites, ssaSite{st, in})
					}
					s.calls = append(s.calls, in)
					switch {
					case isSSASprintf(in):
						if !c.strs.astRoots[in.Pos()] {
							roots = append(roots, root{v: in, pos: in.Pos()})
						}
					case isBuilderMethod(in.Call.StaticCallee(), "String"):
						roots = append(roots, root{v: in, pos: in.Pos()})
					default:
						if raw := s.helperReturns(in); raw != nil {
							if isString(in.Type()) {
								roots = append(roots, root{v: in, pos: in.Pos(), raw: raw})
							} else if x := extract0(in); x != nil {
								roots = append(roots, root{v: x, pos: in.Pos(), raw: raw})
							}
						}
					}
				}
				s.index(instr)
				ops = instr.Operands(ops[:0])
				for _, op := range ops {
					switch k := (*op).(type) {
					case *ssa.Const:
						if k.Value != nil && k.Value.Kind() == constant.String {
							s.constUses[k] = append(s.constUses[k], instr)
						}
					case *ssa.Function:
						s.funcOperand(instr, k)
					}
				}
			}
		}
	}

	// Constants stored in locals: judged alone unless every path uses them
	// as the head (or tail) of a longer string.
	for i, l := range c.strs.locals {
		if v := localVals[i]; v != nil && !s.alone(v, map[ssa.Value]bool{}) {
			continue
		}
		c.out.add(l.expr.Pos(), problemsMessage(l.problems))
	}
	// Strings built at run time from static parts, judged where the whole
	// string is used. A helper's call judges only what its arguments
	// complete: its constant returns were judged at its return statements.
	for _, r := range roots {
		if r.raw == nil && !s.mayMention(r.v) || !s.alone(r.v, map[ssa.Value]bool{}) || s.expectedOnly(r.v) {
			continue
		}
		s.steps = 0
		var ts []template
		if r.raw != nil {
			var filled []template
			for _, t := range r.raw {
				if t.params() && !t.passThrough() {
					filled = append(filled, t)
				}
			}
			ts = s.fill(filled, r.v, 0)
		} else {
			ts = s.resolve(r.v, 0)
		}
		var ps []sqlcheck.Problem
		for _, t := range ts {
			if text, ok := t.static(); ok {
				ps = append(ps, sqlcheck.Check(text, c.cfg)...)
			}
		}
		if len(ps) > 0 {
			c.out.add(r.pos, problemsMessage(ps))
		}
	}
	// Sinks. A direct sink's static alternatives were judged where they
	// were built; a wrapper's are judged here when it adds text.
	for _, k := range ssaSites {
		s.judge(k)
	}
	// Sinks reached by other call forms.
	s.judgeForms()
}

// matches checks that the SSA call is the recorded AST call.
func (s *ssaState) matches(call ssa.CallInstruction, st *site) bool {
	cc := call.Common()
	n := len(st.call.Args)
	if !cc.IsInvoke() && cc.Signature().Recv() != nil {
		n++
	}
	return len(cc.Args) == n || st.call.Ellipsis.IsValid() || cc.Signature().Variadic()
}

// arg returns the SSA value of the call's argument for parameter i.
func arg(call *ssa.Call, i int) ssa.Value { return argOf(&call.Call, i) }

// argOf is arg for any call instruction's common part.
func argOf(cc *ssa.CallCommon, i int) ssa.Value {
	if !cc.IsInvoke() && cc.Signature().Recv() != nil {
		i++ // static method call: the receiver is Args[0]
	}
	sig := cc.Signature()
	if sig.Variadic() && i >= sig.Params().Len()-1+boolInt(!cc.IsInvoke() && sig.Recv() != nil) {
		return nil
	}
	if i < len(cc.Args) {
		return cc.Args[i]
	}
	return nil
}

// queryArg returns the SSA value of a direct sink's query, parameter i: a
// string, or the value boxed in an any parameter, or in an element of a
// variadic ...any (xorm's Exec(sqlOrArgs ...any)).
func queryArg(cc *ssa.CallCommon, i int) ssa.Value {
	var v ssa.Value
	j := i
	if !cc.IsInvoke() && cc.Signature().Recv() != nil {
		j++ // static method call: the receiver is Args[0]
	}
	sig := cc.Signature()
	last := sig.Params().Len() - 1
	if sig.Variadic() && i >= last {
		v = variadicElem(cc, j-i+last, i-last)
	} else if j < len(cc.Args) {
		v = cc.Args[j]
	}
	if mi, ok := v.(*ssa.MakeInterface); ok {
		v = mi.X
	}
	return v
}

// variadicElem returns the value stored in element k of the slice that SSA
// builds for a variadic call's argument j, or nil.
func variadicElem(cc *ssa.CallCommon, j, k int) ssa.Value {
	if j >= len(cc.Args) {
		return nil
	}
	return sliceElem(cc.Args[j], k, 0)
}

// sliceElem returns the value stored in element k of the slice v: a
// slice of a local array, or append's first operand (a spread
// Exec(append([]any{q}, args...)...)).
func sliceElem(v ssa.Value, k, depth int) ssa.Value {
	if call, ok := v.(*ssa.Call); ok && depth < maxDepth {
		if b, ok := call.Call.Value.(*ssa.Builtin); ok && b.Name() == "append" && len(call.Call.Args) > 0 {
			return sliceElem(call.Call.Args[0], k, depth+1)
		}
	}
	sl, ok := v.(*ssa.Slice)
	if !ok {
		return nil
	}
	alloc, ok := sl.X.(*ssa.Alloc)
	if !ok {
		return nil
	}
	for _, r := range *alloc.Referrers() {
		ia, ok := r.(*ssa.IndexAddr)
		if !ok {
			continue
		}
		if c, ok := ia.Index.(*ssa.Const); !ok || c.Int64() != int64(k) {
			continue
		}
		for _, r := range *ia.Referrers() {
			if st, ok := r.(*ssa.Store); ok && st.Addr == ia {
				return st.Val
			}
		}
	}
	return nil
}

// siteArg returns the SSA value of a wrapper site's argument for
// parameter i. A method expression's call passes the receiver first,
// whether SSA calls the method or a thunk.
func (s *ssaState) siteArg(k ssaSite, i int) ssa.Value {
	if sel, ok := ast.Unparen(k.st.call.Fun).(*ast.SelectorExpr); ok {
		if x := s.c.pass.TypesInfo.Selections[sel]; x != nil && x.Kind() == types.MethodExpr {
			if args := k.call.Common().Args; i+1 < len(args) {
				return args[i+1]
			}
			return nil
		}
	}
	return argOf(k.call.Common(), i)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *ssaState) judge(k ssaSite) {
	c := s.c
	s.steps = 0
	var ts []template
	if k.st.query >= 0 {
		if v := queryArg(k.call.Common(), k.st.query); v != nil {
			ts = s.resolve(v, 0)
		}
	} else {
		for _, w := range k.st.wrapper {
			filled := substitute([]template{w}, func(i int) []template {
				if a := s.siteArg(k, i); a != nil {
					return s.resolve(a, 0)
				}
				return nil
			})
			if w.passThrough() {
				// The argument is the query: its static alternatives
				// were judged where they were built.
				for _, t := range filled {
					if _, ok := t.static(); !ok {
						ts = union(ts, []template{t})
					}
				}
				continue
			}
			ts = union(ts, filled)
		}
	}
	var ps []sqlcheck.Problem
	for _, t := range ts {
		if text, ok := t.static(); ok {
			if k.st.query < 0 {
				ps = append(ps, sqlcheck.Check(text, c.cfg)...)
			}
			continue
		}
		found := sqlcheck.CheckTemplate(t, c.cfg)
		if s.deferred(t, found, k.call.Parent(), k.st.fn) {
			continue // judged at the calls that complete it
		}
		ps = append(ps, found...)
	}
	if len(ps) > 0 {
		c.out.add(s.sitePos(k), problemsMessage(ps))
	}
}

// sitePos is where a site is reported: its query argument, or for a
// wrapper the first argument its queries use that names a fenced table
// (else the first they use).
func (s *ssaState) sitePos(k ssaSite) token.Pos {
	st := k.st
	if st.query >= 0 {
		return st.call.Args[st.query].Pos()
	}
	first := token.NoPos
	for _, w := range st.wrapper {
		for _, p := range w {
			i := p.Param
			if i < 0 {
				i = -i
			}
			if i == 0 {
				continue
			}
			a := callArg(s.c.pass.TypesInfo, st.call, i-1)
			if a == nil {
				continue
			}
			if first == token.NoPos {
				first = a.Pos()
			}
			if v := s.siteArg(k, i-1); v != nil && anyMentions(s.resolve(v, 0), s.c.cfg) {
				return a.Pos()
			}
		}
	}
	if first != token.NoPos {
		return first
	}
	return st.call.Lparen
}

func extract0(call *ssa.Call) ssa.Value {
	for _, r := range *call.Referrers() {
		if x, ok := r.(*ssa.Extract); ok && x.Index == 0 {
			return x
		}
	}
	return nil
}

func isSSASprintf(call *ssa.Call) bool {
	fn := call.Call.StaticCallee()
	return fn != nil && fn.Name() == "Sprintf" && fn.Pkg != nil && fn.Pkg.Pkg.Path() == "fmt" && fn.Signature.Recv() == nil
}

// helperReturns returns what the callee of call returns when it depends
// on its parameters: a function of this package or one with a fact.
func (s *ssaState) helperReturns(call *ssa.Call) []template {
	fn := call.Call.StaticCallee()
	if fn == nil {
		return nil
	}
	var rs []template
	if obj, ok := fn.Object().(*types.Func); ok {
		rs, _ = s.c.wrappers.returnsOf(obj)
	} else if lit, ok := fn.Syntax().(*ast.FuncLit); ok && s.c.wrappers.litOf[lit] != nil {
		rs = s.c.wrappers.summary(s.c.wrappers.litOf[lit]).returns
	}
	for _, t := range rs {
		if t.params() && !t.passThrough() {
			return rs
		}
	}
	return nil // a parameter returned unchanged adds nothing to judge
}

// alone reports whether some use of v takes the string as a whole rather
// than as an operand of a longer concatenation.
func (s *ssaState) alone(v ssa.Value, seen map[ssa.Value]bool) bool {
	if seen[v] {
		return false
	}
	seen[v] = true
	var uses []ssa.Instruction
	if k, ok := v.(*ssa.Const); ok {
		uses = s.constUses[k]
	} else if r := v.Referrers(); r != nil {
		uses = *r
	}
	for _, u := range uses {
		switch u := u.(type) {
		case *ssa.DebugRef:
			continue
		case *ssa.BinOp:
			if u.Op == token.ADD && isString(u.Type()) {
				continue
			}
		case *ssa.Phi:
			if s.alone(u, seen) {
				return true
			}
			continue
		case *ssa.ChangeType:
			if s.alone(u, seen) {
				return true
			}
			continue
		case *ssa.Convert:
			if isString(u.Type()) {
				if s.alone(u, seen) {
					return true
				}
				continue
			}
		case *ssa.Call:
			if isSSASprintf(u) || isBuilderWrite(u) || s.feedsHelper(u, v) {
				continue // judged as part of the longer string
			}
		case *ssa.Store:
			// An argument of fmt.Sprintf is stored into its variadic
			// array; that array feeds the call only.
			if ia, ok := u.Addr.(*ssa.IndexAddr); ok && feedsSprintf(ia) {
				continue
			}
		case *ssa.MakeInterface:
			if feedsSprintfIface(u) {
				continue
			}
		}
		return true
	}
	return false
}

// feedsHelper reports whether v is an argument that a helper's returned
// query uses: the helper's call is judged instead.
func (s *ssaState) feedsHelper(call *ssa.Call, v ssa.Value) bool {
	raw := s.helperReturns(call)
	if raw == nil {
		return false
	}
	for i := 0; i < len(call.Call.Args); i++ {
		if arg(call, i) != v {
			continue
		}
		for _, t := range raw {
			for _, p := range t {
				if p.Param == i+1 {
					return true
				}
			}
		}
	}
	return false
}

func isBuilderWrite(call *ssa.Call) bool {
	return isBuilderMethod(call.Call.StaticCallee(), "WriteString")
}

func feedsSprintfIface(mi *ssa.MakeInterface) bool {
	refs := mi.Referrers()
	if refs == nil || len(*refs) == 0 {
		return false
	}
	for _, r := range *refs {
		st, ok := r.(*ssa.Store)
		if !ok {
			return false
		}
		ia, ok := st.Addr.(*ssa.IndexAddr)
		if !ok || !feedsSprintf(ia) {
			return false
		}
	}
	return true
}

// feedsSprintf reports whether the element address belongs to the variadic
// array of a fmt.Sprintf (or fmt.Fprintf) call.
func feedsSprintf(ia *ssa.IndexAddr) bool {
	alloc, ok := ia.X.(*ssa.Alloc)
	if !ok {
		return false
	}
	for _, r := range *alloc.Referrers() {
		sl, ok := r.(*ssa.Slice)
		if !ok {
			continue
		}
		for _, r2 := range *sl.Referrers() {
			if call, ok := r2.(*ssa.Call); ok && (isSSASprintf(call) || isSSAFprintf(call)) {
				return true
			}
		}
	}
	return false
}

func isSSAFprintf(call *ssa.Call) bool {
	fn := call.Call.StaticCallee()
	return fn != nil && fn.Name() == "Fprintf" && fn.Pkg != nil && fn.Pkg.Pkg.Path() == "fmt"
}

// resolve returns the alternative values of a string as templates.
func (s *ssaState) resolve(v ssa.Value, depth int) []template {
	if ts, ok := s.memo[v]; ok {
		return ts
	}
	if depth > maxDepth || s.steps > maxSteps {
		return holeTemplate
	}
	if s.busy[v] {
		s.cycles++
		return s.cycle(v)
	}
	s.steps++
	s.busy[v] = true
	before := s.cycles
	ts := s.holeName(v, s.resolve0(v, depth+1))
	delete(s.busy, v)
	if s.cycles == before {
		// A value resolved across a cut cycle depends on where the walk
		// entered the cycle: do not reuse it.
		s.memo[v] = ts
	}
	return ts
}

func (s *ssaState) resolve0(v ssa.Value, depth int) []template {
	c := s.c
	switch x := v.(type) {
	case *ssa.Const:
		if x.Value == nil {
			if isString(x.Type()) {
				return []template{{}}
			}
			return holeTemplate
		}
		if x.Value.Kind() == constant.String {
			return textTemplate(constant.StringVal(x.Value))
		}
	case *ssa.Parameter:
		if i := s.paramIndex(x); i >= 0 {
			return namedParam(i, x.Name())
		}
	case *ssa.BinOp:
		if x.Op == token.ADD && isString(x.Type()) {
			return concat(s.resolve(x.X, depth), s.resolve(x.Y, depth))
		}
	case *ssa.Phi:
		var out []template
		for _, e := range x.Edges {
			out = union(out, s.resolve(e, depth))
		}
		return out
	case *ssa.ChangeType:
		return s.resolve(x.X, depth)
	case *ssa.Convert:
		if stringish(x.X.Type()) {
			return s.resolve(x.X, depth)
		}
	case *ssa.Slice:
		if stringish(x.X.Type()) {
			return edited(s.resolve(x.X, depth), c.cfg)
		}
	case *ssa.UnOp:
		if ts, ok := s.travelled(x, depth); ok {
			return ts
		}
		if x.Op == token.MUL {
			switch p := x.X.(type) {
			case *ssa.Alloc, *ssa.FreeVar:
				if ts, ok := s.captured(p, x.Parent(), depth); ok {
					return ts
				}
			case *ssa.FieldAddr:
				if ts, ok := s.sentField(p.X, p.Field, x.Parent(), depth); ok {
					return ts
				}
			}
		}
		if ia, ok := x.X.(*ssa.IndexAddr); ok && x.Op == token.MUL {
			if vals, ok := literalElems(ia); ok {
				var out []template
				for _, e := range vals {
					out = union(out, s.resolve(e, depth))
				}
				return out
			}
		}
		if g, ok := x.X.(*ssa.Global); ok && x.Op == token.MUL {
			if v, ok := g.Object().(*types.Var); ok {
				if e := c.strs.embedded(v); e != nil && e.text != "" {
					return textTemplate(e.text)
				}
			}
			if len(s.stores[g]) > 0 {
				var out []template
				for _, st := range s.stores[g] {
					out = union(out, s.resolveIn(st, x.Parent(), depth))
				}
				return out
			}
		}
	case *ssa.Index:
		if u, ok := x.X.(*ssa.UnOp); ok && u.Op == token.MUL {
			if alloc, ok := u.X.(*ssa.Alloc); ok {
				if vals, ok := allocElems(alloc); ok {
					var out []template
					for _, e := range vals {
						out = union(out, s.resolve(e, depth))
					}
					return out
				}
			}
		}
	case *ssa.Extract:
		if call, ok := x.Tuple.(*ssa.Call); ok && x.Index == 0 {
			return s.resolveCall(call, depth)
		}
		if x.Index == 0 {
			if ts, ok := s.travelled(x.Tuple, depth); ok {
				return ts
			}
		}
	case *ssa.Lookup:
		if ts, ok := s.travelled(x, depth); ok {
			return ts
		}
	case *ssa.Field:
		if ts, ok := s.sentField(x.X, x.Field, x.Parent(), depth); ok {
			return ts
		}
	case *ssa.Call:
		return s.resolveCall(x, depth)
	}
	return holeTemplate
}

// literalElems returns the values stored into the elements of the local
// array (or slice literal) that ia indexes, when nothing else may write
// them: the elements of a range over []string{…}.
func literalElems(ia *ssa.IndexAddr) ([]ssa.Value, bool) {
	alloc, ok := indexedAlloc(ia)
	if !ok {
		return nil, false
	}
	return allocElems(alloc)
}

// indexedAlloc is the local array that ia indexes, directly or through a
// slice of it.
func indexedAlloc(ia *ssa.IndexAddr) (*ssa.Alloc, bool) {
	base := ia.X
	if sl, ok := base.(*ssa.Slice); ok {
		base = sl.X
	}
	alloc, ok := base.(*ssa.Alloc)
	return alloc, ok
}

// allocElems returns the values stored into the elements of a local array
// that is only written by element stores and read.
func allocElems(alloc *ssa.Alloc) ([]ssa.Value, bool) {
	if _, ok := alloc.Type().(*types.Pointer).Elem().Underlying().(*types.Array); !ok {
		return nil, false
	}
	var vals []ssa.Value
	for _, r := range *alloc.Referrers() {
		switch r := r.(type) {
		case *ssa.IndexAddr:
			for _, r2 := range *r.Referrers() {
				switch r2 := r2.(type) {
				case *ssa.Store:
					if r2.Addr == r {
						vals = append(vals, r2.Val)
					}
				case *ssa.UnOp, *ssa.DebugRef:
				default:
					return nil, false
				}
			}
		case *ssa.Slice:
			for _, r2 := range *r.Referrers() {
				switch r2 := r2.(type) {
				case *ssa.IndexAddr:
					for _, r3 := range *r2.Referrers() {
						if _, ok := r3.(*ssa.UnOp); !ok {
							if _, ok := r3.(*ssa.DebugRef); !ok {
								return nil, false
							}
						}
					}
				case *ssa.DebugRef:
				default:
					if _, ok := r2.(*ssa.Call); ok && isLen(r2.(*ssa.Call)) {
						continue
					}
					return nil, false
				}
			}
		case *ssa.DebugRef, *ssa.UnOp:
		default:
			return nil, false
		}
	}
	return vals, len(vals) > 0
}

func isLen(call *ssa.Call) bool {
	b, ok := call.Call.Value.(*ssa.Builtin)
	return ok && b.Name() == "len"
}

// paramIndex is the index of a string parameter of a declared function
// (receiver excluded) or of a bound literal, or -1.
func (s *ssaState) paramIndex(p *ssa.Parameter) int {
	fn := p.Parent()
	_, named := fn.Object().(*types.Func)
	_, lit := fn.Syntax().(*ast.FuncLit)
	if !named && !lit || fn.Signature.Recv() != nil && fn.Params[0] == p {
		return -1
	}
	if !isString(p.Type()) {
		return -1
	}
	for i, q := range fn.Params {
		if q == p {
			if fn.Signature.Recv() != nil {
				i--
			}
			if fn.Signature.Variadic() && i == fn.Signature.Params().Len()-1 {
				return -1
			}
			return i
		}
	}
	return -1
}

func (s *ssaState) resolveCall(x *ssa.Call, depth int) []template {
	c := s.c
	fn := x.Call.StaticCallee()
	switch {
	case isSSASprintf(x):
		return s.sprintf(x.Call.Args[0], x.Call.Args[1], depth)
	case isBuilderMethod(fn, "String") && len(x.Call.Args) == 1:
		return s.builder(x.Call.Args[0], x, depth)
	}
	if marker, ok := sqlcSliceSSA(x); ok {
		return expandSlice(s.resolve(x.Call.Args[0], depth), marker)
	}
	if fn != nil {
		if obj, ok := fn.Object().(*types.Func); ok {
			if i := identityArg(obj); i >= 0 {
				if a := arg(x, i); a != nil {
					return s.resolve(a, depth)
				}
			}
			if text, ok := s.embedRead(x, obj); ok {
				return textTemplate(text)
			}
			if ts, ok := s.join(x, obj, depth); ok {
				return ts
			}
			if fn.Pkg == s.pkg && len(s.returns[fn]) > 0 && stringish(resultType(fn.Signature.Results())) {
				var rs []template
				for _, r := range s.returns[fn] {
					rs = union(rs, s.resolve(r, depth))
				}
				return s.fillCall(rs, x, depth)
			}
			if obj.Pkg() != c.pass.Pkg {
				if rs, ok := c.wrappers.returnsOf(obj); ok {
					return s.fillCall(rs, x, depth)
				}
			}
		}
	}
	// An unknown function of a query: an edit.
	if !stringish(resultType(x.Type())) {
		return holeTemplate
	}
	var args []template
	for _, a := range x.Call.Args {
		if stringish(a.Type()) {
			args = union(args, s.resolve(a, depth))
		}
	}
	return edited(args, c.cfg)
}

// fillCall fills the parameter holes of a callee's templates with the
// call's arguments.
func (s *ssaState) fillCall(ts []template, call *ssa.Call, depth int) []template {
	return substitute(ts, func(i int) []template {
		if a := arg(call, i); a != nil {
			return s.resolve(a, depth)
		}
		return nil
	})
}

// fill fills a helper root's templates: v is the call, or its Extract.
func (s *ssaState) fill(ts []template, v ssa.Value, depth int) []template {
	if x, ok := v.(*ssa.Extract); ok {
		v = x.Tuple
	}
	call, ok := v.(*ssa.Call)
	if !ok {
		return nil
	}
	return s.fillCall(ts, call, depth)
}

// embedRead is sqlStrings.embedRead on SSA: fsys.ReadFile("name") of an
// embedded file system.
func (s *ssaState) embedRead(call *ssa.Call, fn *types.Func) (string, bool) {
	if fn.Name() != "ReadFile" || fn.Pkg() == nil {
		return "", false
	}
	var fsys, name ssa.Value
	switch {
	case fn.Pkg().Path() == "embed" && len(call.Call.Args) == 2:
		fsys, name = call.Call.Args[0], call.Call.Args[1]
	case fn.Pkg().Path() == "io/fs" && len(call.Call.Args) == 2:
		fsys, name = call.Call.Args[0], call.Call.Args[1]
		if mi, ok := fsys.(*ssa.MakeInterface); ok {
			fsys = mi.X
		}
	default:
		return "", false
	}
	if u, ok := fsys.(*ssa.UnOp); ok && u.Op == token.MUL {
		fsys = u.X
	}
	g, ok := fsys.(*ssa.Global)
	k, ok2 := name.(*ssa.Const)
	if !ok || !ok2 || k.Value == nil || k.Value.Kind() != constant.String {
		return "", false
	}
	v, _ := g.Object().(*types.Var)
	e := s.c.strs.embedded(v)
	if e == nil {
		return "", false
	}
	text, ok := e.files[path.Clean(constant.StringVal(k.Value))]
	return text, ok
}

// cycle is the value of a phi met again while resolving it: a loop that
// extends a string. It is one of the phi's constant entries (or anything)
// followed by what the loop added, unknown here.
func (s *ssaState) cycle(v ssa.Value) []template {
	phi, ok := v.(*ssa.Phi)
	if !ok {
		return holeTemplate
	}
	var out []template
	for _, e := range phi.Edges {
		if k, ok := e.(*ssa.Const); ok && k.Value != nil && k.Value.Kind() == constant.String {
			out = union(out, []template{{{Text: constant.StringVal(k.Value)}, {Hole: true}}})
		}
	}
	return union(out, holeTemplate)
}

// sprintf builds the templates of a fmt.Sprintf call: the format's text,
// each verb replaced by its argument when known, else by a hole.
func (s *ssaState) sprintf(format, args ssa.Value, depth int) []template {
	formats := s.resolve(format, depth)
	vals, ok := varargs(args)
	var out []template
	for _, f := range formats {
		text, static := f.static()
		if !static {
			out = union(out, []template{f}) // keep the fragments, holes for verbs
			continue
		}
		out = union(out, formatTemplates(text, ok, func(i int, spec string, verb byte) []template {
			if i >= len(vals) {
				return holeTemplate
			}
			return s.verb(spec, verb, vals[i], depth)
		}))
	}
	return out
}

// varargs recovers the values passed to a variadic ...any parameter.
func varargs(v ssa.Value) ([]ssa.Value, bool) {
	if k, ok := v.(*ssa.Const); ok && k.IsNil() {
		return nil, true
	}
	sl, ok := v.(*ssa.Slice)
	if !ok {
		return nil, false
	}
	alloc, ok := sl.X.(*ssa.Alloc)
	if !ok {
		return nil, false
	}
	arr, ok := alloc.Type().(*types.Pointer).Elem().Underlying().(*types.Array)
	if !ok {
		return nil, false
	}
	vals := make([]ssa.Value, arr.Len())
	for _, r := range *alloc.Referrers() {
		ia, ok := r.(*ssa.IndexAddr)
		if !ok {
			continue
		}
		k, ok := ia.Index.(*ssa.Const)
		if !ok {
			return nil, false
		}
		i := k.Int64()
		for _, r2 := range *ia.Referrers() {
			if st, ok := r2.(*ssa.Store); ok && st.Addr == ia && i >= 0 && int(i) < len(vals) {
				val := st.Val
				if mi, ok := val.(*ssa.MakeInterface); ok {
					val = mi.X
				}
				vals[i] = val
			}
		}
	}
	return vals, true
}

func (s *ssaState) verb(spec string, verb byte, v ssa.Value, depth int) []template {
	if v == nil {
		return holeTemplate
	}
	if k, ok := v.(*ssa.Const); ok && k.Value != nil {
		if gv, ok := goValue(k.Value, k.Type()); ok {
			return textTemplate(fmt.Sprintf("%"+spec+string(verb), gv))
		}
		return holeTemplate
	}
	if intVerb(spec, verb, v.Type()) {
		return textTemplate("0") // an integer cannot inject SQL: any literal stands for it
	}
	if !isString(v.Type()) || (verb != 's' && verb != 'v') || spec != "" {
		return holeTemplate
	}
	if hasMethods(v.Type()) {
		return holeTemplate // a String method decides the text
	}
	return s.resolve(v, depth)
}

// sprintf is fmt.Sprintf, named for the static evaluation of constant
// format calls.
func sprintf(format string, args []any) string { return fmt.Sprintf(format, args...) }

// isBuilderMethod reports whether fn is the named method of
// *strings.Builder or *bytes.Buffer.
func isBuilderMethod(fn *ssa.Function, name string) bool {
	if fn == nil || fn.Name() != name || fn.Signature.Recv() == nil {
		return false
	}
	return isBuilderType(fn.Signature.Recv().Type())
}

func isBuilderType(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	path, name := n.Obj().Pkg().Path(), n.Obj().Name()
	return path == "strings" && name == "Builder" || path == "bytes" && name == "Buffer"
}

// builderEvent is something that happens to a builder at one instruction:
// a write of one of ts, a reset, or an escape (the builder goes where
// fencelint does not follow: it may be written there).
type builderEvent struct {
	block *ssa.BasicBlock
	index int
	ts    []template
	reset bool
}

// builder returns what a strings.Builder or bytes.Buffer r holds when
// read by the String call at: every possible content, following the
// control flow from the builder's allocation. A builder written inside a
// loop, or not allocated here, is modelled by its writes in source order
// followed by a hole.
func (s *ssaState) builder(r ssa.Value, at *ssa.Call, depth int) []template {
	refs := r.Referrers()
	if refs == nil {
		return holeTemplate
	}
	var evs []builderEvent
	index := map[ssa.Instruction]int{}
	indexOf := func(in ssa.Instruction) int {
		if i, ok := index[in]; ok {
			return i
		}
		for i, x := range in.Block().Instrs {
			index[x] = i
		}
		return index[in]
	}
	add := func(in ssa.Instruction, ts []template, reset bool) {
		evs = append(evs, builderEvent{in.Block(), indexOf(in), ts, reset})
	}
	for _, ref := range *refs {
		switch u := ref.(type) {
		case *ssa.Call:
			if u == at {
				continue
			}
			fn := u.Call.StaticCallee()
			switch {
			case isBuilderMethod(fn, "WriteString") && len(u.Call.Args) == 2 && u.Call.Args[0] == r:
				add(u, s.resolve(u.Call.Args[1], depth), false)
			case (isBuilderMethod(fn, "WriteByte") || isBuilderMethod(fn, "WriteRune")) && len(u.Call.Args) == 2:
				if k, ok := u.Call.Args[1].(*ssa.Const); ok && k.Value != nil && k.Value.Kind() == constant.Int {
					n, _ := constant.Int64Val(k.Value)
					add(u, textTemplate(string(rune(n))), false)
				} else {
					add(u, holeTemplate, false)
				}
			case isBuilderMethod(fn, "Reset"):
				add(u, nil, true)
			case fn != nil && fn.Signature.Recv() != nil && isBuilderType(fn.Signature.Recv().Type()) &&
				fn.Name() != "Write" && fn.Name() != "ReadFrom" && fn.Name() != "Truncate":
				// String, Len, Grow, Cap, …: no content added.
			default:
				add(u, holeTemplate, false) // Write, or a helper that may write
			}
		case *ssa.MakeInterface:
			for _, ref2 := range *u.Referrers() {
				call, ok := ref2.(*ssa.Call)
				if !ok {
					add(ref2, holeTemplate, false)
					continue
				}
				if isSSAFprintf(call) && len(call.Call.Args) == 3 && call.Call.Args[0] == u {
					add(call, s.sprintf(call.Call.Args[1], call.Call.Args[2], depth), false)
				} else if ln, ok := isSSAFprint(call); ok && len(call.Call.Args) == 2 && call.Call.Args[0] == u {
					add(call, s.fprint(call.Call.Args[1], ln, depth), false)
				} else {
					add(call, holeTemplate, false)
				}
			}
		case *ssa.DebugRef:
		default:
			add(u, holeTemplate, false)
		}
	}
	alloc, ok := r.(*ssa.Alloc)
	if ok {
		for _, e := range evs {
			if inCycle(e.block) {
				ok = false
				break
			}
		}
	}
	if !ok {
		sort.Slice(evs, func(i, j int) bool {
			if evs[i].block != evs[j].block {
				return evs[i].block.Index < evs[j].block.Index
			}
			return evs[i].index < evs[j].index
		})
		out := []template{{}}
		for _, e := range evs {
			if e.reset {
				out = []template{{}}
				continue
			}
			out = concat(out, e.ts)
		}
		return concat(out, holeTemplate)
	}
	return builderFlow(alloc, indexOf(alloc), at, indexOf(at), evs)
}

// builderFlow propagates the possible contents of a builder through the
// blocks from its allocation to the String call, whose writes sit outside
// cycles.
func builderFlow(alloc *ssa.Alloc, allocIdx int, at *ssa.Call, atIdx int, evs []builderEvent) []template {
	byBlock := map[*ssa.BasicBlock][]builderEvent{}
	for _, e := range evs {
		byBlock[e.block] = append(byBlock[e.block], e)
	}
	for _, es := range byBlock {
		sort.Slice(es, func(i, j int) bool { return es[i].index < es[j].index })
	}
	start, target := alloc.Block(), at.Block()
	in := map[*ssa.BasicBlock][]template{start: {{}}}
	seen := map[*ssa.BasicBlock]map[string]bool{start: {"": true}}
	var result []template
	work := []*ssa.BasicBlock{start}
	for steps := 0; len(work) > 0 && steps < maxSteps; steps++ {
		b := work[0]
		work = work[1:]
		state := in[b]
		from := -1
		if b == start {
			from = allocIdx
		}
		to := len(b.Instrs)
		if b == target && (b != start || atIdx > allocIdx) {
			to = atIdx
		}
		for _, e := range byBlock[b] {
			if e.index <= from || e.index >= to {
				continue
			}
			if e.reset {
				state = []template{{}}
			} else {
				state = concat(state, e.ts)
			}
		}
		if b == target && to == atIdx {
			result = union(result, state)
			continue
		}
		for _, succ := range b.Succs {
			if seen[succ] == nil {
				seen[succ] = map[string]bool{}
			}
			grew := false
			for _, t := range state {
				k := templateKey(t)
				if !seen[succ][k] && len(in[succ]) < maxTemplates {
					seen[succ][k] = true
					in[succ] = append(in[succ], t)
					grew = true
				}
			}
			if grew {
				work = append(work, succ)
			}
		}
	}
	if result == nil {
		return holeTemplate
	}
	return dedup(result)
}

func templateKey(t template) string {
	var b strings.Builder
	for _, p := range t {
		switch {
		case p.Param > 0:
			fmt.Fprintf(&b, "\x00%d\x00", p.Param)
		case p.Outer != 0:
			fmt.Fprintf(&b, "\x00o%d\x00", p.Outer)
		case p.Hole:
			b.WriteString("\x00?\x00")
		default:
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func dedup(ts []template) []template {
	seen := map[string]bool{}
	out := ts[:0:0]
	for _, t := range ts {
		if k := templateKey(t); !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	return out
}

// inCycle reports whether b can reach itself.
func inCycle(b *ssa.BasicBlock) bool {
	seen := map[*ssa.BasicBlock]bool{}
	stack := append([]*ssa.BasicBlock(nil), b.Succs...)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == b {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, x.Succs...)
	}
	return false
}
