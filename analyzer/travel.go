package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/ssa"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// Values that cross functions (issue 32), for SSA's resolve: a variable
// captured by a closure (a retry helper's or a transaction wrapper's
// callback that runs the query its function built), the field of a
// struct received from a channel (a statement and its arguments sent to
// the goroutine that runs them), and the rule that keeps a parameter
// hole meaningful when its value crosses into another function.
//
// A template's parameter holes (Part.Param) are the parameters of the
// function that holds the value being resolved: its callers fill them in.
// A value that comes from another function (a package variable's store,
// a send on a channel, a store into a captured variable) is resolved
// there, so its parameter holes are rebased (resolveIn): the parameters
// of the declared function around the closure become Outer holes, which
// that function's callers complete (the walk's summary of the function
// holds the closure's sinks); any other function's parameters become
// holes of their own, named, that no caller fills in.

// resolveIn resolves v, a value of another function than in perhaps, as
// seen from in.
func (s *ssaState) resolveIn(v ssa.Value, in *ssa.Function, depth int) []template {
	return rebase(s.resolve(v, depth), v.Parent(), in)
}

// rebase turns the parameter holes of from's templates into what they are
// in in: the same when from is in; Outer holes when from is the declared
// function whose closure in is; else holes that no caller fills.
func rebase(ts []template, from, in *ssa.Function) []template {
	if from == nil || from == in || !anyParams(ts) {
		return ts
	}
	outer := false
	if _, declared := from.Object().(*types.Func); declared && in != nil && in.Parent() != nil {
		outer = rootFunc(in) == from
	}
	out := make([]template, len(ts))
	for i, t := range ts {
		if !t.params() {
			out[i] = t
			continue
		}
		c := append(template(nil), t...)
		for j, p := range c {
			if p.Param == 0 {
				continue
			}
			if outer {
				c[j].Outer = max(p.Param, -p.Param)
			}
			c[j].Param = 0
		}
		out[i] = c
	}
	return out
}

// rootFunc is the declared function (or package initializer) whose body
// holds fn, fn itself when it is one.
func rootFunc(fn *ssa.Function) *ssa.Function {
	for fn.Parent() != nil {
		fn = fn.Parent()
	}
	return fn
}

// captured resolves a load, in function in, of a local variable that a
// closure captures (p is its Alloc, or the closure's FreeVar): every
// value stored into it, in its function or in the closures that capture
// it. ok is false when the variable's address goes anywhere else (a
// function given &q may write it).
func (s *ssaState) captured(p ssa.Value, in *ssa.Function, depth int) ([]template, bool) {
	if !stringish(p.Type().Underlying().(*types.Pointer).Elem()) {
		return nil, false
	}
	root, ok := capturedRoot(p, map[ssa.Value]bool{})
	if !ok {
		return nil, false
	}
	var vals []ssa.Value
	if !capturedStores(root, &vals, map[ssa.Value]bool{}) || len(vals) == 0 {
		return nil, false
	}
	var out []template
	for _, v := range vals {
		out = union(out, s.resolveIn(v, in, depth))
	}
	return out, true
}

// capturedRoot follows a FreeVar to the Alloc its closures are made with.
func capturedRoot(p ssa.Value, seen map[ssa.Value]bool) (ssa.Value, bool) {
	for !seen[p] {
		seen[p] = true
		fv, ok := p.(*ssa.FreeVar)
		if !ok {
			_, alloc := p.(*ssa.Alloc)
			return p, alloc
		}
		var bound ssa.Value
		for _, b := range freeVarBindings(fv) {
			if bound != nil && b != bound {
				return nil, false // made with several variables
			}
			bound = b
		}
		if bound == nil {
			return nil, false
		}
		p = bound
	}
	return nil, false
}

// freeVarBindings are the values a free variable is bound to where its
// closures are made (its function's referrers are the MakeClosures).
func freeVarBindings(fv *ssa.FreeVar) []ssa.Value {
	fn := fv.Parent()
	i := -1
	for j, f := range fn.FreeVars {
		if f == fv {
			i = j
		}
	}
	var out []ssa.Value
	if i < 0 || fn.Referrers() == nil {
		return nil
	}
	for _, r := range *fn.Referrers() {
		if mc, ok := r.(*ssa.MakeClosure); ok && mc.Fn == fn && i < len(mc.Bindings) {
			out = append(out, mc.Bindings[i])
		}
	}
	return out
}

