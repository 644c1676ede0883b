package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"golang.org/x/tools/go/ssa"
)

// Call forms (issue 20). The walk recognises a sink by the syntax of its
// call: f(…) where f names a function or method. SSA normalises the other
// ways Go calls a function (go and defer statements, method values, bound
// methods passed as values, closures passed to helpers, function-typed
// fields and variables, interface methods), and this file judges them on
// the SSA call instructions, with a call graph built for the package:
//
//   - the callees of a function value are found by following the value
//     back to where it was made: a function, a closure or a bound method
//     (MakeClosure), through phis, locals (also captured ones), unexported
//     struct fields and package variables of the package (every store into
//     them), and the parameters of the package's functions (the arguments
//     of their calls);
//   - the callees of an interface method are the methods of the package's
//     types that implement the interface, and the methods of other
//     packages' types that carry a sink fact;
//   - each callee contributes the queries it sends: a sink's query
//     parameter, a wrapper's summary (or fact), and the queries sent by the
//     new forms in its body (callSinks), filled with the call's arguments.
//
// A query that depends on a parameter of the function holding the call is
// judged at that function's calls when all of them are visible (closed):
// an unexported declared function (or any function of a command) whose
// values, if any, do not escape, or a function literal whose value is
// only called, captured by closures that only call it, or passed to closed
// functions of the package. Otherwise it is judged at the call, where a
// parameter is a hole. The walk's sites use the same rule (ssa.go, judge).

// callGraph is the state of the call forms: the package's calls and what
// its function values and travelling strings may be, indexed once per
// SSA build, and the memos of the judgement.
type callGraph struct {
	calls       []ssa.CallInstruction
	callsOf     map[*ssa.Function][]ssa.CallInstruction
	closures    map[*ssa.Function][]*ssa.MakeClosure
	funcUses    map[*ssa.Function][]ssa.Instruction
	fieldStores map[*types.Var][]ssa.Value
	fnSinks     map[*ssa.Function][]template
	forms       map[formKey][]template
	closedLits  map[*ssa.Function]bool
	impls       map[*types.Func][]callee
	objUses     map[*types.Func][]objUse // declared functions used as values
	closedFuncs map[*types.Func]bool
	methodFacts map[string][]*types.Func // other packages' methods with a sink fact, by name

	// Strings that travel: sent on channels (by element type), stored
	// into maps (by map type); structs (or pointers to them) sent on
	// channels, whose string fields travel with them (travel.go).
	sends       map[string][]ssa.Value
	mapStores   map[string][]*ssa.MapUpdate
	structSends map[string][]ssa.Value

	// The functions that some call of the package may reach
	// (unprovable.go), computed on first use.
	reached map[*ssa.Function]bool
}

func newCallGraph() callGraph {
	return callGraph{
		callsOf:     map[*ssa.Function][]ssa.CallInstruction{},
		closures:    map[*ssa.Function][]*ssa.MakeClosure{},
		funcUses:    map[*ssa.Function][]ssa.Instruction{},
		fieldStores: map[*types.Var][]ssa.Value{},
		fnSinks:     map[*ssa.Function][]template{},
		forms:       map[formKey][]template{},
		closedLits:  map[*ssa.Function]bool{},
		impls:       map[*types.Func][]callee{},
		objUses:     map[*types.Func][]objUse{},
		closedFuncs: map[*types.Func]bool{},
		sends:       map[string][]ssa.Value{},
		mapStores:   map[string][]*ssa.MapUpdate{},
		structSends: map[string][]ssa.Value{},
	}
}

// isStructish reports whether t is a struct or a pointer to one.
func isStructish(t types.Type) bool {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	_, ok := t.Underlying().(*types.Struct)
	return ok
}

// fieldOf is the struct field that a FieldAddr or Field instruction
// reaches.
func fieldOf(x ssa.Value, i int) *types.Var {
	t := x.Type()
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok || i >= st.NumFields() {
		return nil
	}
	return st.Field(i)
}

