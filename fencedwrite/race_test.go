package fencedwrite_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// The tests of DESIGN.md's "Tests that count", at the data layer: two
// workers on separate connections, ordered with barriers. A test that kills
// worker A and watches B finish tests nothing; here the old worker comes
// back.

// Zombie late write: A claims (attempt 7), sends, and pauses before writing
// back; its lease expires; B takes over (8), reconciles and completes; then
// A resumes, and each of its complete, reschedule and manual review affects
// 0 rows.
func TestZombieLateWriteIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "refund-123"
	job := e.enqueue(key)
	e.advance(job.ID, 6)
	a, b := e.worker(), e.worker()
	provider := &inMemoryProvider{}

	la, err := a.RefundJob.Claim(ctx, job.ID, instant)
	if err != nil {
		t.Fatal(err)
	}
	if la.Attempt() != 7 || la.NextAction() != refundjob.NextActionRefund {
		t.Fatalf("A's lease = %v (%s), want attempt 7 to refund", la, la.NextAction())
	}

	sent, resume := make(chan struct{}), make(chan struct{})
	type result struct {
		op  string
		err error
	}
	results := make(chan result, 3)
	go func() { // worker A
		refundID := provider.refund(key) // the request executes at the provider
		close(sent)
		<-resume // ... but the reply hangs until B has settled the job
		results <- result{"complete", a.RefundJob.Apply(ctx, la.Complete(refundID), ledger.Refunded(key, refundID))}
		results <- result{"reschedule", a.RefundJob.Apply(ctx, la.Reschedule(refundjob.NextActionRefund, 0, "", "socket timeout"), nil)}
		results <- result{"manual review", a.RefundJob.Apply(ctx, la.ManualReview("socket timeout", "", ""), nil)}
		close(results)
	}()

	<-sent
	e.wantLeaseExpired(job.ID)
	lb, err := b.RefundJob.Takeover(ctx, job.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Attempt() != 8 || lb.NextAction() != refundjob.NextActionReconcile {
		t.Fatalf("B's lease = %v (%s), want attempt 8 to reconcile", lb, lb.NextAction())
	}
	// B reconciles: it asks about the same operation key.
	refundID, ok := provider.lookup(key)
	if !ok {
		t.Fatal("reconcile found no refund for the operation key")
	}
	if err := b.RefundJob.Apply(ctx, lb.Complete(refundID), ledger.Refunded(key, refundID)); err != nil {
		t.Fatalf("B's completion: %v", err)
	}
	close(resume)

	for r := range results {
		var we *fencedwrite.WriteError
		if !errors.Is(r.err, fencedwrite.ErrSuperseded) || !errors.As(r.err, &we) {
			t.Fatalf("A's %s: %v, want superseded", r.op, r.err)
		}
		if we.Attempt != 7 || we.Found.State != fencedwrite.StateSucceeded || we.Found.Attempt != 8 {
			t.Errorf("A's %s: %+v, want fenced on 7 and the row succeeded at 8", r.op, we)
		}
	}
	j := e.wantJob(job.ID, refundjob.StateSucceeded, 8)
	if j.ProviderRefundID == nil || *j.ProviderRefundID != refundID {
		t.Errorf("provider_refund_id = %v, want %s", j.ProviderRefundID, refundID)
	}
	if l := e.ledger(key); l.Status != refund.StatusRefunded {
		t.Errorf("ledger row is %s, want refunded", l.Status)
	}
	if calls, keys := provider.executed(); calls != 1 || keys != 1 {
		t.Errorf("provider saw %d refund calls for %d keys, want exactly one", calls, keys)
	}
}

// Expired but not taken over: lease expiry alone never takes A's rights
// away. A's write after lease_until succeeds, and B's later takeover backs
// off.
func TestExpiredButNotTakenOverStillWrites(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		write func(l *ent.RefundJobLease) *ent.RefundJobTransition
		state refundjob.State
	}{
		{"complete", func(l *ent.RefundJobLease) *ent.RefundJobTransition { return l.Complete("re_1") }, refundjob.StateSucceeded},
		{"reschedule", func(l *ent.RefundJobLease) *ent.RefundJobTransition {
			return l.Reschedule(refundjob.NextActionReconcile, 0, "re_1", "provider answered pending")
		}, refundjob.StateReady},
		{"manual review", func(l *ent.RefundJobLease) *ent.RefundJobTransition {
			return l.ManualReview("not found after the lag window", "lookup by reference: empty", "")
		}, refundjob.StateManualReview},
	}
	for _, tc := range cases {
		t.Run("expired lease can still "+tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := t.Context()
			job := e.enqueue("k")
			a, b := e.worker(), e.worker()
			la, err := a.RefundJob.Claim(ctx, job.ID, instant)
			if err != nil {
				t.Fatal(err)
			}
			e.wantLeaseExpired(job.ID)
			if err := a.RefundJob.Apply(ctx, tc.write(la), nil); err != nil {
				t.Fatalf("A's %s after its lease expired: %v", tc.name, err)
			}
			_, err = b.RefundJob.Takeover(ctx, job.ID, opts)
			wantOutcome(t, err, fencedwrite.ErrNotClaimable)
			e.wantJob(job.ID, tc.state, 1)
		})
	}
}

