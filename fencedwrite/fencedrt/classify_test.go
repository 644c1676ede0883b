package fencedrt_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
	"pgregory.net/rapid"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

var (
	states   = []string{fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateSucceeded, fencedwrite.StateManualReview, fencedwrite.StateFailed}
	outcomes = []error{fencedwrite.ErrSuperseded, fencedwrite.ErrAlreadySettled, fencedwrite.ErrCommitUnknown, fencedwrite.ErrRolledBack,
		fencedwrite.ErrUnexpectedState, fencedwrite.ErrFoundRowsOff, fencedwrite.ErrInvalid}
	transitions = []fencedrt.Op{fencedrt.OpComplete, fencedrt.OpReschedule, fencedrt.OpManualReview, fencedrt.OpFail,
		fencedrt.OpWakeUp, fencedrt.OpResolveSucceeded, fencedrt.OpResolveReconcile, fencedrt.OpResolveRefund}
	texts = []string{"re_1", "re_2", "refund", "reconcile", "why", "proof"}
)

func refundJobs(t interface{ Fatal(...any) }) *fencedrt.Table {
	table, ok := fencedrt.Registered(ent.RefundJobFencedTable)
	if !ok {
		t.Fatal("the generated package declared no refund_jobs table")
	}
	return table
}

// drawValues draws the values of a transition: each is nil or a short text.
func drawValues(t *rapid.T, label string) fencedrt.Values {
	v := fencedrt.Values{}
	for _, p := range []fencedrt.Param{fencedrt.ParamProviderRef, fencedrt.ParamNextAction, fencedrt.ParamLastError,
		fencedrt.ParamReason, fencedrt.ParamEvidence} {
		if rapid.Bool().Draw(t, label+" "+string(p)+" set") {
			v[p] = rapid.SampledFrom(texts).Draw(t, label+" "+string(p))
		} else {
			v[p] = nil
		}
	}
	v[fencedrt.ParamDelay] = int64(0)
	return v
}

// classify must never let a caller believe something the row does not
// prove: it reports exactly one outcome, "already settled" only when the row
// shows this very write (state, attempt and every value it sets), "superseded"
// only when the attempt moved past the caller's, "rolled back" after a lost
// COMMIT only when the row is unchanged under lock, and never "rolled back"
// or "unknown" for a write that simply matched no row.
func TestClassifyIsSound(t *testing.T) {
	table := refundJobs(t)
	spec := table.Spec()
	rapid.Check(t, func(t *rapid.T) {
		op := rapid.SampledFrom(transitions).Draw(t, "op")
		tr := fencedrt.Transitions[op]
		attempt := rapid.Int64Range(1, 20).Draw(t, "attempt")
		w := fencedrt.NewTestWrite(table, op, 1, attempt, drawValues(t, "write"))
		cols := map[string]*string{}
		for _, c := range spec.Compared {
			if rapid.Bool().Draw(t, c+" set") {
				v := rapid.SampledFrom(texts).Draw(t, c)
				cols[c] = &v
			}
		}
		row := fencedrt.NewTestRow(rapid.Float64Range(0, 1).Draw(t, "found") < 0.95,
			rapid.SampledFrom(states).Draw(t, "state"), rapid.Int64Range(0, 22).Draw(t, "row attempt"), cols)
		afterCommit := rapid.Bool().Draw(t, "after commit")
		err := w.Classify(row, afterCommit, nil)

		var we *fencedwrite.WriteError
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
		toAttempt := attempt
		if tr.Bump {
			toAttempt++
		}
		found := we.Found
		pre := found.Found && found.State == tr.From && found.Attempt == attempt
		noop := tr.From == tr.To && !tr.Bump
		switch we.Outcome {
		case fencedwrite.ErrAlreadySettled:
			if noop || !found.Found || found.State != tr.To || found.Attempt != toAttempt || !w.SameWrite(row) {
				t.Fatalf("already settled, but the row %v is not this write's result", found)
			}
			if tr.Bump && !afterCommit {
				// An attempt+1 move that matched no row wrote nothing:
				// another writer holding the same attempt made it.
				t.Fatalf("already settled, but %s matched no row and sent no COMMIT: the row %v is another writer's", op, found)
			}
		case fencedwrite.ErrSuperseded:
			if found.Attempt <= attempt {
				t.Fatalf("superseded, but the row's attempt %d is not past %d", found.Attempt, attempt)
			}
			if afterCommit && !errors.Is(err, fencedwrite.ErrCommitUnknown) {
				t.Fatal("superseded after a lost COMMIT must also say the commit is unknown")
			}
		case fencedwrite.ErrFoundRowsOff:
			if afterCommit || !pre {
				t.Fatalf("found-rows-off for row %v after commit=%v", found, afterCommit)
			}
		case fencedwrite.ErrRolledBack:
			if !afterCommit || !pre || noop {
				t.Fatalf("rolled back for row %v after commit=%v", found, afterCommit)
			}
		case fencedwrite.ErrCommitUnknown:
			if !afterCommit {
				t.Fatal("commit unknown for a write that was never committed")
			}
		}
	})
}

