package analyzer

import (
	"go/ast"
	"go/constant"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/types/typeutil"
)

// sqlc's sqlc.slice(ids): the generated code (sqlc v1.2x, MySQL) holds the
// query as a constant with the marker /*SLICE:ids*/? and expands it at run
// time:
//
//	query = strings.Replace(query, "/*SLICE:ids*/?", strings.Repeat(",?", len(arg.Ids))[1:], 1)
//	…
//	query = strings.Replace(query, "/*SLICE:ids*/?", "NULL", 1)
//
// Both replacements are a list of placeholders or NULL: a value, never SQL
// that could add an OR or drop the fence. So such a Replace keeps the query
// as it is for fencelint, the marker read as one placeholder; any other
// replacement (a run-time string, another old text) stays an edit.

var sqlcMarker = regexp.MustCompile(`^/\*SLICE:[A-Za-z_][A-Za-z0-9_]*\*/\?$`)

// sqlcValues reports whether s is what sqlc writes in place of a marker:
// NULL, or placeholders and commas.
func sqlcValues(s string) bool {
	if s == "NULL" {
		return true
	}
	return s != "" && strings.Trim(s, "?, ") == ""
}

func isStringsReplace(fn *types.Func) bool {
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "strings" && fn.Signature().Recv() == nil &&
		(fn.Name() == "Replace" || fn.Name() == "ReplaceAll")
}

// sqlcSlice returns the marker when call is sqlc's expansion of one
// (strings.Replace or ReplaceAll of the marker with NULL, placeholders, or
// strings.Repeat(",?", n)[1:]).
func (sk *sinkUnit) sqlcSlice(call *ast.CallExpr, fn *types.Func) (string, bool) {
	if !isStringsReplace(fn) || len(call.Args) < 3 || call.Ellipsis.IsValid() {
		return "", false
	}
	old, ok := sk.strs.static(call.Args[1])
	if !ok || !sqlcMarker.MatchString(old) {
		return "", false
	}
	repl := ast.Unparen(call.Args[2])
	if s, ok := sk.strs.static(repl); ok {
		return old, sqlcValues(s)
	}
	sl, ok := repl.(*ast.SliceExpr)
	if !ok {
		return "", false
	}
	rep, ok := ast.Unparen(sl.X).(*ast.CallExpr)
	if !ok || len(rep.Args) != 2 {
		return "", false
	}
	rf, _ := typeutil.Callee(sk.info, rep).(*types.Func)
	if rf == nil || rf.Pkg() == nil || rf.Pkg().Path() != "strings" || rf.Name() != "Repeat" {
		return "", false
	}
	unit, ok := sk.strs.static(rep.Args[0])
	return old, ok && sqlcValues(unit)
}

// sqlcSliceSSA is sqlcSlice on an SSA call.
func sqlcSliceSSA(call *ssa.Call) (string, bool) {
	fn := call.Call.StaticCallee()
	if fn == nil {
		return "", false
	}
	obj, _ := fn.Object().(*types.Func)
	if !isStringsReplace(obj) || len(call.Call.Args) < 3 {
		return "", false
	}
	old, ok := constStr(call.Call.Args[1])
	if !ok || !sqlcMarker.MatchString(old) {
		return "", false
	}
	repl := call.Call.Args[2]
	if s, ok := constStr(repl); ok {
		return old, sqlcValues(s)
	}
	sl, ok := repl.(*ssa.Slice)
	if !ok {
		return "", false
	}
	rep, ok := sl.X.(*ssa.Call)
	if !ok || len(rep.Call.Args) != 2 {
		return "", false
	}
	rf := rep.Call.StaticCallee()
	if rf == nil || rf.Pkg == nil || rf.Pkg.Pkg.Path() != "strings" || rf.Name() != "Repeat" {
		return "", false
	}
	unit, ok := constStr(rep.Call.Args[0])
	return old, ok && sqlcValues(unit)
}

func constStr(v ssa.Value) (string, bool) {
	k, ok := v.(*ssa.Const)
	if !ok || k.Value == nil || k.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(k.Value), true
}

// expandSlice reads the marker as one placeholder in the text of ts.
func expandSlice(ts []template, marker string) []template {
	out := make([]template, 0, len(ts))
	for _, t := range ts {
		nt := make(template, len(t))
		for i, p := range t {
			if !p.Hole {
				p.Text = strings.ReplaceAll(p.Text, marker, "?")
			}
			nt[i] = p
		}
		out = append(out, nt)
	}
	return out
}
