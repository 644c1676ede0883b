package analyzer

import (
	"fmt"
	"strings"
)

// sinkFact marks a function that sends a string parameter to a SQL sink:
// each query it may send is one of Queries, whose parameter holes are the
// function's arguments. A call of the function is judged as a sink.
type sinkFact struct{ Queries []template }

func (*sinkFact) AFact() {}

func (f *sinkFact) String() string { return "sink" + render(f.Queries) }

// returnFact records what a function returns as its first result when it
// is a query or depends on a string parameter: its callers see the query.
type returnFact struct{ Returns []template }

func (*returnFact) AFact() {}

func (f *returnFact) String() string { return "returns" + render(f.Returns) }

func render(ts []template) string {
	alts := make([]string, len(ts))
	for i, t := range ts {
		var b strings.Builder
		for _, p := range t {
			switch {
			case p.Param > 0:
				fmt.Fprintf(&b, "{%d}", p.Param-1)
			case p.Hole:
				b.WriteString("{?}")
			default:
				b.WriteString(p.Text)
			}
		}
		alts[i] = fmt.Sprintf("%q", b.String())
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// exportFacts exports the summaries that callers in other packages can
// use: those of exported functions and methods that take a string (or
// return a query of a package that names a fenced table). A sink known by
// its name needs no fact.
func (c *checker) exportFacts() {
	if c.wrappers.command() {
		return // nothing imports a command
	}
	for _, fi := range c.wrappers.funcOrder {
		if fi.fn == nil || !fi.fn.Exported() || !hasStringParam(fi.fn.Signature()) && !c.strs.mentionTable {
			continue
		}
		s := c.wrappers.summary(fi)
		if len(s.sinks) > 0 && c.sinks.sinkQueryIndex(fi.fn) < 0 {
			c.pass.ExportObjectFact(fi.fn, &sinkFact{Queries: s.sinks})
		}
		if s.returns != nil {
			c.pass.ExportObjectFact(fi.fn, &returnFact{Returns: s.returns})
		}
	}
}
