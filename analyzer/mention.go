package analyzer

import (
	"go/constant"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// The cost of strings built at run time (issue 32). A root (a string
// built at run time, judged where the whole string is used) can be
// reported only when one of its static alternatives writes a fenced
// table, so only when some constant it may be built from names one.
// mayMention answers that by reachability over the values resolve would
// visit, without building templates: a linter's own package, full of
// messages built with + and fmt.Sprintf, then skips its hundreds of roots
// (on this repository's self-lint, the analyzer package alone spent 0.9
// to 2 s resolving them). It errs towards true: a value it does not model
// may mention.

// mayMention reports whether some text v may hold comes from a constant
// (or an embedded file, a helper's return, a fact) that names a fenced
// table. Each question walks the values v is built from once (a value
// met again adds nothing); a value found to mention is remembered for
// the next question, and a walk that grows past maxSteps answers true.
func (s *ssaState) mayMention(v ssa.Value) bool {
	if s.mentionMemo == nil {
		s.mentionMemo = map[ssa.Value]bool{}
	}
	s.mentionSeen = map[ssa.Value]bool{}
	return s.reaches(v)
}

func (s *ssaState) reaches(v ssa.Value) bool {
	if s.mentionMemo[v] {
		return true
	}
	if s.mentionSeen[v] {
		return false
	}
	s.mentionSeen[v] = true
	if len(s.mentionSeen) > maxSteps {
		return true
	}
	m := s.mayMention0(v)
	if m {
		s.mentionMemo[v] = true
	}
	return m
}

func (s *ssaState) anyMayMention(vs ...ssa.Value) bool {
	for _, v := range vs {
		if v != nil && s.reaches(v) {
			return true
		}
	}
	return false
}

func (s *ssaState) mayMention0(v ssa.Value) bool {
	cfg := s.c.cfg
	switch x := v.(type) {
	case *ssa.Const:
		return x.Value != nil && x.Value.Kind() == constant.String && cfg.Mentions(constant.StringVal(x.Value))
	case *ssa.Parameter:
		return false // a hole: no text of its own
	case *ssa.BinOp:
		return s.anyMayMention(x.X, x.Y)
	case *ssa.Phi:
		return s.anyMayMention(x.Edges...)
	case *ssa.ChangeType:
		return s.reaches(x.X)
	case *ssa.Convert:
		return s.reaches(x.X)
	case *ssa.MakeInterface:
		return s.reaches(x.X)
	case *ssa.Slice:
		return s.reaches(x.X)
	case *ssa.Extract:
		return s.reaches(x.Tuple)
	case *ssa.UnOp:
		switch p := x.X.(type) {
		case *ssa.Global:
			if g, ok := p.Object().(*types.Var); ok && s.c.strs.embedded(g) != nil {
				return true
			}
			return s.anyMayMention(s.stores[p]...)
		case *ssa.Alloc, *ssa.FreeVar, *ssa.IndexAddr:
			return true // captured, a literal's element: resolve decides
		case *ssa.FieldAddr:
			return s.fieldMayTravel(p.X)
		}
		if x.Op == token.ARROW {
			return s.anyMayMention(s.sends[chanKey(x.X.Type())]...) || len(s.structSends[chanKey(x.X.Type())]) > 0
		}
	case *ssa.Field:
		return s.fieldMayTravel(x.X)
	case *ssa.Index:
		return true
	case *ssa.Lookup:
		if m, ok := x.X.Type().Underlying().(*types.Map); ok {
			for _, u := range s.mapStores[types.TypeString(m, nil)] {
				if s.reaches(u.Value) {
					return true
				}
			}
		}
	case *ssa.Alloc:
		return true // a builder, an array: resolve decides
	case *ssa.Call:
		return s.callMayMention(x)
	}
	return false
}

// callMayMention is mayMention for what a call returns: a helper's
// returns (its own constants, or the arguments it fills in), an edit of
// its arguments, a builder's contents, an embedded file.
func (s *ssaState) callMayMention(call *ssa.Call) bool {
	cc := &call.Call
	if s.anyMayMention(cc.Args...) {
		return true
	}
	fn := cc.StaticCallee()
	if fn == nil {
		return false // an unknown function of text that names no table
	}
	if isBuilderMethod(fn, "String") {
		return true
	}
	obj, _ := fn.Object().(*types.Func)
	if obj != nil && obj.Pkg() != s.c.pass.Pkg {
		if rs, ok := s.c.wrappers.returnsOf(obj); ok && anyMentions(rs, s.c.cfg) {
			return true
		}
		if obj.Name() == "ReadFile" { // an embedded file system's file
			return true
		}
		return false
	}
	if fn.Pkg == s.pkg {
		return s.anyMayMention(s.returns[fn]...)
	}
	return false
}

// fieldMayTravel reports whether a field of the struct x is one resolve
// follows (sentField, tableField): of a struct received from a channel,
// copied into a local, or an element of a local table.
func (s *ssaState) fieldMayTravel(x ssa.Value) bool {
	if u, ok := x.(*ssa.UnOp); ok && u.Op == token.MUL {
		x = u.X
	}
	if e, ok := x.(*ssa.Extract); ok {
		x = e.Tuple
	}
	switch x := x.(type) {
	case *ssa.Alloc, *ssa.IndexAddr:
		return true
	case *ssa.UnOp:
		return x.Op == token.ARROW
	}
	return false
}