// capturedStores collects the values stored through p (an Alloc, or a
// closure's FreeVar bound to it) and through the closures that capture
// it; false when p is used in any other way than loads, stores into it
// and captures.
func capturedStores(p ssa.Value, vals *[]ssa.Value, seen map[ssa.Value]bool) bool {
	if seen[p] {
		return true
	}
	seen[p] = true
	refs := p.Referrers()
	if refs == nil {
		return true
	}
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.Store:
			if r.Addr != p {
				return false // the address itself is stored
			}
			*vals = append(*vals, r.Val)
		case *ssa.UnOp:
			if r.Op != token.MUL {
				return false
			}
		case *ssa.DebugRef:
		case *ssa.MakeClosure:
			fn := r.Fn.(*ssa.Function)
			for i, b := range r.Bindings {
				if b == p && i < len(fn.FreeVars) && !capturedStores(fn.FreeVars[i], vals, seen) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// sentField resolves field i of a struct received from a channel (x is
// the received value, or the pointer received): the values the package's
// sends on channels of that type store into the field of the struct they
// send, composite literals included.
func (s *ssaState) sentField(x ssa.Value, i int, in *ssa.Function, depth int) ([]template, bool) {
	if u, ok := x.(*ssa.UnOp); ok && u.Op == token.MUL {
		x = u.X
	}
	if ts, ok := s.tableField(x, i, in, depth); ok {
		return ts, true
	}
	if alloc, ok := x.(*ssa.Alloc); ok {
		// A local copy of the received struct (for s := range ch { s.f }):
		// what is stored into it whole, and into its field.
		var out []template
		found := false
		for _, r := range *alloc.Referrers() {
			switch r := r.(type) {
			case *ssa.Store:
				if r.Addr != alloc {
					return nil, false
				}
				ts, ok := s.sentField(r.Val, i, in, depth)
				if !ok {
					return nil, false
				}
				out, found = union(out, ts), true
			case *ssa.FieldAddr:
				if r.Field != i {
					continue
				}
				for _, r2 := range *r.Referrers() {
					if st, ok := r2.(*ssa.Store); ok && st.Addr == r {
						out, found = union(out, s.resolveIn(st.Val, in, depth)), true
					}
				}
			}
		}
		return out, found
	}
	if e, ok := x.(*ssa.Extract); ok && e.Index == 0 {
		x = e.Tuple
	}
	recv, ok := x.(*ssa.UnOp)
	if !ok || recv.Op != token.ARROW {
		return nil, false
	}
	sent := s.structSends[chanKey(recv.X.Type())]
	if len(sent) == 0 {
		return nil, false
	}
	var out []template
	for _, v := range sent {
		vals, ok := fieldStores(v, i)
		if !ok {
			out = union(out, holeTemplate)
			continue
		}
		for _, val := range vals {
			out = union(out, s.resolveIn(val, in, depth))
		}
	}
	return out, true
}

// fieldStores returns the values stored into field i of the struct that
// v is (a load of a local composite literal) or points to (a new one),
// when the struct is only written field by field and read.
func fieldStores(v ssa.Value, i int) ([]ssa.Value, bool) {
	if u, ok := v.(*ssa.UnOp); ok && u.Op == token.MUL {
		v = u.X
	}
	alloc, ok := v.(*ssa.Alloc)
	if !ok {
		return nil, false
	}
	var vals []ssa.Value
	for _, r := range *alloc.Referrers() {
		fa, ok := r.(*ssa.FieldAddr)
		if !ok || fa.Field != i {
			continue
		}
		for _, r2 := range *fa.Referrers() {
			if st, ok := r2.(*ssa.Store); ok && st.Addr == fa {
				vals = append(vals, st.Val)
			}
		}
	}
	return vals, len(vals) > 0
}

// unnamed reports whether some hole of ts has no name.
func unnamed(ts []template) bool {
	for _, t := range ts {
		for _, p := range t {
			if p.Hole && p.Name == "" {
				return true
			}
		}
	}
	return false
}

// holeName names the holes of ts, v's templates, for a finding's
// message: a hole without a name is named after v, and a variable (a
// package variable, a captured local, a field) renames what it holds,
// since the query's text names the variable, not where its value came
// from.
func (s *ssaState) holeName(v ssa.Value, ts []template) []template {
	variable := false
	switch x := v.(type) {
	case *ssa.UnOp:
		switch x.X.(type) {
		case *ssa.Global, *ssa.Alloc, *ssa.FreeVar, *ssa.FieldAddr:
			variable = x.Op == token.MUL
		}
	case *ssa.Field:
		variable = true
	}
	if variable {
		// Named after the variable only when it is all run time (where
		// = os.Getenv(…)), not when it holds the query (q = "UPDATE … "
		// + strconv.Itoa(id)).
		for _, t := range ts {
			if len(t) != 1 || !t[0].Hole {
				variable = false
			}
		}
	}
	if !variable {
		if unnamed(ts) {
			return named(ts, s.describe(v))
		}
		return ts
	}
	name := s.describe(v)
	return renamed(ts, name, func(p sqlcheck.Part) bool {
		return p.Hole && p.Param == 0 && p.Outer == 0 && p.Name != name
	})
}

// describe names the Go expression an SSA value stands for, for a
// finding's message: a variable, a parameter, a field, a call.
func (s *ssaState) describe(v ssa.Value) string {
	if call, ok := v.(*ssa.Call); ok {
		if e := s.callExpr(call.Pos()); e != nil {
			return shortExpr(e)
		}
	}
	return describe(v)
}

// callExpr is the call expression whose parenthesis is at pos.
func (s *ssaState) callExpr(pos token.Pos) *ast.CallExpr {
	if s.callExprs == nil {
		s.callExprs = map[token.Pos]*ast.CallExpr{}
		for _, f := range s.c.pass.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					s.callExprs[call.Lparen] = call
				}
				return true
			})
		}
	}
	return s.callExprs[pos]
}

