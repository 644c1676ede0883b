package fencedrt

import (
	"fmt"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Write is one fenced transition of one job: statement op of its table,
// fenced on the job's id and on the attempt the caller holds (a lease) or
// read (a job in manual review, a waiting job), and declaring that attempt.
// Generated code builds it; nothing else can name its query.
type Write struct {
	table   *Table
	op      Op
	id      int64
	attempt int64
	vals    Values
	err     error // returned instead of running: the write could not be built
}

// Lease is the write right of one committed claim or takeover: an opaque
// handle that only the runtime's claims mint (Claimed.Lease), after their
// COMMIT was acknowledged. Its job, attempt and table cannot be set or
// changed by anyone, and a zero Lease holds no right: a transition of a
// running job can only be built from a Lease (LeaseWrite), so an attempt
// read off the row never becomes a write right.
type Lease struct{ l *leased }

type leased struct {
	table   *Table
	id      int64
	attempt int64
}

// ID is the leased job's id (0 for a zero Lease).
func (l Lease) ID() int64 {
	if l.l == nil {
		return 0
	}
	return l.l.id
}

// Attempt is the fencing token the lease holds (0 for a zero Lease).
func (l Lease) Attempt() int64 {
	if l.l == nil {
		return 0
	}
	return l.l.attempt
}

// LeaseWrite builds the holder's transition op (Complete, Reschedule,
// ManualReview or Fail: a move out of running) of the job l leases, fenced
// on l's attempt, with the transition's own values. A zero Lease gives a
// write that fails with fencedwrite.ErrInvalidLease.
func LeaseWrite(l Lease, op Op, vals Values) *Write {
	if l.l == nil {
		return Invalid(nil, op, 0, 0, fencedwrite.ErrInvalidLease)
	}
	if tr, ok := Transitions[op]; !ok || tr.From != fencedwrite.StateRunning || tr.Bump {
		return Invalid(l.l.table, op, l.l.id, l.l.attempt, fmt.Errorf("%w: %q is not a transition a lease holder makes", fencedwrite.ErrInvalid, op))
	}
	return newWrite(l.l.table, op, l.l.id, l.l.attempt, vals)
}

// ReadWrite builds transition op of job id fenced on the attempt the caller
// read (seen): a wake-up of a waiting job, or an operator's resolution of a
// job in manual review. No other transition can be built from a read: a
// running job is written only through its lease (LeaseWrite).
func ReadWrite(t *Table, op Op, id, seen int64, vals Values) *Write {
	if tr, ok := Transitions[op]; !ok || tr.From == fencedwrite.StateRunning || tr.From == fencedwrite.StateReady && tr.To != fencedwrite.StateReady {
		return Invalid(t, op, id, seen, fmt.Errorf("%w: %q is not a transition built from a read; a running job is written only through its lease", fencedwrite.ErrInvalid, op))
	}
	return newWrite(t, op, id, seen, vals)
}

// newWrite builds transition op of job id, fenced on attempt, with the
// transition's own values (the fence's arguments are added here).
func newWrite(t *Table, op Op, id, attempt int64, vals Values) *Write {
	all := make(Values, len(vals)+4)
	for k, v := range vals {
		all[k] = v
	}
	all[ParamID], all[ParamAttempt], all[ParamWriter], all[ParamNewAttempt] = id, attempt, attempt, attempt+1
	return &Write{table: t, op: op, id: id, attempt: attempt, vals: all}
}

// Invalid is a write that could not be built: Fence returns err, which
// should match fencedwrite.ErrInvalid, instead of writing.
func Invalid(t *Table, op Op, id, attempt int64, err error) *Write {
	name := "?"
	if t != nil {
		name = t.Name()
	}
	return &Write{table: t, op: op, id: id, attempt: attempt,
		err: fmt.Errorf("%s %s#%d at attempt %d: %w", op, name, id, attempt, err)}
}

// Op is the transition's name.
func (w *Write) Op() Op { return w.op }

// ID is the job's id.
func (w *Write) ID() int64 { return w.id }

// Attempt is the attempt the write is fenced on.
func (w *Write) Attempt() int64 { return w.attempt }

// Err is the error that keeps the write from running, or nil.
func (w *Write) Err() error { return w.err }

func (w *Write) transition() Transition { return Transitions[w.op] }

func (w *Write) toAttempt() int64 {
	if w.transition().Bump {
		return w.attempt + 1
	}
	return w.attempt
}

func (w *Write) fail(outcome error, found row, cause error) *fencedwrite.WriteError {
	return &fencedwrite.WriteError{Table: w.table.Name(), ID: w.id, Op: string(w.op), Attempt: w.attempt,
		Found: found.public(), Outcome: outcome, Cause: cause}
}

// row is what a re-read of a job found: its state, attempt and the values of
// the table's compared columns.
type row struct {
	found   bool
	state   string
	attempt int64
	cols    map[string]*string
}

func (r row) public() fencedwrite.Row {
	return fencedwrite.Row{Found: r.found, State: r.state, Attempt: r.attempt}
}

// sameWrite reports whether r holds exactly what w writes: its state and
// attempt, and every value it sets that a re-read can compare.
func (w *Write) sameWrite(r row) bool {
	if r.state != w.transition().To || r.attempt != w.toAttempt() {
		return false
	}
	s, _ := w.table.Stmt(w.op)
	for _, set := range s.Sets {
		var want *string
		switch {
		case set.Param == "":
			want = &set.Literal
		default:
			v := w.vals[set.Param]
			if v == nil {
				if set.OrKeep {
					continue
				}
			} else {
				str := fmt.Sprint(v)
				want = &str
			}
		}
		got := r.cols[set.Column]
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			return false
		}
	}
	return true
}
