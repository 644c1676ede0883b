package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/fencekit/fencekit/fencedwrite"
)

// row is a job's row as far as the model cares.
type row struct {
	state   string
	attempt int64
}

func (r row) String() string { return fmt.Sprintf("%s@%d", r.state, r.attempt) }

func compareRows(a, b row) int {
	if c := strings.Compare(a.state, b.state); c != 0 {
		return c
	}
	return cmp.Compare(a.attempt, b.attempt)
}

// rows is the set of rows a job could be at, sorted; a model state. It is
// never modified once built.
type rows []row

func (s rows) String() string {
	names := make([]string, len(s))
	for i, r := range s {
		names[i] = r.String()
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// opFinal is the kind of the final read of a job: the row the database
// holds at the end, which must be one of the possible rows.
const opFinal = "final"

// op is one operation of the model: a claim, takeover, write or provider call
// paired from its call and return events, or a job's final read.
type op struct {
	proc     string // the process incarnation, "database" for the final read
	id       int64
	kind     string // OpClaim, OpTakeover, OpResolve, OpWrite, OpProvider or opFinal
	job      int64
	attempt  int64
	to       string // write: the target state; final: the state read
	detail   string // provider: the call kind
	answer   string // provider: the answer
	result   string
	call     int64
	ret      int64
	returned bool
}

// unknown reports whether the operation may or may not have taken effect.
func (o *op) unknown() bool {
	return !o.returned || o.result == ResultUnknown || o.result == ResultError
}

// end is the latest time the operation can take effect: its return, or
// pending (after every event and the final reads) when its outcome is
// unknown, as a COMMIT whose reply was lost may still land.
func (o *op) end(pending int64) int64 {
	if o.unknown() {
		return pending
	}
	return o.ret
}

// source is the row an acknowledged claim, takeover, resolution or write
// needs.
func (o *op) source() row {
	switch o.kind {
	case OpClaim:
		return row{fencedwrite.StateReady, o.attempt - 1}
	case OpTakeover:
		return row{fencedwrite.StateRunning, o.attempt - 1}
	case OpResolve:
		return row{fencedwrite.StateManualReview, o.attempt - 1}
	case opFinal:
		return row{o.to, o.attempt}
	}
	return row{fencedwrite.StateRunning, o.attempt}
}

// target is the row a claim, takeover, resolution or write makes.
func (o *op) target() row {
	switch o.kind {
	case OpWrite:
		return row{o.to, o.attempt}
	case OpResolve:
		return row{fencedwrite.StateReady, o.attempt}
	}
	return row{fencedwrite.StateRunning, o.attempt}
}

// next appends to out the rows the job can be at after o, when it was at r.
func (o *op) next(r row, out rows) rows {
	src, dst := o.source(), o.target()
	switch {
	case o.kind == opFinal:
		if r == src {
			out = append(out, r)
		}
	case o.result == ResultOK:
		if r == src {
			out = append(out, dst)
		}
	case o.kind != OpWrite:
		out = append(out, r)
		if o.unknown() && r == src {
			out = append(out, dst)
		}
	case o.result == ResultAlreadySettled:
		if r == src || r == dst {
			out = append(out, dst)
		}
	case o.result == ResultSuperseded || o.result == ResultRefused:
		if r != src {
			out = append(out, r)
		}
	default:
		out = append(out, r)
		if o.unknown() && r == src {
			out = append(out, dst)
		}
	}
	return out
}

// step returns the rows the job can be at after o, from the rows in s; none
// when o cannot apply.
func step(s rows, o *op) rows {
	var out rows
	for _, r := range s {
		out = o.next(r, out)
	}
	slices.SortFunc(out, compareRows)
	return slices.Compact(out)
}

// initial is where every job starts.
var initial = rows{{fencedwrite.StateReady, 0}}

// model is the job state machine as porcupine sees it: the input of an
// operation is its *op, which carries its result too.
var model = porcupine.Model{
	Init: func() any { return initial },
	Step: func(state, input, _ any) (bool, any) {
		next := step(state.(rows), input.(*op))
		return len(next) > 0, next
	},
	Equal:                     func(a, b any) bool { return slices.Equal(a.(rows), b.(rows)) },
	DescribeOperation:         func(input, _ any) string { o := input.(*op); return o.proc + " " + o.describe() },
	DescribeState:             func(state any) string { return state.(rows).String() },
	DescribeOperationMetadata: func(any) string { return "" },
}