// index records what the call graph needs about one instruction.
func (s *ssaState) index(instr ssa.Instruction) {
	switch in := instr.(type) {
	case *ssa.Store:
		if fa, ok := in.Addr.(*ssa.FieldAddr); ok {
			if f := fieldOf(fa.X, fa.Field); f != nil && isSig(f.Type().Underlying()) {
				s.fieldStores[f] = append(s.fieldStores[f], in.Val)
			}
		}
	case *ssa.Send:
		if stringish(in.X.Type()) {
			s.sends[chanKey(in.Chan.Type())] = append(s.sends[chanKey(in.Chan.Type())], in.X)
		} else if isStructish(in.X.Type()) {
			s.structSends[chanKey(in.Chan.Type())] = append(s.structSends[chanKey(in.Chan.Type())], in.X)
		}
	case *ssa.MapUpdate:
		if m, ok := in.Map.Type().Underlying().(*types.Map); ok && stringish(m.Elem()) {
			k := types.TypeString(m, nil)
			s.mapStores[k] = append(s.mapStores[k], in)
		}
	case *ssa.MakeClosure:
		if fn, ok := in.Fn.(*ssa.Function); ok {
			s.closures[fn] = append(s.closures[fn], in)
			if obj, ok := fn.Object().(*types.Func); ok && fn.Parent() == nil && obj.Pkg() == s.c.pass.Pkg {
				s.objUses[obj.Origin()] = append(s.objUses[obj.Origin()], objUse{v: in}) // a bound method
			}
		}
	case ssa.CallInstruction:
		if cc := in.Common(); !cc.IsInvoke() {
			if fn := cc.StaticCallee(); fn != nil {
				s.callsOf[fn] = append(s.callsOf[fn], in)
			}
		}
	}
}

// funcOperand records a function used as a value by instr (not called by
// it): a literal, or a declared function of the package (or its thunk).
func (s *ssaState) funcOperand(instr ssa.Instruction, k *ssa.Function) {
	if ci, ok := instr.(ssa.CallInstruction); ok && ci.Common().Value == k {
		return // a call, not a use as a value
	}
	if mc, ok := instr.(*ssa.MakeClosure); ok && mc.Fn == k {
		return // the closure is the value (index)
	}
	if k.Parent() != nil {
		s.funcUses[k] = append(s.funcUses[k], instr)
	} else if obj, ok := k.Object().(*types.Func); ok && obj.Pkg() == s.c.pass.Pkg {
		s.objUses[obj.Origin()] = append(s.objUses[obj.Origin()], objUse{instr, k})
	}
}

// callee is one function a call may reach: an SSA function (declared,
// literal, bound method or thunk) and, when it has one, the declared
// function or method it stands for; or only a method of another package,
// known by its fact.
type callee struct {
	fn        *ssa.Function
	obj       *types.Func
	recvFirst bool // the call's first argument is the method's receiver
}

// callees returns the functions the call may reach, and whether the walk
// already judges the call by its syntax (a call of a named function or
// method, or of a bound literal).
func (s *ssaState) callees(ci ssa.CallInstruction) ([]callee, bool) {
	cc := ci.Common()
	c := s.c
	if cc.IsInvoke() {
		if c.sinks.sinkQueryIndex(cc.Method) >= 0 {
			return nil, true
		}
		return s.implementations(cc.Value.Type(), cc.Method), false
	}
	if fn, ok := cc.Value.(*ssa.Function); ok {
		if obj, ok := fn.Object().(*types.Func); ok {
			return []callee{{fn: fn, obj: obj, recvFirst: obj.Signature().Recv() != nil}}, true
		}
		if lit, ok := fn.Syntax().(*ast.FuncLit); ok && c.wrappers.litOf[lit] != nil && c.wrappers.bound(c.wrappers.litOf[lit].v) != nil {
			return nil, true
		}
	}
	if mc, ok := cc.Value.(*ssa.MakeClosure); ok {
		if lit, ok := mc.Fn.(*ssa.Function).Syntax().(*ast.FuncLit); ok && c.wrappers.litOf[lit] != nil && c.wrappers.bound(c.wrappers.litOf[lit].v) != nil {
			return nil, true
		}
	}
	var out []callee
	for _, fn := range s.funcValues(cc.Value, map[ssa.Value]bool{}, 0) {
		k := callee{fn: fn}
		if obj, ok := fn.Object().(*types.Func); ok {
			k.obj = obj
			// A thunk ((*T).M as a value) takes the receiver first; a
			// bound method (x.M) has it bound.
			k.recvFirst = obj.Signature().Recv() != nil && len(fn.Params) == obj.Signature().Params().Len()+1
		}
		out = append(out, k)
	}
	return out, false
}

