package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/types/typeutil"
)

// SQL text that is a test's expectation (issue 32). A statement that never
// reaches a sink is not a write: in a test file, the SQL a test expects a
// builder or a mock to see sits in a table of cases, is compared with ==
// or !=, or is handed to an assertion (assert.Equal, cmp.Diff, sqlmock's
// ExpectExec). Such constant text is not judged where it stands, only
// where it reaches a sink: SSA follows the fields of a local table of
// cases to the sink that runs them (tableField).

// expectation reports whether the constant SQL e, in a test file, is an
// expectation: an operand of == or !=, or an argument of another
// package's function that sends no query (then it is dropped at once, and
// field is nil); or the value of a struct field in a composite literal
// (then field is that field, and the finding waits for settle: it stands
// if some read of the field is anything but an expectation's use).
func (ss *sqlStrings) expectation(e ast.Expr, stack []ast.Node) (field *types.Var, ok bool) {
	if !ss.testFile || len(stack) == 0 {
		return nil, false
	}
	switch p := stack[len(stack)-1].(type) {
	case *ast.CompositeLit:
		st, ok := ss.pass.TypesInfo.TypeOf(p).Underlying().(*types.Struct)
		if !ok {
			return nil, false
		}
		for i, el := range p.Elts {
			if el == e && i < st.NumFields() && ss.testField(st.Field(i)) {
				return st.Field(i), true
			}
		}
	case *ast.KeyValueExpr:
		if p.Value != e {
			return nil, false
		}
		if key, ok := p.Key.(*ast.Ident); ok {
			if f, ok := ss.pass.TypesInfo.Uses[key].(*types.Var); ok && f.IsField() && ss.testField(f) {
				return f, true
			}
		}
	default:
		return nil, ss.expectationUse(e, stack)
	}
	return nil, false
}

// testField reports whether f is a field of a struct declared in a test
// file (a table of cases): every read of it is in test files, which the
// walk records.
func (ss *sqlStrings) testField(f *types.Var) bool {
	return strings.HasSuffix(ss.pass.Fset.Position(f.Pos()).Filename, "_test.go")
}

// expectationUse reports whether e is used the way a test uses what it
// expects: compared with == or !=, or handed to another package's
// function that sends no query (assert.Equal, cmp.Diff, t.Errorf,
// sqlmock's ExpectExec).
func (ss *sqlStrings) expectationUse(e ast.Expr, stack []ast.Node) bool {
	switch p := stack[len(stack)-1].(type) {
	case *ast.BinaryExpr:
		return p.Op == token.EQL || p.Op == token.NEQ
	case *ast.CallExpr:
		if p.Fun == e {
			return false
		}
		fn, ok := typeutil.Callee(ss.pass.TypesInfo, p).(*types.Func)
		if !ok || fn.Pkg() == nil || fn.Pkg() == ss.pass.Pkg || ss.sinks.sinkQueryIndex(fn) >= 0 {
			return false
		}
		var f sinkFact
		return !ss.pass.ImportObjectFact(fn.Origin(), &f)
	}
	return false
}

// fieldRead records a read of a struct field in a test file: a read that
// is not an expectation's use (the field is passed to a sink, a helper,
// assigned) makes the SQL in that field's literals judged where it
// stands.
func (ss *sqlStrings) fieldRead(se *ast.SelectorExpr, stack []ast.Node) {
	if !ss.testFile {
		return
	}
	sel := ss.pass.TypesInfo.Selections[se]
	if sel == nil || sel.Kind() != types.FieldVal {
		return
	}
	f := sel.Obj().(*types.Var)
	if len(stack) == 0 || !ss.expectationUse(se, stack) {
		if ss.fieldUsed == nil {
			ss.fieldUsed = map[*types.Var]bool{}
		}
		ss.fieldUsed[f] = true
	}
}

// judgeExpected reports the SQL of test tables' fields that some read
// takes elsewhere than to an expectation's use.
func (ss *sqlStrings) judgeExpected() {
	for _, x := range ss.expected {
		if ss.fieldUsed[x.field] {
			ss.out.addFinding(x.finding)
		}
	}
}

