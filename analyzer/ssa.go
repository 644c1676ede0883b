package analyzer

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"golang.org/x/tools/go/ssa"
)

// Bounds that keep the SSA walk linear on pathological code.
const (
	maxTemplates = 32    // alternative values of one string
	maxDepth     = 24    // nesting of concatenations, phis and calls
	maxSteps     = 10000 // values resolved for one string
)

// template is a string built at run time: constant text and holes.
type template []sqlcheck.Part

func (t template) static() (string, bool) {
	var b strings.Builder
	for _, p := range t {
		if p.Hole {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

var holeTemplate = []template{{{Hole: true}}}

// ssaState is the SSA form of the package, built only when a candidate
// needs it.
type ssaState struct {
	c         *checker
	pkg       *ssa.Package
	constUses map[*ssa.Const][]ssa.Instruction
	stores    map[*ssa.Global][]ssa.Value
	returns   map[*ssa.Function][]ssa.Value
	memo      map[ssa.Value][]template
	busy      map[ssa.Value]bool
	cycles    int // cycles cut so far
	steps     int // values resolved so far
}

func (c *checker) runSSA() {
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
	}
	localIdents := map[ast.Expr]int{}
	for i, l := range c.locals {
		localIdents[l.ident] = i
	}
	localVals := make([]ssa.Value, len(c.locals))
	sinkCalls := map[token.Pos]int{}
	for i, k := range c.sinks {
		sinkCalls[k.call.Lparen] = i
	}
	sinkVals := make([]ssa.Value, len(c.sinks))
	var roots []ssa.Value

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
					if len(in.Results) == 1 {
						s.returns[fn] = append(s.returns[fn], in.Results[0])
					}
				case *ssa.BinOp:
					if in.Op == token.ADD && isString(in.Type()) && !c.astRoots[in.Pos()] {
						roots = append(roots, in)
					}
				case *ssa.Call:
					if i, ok := sinkCalls[in.Pos()]; ok {
						if k := c.sinks[i]; isSinkCall(in, k) {
							sinkVals[i] = in.Call.Args[argIndex(in, k)]
						}
					}
					if isSSASprintf(in) && !c.astRoots[in.Pos()] {
						roots = append(roots, in)
					}
				}
				ops = instr.Operands(ops[:0])
				for _, op := range ops {
					if k, ok := (*op).(*ssa.Const); ok && k.Value != nil && k.Value.Kind() == constant.String {
						s.constUses[k] = append(s.constUses[k], instr)
					}
				}
			}
		}
	}

	// Constants stored in locals: judged alone unless every path uses them
	// as the head (or tail) of a longer string.
	for i, l := range c.locals {
		if v := localVals[i]; v != nil && !s.alone(v, map[ssa.Value]bool{}) {
			continue
		}
		c.add(l.expr.Pos(), problemsMessage(l.problems))
	}
	// Run-time concatenations (and fmt.Sprintf) of static parts, judged
	// where the whole string is used.
	for _, r := range roots {
		if !s.alone(r, map[ssa.Value]bool{}) {
			continue
		}
		var ps []sqlcheck.Problem
		s.steps = 0
		for _, t := range s.resolve(r, 0) {
			if text, ok := t.static(); ok {
				ps = append(ps, sqlcheck.Check(text, c.cfg)...)
			}
		}
		if len(ps) > 0 {
			c.add(r.Pos(), problemsMessage(ps))
		}
	}
	// Sinks: the alternatives with holes. Static alternatives were judged
	// where they were built.
	for i, k := range c.sinks {
		v := sinkVals[i]
		if v == nil {
			continue
		}
		var ps []sqlcheck.Problem
		s.steps = 0
		for _, t := range s.resolve(v, 0) {
			if _, ok := t.static(); !ok {
				ps = append(ps, sqlcheck.CheckTemplate(t, c.cfg)...)
			}
		}
		if len(ps) > 0 {
			c.add(k.query.Pos(), problemsMessage(ps))
		}
	}
}

// isSinkCall checks that the SSA call is the recorded AST sink call.
func isSinkCall(call *ssa.Call, k sink) bool {
	i := argIndex(call, k)
	return i >= 0 && i < len(call.Call.Args)
}

// argIndex maps the AST query argument to the SSA argument: a static
// method call has the receiver first.
func argIndex(call *ssa.Call, k sink) int {
	i := -1
	for j, a := range k.call.Args {
		if a == k.query {
			i = j
		}
	}
	if i >= 0 && !call.Call.IsInvoke() && call.Call.Signature().Recv() != nil {
		i++ // static method call: the receiver is Args[0]
	}
	return i
}

func isSSASprintf(call *ssa.Call) bool {
	fn := call.Call.StaticCallee()
	return fn != nil && fn.Name() == "Sprintf" && fn.Pkg != nil && fn.Pkg.Pkg.Path() == "fmt" && fn.Signature.Recv() == nil
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
			if isSSASprintf(u) {
				continue // judged as part of the formatted string
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
// array of a fmt.Sprintf call.
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
			if call, ok := r2.(*ssa.Call); ok && isSSASprintf(call) {
				return true
			}
		}
	}
	return false
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
	ts := s.resolve0(v, depth+1)
	delete(s.busy, v)
	if s.cycles == before {
		// A value resolved across a cut cycle depends on where the walk
		// entered the cycle: do not reuse it.
		s.memo[v] = ts
	}
	return ts
}

