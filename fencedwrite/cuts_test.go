package fencedwrite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// cutStep is the stride of the byte sweep: every cut point of a packet is
// not needed, but every packet is cut somewhere.
const cutStep = 11

// lockedRow reads the job under a row lock on a clean connection: the lock
// waits for a cut session's transaction to end (commit or rollback), so the
// row it shows is final.
func (e *env) lockedRow(id int64) (state string, attempt int64, ledgerStatus string) {
	e.t.Helper()
	tx, err := e.raw.BeginTx(e.t.Context(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.QueryRow("SELECT j.state, j.attempt, r.status FROM refund_jobs j JOIN refunds r ON r.operation_key = j.operation_key WHERE j.id = ? FOR UPDATE", id).
		Scan(&state, &attempt, &ledgerStatus); err != nil {
		e.t.Fatal(err)
	}
	return state, attempt, ledgerStatus
}

// onlyOne returns the one sentinel of set that err matches, or an error
// saying it matches none or several.
func onlyOne(err error, set ...error) (error, error) {
	var got []error
	for _, s := range set {
		if errors.Is(err, s) {
			got = append(got, s)
		}
	}
	if len(got) != 1 {
		return nil, fmt.Errorf("%v matches %d of the outcomes %v", err, len(got), got)
	}
	return got[0], nil
}

// applyOutcomes are the outcomes a completion with its ledger write may end
// in after a cut.
var applyOutcomes = []error{fencedwrite.ErrSuperseded, fencedwrite.ErrAlreadySettled, fencedwrite.ErrCommitUnknown, fencedwrite.ErrRolledBack,
	fencedwrite.ErrUnexpectedState, fencedwrite.ErrFoundRowsOff, fencedwrite.ErrInvalid}

// wantCutCompletion checks the outcome err of job id's completion with its
// ledger write, cut somewhere (where says where), against the job and its
// ledger row read under a lock: they never part, nil and ErrAlreadySettled
// mean settled, ErrRolledBack untouched, ErrCommitUnknown either. It counts
// the outcome in seen and reports whether the write committed (err nil).
func (e *env) wantCutCompletion(where string, id int64, err error, seen map[error]int) bool {
	e.t.Helper()
	state, _, ledgerStatus := e.lockedRow(id)
	settled := state == fencedwrite.StateSucceeded && ledgerStatus == string(refund.StatusRefunded)
	untouched := state == fencedwrite.StateRunning && ledgerStatus == string(refund.StatusRequested)
	if !settled && !untouched {
		e.t.Fatalf("%s: the job is %s and its ledger %s: they parted", where, state, ledgerStatus)
	}
	if err == nil {
		if !settled {
			e.t.Fatalf("%s: committed, but the job is %s", where, state)
		}
		return true
	}
	outcome, oerr := onlyOne(err, applyOutcomes...)
	if oerr != nil {
		e.t.Fatalf("%s: %v", where, oerr)
	}
	seen[outcome]++
	switch {
	case outcome == fencedwrite.ErrRolledBack && !untouched,
		outcome == fencedwrite.ErrAlreadySettled && !settled:
		e.t.Fatalf("%s: %v, but the job is %s", where, err, state)
	case outcome == fencedwrite.ErrRolledBack, outcome == fencedwrite.ErrAlreadySettled, outcome == fencedwrite.ErrCommitUnknown:
	default:
		e.t.Fatalf("%s: unexpected %v", where, err)
	}
	return false
}

// A connection cut at any byte of a claim, in either direction, ends in
// exactly one outcome the caller can switch on, and the outcome never claims
// more than the row shows.
func TestEveryCutOfAClaimHasOneTrueOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outcomes := []error{fencedwrite.ErrRolledBack, fencedwrite.ErrCommitUnknown, fencedwrite.ErrNotClaimable,
		fencedwrite.ErrNotFound, fencedwrite.ErrInvalid, fencedwrite.ErrUnexpectedState}
	for _, dir := range []dbtest.Stream{dbtest.Upstream, dbtest.Downstream} {
		seen := map[error]int{}
		for n := 0; ; n += cutStep {
			job := e.enqueue(fmt.Sprintf("cut-claim-%s-%d", dir, n))
			proxy := dbtest.NewProxy(t, e.db)
			proxy.CutAfter(dir, n)
			c := dbtest.ClientOn(t, dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{})))
			lease, err := c.RefundJob.Claim(t.Context(), job.ID, opts)
			_ = c.Close()
			proxy.Close()
			state, attempt, _ := e.lockedRow(job.ID)
			if err == nil {
				if lease == nil || state != fencedwrite.StateRunning || attempt != 1 {
					t.Fatalf("%s cut at %d: a lease %v, but the row is %s at %d", dir, n, lease, state, attempt)
				}
				t.Logf("%s: %d cuts, outcomes %v", dir, n/cutStep, seen)
				break
			}
			outcome, oerr := onlyOne(err, outcomes...)
			if oerr != nil {
				t.Fatalf("%s cut at %d: %v", dir, n, oerr)
			}
			seen[outcome]++
			switch outcome {
			case fencedwrite.ErrRolledBack:
				if state != fencedwrite.StateReady || attempt != 0 {
					t.Fatalf("%s cut at %d: rolled back, but the row is %s at %d", dir, n, state, attempt)
				}
			case fencedwrite.ErrCommitUnknown:
				// Either is possible; the claim returned no lease.
			default:
				t.Fatalf("%s cut at %d: %v", dir, n, err)
			}
		}
	}
}