// funcValues returns the functions that the function value v may hold,
// as far as the package shows them.
func (s *ssaState) funcValues(v ssa.Value, seen map[ssa.Value]bool, depth int) []*ssa.Function {
	if seen[v] || depth > maxDepth {
		return nil
	}
	seen[v] = true
	var out []*ssa.Function
	add := func(vs ...ssa.Value) {
		for _, x := range vs {
			out = append(out, s.funcValues(x, seen, depth+1)...)
		}
	}
	switch x := v.(type) {
	case *ssa.Function:
		return []*ssa.Function{x}
	case *ssa.MakeClosure:
		return []*ssa.Function{x.Fn.(*ssa.Function)}
	case *ssa.Phi:
		add(x.Edges...)
	case *ssa.ChangeType:
		add(x.X)
	case *ssa.Parameter:
		fn := x.Parent()
		for i, p := range fn.Params {
			if p != x {
				continue
			}
			for _, call := range s.callsOf[fn] {
				if args := call.Common().Args; i < len(args) {
					add(args[i])
				}
			}
		}
	case *ssa.FreeVar:
		add(s.bindings(x)...)
	case *ssa.Field:
		if f := fieldOf(x.X, x.Field); f != nil {
			add(s.fieldStores[f]...)
		}
	case *ssa.UnOp:
		if x.Op != token.MUL {
			break
		}
		switch p := x.X.(type) {
		case *ssa.Global:
			add(s.stores[p]...)
		case *ssa.FieldAddr:
			if f := fieldOf(p.X, p.Field); f != nil {
				add(s.fieldStores[f]...)
			}
		case *ssa.Alloc, *ssa.FreeVar:
			add(s.storedValues(p, map[ssa.Value]bool{})...)
		}
	}
	return out
}

// bindings returns the values a free variable is bound to by the closures
// made of its function.
func (s *ssaState) bindings(fv *ssa.FreeVar) []ssa.Value {
	fn := fv.Parent()
	var out []ssa.Value
	for i, f := range fn.FreeVars {
		if f != fv {
			continue
		}
		for _, mc := range s.closures[fn] {
			if i < len(mc.Bindings) {
				out = append(out, mc.Bindings[i])
			}
		}
	}
	return out
}

// storedValues returns the values stored through the address p of a
// local variable: in its function, and in the closures that capture it.
func (s *ssaState) storedValues(p ssa.Value, seen map[ssa.Value]bool) []ssa.Value {
	if seen[p] {
		return nil
	}
	seen[p] = true
	if fv, ok := p.(*ssa.FreeVar); ok {
		var out []ssa.Value
		for _, b := range s.bindings(fv) {
			out = append(out, s.storedValues(b, seen)...)
		}
		return out
	}
	refs := p.Referrers()
	if refs == nil {
		return nil
	}
	var out []ssa.Value
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.Store:
			if r.Addr == p {
				out = append(out, r.Val)
			}
		case *ssa.MakeClosure:
			fn := r.Fn.(*ssa.Function)
			for i, b := range r.Bindings {
				if b == p && i < len(fn.FreeVars) {
					if refs := fn.FreeVars[i].Referrers(); refs != nil {
						for _, r2 := range *refs {
							if st, ok := r2.(*ssa.Store); ok && st.Addr == fn.FreeVars[i] {
								out = append(out, st.Val)
							}
						}
					}
				}
			}
		}
	}
	return out
}

// implementations returns the methods that a call of the interface method
// m on a value of type t may reach: those of the package's types, and
// those of other packages' types that carry a sink fact.
func (s *ssaState) implementations(t types.Type, m *types.Func) []callee {
	if ks, ok := s.impls[m]; ok {
		return ks
	}
	ks := s.implementations0(t, m)
	s.impls[m] = ks
	return ks
}