// shortExpr is e as written, or its function and "(…)" when that is long.
func shortExpr(e ast.Expr) string {
	text := types.ExprString(e)
	if len(text) <= 48 {
		return text
	}
	if call, ok := e.(*ast.CallExpr); ok {
		if f := types.ExprString(call.Fun); len(f) <= 44 {
			return f + "(…)"
		}
	}
	return ""
}

// describe names the Go expression an SSA value stands for, without the
// syntax: a variable, a parameter, a field, a call.
func describe(v ssa.Value) string {
	switch x := v.(type) {
	case *ssa.Parameter, *ssa.FreeVar, *ssa.Global:
		return x.Name()
	case *ssa.Alloc:
		return x.Comment
	case *ssa.Phi:
		return x.Comment
	case *ssa.UnOp:
		switch x.Op {
		case token.MUL:
			return describe(x.X)
		case token.ARROW:
			if d := describe(x.X); d != "" {
				return "a receive from " + d
			}
		}
	case *ssa.Extract:
		return describe(x.Tuple)
	case *ssa.FieldAddr:
		return fieldName(x.X, x.Field)
	case *ssa.Field:
		return fieldName(x.X, x.Field)
	case *ssa.Lookup:
		if d := describe(x.X); d != "" {
			return d + "[…]"
		}
	case *ssa.Slice:
		if d := describe(x.X); d != "" {
			return d + "[…]"
		}
	case *ssa.Convert:
		return describe(x.X)
	case *ssa.ChangeType:
		return describe(x.X)
	case *ssa.MakeInterface:
		return describe(x.X)
	case *ssa.Call:
		return callName(&x.Call) + "(…)"
	}
	return ""
}

func fieldName(x ssa.Value, i int) string {
	f := fieldOf(x, i)
	if f == nil {
		return ""
	}
	if d := describe(x); d != "" && !strings.HasPrefix(d, "a receive") {
		return d + "." + f.Name()
	}
	return f.Name()
}

// callName names a call's callee: pkg.Func, Type.Method, or the value.
func callName(cc *ssa.CallCommon) string {
	if cc.IsInvoke() {
		return describe(cc.Value) + "." + cc.Method.Name()
	}
	fn := cc.StaticCallee()
	if fn == nil {
		return describe(cc.Value)
	}
	if obj, ok := fn.Object().(*types.Func); ok {
		if recv := obj.Signature().Recv(); recv != nil {
			t := recv.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				return n.Obj().Name() + "." + obj.Name()
			}
			return obj.Name()
		}
		if obj.Pkg() != nil {
			return obj.Pkg().Name() + "." + obj.Name()
		}
	}
	return fn.Name()
}