// Commit acknowledged to nobody: the completion's COMMIT lands but the
// connection drops before the reply. The runner cannot re-read (the network
// is still down) and reports the outcome unknown; the retry sees 0 rows,
// re-reads, finds the job succeeded by this attempt, and does not pay again.
func TestCommitAcknowledgedToNobody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "refund-lost-ack"
	job := e.enqueue(key)
	proxy := dbtest.NewProxy(t, e.db)
	a := dbtest.ClientOn(t, dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{})))
	provider := &inMemoryProvider{}

	la, err := a.RefundJob.Claim(ctx, job.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	refundID := provider.refund(key)
	err = a.RefundJob.Apply(ctx, la.Complete(refundID), cutReplyOfCommit(proxy, ledger.Refunded(key, refundID)))
	wantOutcome(t, err, fencedwrite.ErrCommitUnknown)
	for _, other := range []error{fencedwrite.ErrRolledBack, fencedwrite.ErrAlreadySettled, fencedwrite.ErrSuperseded} {
		if errors.Is(err, other) {
			t.Fatalf("an unknown outcome also claims %v: %v", other, err)
		}
	}

	proxy.Restore()
	// The worker retries the same completion, as it would on any unknown
	// outcome: the fence matches 0 rows and the fresh re-read explains why.
	err = a.RefundJob.Apply(ctx, la.Complete(refundID), ledger.Refunded(key, refundID))
	wantOutcome(t, err, fencedwrite.ErrAlreadySettled)
	// ErrAlreadySettled tells the worker it is done: it does not pay again.
	e.wantJob(job.ID, refundjob.StateSucceeded, 1)
	if l := e.ledger(key); l.Status != refund.StatusRefunded || l.ProviderRefundID == nil || *l.ProviderRefundID != refundID {
		t.Errorf("ledger row = %+v, want refunded once with %s", l, refundID)
	}
	if calls, _ := provider.executed(); calls != 1 {
		t.Errorf("provider saw %d refund calls, want 1", calls)
	}
}

// When the COMMIT reply is lost but the database can be reached again, the
// runner's own locking re-read finds the write in place and says so.
func TestLostCommitReplyIsResolvedByTheRunnersReRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "refund-reread"
	job := e.enqueue(key)
	proxy := dbtest.NewProxy(t, e.db)
	a := dbtest.ClientOn(t, proxy.FirstConnectionDB(fencedwrite.DSNOptions{}))

	la, err := a.RefundJob.Claim(ctx, job.ID, opts) // opens the proxied connection
	if err != nil {
		t.Fatal(err)
	}
	err = a.RefundJob.Apply(ctx, la.Complete("re_9"), cutReplyOfCommit(proxy, ledger.Refunded(key, "re_9")))
	wantOutcome(t, err, fencedwrite.ErrAlreadySettled)
	var we *fencedwrite.WriteError
	if !errors.As(err, &we) || we.Cause == nil {
		t.Fatalf("want the lost COMMIT as the cause: %v", err)
	}
	e.wantJob(job.ID, refundjob.StateSucceeded, 1)
	if l := e.ledger(key); l.Status != refund.StatusRefunded {
		t.Errorf("ledger row is %s, want refunded: the business write committed with the job", l.Status)
	}
}

// Commit ambiguity on a claim means stop: the error says the outcome is
// unknown and tells the worker not to call the provider.
func TestLostClaimCommitReplyMeansStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job := e.enqueue("k")
	proxy := dbtest.NewProxy(t, e.db)
	db := dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{}))
	if err := db.PingContext(ctx); err != nil { // open the connection before the cut
		t.Fatal(err)
	}
	a := dbtest.ClientOn(t, db)
	lease, err := a.RefundJob.Claim(fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeClaimCommit: proxy.CutReplies}), job.ID, opts)
	if lease != nil {
		t.Fatalf("a claim whose COMMIT reply was lost returned a lease: %v", lease)
	}
	wantOutcome(t, err, fencedwrite.ErrCommitUnknown)
	if want := "do not call the provider"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	// The claim did land; the worker does not know it, and the next
	// scheduler pass finds a running job whose lease will expire.
	e.wantJob(job.ID, refundjob.StateRunning, 1)
}

