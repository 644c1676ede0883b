package sqlcheck

import (
	"fmt"
	"strings"
)

// Kind classifies a Problem.
type Kind int

const (
	// Unfenced: the WHERE clause lacks the state and/or token equality.
	Unfenced Kind = iota + 1
	// LeaseCheck: the WHERE clause requires the lease to be still valid.
	LeaseCheck
	// Unfenceable: REPLACE or INSERT … ON DUPLICATE KEY UPDATE, which
	// cannot carry a WHERE clause.
	Unfenceable
	// Dynamic: a query built at run time writes the table; the checker
	// cannot prove its WHERE clause.
	Dynamic
	// SelfDeclared: the SET list assigns the writer column from the row's
	// own token column, declaring whatever attempt the row holds.
	SelfDeclared
	// Unprovable: text that the MySQL grammar does not read, shaped like a
	// write of the table (a statement keyword, the table, then SET col =
	// or an upsert clause).
	Unprovable
	// Unjudged: text that names a fenced table and that no judge read,
	// the fencelint-sql helper having failed (Stop says how).
	Unjudged
)

// Problem is one unfenced write of a fenced table in one statement.
type Problem struct {
	Kind    Kind
	Verb    string // UPDATE, DELETE, REPLACE, INSERT … ON DUPLICATE KEY UPDATE
	Table   Table
	Ref     string   // the name the statement uses for the table: its alias if any
	Missing []string // Unfenced: the columns with no usable equality
	Multi   bool     // the statement names several tables
	// Unread: the statement was judged by its tokens, the parser having
	// stopped at Stop (Unprovable: the construct and its offset).
	Unread bool
	Stop   string
	// Dynamic, when a named hole completes the statement: the clause it
	// completes (WHERE, SET, or SET+WHERE for a SET list with no constant
	// WHERE after it) and the Go expression it stands for.
	Clause string
	From   string
}

// fix is the predicate to add, qualified when the statement joins tables.
func (p Problem) fix() string {
	q := ""
	if p.Multi {
		q = p.Ref + "."
	}
	return fmt.Sprintf("AND %s%s = ? AND %s%s = ?", q, p.Table.State, q, p.Table.Token)
}

// String is the diagnostic text: it names the table, what is missing and
// the fix.
func (p Problem) String() string {
	t := p.Table.Name
	switch p.Kind {
	case Unfenced:
		miss := make([]string, len(p.Missing))
		for i, m := range p.Missing {
			miss[i] = m + " = ?"
		}
		extra := ""
		if p.Multi {
			extra = fmt.Sprintf(" qualified with %s", p.Ref)
		}
		return fmt.Sprintf("unfenced %s of %s: WHERE lacks %s%s; add %s", p.Verb, t, strings.Join(miss, " and "), extra, p.fix())
	case LeaseCheck:
		return fmt.Sprintf("%s of %s requires %s to be in the future: lease expiry must not revoke write rights; fence with %s only (drop the %s check)",
			p.Verb, t, p.Table.Lease, p.fix(), p.Table.Lease)
	case Unfenceable:
		return fmt.Sprintf("%s writes existing %s rows and cannot be fenced: enqueue with a plain INSERT and change a row with UPDATE … WHERE … %s",
			p.Verb, t, p.fix())
	case Dynamic:
		if p.From != "" {
			what := "its WHERE is"
			switch p.Clause {
			case "SET":
				what = "its SET list is"
			case "SET+WHERE":
				what = "its SET list and WHERE are"
			}
			return fmt.Sprintf("the fence of this %s cannot be proven: %s built at run time from %s; a write of %s must hold %s in constant text, or be justified with //fencelint:allow <reason>",
				p.Verb, what, p.From, t, p.fix())
		}
		return fmt.Sprintf("query built at run time writes %s (%s): fencelint cannot prove it holds %s; build it from constants, or justify it with //fencelint:allow <reason>",
			t, p.Verb, p.fix())
	case SelfDeclared:
		q := ""
		if p.Multi {
			q = p.Ref + "."
		}
		return fmt.Sprintf("%s of %s sets %s%s from the row's own %s: that declares whatever attempt the row holds and defeats the database's fence; set %s%s = ? to the attempt this writer holds",
			p.Verb, t, q, p.Table.Writer, p.Table.Token, q, p.Table.Writer)
	case Unprovable:
		stop := p.Stop
		if stop == "" {
			stop = "its parser stops"
		}
		return fmt.Sprintf("%s of %s that fencelint cannot read (%s): it cannot prove it holds %s; write it in a form fencelint reads, or justify it with //fencelint:allow <reason>",
			p.Verb, t, stop, p.fix())
	case Unjudged:
		return fmt.Sprintf("SQL naming %s that fencelint could not judge: %s", t, p.Stop)
	}
	return "unknown problem"
}

// Part is a piece of a query built at run time: constant text, or a hole
// whose value is not known statically. A hole may stand for a parameter
// of the function that builds the query (Param, 1-based), which its
// callers fill in, or for a parameter of the declared function around the
// closure that uses it (Outer, 1-based), which that function's callers
// fill in. Name is the Go expression the hole stands for ("cond",
// "strconv.FormatInt(id, 10)"), when known: the unprovable message names
// it.
type Part struct {
	Text  string
	Hole  bool
	Param int
	Outer int
	Name  string
}