func (s *ssaState) implementations0(t types.Type, m *types.Func) []callee {
	iface, ok := t.Underlying().(*types.Interface)
	if !ok {
		return nil
	}
	var out []callee
	prog := s.pkg.Prog
	scope := s.c.pass.Pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() || types.IsInterface(tn.Type()) {
			continue
		}
		if _, ok := tn.Type().(*types.Named); !ok || tn.Type().(*types.Named).TypeParams().Len() > 0 {
			continue
		}
		for _, rt := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
			if !types.Implements(rt, iface) {
				continue
			}
			sel := prog.MethodSets.MethodSet(rt).Lookup(m.Pkg(), m.Name())
			if sel == nil {
				continue
			}
			obj := sel.Obj().(*types.Func)
			out = append(out, callee{fn: prog.FuncValue(obj), obj: obj})
			break
		}
	}
	if s.methodFacts == nil {
		s.methodFacts = map[string][]*types.Func{}
		for _, f := range s.c.pass.AllObjectFacts() {
			if obj, ok := f.Object.(*types.Func); ok && obj.Signature().Recv() != nil {
				if _, ok := f.Fact.(*sinkFact); ok {
					s.methodFacts[obj.Name()] = append(s.methodFacts[obj.Name()], obj)
				}
			}
		}
	}
	for _, obj := range s.methodFacts[m.Name()] {
		if obj.Pkg() == s.c.pass.Pkg || !types.Implements(obj.Signature().Recv().Type(), iface) {
			continue
		}
		out = append(out, callee{obj: obj})
	}
	return out
}

// calleeSinks returns the queries a callee sends, with its parameters as
// parameter holes. walked tells that the walk judges the call already: only
// what the new forms add to the callee is returned then.
func (s *ssaState) calleeSinks(k callee, walked bool) []template {
	c := s.c
	var out []template
	if k.obj != nil && !walked {
		if i := c.sinks.sinkQueryIndex(k.obj); i >= 0 {
			return paramTemplate(i)
		}
		out = union(out, c.wrappers.sinksOf(k.obj))
	}
	switch {
	case k.fn == nil:
	case k.obj != nil:
		if k.obj.Pkg() == c.pass.Pkg {
			if fn := s.pkg.Prog.FuncValue(k.obj.Origin()); fn != nil && fn.Pkg == s.pkg {
				out = union(out, s.callSinks(fn))
			}
		}
	case !walked && k.fn.Pkg == s.pkg:
		out = union(out, s.callSinks(k.fn))
	}
	return out
}

// callSinks returns the queries that depend on fn's parameters and that
// fn sends where the walk does not see it: through the new call forms, or
// (for a function literal) any sink.
func (s *ssaState) callSinks(fn *ssa.Function) []template {
	if ts, ok := s.fnSinks[fn]; ok {
		return ts
	}
	s.fnSinks[fn] = nil // a cycle sees nothing
	lit := fn.Parent() != nil
	var out []template
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			ci, ok := instr.(ssa.CallInstruction)
			if !ok {
				continue
			}
			ts := s.formTemplates(ci, lit)
			for _, t := range ts {
				if t.params() && len(out) < maxTemplates {
					out = append(out, t)
				}
			}
		}
	}
	s.fnSinks[fn] = out
	return out
}

// formTemplates returns the queries a call instruction sends through its
// callees, filled with its arguments. all includes what the walk judges
// (for the summary of a function literal, whose parameters the walk does
// not follow).
func (s *ssaState) formTemplates(ci ssa.CallInstruction, all bool) []template {
	key := formKey{ci, all}
	if ts, ok := s.forms[key]; ok {
		return ts
	}
	s.forms[key] = nil
	ks, walked := s.callees(ci)
	if walked && all {
		if cc := ci.Common(); cc.IsInvoke() {
			if i := s.c.sinks.sinkQueryIndex(cc.Method); i >= 0 {
				ks = []callee{{obj: cc.Method}}
			}
		} else if fn := cc.StaticCallee(); fn != nil {
			obj, _ := fn.Object().(*types.Func)
			ks = []callee{{fn: fn, obj: obj, recvFirst: obj != nil && obj.Signature().Recv() != nil}}
		}
		walked = false
	}
	cc := ci.Common()
	var out []template
	for _, k := range ks {
		ts := s.calleeSinks(k, walked)
		if len(ts) == 0 {
			continue
		}
		off := boolInt(k.recvFirst)
		out = union(out, substitute(ts, func(i int) []template {
			if i+off < len(cc.Args) {
				return s.resolve(cc.Args[i+off], 0)
			}
			return nil
		}))
	}
	s.forms[key] = out
	return out
}

