package fencedwrite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
	"pgregory.net/rapid"
)

var (
	states   = []string{StateReady, StateRunning, StateSucceeded, StateManualReview, StateFailed}
	outcomes = []error{ErrSuperseded, ErrAlreadySettled, ErrCommitUnknown, ErrRolledBack, ErrUnexpectedState, ErrFoundRowsOff}
)

// writes are the fenced transitions of DESIGN.md's state machine.
var writes = []struct {
	from, to string
	bump     int64
}{
	{StateRunning, StateSucceeded, 0},      // complete
	{StateRunning, StateReady, 0},          // reschedule
	{StateRunning, StateManualReview, 0},   // manual review
	{StateRunning, StateFailed, 0},         // fail
	{StateReady, StateReady, 0},            // wake-up
	{StateManualReview, StateSucceeded, 1}, // resolve succeeded
	{StateManualReview, StateReady, 1},     // resolve reconcile / refund
}

// classify must never let a caller believe something the row does not
// prove: it reports exactly one outcome, "already settled" only when the row
// shows this very write, "superseded" only when the attempt moved past the
// caller's, "rolled back" after a lost COMMIT only when the row is unchanged
// under lock, and never "rolled back" or "unknown" for a write that simply
// matched no row.
func TestClassifyIsSound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := rapid.SampledFrom(writes).Draw(t, "write")
		attempt := rapid.Int64Range(0, 20).Draw(t, "attempt")
		w := &Write{Table: &Table{Name: "refund_jobs"}, Op: "op", ID: 1,
			From: spec.from, Attempt: attempt, To: spec.to, ToAttempt: attempt + spec.bump}
		row := Row{
			Found:   rapid.Float64Range(0, 1).Draw(t, "found") < 0.95,
			State:   rapid.SampledFrom(states).Draw(t, "state"),
			Attempt: rapid.Int64Range(0, 22).Draw(t, "row attempt"),
		}
		afterCommit := rapid.Bool().Draw(t, "after commit")
		err := w.classify(row, afterCommit, nil)

		var we *WriteError
		if !errors.As(err, &we) {
			t.Fatalf("classify returned %T %v, want *WriteError", err, err)
		}
		var matched []error
		for _, o := range outcomes {
			if errors.Is(we.Outcome, o) {
				matched = append(matched, o)
			}
		}
		if len(matched) != 1 {
			t.Fatalf("outcome %v matches %v, want exactly one sentinel", we.Outcome, matched)
		}
		settled := row.Found && row.State == w.To && row.Attempt == w.ToAttempt
		pre := row.Found && row.State == w.From && row.Attempt == w.Attempt
		noop := w.From == w.To && w.Attempt == w.ToAttempt
		switch we.Outcome {
		case ErrAlreadySettled:
			if !settled || noop {
				t.Fatalf("already settled, but the row %v is not this write's result", row)
			}
		case ErrSuperseded:
			if row.Attempt <= w.Attempt {
				t.Fatalf("superseded, but the row's attempt %d is not past %d", row.Attempt, w.Attempt)
			}
			if afterCommit && !errors.Is(err, ErrCommitUnknown) {
				t.Fatal("superseded after a lost COMMIT must also say the commit is unknown")
			}
		case ErrFoundRowsOff:
			if afterCommit || !pre {
				t.Fatalf("found-rows-off for row %v after commit=%v", row, afterCommit)
			}
		case ErrRolledBack:
			if !afterCommit || !pre || noop {
				t.Fatalf("rolled back for row %v after commit=%v", row, afterCommit)
			}
		case ErrCommitUnknown:
			if !afterCommit {
				t.Fatal("commit unknown for a write that was never committed")
			}
		}
	})
}

func TestCommitMayHaveLanded(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection lost after sending", mysql.ErrInvalidConn, true},
		{"server answered with an error", &mysql.MySQLError{Number: 1180, Message: "Got error during COMMIT"}, false},
		{"context cancelled before sending", context.Canceled, false},
		{"transaction already done", sql.ErrTxDone, false},
		{"nothing was sent", driver.ErrBadConn, false},
	} {
		if got := CommitMayHaveLanded(tc.err); got != tc.want {
			t.Errorf("%s: CommitMayHaveLanded = %v, want %v", tc.name, got, tc.want)
		}
	}
}