// tableField resolves field i of an element of a local slice (or array)
// literal, as a range over a test's table of cases reads it (tc.query):
// every value the literal stores into that field. ok is false for any
// other struct.
func (s *ssaState) tableField(elem ssa.Value, i int, in *ssa.Function, depth int) ([]template, bool) {
	ia, ok := elem.(*ssa.IndexAddr)
	if !ok {
		return nil, false
	}
	alloc, ok := indexedAlloc(ia)
	if !ok {
		return nil, false
	}
	var out []template
	found := false
	for _, r := range *alloc.Referrers() {
		eia, ok := r.(*ssa.IndexAddr)
		if !ok {
			continue
		}
		for _, r2 := range *eia.Referrers() {
			var vals []ssa.Value
			switch r2 := r2.(type) {
			case *ssa.FieldAddr: // the element's field, written in place
				if r2.Field != i {
					continue
				}
				for _, r3 := range *r2.Referrers() {
					if st, ok := r3.(*ssa.Store); ok && st.Addr == r2 {
						vals = append(vals, st.Val)
					}
				}
			case *ssa.Store: // the element, written whole from a literal
				if r2.Addr == eia {
					vals, _ = fieldStores(r2.Val, i)
				}
			}
			for _, v := range vals {
				out, found = union(out, s.resolveIn(v, in, depth)), true
			}
		}
	}
	return out, found
}

// expectedOnly reports whether v, a string built at run time in a test
// file, is only an expectation: compared with == or !=, handed to another
// package's function that sends no query (an assertion, t.Errorf), or
// stored in a composite literal.
func (s *ssaState) expectedOnly(v ssa.Value) bool {
	fn := v.Parent()
	if fn == nil || !strings.HasSuffix(s.c.pass.Fset.Position(fn.Pos()).Filename, "_test.go") {
		return false
	}
	return s.expectedUses(v, 0)
}

func (s *ssaState) expectedUses(v ssa.Value, depth int) bool {
	refs := v.Referrers()
	if refs == nil || depth > 4 {
		return false
	}
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.DebugRef:
		case *ssa.BinOp:
			if r.Op != token.EQL && r.Op != token.NEQ {
				return false
			}
		case *ssa.MakeInterface:
			if !s.expectedUses(r, depth+1) {
				return false
			}
		case *ssa.Store:
			// Into a test table's field that only expectations read, or
			// into the array of a variadic call's arguments.
			switch a := r.Addr.(type) {
			case *ssa.FieldAddr:
				f := fieldOf(a.X, a.Field)
				if f == nil || !s.c.strs.testField(f) || s.c.strs.fieldUsed[f] {
					return false
				}
			case *ssa.IndexAddr:
				if !s.argsOnly(a.X, depth) {
					return false
				}
			default:
				return false
			}
		case *ssa.Call:
			callee := r.Call.StaticCallee()
			if callee == nil {
				return false
			}
			obj, ok := callee.Object().(*types.Func)
			if !ok || obj.Pkg() == nil || obj.Pkg() == s.c.pass.Pkg || s.c.sinks.sinkQueryIndex(obj) >= 0 {
				return false
			}
			var f sinkFact
			if s.c.pass.ImportObjectFact(obj.Origin(), &f) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// argsOnly reports whether x is the array of a variadic call's arguments:
// written by element, sliced, and the slice only passed to calls that
// expectations may be passed to.
func (s *ssaState) argsOnly(x ssa.Value, depth int) bool {
	alloc, ok := x.(*ssa.Alloc)
	if !ok {
		return false
	}
	for _, r := range *alloc.Referrers() {
		switch r := r.(type) {
		case *ssa.IndexAddr, *ssa.DebugRef:
		case *ssa.Slice:
			for _, r2 := range *r.Referrers() {
				if _, ok := r2.(*ssa.Call); !ok {
					return false
				}
			}
			if !s.expectedUses(r, depth+1) {
				return false
			}
		default:
			return false
		}
	}
	return true
}