// The same for a completion with its ledger write.
func TestEveryCutOfAnApplyHasOneTrueOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, dir := range []dbtest.Stream{dbtest.Upstream, dbtest.Downstream} {
		seen := map[error]int{}
		for n := 0; ; n += cutStep {
			key := fmt.Sprintf("cut-apply-%s-%d", dir, n)
			job, l := e.claim(key)
			proxy := dbtest.NewProxy(t, e.db)
			proxy.CutAfter(dir, n)
			c := dbtest.ClientOn(t, proxy.FirstConnectionDB(fencedwrite.DSNOptions{}))
			err := c.RefundJob.Apply(t.Context(), l.Complete("re_1"), ledger.Refunded(key, "re_1"))
			_ = c.Close()
			proxy.Close()
			if e.wantCutCompletion(fmt.Sprintf("%s cut at %d", dir, n), job.ID, err, seen) {
				t.Logf("%s: %d cuts, outcomes %v", dir, n/cutStep, seen)
				break
			}
		}
	}
}

// The same for a write-back batch whose completions share one fenced UPDATE
// and whose ledger rows share one more (deferred): wherever the connection
// is cut, each job and its ledger row move together, and each item's
// outcome is one the rows bear out. (TestApplyBatch loses the COMMIT's
// reply on purpose, which the stride may step over.)
func TestEveryCutOfAGroupedBatchHasOneTrueOutcomePerItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, dir := range []dbtest.Stream{dbtest.Upstream, dbtest.Downstream} {
		seen := map[error]int{}
		for n := 0; ; n += cutStep {
			ids, items := e.completions(keys(fmt.Sprintf("cut-batch-%s-%d", dir, n), 3)...)
			proxy := dbtest.NewProxy(t, e.db)
			proxy.CutAfter(dir, n)
			c := dbtest.ClientOn(t, proxy.FirstConnectionDB(fencedwrite.DSNOptions{}))
			errs := c.RefundJob.ApplyBatch(fencedwrite.WithDeferredRows(t.Context()), items)
			_ = c.Close()
			proxy.Close()
			done := 0
			for i, err := range errs {
				if e.wantCutCompletion(fmt.Sprintf("%s cut at %d, item %d", dir, n, i), ids[i], err, seen) {
					done++
				}
			}
			if done == len(items) {
				t.Logf("%s: %d cuts, outcomes %v", dir, n/cutStep, seen)
				break
			}
		}
	}
}

// A COMMIT still in flight on the wire when the runner gives up waiting for
// its reply: the runner's re-read takes the row lock, so it waits for the
// held COMMIT to land or not, and never reports "rolled back" for a write
// that then lands. The COMMIT is held until the re-read is in flight and
// blocked behind the old transaction's lock: a re-read without the lock
// would answer at once from the row before the COMMIT.
func TestCommitInFlightDuringTheReRead(t *testing.T) {
	// Not parallel: on TiDB the barrier below sees any lock wait of the
	// server (its lock-wait table names no database).
	e := newEnv(t)
	const key = "in-flight"
	job, l := e.claim(key)
	proxy := dbtest.NewProxy(t, e.db)
	// A short read timeout, so the client stops waiting for the reply while
	// the COMMIT is still held on the wire; a lock wait long enough for the
	// test to see the re-read wait.
	o := fencedwrite.DSNOptions{LockWaitTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second}
	c := dbtest.ClientOn(t, proxy.FirstConnectionDB(o))
	applied := make(chan struct{})
	released := make(chan bool, 1)
	ctx := fencedwrite.WithHooks(t.Context(), fencedwrite.Hooks{
		BeforeCommit: func() { proxy.Delay(time.Hour) },
		// The client gave up. Let the held COMMIT through only once the
		// runner's re-read waits for the row lock the COMMIT still holds.
		BeforeReRead: func() {
			go func() {
				waited := dbtest.AwaitLockWaitIn(e.raw, e.db.Name, "SELECT `state`, `attempt`", applied)
				proxy.Undelay()
				released <- waited
			}()
		},
	})
	err := c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded(key, "re_1"))
	close(applied)
	if !<-released {
		t.Error("the runner's re-read never waited for the row lock of the held COMMIT: it read without the lock")
	}
	state, _, ledgerStatus := e.lockedRow(job.ID)
	switch {
	case errors.Is(err, fencedwrite.ErrRolledBack) && state != fencedwrite.StateRunning:
		t.Fatalf("reported rolled back, but the COMMIT landed: the job is %s", state)
	case errors.Is(err, fencedwrite.ErrAlreadySettled) && state != fencedwrite.StateSucceeded:
		t.Fatalf("reported settled, but the job is %s", state)
	case err == nil:
		t.Fatal("the client saw the reply of a COMMIT held for an hour")
	}
	if state == fencedwrite.StateSucceeded && ledgerStatus != string(refund.StatusRefunded) {
		t.Fatalf("the job is %s and its ledger %s", state, ledgerStatus)
	}
	// The held COMMIT reaches the server once released: the re-read waits
	// for it under the row lock and sees it landed.
	if !errors.Is(err, fencedwrite.ErrAlreadySettled) || state != fencedwrite.StateSucceeded {
		t.Fatalf("outcome %v with the job %s, want ErrAlreadySettled and succeeded", err, state)
	}
}