// After 0 rows the runner rolls back the business write made in the same
// transaction, and re-reads afresh: not from the transaction's snapshot,
// which still shows the old attempt.
func TestZeroRowsRollsBackAndReReadsFresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "k"
	job := e.enqueue(key)
	a, b := e.worker(), e.worker()
	la, err := a.RefundJob.Claim(ctx, job.ID, instant)
	if err != nil {
		t.Fatal(err)
	}
	var staleAttempt int64
	err = a.RefundJob.Run(ctx, func(ctx context.Context, tx *ent.Tx) error {
		before, err := tx.RefundJob.Get(ctx, job.ID) // opens the snapshot
		if err != nil {
			return err
		}
		// B takes over while A's transaction is open.
		e.wantLeaseExpired(job.ID)
		if _, err := b.RefundJob.Takeover(ctx, job.ID, opts); err != nil {
			return err
		}
		again, err := tx.RefundJob.Get(ctx, job.ID)
		if err != nil {
			return err
		}
		staleAttempt = again.Attempt
		if before.Attempt != again.Attempt {
			t.Errorf("the snapshot moved from %d to %d; the test needs a stale snapshot", before.Attempt, again.Attempt)
		}
		// The business write comes first here: evidence of the provider's answer.
		if _, _, err := evidence.Record(ctx, tx, evidence.Observation{OperationKey: key, JobID: job.ID, Attempt: la.Attempt(),
			Source: evidence.ProviderResponse, ProviderRefundID: "re_1", Status: evidence.Succeeded, Payload: []byte(`{"id":"re_1"}`)}); err != nil {
			return err
		}
		return tx.RefundJob.Fence(ctx, la.Complete("re_1"))
	})
	wantOutcome(t, err, fencedwrite.ErrSuperseded)
	var we *fencedwrite.WriteError
	if !errors.As(err, &we) || we.Found.Attempt != 2 || we.Found.State != fencedwrite.StateRunning {
		t.Fatalf("re-read found %+v, want running at attempt 2", we)
	}
	if staleAttempt != 1 {
		t.Fatalf("inside the transaction the snapshot showed attempt %d, want the stale 1", staleAttempt)
	}
	if kept, err := evidence.ForKey(ctx, e.c, key); err != nil || len(kept) != 0 {
		t.Errorf("evidence %v (%v): the business write of a refused transaction was kept", kept, err)
	}
	e.wantJob(job.ID, refundjob.StateRunning, 2)
}

// Many goroutines claim one job at once, round after round: each round has
// exactly one winner, and each attempt number is won exactly once.
func TestConcurrentClaimsHaveOneWinnerPerAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job := e.enqueue("k")
	const workers, rounds = 8, 6
	clients := make([]*ent.Client, workers)
	for i := range clients {
		clients[i] = e.worker()
	}
	var won []int64
	for round := range rounds {
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			mu    sync.Mutex
			wins  []*ent.RefundJobLease
			other []error
		)
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, err := c.RefundJob.Claim(ctx, job.ID, opts)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins = append(wins, l)
				case errors.Is(err, fencedwrite.ErrNotClaimable):
				default:
					other = append(other, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(other) > 0 {
			t.Fatalf("round %d: unexpected errors %v", round, other)
		}
		if len(wins) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(wins), wins)
		}
		won = append(won, wins[0].Attempt())
		if err := e.c.RefundJob.Apply(ctx, wins[0].Reschedule(refundjob.NextActionRefund, 0, "", ""), nil); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(won, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("attempts won %v, want 1..6 once each", won)
	}
}

// cutReplyOfCommit wraps a business write so that the proxy cuts the reply of
// the transaction's COMMIT: the COMMIT still reaches the server and runs.
func cutReplyOfCommit(proxy *dbtest.Proxy, write func(context.Context, *ent.Tx) error) func(context.Context, *ent.Tx) error {
	return func(ctx context.Context, tx *ent.Tx) error {
		tx.OnCommit(func(next ent.Committer) ent.Committer {
			return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
				proxy.CutReplies()
				return next.Commit(ctx, tx)
			})
		})
		return write(ctx, tx)
	}
}
