package analyzer

import (
	"strings"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// Bounds that keep the walks linear on pathological code.
const (
	maxTemplates = 32    // alternative values of one string
	maxDepth     = 24    // nesting of concatenations, phis and calls
	maxSteps     = 10000 // values resolved for one string
)

// template is a string built at run time: constant text and holes. A hole
// may stand for a string parameter of the function that builds it
// (Part.Param = i+1 for parameter i), which a caller fills in with its
// argument, or for an unknown edit of one (Part.Param = -(i+1)), which a
// caller fills in with the edit of its argument (see edited).
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

// params reports whether t holds a parameter of its function.
func (t template) params() bool {
	for _, p := range t {
		if p.Param != 0 {
			return true
		}
	}
	return false
}

// opaque reports whether t holds a hole that is not a parameter (an
// enclosing function's parameter, Outer, is one here).
func (t template) opaque() bool {
	for _, p := range t {
		if p.Hole && p.Param == 0 {
			return true
		}
	}
	return false
}

// unknown reports whether t holds a hole that no caller fills in: neither
// a parameter of its function nor one of the declared function around it.
func (t template) unknown() bool {
	for _, p := range t {
		if p.Hole && p.Param == 0 && p.Outer == 0 {
			return true
		}
	}
	return false
}

// outer reports whether t holds a parameter of the declared function
// around the closure that builds it.
func (t template) outer() bool {
	for _, p := range t {
		if p.Outer != 0 {
			return true
		}
	}
	return false
}

// named returns ts with every hole that has no name named name (the
// expression the holes come from), copying only what changes.
func named(ts []template, name string) []template {
	return renamed(ts, name, func(p sqlcheck.Part) bool { return p.Hole && p.Name == "" })
}

// renamed returns ts with the parts that which selects named name,
// copying only the templates that change.
func renamed(ts []template, name string, which func(sqlcheck.Part) bool) []template {
	if name == "" {
		return ts
	}
	var out []template
	for i, t := range ts {
		var c template
		for j, p := range t {
			if which(p) {
				if c == nil {
					c = append(template(nil), t...)
				}
				c[j].Name = name
			}
		}
		if c != nil {
			if out == nil {
				out = append([]template(nil), ts...)
			}
			out[i] = c
		}
	}
	if out == nil {
		return ts
	}
	return out
}

// namedHole is a hole standing for the expression name.
func namedHole(name string) []template { return []template{{{Hole: true, Name: name}}} }

// passThrough reports whether t is exactly one parameter, unedited.
func (t template) passThrough() bool { return len(t) == 1 && t[0].Param > 0 }

func (t template) mentions(cfg *sqlcheck.Config) bool {
	for _, p := range t {
		if !p.Hole && cfg.Mentions(p.Text) {
			return true
		}
	}
	return false
}

func anyMentions(ts []template, cfg *sqlcheck.Config) bool {
	for _, t := range ts {
		if t.mentions(cfg) {
			return true
		}
	}
	return false
}

func anyParams(ts []template) bool {
	for _, t := range ts {
		if t.params() {
			return true
		}
	}
	return false
}

var holeTemplate = []template{{{Hole: true}}}

func textTemplate(s string) []template { return []template{{{Text: s}}} }

func paramTemplate(i int) []template { return []template{{{Hole: true, Param: i + 1}}} }

// namedParam is paramTemplate for a parameter named name.
func namedParam(i int, name string) []template {
	return []template{{{Hole: true, Param: i + 1, Name: name}}}
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
	n := len(t)
	switch {
	case n > 0 && !p.Hole && !t[n-1].Hole:
		t[n-1].Text += p.Text
		return t
	case n > 0 && p.Hole && t[n-1].Hole && p.Param == t[n-1].Param && p.Param <= 0 && p.Outer == t[n-1].Outer:
		return t
	case !p.Hole && p.Text == "":
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

// substitute fills the parameter holes of ts with the alternatives of the
// corresponding arguments; arg returns nil for an argument it does not
// know, which becomes a hole.
func substitute(ts []template, arg func(i int) []template) []template {
	var out []template
	args := map[int][]template{}
	for _, t := range ts {
		alts := []template{{}}
		for _, p := range t {
			if p.Param == 0 {
				alts = concat(alts, []template{{p}})
				continue
			}
			i := p.Param
			if i < 0 {
				i = -i
			}
			a, ok := args[i]
			if !ok {
				a = arg(i - 1)
				if a == nil {
					a = holeTemplate
				}
				args[i] = a
			}
			if p.Param < 0 {
				a = edited(a, nil)
			}
			alts = concat(alts, a)
		}
		out = union(out, alts)
	}
	return out
}

// edited is what an unknown function of a query returns
// (strings.Replace(q, " AND attempt = ?", "", 1), q[:n], …): the query's
// text followed by a hole, so that a write it reveals is judged as built
// at run time. An alternative holding parameters becomes an edit of each
// (filled in by callers); the others give a plain hole. With a nil cfg,
// every alternative with text is kept.
func edited(ts []template, cfg *sqlcheck.Config) []template {
	var out []template
	for _, t := range ts {
		if cfg == nil && len(t) > 0 || cfg != nil && t.mentions(cfg) {
			out = union(out, concat([]template{t}, holeTemplate))
			continue
		}
		for _, p := range t {
			if p.Param != 0 {
				i := p.Param
				if i > 0 {
					i = -i
				}
				out = union(out, []template{{{Hole: true, Param: i, Name: p.Name}}})
			}
		}
	}
	if out == nil {
		return holeTemplate
	}
	return out
}

// formatTemplates walks a printf format. Verbs whose argument verb
// returns become its alternatives; with known false (argument positions
// lost), verbs become holes.
func formatTemplates(f string, known bool, verb func(i int, spec string, verb byte) []template) []template {
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
		v := f[i]
		i++
		if v == '%' && spec == "" {
			text("%")
			continue
		}
		if !known || strings.ContainsAny(spec, "*[") {
			known = false // argument positions are lost from here on
			out = concat(out, holeTemplate)
			continue
		}
		out = concat(out, verb(argi, spec, v))
		argi++
	}
	return out
}