func (s *ssaState) resolve0(v ssa.Value, depth int) []template {
	switch x := v.(type) {
	case *ssa.Const:
		if x.Value == nil {
			if isString(x.Type()) {
				return []template{{}}
			}
			return holeTemplate
		}
		if x.Value.Kind() == constant.String {
			return []template{{{Text: constant.StringVal(x.Value)}}}
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
		if isString(x.X.Type()) {
			return s.resolve(x.X, depth)
		}
	case *ssa.UnOp:
		if g, ok := x.X.(*ssa.Global); ok && x.Op == token.MUL && len(s.stores[g]) > 0 {
			var out []template
			for _, st := range s.stores[g] {
				out = union(out, s.resolve(st, depth))
			}
			return out
		}
	case *ssa.Call:
		if isSSASprintf(x) {
			return s.sprintf(x.Call.Args[0], x.Call.Args[1], depth)
		}
		if fn := x.Call.StaticCallee(); isBuilderMethod(fn, "String") && len(x.Call.Args) == 1 {
			return s.builder(x.Call.Args[0], depth)
		}
		if fn := x.Call.StaticCallee(); fn != nil && fn.Pkg == s.pkg && len(s.returns[fn]) > 0 {
			var out []template
			for _, r := range s.returns[fn] {
				out = union(out, s.resolve(r, depth))
			}
			return out
		}
	}
	return holeTemplate
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

// concat is the cross product of two sets of alternatives, bounded.
func concat(a, b []template) []template {
	var out []template
	for _, x := range a {
		for _, y := range b {
			if len(out) == maxTemplates {
				return out
			}
			t := make(template, 0, len(x)+len(y))
			t = append(t, x...)
			for _, p := range y {
				t = appendPart(t, p)
			}
			out = append(out, t)
		}
	}
	return out
}

func appendPart(t template, p sqlcheck.Part) template {
	if n := len(t); n > 0 && !p.Hole && !t[n-1].Hole {
		t[n-1].Text += p.Text
		return t
	}
	if n := len(t); n > 0 && p.Hole && t[n-1].Hole {
		return t
	}
	return append(t, p)
}

func union(a, b []template) []template {
	for _, t := range b {
		if len(a) == maxTemplates {
			break
		}
		a = append(a, t)
	}
	return a
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
		out = union(out, s.format(text, vals, ok, depth))
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

// format walks a printf format. Verbs whose argument is known become text;
// others become holes.
func (s *ssaState) format(f string, vals []ssa.Value, known bool, depth int) []template {
	out := []template{{}}
	text := func(t string) { out = concat(out, []template{{{Text: t}}}) }
	argi := 0
	for i := 0; i < len(f); {
		j := strings.IndexByte(f[i:], '%')
		if j < 0 {
			text(f[i:])
			break
		}
		text(f[i : i+j])
		i += j + 1
		start := i
		for i < len(f) && strings.IndexByte("+-# 0123456789.*[]", f[i]) >= 0 {
			i++
		}
		if i >= len(f) {
			out = concat(out, holeTemplate)
			break
		}
		spec := f[start:i]
		verb := f[i]
		i++
		if verb == '%' && spec == "" {
			text("%")
			continue
		}
		if !known || strings.ContainsAny(spec, "*[") {
			known = false // argument positions are lost from here on
			out = concat(out, holeTemplate)
			continue
		}
		var v ssa.Value
		if argi < len(vals) {
			v = vals[argi]
		}
		argi++
		out = concat(out, s.verb(spec, verb, v, depth))
	}
	return out
}

func (s *ssaState) verb(spec string, verb byte, v ssa.Value, depth int) []template {
	if v == nil {
		return holeTemplate
	}
	if k, ok := v.(*ssa.Const); ok && k.Value != nil {
		if gv, ok := goValue(k.Value, k.Type()); ok {
			return []template{{{Text: fmt.Sprintf("%"+spec+string(verb), gv)}}}
		}
		return holeTemplate
	}
	if !isString(v.Type()) || (verb != 's' && verb != 'v') || spec != "" {
		return holeTemplate
	}
	if types.NewMethodSet(v.Type()).Len() > 0 {
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

// builder returns what a strings.Builder or bytes.Buffer holds: the writes
// made to it in this function, in source order, each a template, ending
// with a hole. Order, branches and loops are not modelled, so the result is
// never static: a builder's SQL is judged as built at run time.
func (s *ssaState) builder(r ssa.Value, depth int) []template {
	refs := r.Referrers()
	if refs == nil {
		return holeTemplate
	}
	type write struct {
		pos token.Pos
		ts  []template
	}
	var ws []write
	for _, ref := range *refs {
		switch u := ref.(type) {
		case *ssa.Call:
			fn := u.Call.StaticCallee()
			switch {
			case isBuilderMethod(fn, "WriteString") && len(u.Call.Args) == 2 && u.Call.Args[0] == r:
				ws = append(ws, write{u.Pos(), s.resolve(u.Call.Args[1], depth)})
			case fn != nil && fn.Signature.Recv() != nil && isBuilderType(fn.Signature.Recv().Type()) &&
				!strings.HasPrefix(fn.Name(), "Write"):
				// String, Len, Grow, …: no content added.
			default:
				ws = append(ws, write{u.Pos(), holeTemplate}) // Write*, or a helper that may write
			}
		case *ssa.MakeInterface:
			for _, ref2 := range *u.Referrers() {
				call, ok := ref2.(*ssa.Call)
				if !ok {
					continue
				}
				fn := call.Call.StaticCallee()
				if fn != nil && fn.Name() == "Fprintf" && fn.Pkg != nil && fn.Pkg.Pkg.Path() == "fmt" &&
					len(call.Call.Args) == 3 && call.Call.Args[0] == u {
					ws = append(ws, write{call.Pos(), s.sprintf(call.Call.Args[1], call.Call.Args[2], depth)})
				} else {
					ws = append(ws, write{call.Pos(), holeTemplate})
				}
			}
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].pos < ws[j].pos })
	out := []template{{}}
	for _, w := range ws {
		out = concat(out, w.ts)
	}
	return concat(out, holeTemplate)
}