// The same state and attempt are not the same write: a completion with
// another refund id, or a reschedule with another next action, is not
// "already settled by this very write".
func TestClassifyComparesTheWholeWrite(t *testing.T) {
	table := refundJobs(t)
	str := func(s string) *string { return &s }
	complete := fencedrt.NewTestWrite(table, fencedrt.OpComplete, 1, 3, fencedrt.Values{fencedrt.ParamProviderRef: "re_2"})
	landed := fencedrt.NewTestRow(true, fencedwrite.StateSucceeded, 3, map[string]*string{"provider_refund_id": str("re_1")})
	if err := complete.Classify(landed, false, nil); !errors.Is(err, fencedwrite.ErrUnexpectedState) {
		t.Errorf("complete re_2 over a completion with re_1: %v, want ErrUnexpectedState", err)
	}
	same := fencedrt.NewTestRow(true, fencedwrite.StateSucceeded, 3, map[string]*string{"provider_refund_id": str("re_2")})
	if err := complete.Classify(same, false, nil); !errors.Is(err, fencedwrite.ErrAlreadySettled) {
		t.Errorf("complete re_2 over itself: %v, want ErrAlreadySettled", err)
	}
	resched := fencedrt.NewTestWrite(table, fencedrt.OpReschedule, 1, 3, fencedrt.Values{fencedrt.ParamNextAction: "refund",
		fencedrt.ParamDelay: int64(0), fencedrt.ParamProviderRef: nil, fencedrt.ParamLastError: nil})
	other := fencedrt.NewTestRow(true, fencedwrite.StateReady, 3, map[string]*string{"next_action": str("reconcile")})
	if err := resched.Classify(other, true, nil); !errors.Is(err, fencedwrite.ErrUnexpectedState) {
		t.Errorf("reschedule to refund over a reschedule to reconcile: %v, want ErrUnexpectedState", err)
	}
}

// Two resolutions of one job in manual review at the same attempt (two
// reconcilers acting on one observation, or two operators): the loser's
// statement matches no row, and the row it then reads is exactly what its
// own write would have made. It wrote nothing: it is superseded, never
// "already settled" (the chaos run's history caught the loser acknowledged
// beside the winner). Only after its own COMMIT, re-read under lock, may
// such a row be its write.
func TestAResolutionThatMatchedNoRowIsSuperseded(t *testing.T) {
	table := refundJobs(t)
	for _, op := range []fencedrt.Op{fencedrt.OpResolveReconcile, fencedrt.OpResolveRefund} {
		w := fencedrt.NewTestWrite(table, op, 1, 2, fencedrt.Values{})
		winners := fencedrt.NewTestRow(true, fencedwrite.StateReady, 3, map[string]*string{})
		if err := w.Classify(winners, false, nil); !errors.Is(err, fencedwrite.ErrSuperseded) || errors.Is(err, fencedwrite.ErrAlreadySettled) {
			t.Errorf("%s over another writer's identical move: %v, want ErrSuperseded", op, err)
		}
		if err := w.Classify(winners, true, nil); errors.Is(err, fencedwrite.ErrSuperseded) {
			t.Errorf("%s re-read under lock after its own COMMIT: %v, want it taken for its own write", op, err)
		}
	}
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
		if got := fencedwrite.CommitMayHaveLanded(tc.err); got != tc.want {
			t.Errorf("%s: CommitMayHaveLanded = %v, want %v", tc.name, got, tc.want)
		}
	}
}
