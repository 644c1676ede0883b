package analyzer

import (
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// Queries built by other means than concatenation (issue 20): strings.Join
// of literal clauses, fmt.Fprint and Fprintln into a builder, strings that
// travel through channels and maps. Template text given to Parse is judged
// by the walk (walk.go, templateText).

// join is strings.Join of a slice literal ([]string{"id = ?", "state = ?"})
// that nothing else writes: its elements in order, separated by sep.
func (s *ssaState) join(call *ssa.Call, fn *types.Func, depth int) ([]template, bool) {
	if fn.Name() != "Join" || fn.Pkg() == nil || fn.Pkg().Path() != "strings" || len(call.Call.Args) != 2 {
		return nil, false
	}
	sl, ok := call.Call.Args[0].(*ssa.Slice)
	if !ok || sl.Low != nil || sl.High != nil {
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
	elems := make([]ssa.Value, arr.Len())
	for _, r := range *alloc.Referrers() {
		switch r := r.(type) {
		case *ssa.Slice:
			if r != sl {
				return nil, false
			}
		case *ssa.IndexAddr:
			k, ok := r.Index.(*ssa.Const)
			if !ok {
				return nil, false
			}
			i := k.Int64()
			for _, r2 := range *r.Referrers() {
				st, ok := r2.(*ssa.Store)
				if !ok || st.Addr != r || i < 0 || int(i) >= len(elems) || elems[i] != nil {
					return nil, false
				}
				elems[i] = st.Val
			}
		case *ssa.DebugRef:
		default:
			return nil, false
		}
	}
	for _, r := range *sl.Referrers() {
		if r != call {
			if _, ok := r.(*ssa.DebugRef); !ok {
				return nil, false // the slice may be written elsewhere
			}
		}
	}
	sep := s.resolve(call.Call.Args[1], depth)
	out := []template{{}}
	for i, e := range elems {
		if e == nil {
			return nil, false
		}
		if i > 0 {
			out = concat(out, sep)
		}
		out = concat(out, s.resolve(e, depth))
	}
	return out, true
}

// isSSAFprint reports whether call is fmt.Fprint or fmt.Fprintln (ln).
func isSSAFprint(call *ssa.Call) (ln, ok bool) {
	fn := call.Call.StaticCallee()
	if fn == nil || fn.Pkg == nil || fn.Pkg.Pkg.Path() != "fmt" {
		return false, false
	}
	return fn.Name() == "Fprintln", fn.Name() == "Fprint" || fn.Name() == "Fprintln"
}

// fprint is what fmt.Fprint (or Fprintln) writes: its string operands
// (Fprint puts no space between strings; Fprintln a space between any
// two, and a newline), anything else a hole.
func (s *ssaState) fprint(args ssa.Value, ln bool, depth int) []template {
	vals, ok := varargs(args)
	if !ok {
		return holeTemplate
	}
	out := []template{{}}
	for i, v := range vals {
		if ln && i > 0 {
			out = concat(out, textTemplate(" "))
		}
		if v == nil || !isString(v.Type()) || hasMethods(v.Type()) {
			out = concat(out, holeTemplate)
			continue
		}
		out = concat(out, s.resolve(v, depth))
	}
	if ln {
		out = concat(out, textTemplate("\n"))
	}
	return out
}

// travelled returns the strings that a receive from a channel, or a map
// lookup, may yield: every string the package sends on a channel of that
// type, or stores into a map of that type (under the same constant key
// when both keys are constants).
func (s *ssaState) travelled(v ssa.Value, depth int) ([]template, bool) {
	var vals []ssa.Value
	switch x := v.(type) {
	case *ssa.UnOp:
		if x.Op != token.ARROW {
			return nil, false
		}
		vals = s.sends[chanKey(x.X.Type())]
	case *ssa.Lookup:
		m, ok := x.X.Type().Underlying().(*types.Map)
		if !ok {
			return nil, false
		}
		k, _ := x.Index.(*ssa.Const)
		for _, u := range s.mapStores[types.TypeString(m, nil)] {
			if uk, ok := u.Key.(*ssa.Const); ok && k != nil && uk.Value != nil && k.Value != nil && uk.Value.ExactString() != k.Value.ExactString() {
				continue
			}
			vals = append(vals, u.Value)
		}
	default:
		return nil, false
	}
	if len(vals) == 0 {
		return nil, false
	}
	var out []template
	for _, val := range vals {
		out = union(out, s.resolveIn(val, v.Parent(), depth))
	}
	return out, true
}

func chanKey(t types.Type) string {
	if c, ok := t.Underlying().(*types.Chan); ok {
		return types.TypeString(c.Elem(), nil)
	}
	return ""
}