type formKey struct {
	ci  ssa.CallInstruction
	all bool
}

// judgeForms judges the queries that calls send through the new forms.
func (s *ssaState) judgeForms() {
	c := s.c
	for _, ci := range s.calls {
		s.steps = 0
		ts := s.formTemplates(ci, false)
		if len(ts) == 0 {
			continue
		}
		fn := ci.Parent()
		var ps []sqlcheck.Problem
		for _, t := range ts {
			if text, ok := t.static(); ok {
				ps = append(ps, sqlcheck.Check(text, c.cfg)...)
				continue
			}
			found := sqlcheck.CheckTemplate(t, c.cfg)
			if s.deferred(t, found, fn, nil) {
				continue // judged at the calls that complete it
			}
			ps = append(ps, found...)
		}
		if len(ps) > 0 {
			c.out.add(s.formPos(ci), problemsMessage(ps))
		}
	}
}

// closed reports whether every call of fn is visible, so that what its
// parameters complete is judged at its calls.
func (s *ssaState) closed(fn *ssa.Function) bool {
	if fn.Parent() == nil {
		obj, ok := fn.Object().(*types.Func)
		if !ok {
			return false
		}
		fi := s.c.wrappers.funcs[obj.Origin()]
		if fi == nil || s.c.wrappers.deferrable(fi) {
			return fi != nil
		}
		if obj.Exported() && !s.c.wrappers.command() {
			return false
		}
		// Used as a value (a method value, a function passed to a
		// helper): closed when no such value escapes.
		if ok, done := s.closedFuncs[fi.fn]; done {
			return ok
		}
		s.closedFuncs[fi.fn] = false
		ok = true
		for _, u := range s.objUses[fi.fn] {
			if u.instr == nil {
				ok = ok && !s.escapes(u.v, map[ssa.Value]bool{}, 0)
			} else {
				ok = ok && !s.escapesAt(u.instr, u.v, map[ssa.Value]bool{}, 0)
			}
		}
		s.closedFuncs[fi.fn] = ok
		return ok
	}
	if ok, done := s.closedLits[fn]; done {
		return ok
	}
	s.closedLits[fn] = false
	ok := true
	for _, mc := range s.closures[fn] {
		ok = ok && !s.escapes(mc, map[ssa.Value]bool{}, 0)
	}
	if len(fn.FreeVars) == 0 {
		// A literal without free variables is a function constant: its
		// uses are operands, not a MakeClosure.
		ok = ok && len(s.closures[fn]) == 0 && s.constOnlyCalled(fn)
	}
	s.closedLits[fn] = ok
	return ok
}

// constOnlyCalled reports whether the function constant fn is only called
// or passed to closed functions of the package.
func (s *ssaState) constOnlyCalled(fn *ssa.Function) bool {
	for _, u := range s.funcUses[fn] {
		if s.escapesAt(u, fn, map[ssa.Value]bool{}, 0) {
			return false
		}
	}
	return true
}

// escapes reports whether the function value v may be called where the
// package does not show it: passed to another package or to a function
// whose calls are not all visible, stored where the call graph does not
// look, converted to an interface.
func (s *ssaState) escapes(v ssa.Value, seen map[ssa.Value]bool, depth int) bool {
	if seen[v] {
		return false
	}
	seen[v] = true
	if depth > maxDepth {
		return true
	}
	refs := v.Referrers()
	if refs == nil {
		return false
	}
	for _, r := range *refs {
		if s.escapesAt(r, v, seen, depth) {
			return true
		}
	}
	return false
}

