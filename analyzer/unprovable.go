package analyzer

import (
	"go/ast"
	"go/types"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"golang.org/x/tools/go/ssa"
)

// What cannot be proven fenced is reported (issue 32; DESIGN.md's lint
// rule: "Code that cannot be proven fenced is reported, not passed").
//
// A query that reaches a sink with holes (text known only at run time)
// cannot be proven to hold the fence where it is sent. It is proven only
// when every hole is a parameter of the function that finishes the text
// and that function's callers complete it: the function is closed (every
// call of it is in sight, ssaState.closed) and has at least one call, and
// the calls are judged with their arguments filled in (the walk's summary
// of the function, or the call forms' summary of a closure). A hole that
// is a parameter of the declared function around the closure that sends
// the query (a retry helper's or a transaction wrapper's callback) is
// completed by that function's callers in the same way. Anything else is
// reported where the query is sent, with the clause the hole completes
// and what it stands for: "the fence of this UPDATE cannot be proven: its
// WHERE is built at run time from cond".
//
// So a function whose parameter completes the WHERE, with no caller (an
// unexported helper nobody calls yet, an exported function of a library),
// or one caller fencelint cannot follow, is reported; one whose callers
// all pass fenced constants is not, and a caller that passes an unfenced
// one is reported at its argument.
//
// Problems that do not depend on the holes (a run-time SET list before a
// constant WHERE that lacks the fence: sqlcheck.CheckTemplate judges the
// WHERE as it stands) are reported where the query is sent, never at the
// callers, which could not change them.

// deferred reports whether the problems found in t, a query sent by a
// call in fn, are judged at the calls of the function whose parameters
// complete it instead of here. owner is the walk's function that holds
// the call (nil for a call form the walk does not see).
func (s *ssaState) deferred(t template, found []sqlcheck.Problem, fn *ssa.Function, owner *funcInfo) bool {
	if len(found) == 0 || t.unknown() || !holesOnly(found) {
		return false
	}
	switch {
	case t.params() && !t.outer():
		return s.closed(fn) && s.called(fn)
	case t.outer() && !t.params():
		// The walk's summary of the declared function around the closure
		// holds this sink, completed by the function's parameters.
		if owner == nil || owner.fn == nil {
			return false
		}
		root := rootFunc(fn)
		obj, ok := root.Object().(*types.Func)
		return ok && obj.Origin() == owner.fn.Origin() && s.closed(root) && s.called(root)
	}
	return false
}

// holesOnly reports whether every problem is one that the holes decide
// (a Dynamic write), so that callers who fill them in can prove it.
func holesOnly(ps []sqlcheck.Problem) bool {
	for _, p := range ps {
		if p.Kind != sqlcheck.Dynamic {
			return false
		}
	}
	return true
}

// called reports whether the package calls fn somewhere: directly, under
// go or defer, through a function value or an interface method.
func (s *ssaState) called(fn *ssa.Function) bool {
	if s.reached == nil {
		s.reached = map[*ssa.Function]bool{}
		for _, ci := range s.calls {
			s.markCallees(ci)
		}
	}
	return s.reached[fn]
}

// markCallees records the functions that the call ci may reach.
func (s *ssaState) markCallees(ci ssa.CallInstruction) {
	cc := ci.Common()
	mark := func(fn *ssa.Function, obj *types.Func) {
		if fn != nil {
			s.reached[fn] = true
			if o := fn.Origin(); o != nil {
				s.reached[o] = true // an instance of a generic function
			}
		}
		if obj != nil {
			if f := s.pkg.Prog.FuncValue(obj.Origin()); f != nil {
				s.reached[f] = true
			}
		}
	}
	if !cc.IsInvoke() {
		switch v := cc.Value.(type) {
		case *ssa.Function:
			obj, _ := v.Object().(*types.Func)
			mark(v, obj)
			if obj != nil || isLit(v) {
				return
			}
		case *ssa.MakeClosure:
			fn := v.Fn.(*ssa.Function)
			obj, _ := fn.Object().(*types.Func)
			mark(fn, obj)
		}
	}
	ks, _ := s.callees(ci)
	for _, k := range ks {
		mark(k.fn, k.obj)
	}
}

func isLit(fn *ssa.Function) bool {
	_, ok := fn.Syntax().(*ast.FuncLit)
	return ok
}