func (s *ssaState) escapesAt(r ssa.Instruction, v ssa.Value, seen map[ssa.Value]bool, depth int) bool {
	switch r := r.(type) {
	case *ssa.DebugRef:
		return false
	case *ssa.Phi:
		return s.escapes(r, seen, depth+1)
	case *ssa.ChangeType:
		return s.escapes(r, seen, depth+1)
	case ssa.CallInstruction:
		cc := r.Common()
		if cc.Value == v && !cc.IsInvoke() {
			return false
		}
		fn := cc.StaticCallee()
		if fn == nil || fn.Pkg != s.pkg || !s.closed(fn) {
			return true
		}
		for i, a := range cc.Args {
			if a == v && (i >= len(fn.Params) || s.escapes(fn.Params[i], seen, depth+1)) {
				return true
			}
		}
		return false
	case *ssa.Store:
		switch p := r.Addr.(type) {
		case *ssa.Alloc:
			return s.escapes(p, seen, depth+1) || s.loadsEscape(p, seen, depth)
		case *ssa.FieldAddr:
			f := fieldOf(p.X, p.Field)
			return f == nil || f.Exported() || f.Pkg() != s.c.pass.Pkg
		case *ssa.Global:
			return p.Pkg != s.pkg || p.Object().Exported()
		}
		return true
	case *ssa.UnOp:
		return s.escapes(r, seen, depth+1)
	case *ssa.MakeClosure:
		// A local captured by a closure: what the closure loads from it.
		fn := r.Fn.(*ssa.Function)
		for i, b := range r.Bindings {
			if b == v && i < len(fn.FreeVars) && s.loadsEscape(fn.FreeVars[i], seen, depth) {
				return true
			}
		}
		return r.Fn == v
	}
	return true
}

// loadsEscape reports whether a value loaded from the local variable p
// escapes.
func (s *ssaState) loadsEscape(p ssa.Value, seen map[ssa.Value]bool, depth int) bool {
	for _, r := range *p.Referrers() {
		if u, ok := r.(*ssa.UnOp); ok && u.Op == token.MUL && s.escapes(u, seen, depth+1) {
			return true
		}
	}
	return false
}

// formPos is where a form's finding is reported: the call's first
// argument whose value names a fenced table, else its first argument
// that fills a query, else the call.
func (s *ssaState) formPos(ci ssa.CallInstruction) token.Pos {
	var call *ast.CallExpr
	switch in := ci.(type) {
	case *ssa.Go, *ssa.Defer:
		call = s.c.goDefer[in.Pos()]
	case *ssa.Call:
		call = s.astCall(in)
	}
	if call == nil {
		return ci.Pos()
	}
	for _, a := range call.Args {
		if tv, ok := s.c.pass.TypesInfo.Types[a]; ok && stringish(tv.Type) {
			if ts, ok := s.c.flow.evalExpr(a); ok || len(ts) > 0 {
				if anyMentions(ts, s.c.cfg) {
					return a.Pos()
				}
			}
		}
	}
	for _, a := range call.Args {
		if tv, ok := s.c.pass.TypesInfo.Types[a]; ok && isString(tv.Type) {
			return a.Pos()
		}
	}
	return call.Lparen
}

// astCall finds the syntax of an SSA call by its parenthesis.
func (s *ssaState) astCall(in *ssa.Call) *ast.CallExpr {
	root := in.Parent()
	for root.Parent() != nil {
		root = root.Parent()
	}
	syn := root.Syntax()
	if syn == nil {
		return nil
	}
	var found *ast.CallExpr
	ast.Inspect(syn, func(n ast.Node) bool {
		if found != nil || n == nil || n.Pos() > in.Pos() || n.End() <= in.Pos() {
			return false
		}
		if call, ok := n.(*ast.CallExpr); ok && call.Lparen == in.Pos() {
			found = call
		}
		return true
	})
	return found
}

// objUse is a use of a declared function as a value: an instruction
// taking the function (or its thunk) as an operand, or (instr nil) a
// bound method v.
type objUse struct {
	instr ssa.Instruction
	v     ssa.Value
}
