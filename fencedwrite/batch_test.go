package fencedwrite_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// The batch claims find work on the scheduler's indexes and move each job
// with the same fenced statements and rules as a single claim.
func TestClaimDueAndTakeoverExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.enqueue(fmt.Sprintf("b-%d", i)).ID)
	}
	t.Run("claims up to the limit, oldest first, with the request under the lock", func(t *testing.T) {
		leases, err := e.c.RefundJob.ClaimDue(ctx, 3, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, l := range leases {
			got = append(got, l.ID())
			want := request(fmt.Sprintf("b-%d", slices.Index(ids, l.ID())))
			if l.Attempt() != 1 || l.NextAction() != refundjob.NextActionRefund || l.Request() != want || l.Resend() {
				t.Errorf("lease %v: action %s, request %+v, resend %v; want attempt 1 to send %+v", l, l.NextAction(), l.Request(), l.Resend(), want)
			}
			if l.KeyFirstUsedAt() == nil || l.LastSendAt() == nil || !l.LastSendAt().Equal(l.ClaimedAt()) {
				t.Errorf("lease %v does not record the send: first use %v, last send %v", l, l.KeyFirstUsedAt(), l.LastSendAt())
			}
			e.wantJob(l.ID(), refundjob.StateRunning, 1)
		}
		if !slices.Equal(got, ids[:3]) {
			t.Fatalf("claimed %v, want the three oldest %v", got, ids[:3])
		}
	})
	t.Run("a limit of zero claims nothing, a bad limit names the field", func(t *testing.T) {
		if leases, err := e.c.RefundJob.ClaimDue(ctx, 0, opts); err != nil || len(leases) != 0 {
			t.Fatalf("limit 0: %v %v", leases, err)
		}
		_, err := e.c.RefundJob.ClaimDue(ctx, fencedwrite.MaxBatch+1, opts)
		if !strings.Contains(fmt.Sprint(err), "limit: must be between 0 and") {
			t.Fatalf("limit too large: %v", err)
		}
		wantOutcome(t, err, fencedwrite.ErrInvalid)
	})
	t.Run("takes over only expired leases, and reconciles", func(t *testing.T) {
		rest, err := e.worker().RefundJob.ClaimDue(ctx, 10, instant)
		if err != nil || len(rest) != 2 {
			t.Fatalf("claimed %d (%v), want the two left", len(rest), err)
		}
		e.wantLeaseExpired(rest[0].ID())
		taken, err := e.c.RefundJob.TakeoverExpired(ctx, 10, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(taken) != 2 {
			t.Fatalf("took over %d, want the two expired leases only", len(taken))
		}
		for _, l := range taken {
			if l.Attempt() != 2 || l.NextAction() != refundjob.NextActionReconcile {
				t.Errorf("takeover lease %v (%s), want attempt 2 to reconcile", l, l.NextAction())
			}
		}
		if none, err := e.c.RefundJob.ClaimDue(ctx, 10, opts); err != nil || len(none) != 0 {
			t.Fatalf("nothing is due, but ClaimDue returned %v (%v)", none, err)
		}
	})
}

// ClaimDueReconciles claims the due jobs whose next action is reconcile, and
// only those, oldest first, with the rules of a single claim: a scheduler
// takes the unknown outcomes before fresh sends that have waited longer.
func TestClaimDueReconcilesTakesOnlyDueReconciles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	// rescheduled claims key's job, then reschedules it to next after
	// delay.
	rescheduled := func(key string, next refundjob.NextAction, delay time.Duration) int64 {
		t.Helper()
		id := e.enqueue(key).ID
		l, err := e.c.RefundJob.Claim(ctx, id, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(next, delay, "", "outcome unknown"), nil); err != nil {
			t.Fatal(err)
		}
		return id
	}
	sends := []int64{e.enqueue("send-0").ID, e.enqueue("send-1").ID} // due before any reconcile
	first := rescheduled("reconcile-0", refundjob.NextActionReconcile, 0)
	later := rescheduled("reconcile-later", refundjob.NextActionReconcile, time.Hour)
	resend := rescheduled("resend", refundjob.NextActionRefund, 0)
	second := rescheduled("reconcile-1", refundjob.NextActionReconcile, 0)

	var got []int64
	for _, limit := range []int{1, 10} {
		leases, err := e.c.RefundJob.ClaimDueReconciles(ctx, limit, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			got = append(got, l.ID())
			if l.Attempt() != 2 || l.NextAction() != refundjob.NextActionReconcile || l.Resend() {
				t.Errorf("lease %v: attempt %d, action %s, resend %v; want attempt 2 to reconcile", l, l.Attempt(), l.NextAction(), l.Resend())
			}
			e.wantJob(l.ID(), refundjob.StateRunning, 2)
		}
	}
	if !slices.Equal(got, []int64{first, second}) {
		t.Fatalf("claimed %v, want the due reconciles %v, oldest first, one per call of limit 1 then the rest", got, []int64{first, second})
	}
	for _, id := range sends {
		e.wantJob(id, refundjob.StateReady, 0)
	}
	e.wantJob(later, refundjob.StateReady, 1)
	e.wantJob(resend, refundjob.StateReady, 1)
	if _, err := e.c.RefundJob.ClaimDueReconciles(ctx, fencedwrite.MaxBatch+1, opts); !strings.Contains(fmt.Sprint(err), "limit: must be between 0 and") {
		t.Fatalf("limit too large: %v", err)
	}
}

// claimDueWithout is ClaimDue on a copy of the generated table whose scans
// drop SKIP LOCKED: what TiDB does with it.
func claimDueWithout(t *testing.T, drv dialect.Driver, limit int) ([]fencedrt.Claimed, error) {
	t.Helper()
	table, ok := fencedrt.Registered(ent.RefundJobFencedTable)
	if !ok {
		t.Fatal("no generated table")
	}
	spec := table.Spec()
	stmts := map[fencedrt.Op]fencedrt.Stmt{}
	for op, s := range spec.Stmts {
		s.SQL = strings.ReplaceAll(s.SQL, " SKIP LOCKED", "")
		stmts[op] = s
	}
	spec.Stmts = stmts
	plain, err := fencedrt.NewTable(spec)
	if err != nil {
		t.Fatal(err)
	}
	return fencedrt.ClaimDue(t.Context(), drv, plain, limit, opts)
}

// Two claimers at once never get the same job, with SKIP LOCKED and
// without it: the primary-key lock and the fenced UPDATE are the guarantee.
func TestConcurrentClaimDueNeverSharesAJob(t *testing.T) {
	t.Parallel()
	for _, skip := range []bool{true, false} {
		t.Run(fmt.Sprintf("skip locked %v", skip), func(t *testing.T) {
			e := newEnv(t)
			const jobs, rounds = 16, 4
			for i := range jobs {
				e.enqueue(fmt.Sprintf("c-%d", i))
			}
			a, b := e.worker(), e.worker()
			drvs := []dialect.Driver{entsql.OpenDB(dialect.MySQL, e.db.FencedDB(fencedwrite.DSNOptions{})), entsql.OpenDB(dialect.MySQL, e.db.FencedDB(fencedwrite.DSNOptions{}))}
			owner := map[int64]int{}
			for round := range rounds {
				var start, done sync.WaitGroup
				start.Add(1)
				got := make([][]int64, 2)
				for w := range 2 {
					done.Add(1)
					go func() {
						defer done.Done()
						start.Wait()
						if skip {
							leases, err := []*ent.Client{a, b}[w].RefundJob.ClaimDue(t.Context(), 2, opts)
							if err != nil {
								t.Error(err)
							}
							for _, l := range leases {
								got[w] = append(got[w], l.ID())
							}
							return
						}
						claimed, err := claimDueWithout(t, drvs[w], 2)
						if err != nil {
							t.Error(err)
						}
						for _, c := range claimed {
							got[w] = append(got[w], c.ID)
						}
					}()
				}
				start.Done()
				done.Wait()
				for w, ids := range got {
					for _, id := range ids {
						if prev, taken := owner[id]; taken {
							t.Fatalf("round %d: job %d handed to worker %d, already held by worker %d", round, id, w, prev)
						}
						owner[id] = w
						e.wantJob(id, refundjob.StateRunning, 1)
					}
				}
			}
			// Whatever the interleaving, every job is claimed exactly once:
			// what the rounds left is still ready, and claimed now.
			rest, err := e.c.RefundJob.ClaimDue(t.Context(), jobs, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range rest {
				if _, taken := owner[l.ID()]; taken {
					t.Fatalf("job %d claimed twice", l.ID())
				}
				owner[l.ID()] = -1
			}
			if len(owner) != jobs {
				t.Fatalf("%d of %d jobs claimed", len(owner), jobs)
			}
		})
	}
}

// A batch claim whose scan returned a job that another claimer has moved
// since leaves that job out and claims the rest: the fenced UPDATE matched
// no row and wrote nothing. TiDB's scan allows it (SKIP LOCKED is ignored
// and nothing is locked); here a scan that answers what a snapshot taken
// before the other claim would have shown makes it happen on every engine.
func TestBatchClaimLeavesAJobMovedSinceTheScan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	moved, free := e.enqueue("moved"), e.enqueue("free")
	if _, err := e.worker().RefundJob.Claim(ctx, moved.ID, opts); err != nil {
		t.Fatal(err)
	}
	table, ok := fencedrt.Registered(ent.RefundJobFencedTable)
	if !ok {
		t.Fatal("no generated table")
	}
	spec := table.Spec()
	stale := spec
	stale.Stmts = maps.Clone(spec.Stmts)
	due := stale.Stmts[fencedrt.OpDue]
	for from, to := range map[string]string{
		"SELECT `id`, `state`, `attempt`,": "SELECT `id`, 'ready', IF(`state` = 'ready', `attempt`, `attempt` - 1),",
		"WHERE `state` = 'ready' AND":      "WHERE `state` IN ('ready', 'running') AND",
	} {
		if !strings.Contains(due.SQL, from) {
			t.Fatalf("the pending scan no longer contains %q: %s", from, due.SQL)
		}
		due.SQL = strings.Replace(due.SQL, from, to, 1)
	}
	// It locks nothing, as TiDB's does. (The registered table may be
	// claimDueWithout's, whose scan has no SKIP LOCKED.)
	due.SQL = strings.TrimSuffix(strings.TrimSuffix(due.SQL, " SKIP LOCKED"), " FOR UPDATE")
	stale.Stmts[fencedrt.OpDue] = due
	staleTable, err := fencedrt.NewTable(stale)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := fencedrt.ClaimDue(ctx, entsql.OpenDB(dialect.MySQL, e.db.FencedDB(fencedwrite.DSNOptions{})), staleTable, 10, opts)
	if err != nil {
		t.Fatalf("a batch that met a job moved since its scan: %v, want the other jobs claimed", err)
	}
	if len(claimed) != 1 || claimed[0].ID != free.ID {
		t.Fatalf("claimed %+v, want only job %d", claimed, free.ID)
	}
	e.wantJob(moved.ID, refundjob.StateRunning, 1)
	e.wantJob(free.ID, refundjob.StateRunning, 1)
}

// A lost COMMIT reply of a batch claim returns no lease at all.
func TestLostBatchClaimCommitReplyMeansStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 3 {
		e.enqueue(fmt.Sprintf("lost-%d", i))
	}
	proxy := dbtest.NewProxy(t, e.db)
	c := dbtest.ClientOn(t, dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{})))
	leases, err := c.RefundJob.ClaimDue(fencedwrite.WithHooks(t.Context(), fencedwrite.Hooks{BeforeClaimCommit: proxy.CutReplies}), 3, opts)
	if leases != nil {
		t.Fatalf("a batch whose COMMIT reply was lost returned leases: %v", leases)
	}
	wantOutcome(t, err, fencedwrite.ErrCommitUnknown)
}

// The scans use their indexes.
func TestBatchScansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 30 {
		e.enqueue(fmt.Sprintf("i-%d", i))
	}
	table, _ := fencedrt.Registered(ent.RefundJobFencedTable)
	for op, index := range map[fencedrt.Op]string{fencedrt.OpDue: "refund_jobs_pending", fencedrt.OpDueReconcile: "refund_jobs_reconcile_due",
		fencedrt.OpExpired: "refund_jobs_lease"} {
		query, args, err := table.Bind(op, fencedrt.Values{fencedrt.ParamLimit: 10})
		if err != nil {
			t.Fatal(err)
		}
		// The scan of refund_jobs, beside the clock's derived table.
		var key string
		var found bool
		for _, a := range dbtest.Explain(t, e.raw, query, args...) {
			if a.Table == "refund_jobs" {
				key, found = a.Key, true
			}
		}
		if !found || key != index {
			t.Errorf("%s uses key %q (read: %v), want %s: %s", op, key, found, index, query)
		}
	}
}

// A claimed-and-completed job costs as few statements as the rules allow:
// counted on the wire, on one connection.
func TestStatementsPerJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	db, sent := e.db.CountedDB(fencedwrite.DSNOptions{})
	c := dbtest.ClientOn(t, db)

	job := e.enqueue("one")
	before := sent.Sent()
	l, err := c.RefundJob.Claim(ctx, job.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	claim := sent.Sent() - before
	before = sent.Sent()
	if err := c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("one", "re_1")); err != nil {
		t.Fatal(err)
	}
	apply := sent.Sent() - before
	t.Logf("Claim(id): %d statements; Apply(Complete, ledger.Refunded): %d; %d per job", claim, apply, claim+apply)
	// BEGIN, the locking read, the fenced UPDATE, the attempts log's
	// INSERT, COMMIT; and BEGIN, the fenced UPDATE, the ledger's UPDATE,
	// COMMIT.
	if claim != 5 || apply != 4 {
		t.Fatalf("claim %d + apply %d statements, want 5 + 4", claim, apply)
	}

	const n = 20
	for i := range n {
		e.enqueue(fmt.Sprintf("many-%d", i))
	}
	before = sent.Sent()
	leases, err := c.RefundJob.ClaimDue(ctx, n, opts)
	if err != nil || len(leases) != n {
		t.Fatalf("claimed %d (%v)", len(leases), err)
	}
	batch := sent.Sent() - before
	t.Logf("ClaimDue(%d): %d statements, %.2f per job", n, batch, float64(batch)/n)
	if batch != 5 {
		t.Fatalf("a batch of %d cost %d statements, want BEGIN, the scan, one UPDATE for the %d jobs at attempt 0, "+
			"one INSERT of their attempts and COMMIT: 5", n, batch, n)
	}
}

// A batch claim moves the jobs it read at the same attempt, making the same
// move, in one UPDATE fenced on their ids, that state and that attempt;
// every job still gets the lease and the action of its own claim.
func TestBatchClaimMovesEachGroupInOneStatement(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	db, sent := e.db.CountedDB(fencedwrite.DSNOptions{})
	c := dbtest.ClientOn(t, db)
	want := map[int64]struct {
		attempt int64
		action  refundjob.NextAction
	}{}
	// Two jobs back to ready at attempt 1 to reconcile, two to send again
	// inside the key's window, and three new ones at attempt 0.
	for i, next := range []refundjob.NextAction{refundjob.NextActionReconcile, refundjob.NextActionReconcile, refundjob.NextActionRefund, refundjob.NextActionRefund} {
		job, l := e.claim(fmt.Sprintf("again-%d", i))
		if err := e.worker().RefundJob.Apply(ctx, l.Reschedule(next, 0, "", "timeout"), nil); err != nil {
			t.Fatal(err)
		}
		want[job.ID] = struct {
			attempt int64
			action  refundjob.NextAction
		}{2, next}
	}
	for i := range 3 {
		want[e.enqueue(fmt.Sprintf("new-%d", i)).ID] = struct {
			attempt int64
			action  refundjob.NextAction
		}{1, refundjob.NextActionRefund}
	}
	before := sent.Sent()
	leases, err := c.RefundJob.ClaimDue(ctx, 10, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := sent.Sent() - before; n != 7 {
		t.Errorf("a batch with three groups cost %d statements, want BEGIN, the scan, three UPDATEs, one INSERT of the attempts and COMMIT: 7", n)
	}
	if len(leases) != len(want) {
		t.Fatalf("claimed %d jobs, want %d", len(leases), len(want))
	}
	for _, l := range leases {
		w := want[l.ID()]
		if l.Attempt() != w.attempt || l.NextAction() != w.action || !l.LeaseUntil().Equal(leases[0].LeaseUntil()) {
			t.Errorf("lease of job %d: attempt %d, %s, lease until %v; want attempt %d, %s, the batch's lease %v",
				l.ID(), l.Attempt(), l.NextAction(), l.LeaseUntil(), w.attempt, w.action, leases[0].LeaseUntil())
		}
		job := e.wantJob(l.ID(), refundjob.StateRunning, w.attempt)
		if job.NextAction != w.action || job.LeaseUntil == nil || !job.LeaseUntil.Equal(l.LeaseUntil()) {
			t.Errorf("job %d holds %s until %v, its lease says %s until %v", l.ID(), job.NextAction, job.LeaseUntil, l.NextAction(), l.LeaseUntil())
		}
	}
}

// ApplyBatch settles several jobs in one transaction, each fenced on its own
// attempt with its own ledger write; one job's lost fence or failed business
// write never rolls back another's.
func TestApplyBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	t.Run("every job settles with its ledger row: one fenced UPDATE for all, one ledger write each", func(t *testing.T) {
		db, sent := e.db.CountedDB(fencedwrite.DSNOptions{})
		c := dbtest.ClientOn(t, db)
		ids, items := e.completions(keys("ok", 5)...)
		before := sent.Sent()
		for i, err := range c.RefundJob.ApplyBatch(ctx, items) {
			if err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
		}
		n := sent.Sent() - before
		t.Logf("ApplyBatch(5 completions with the ledger): %d statements", n)
		if n != 3+5 {
			t.Fatalf("%d statements, want BEGIN, the completions' UPDATE, a ledger write per job, COMMIT: %d", n, 3+5)
		}
		for i, id := range ids {
			e.wantJob(id, refundjob.StateSucceeded, 1)
			if l := e.ledger(fmt.Sprintf("ok-%d", i)); l.Status != "refunded" {
				t.Fatalf("ledger %d is %s", i, l.Status)
			}
		}
	})
	t.Run("a stale item and a failing business write take only themselves out", func(t *testing.T) {
		db, sent := e.db.CountedDB(fencedwrite.DSNOptions{})
		a, b := dbtest.ClientOn(t, db), e.worker()
		staleJob := e.enqueue("stale")
		stale, err := a.RefundJob.Claim(ctx, staleJob.ID, instant)
		if err != nil {
			t.Fatal(err)
		}
		e.wantLeaseExpired(staleJob.ID)
		if _, err := b.RefundJob.Takeover(ctx, staleJob.ID, opts); err != nil {
			t.Fatal(err)
		}
		goodJob, good := e.claim("good")
		badJob, bad := e.claim("bad")
		other, otherLease := e.claim("other")
		before := sent.Sent()
		errs := a.RefundJob.ApplyBatch(ctx, []ent.RefundJobBatchItem{
			{Transition: stale.Complete("re_s"), Then: ledger.Refunded("stale", "re_s")},
			{Transition: good.Complete("re_g"), Then: ledger.Refunded("good", "re_g")},
			{Transition: bad.Complete("re_b"), Then: func(context.Context, *ent.Tx) error { return fmt.Errorf("ledger service down") }},
			{Transition: otherLease.Reschedule(refundjob.NextActionReconcile, 0, "re_o", "pending"), Then: nil},
			{Transition: good.Fail("twice", ""), Then: nil},
			{Transition: &ent.RefundJobTransition{}},
		})
		wantOutcome(t, errs[0], fencedwrite.ErrSuperseded)
		if errs[1] != nil || errs[3] != nil {
			t.Fatalf("the good items: %v, %v", errs[1], errs[3])
		}
		wantOutcome(t, errs[2], fencedwrite.ErrRolledBack)
		wantOutcome(t, errs[4], fencedwrite.ErrInvalid)
		wantOutcome(t, errs[5], fencedwrite.ErrInvalid)
		e.wantJob(staleJob.ID, refundjob.StateRunning, 2)
		e.wantJob(goodJob.ID, refundjob.StateSucceeded, 1)
		e.wantJob(badJob.ID, refundjob.StateRunning, 1)
		e.wantJob(other.ID, refundjob.StateReady, 1)
		if l := e.ledger("bad"); l.Status != "requested" {
			t.Fatalf("the failed item's ledger is %s", l.Status)
		}
		// The three completions at attempt 1 share one UPDATE, which matches
		// two rows (the stale one moved on): rolled back, the batch runs one
		// statement per item; the failing business write then takes its
		// item out, and the rest runs again.
		// 1: BEGIN, the completions' UPDATE (2 of 3 rows), ROLLBACK.
		// 2: BEGIN, the fenced UPDATEs of stale (0 rows), good and bad,
		//    good's ledger write, bad's failing callback (it sends
		//    nothing), ROLLBACK.
		// 3: BEGIN, the fenced UPDATEs of stale, good and other, good's
		//    ledger write, COMMIT, and the re-read of the stale item.
		if n := sent.Sent() - before; n != 3+6+7 {
			t.Errorf("%d statements, want 16: the many-row UPDATE that did not hold, then one statement per item", n)
		}
	})
	t.Run("a stale and a live lease of one job in one batch: the live write lands, the stale one is superseded, in either order", func(t *testing.T) {
		for _, staleFirst := range []bool{true, false} {
			key := fmt.Sprintf("both-leases-%v", staleFirst)
			job := e.enqueue(key)
			// The same process holds both: its paused goroutine's lease at
			// attempt 1, and its own takeover at attempt 2.
			stale, err := e.c.RefundJob.Claim(ctx, job.ID, instant)
			if err != nil {
				t.Fatal(err)
			}
			e.wantLeaseExpired(job.ID)
			live, err := e.c.RefundJob.Takeover(ctx, job.ID, opts)
			if err != nil {
				t.Fatal(err)
			}
			staleItem := ent.RefundJobBatchItem{Transition: stale.Reschedule(refundjob.NextActionRefund, 0, "", "stale"), Then: nil}
			liveItem := ent.RefundJobBatchItem{Transition: live.Complete("re_live"), Then: ledger.Refunded(key, "re_live")}
			items, si, li := []ent.RefundJobBatchItem{staleItem, liveItem}, 0, 1
			if !staleFirst {
				items, si, li = []ent.RefundJobBatchItem{liveItem, staleItem}, 1, 0
			}
			errs := e.c.RefundJob.ApplyBatch(ctx, items)
			if errs[li] != nil {
				t.Fatalf("stale first %v: the live lease's completion: %v", staleFirst, errs[li])
			}
			wantOutcome(t, errs[si], fencedwrite.ErrSuperseded)
			e.wantJob(job.ID, refundjob.StateSucceeded, 2)
			if l := e.ledger(key); l.Status != "refunded" || l.ProviderRefundID == nil || *l.ProviderRefundID != "re_live" {
				t.Fatalf("stale first %v: ledger row %+v, want refunded with re_live", staleFirst, l)
			}
		}
		// The same lease twice is a caller's mistake, not a race.
		job, l := e.claim("same-lease-twice")
		errs := e.c.RefundJob.ApplyBatch(ctx, []ent.RefundJobBatchItem{{Transition: l.Complete("re_1")}, {Transition: l.Fail("no", "")}})
		if errs[0] != nil {
			t.Fatalf("the first item: %v", errs[0])
		}
		wantOutcome(t, errs[1], fencedwrite.ErrInvalid)
		e.wantJob(job.ID, refundjob.StateSucceeded, 1)
	})
	t.Run("two batches completing one job at once: it settles once, each other job with its own", func(t *testing.T) {
		keys := []string{"both-0", "both-1", "both-2"}
		var (
			ids    []int64
			leases []*ent.RefundJobLease
		)
		for _, key := range keys {
			job, l := e.claim(key)
			ids, leases = append(ids, job.ID), append(leases, l)
		}
		item := func(i int) ent.RefundJobBatchItem {
			return ent.RefundJobBatchItem{Transition: leases[i].Complete("re_" + keys[i]), Then: ledger.Refunded(keys[i], "re_"+keys[i])}
		}
		batches := [][]ent.RefundJobBatchItem{{item(0), item(1)}, {item(1), item(2)}}
		errs := make([][]error, 2)
		var start, done sync.WaitGroup
		start.Add(1)
		for b := range batches {
			done.Add(1)
			go func() {
				defer done.Done()
				c := dbtest.ClientOn(t, e.db.FencedDB(fencedwrite.DSNOptions{}))
				start.Wait()
				errs[b] = c.RefundJob.ApplyBatch(fencedwrite.WithDeferredRows(ctx), batches[b])
			}()
		}
		start.Done()
		done.Wait()
		if errs[0][0] != nil || errs[1][1] != nil {
			t.Fatalf("the jobs only one batch held: %v, %v", errs[0][0], errs[1][1])
		}
		shared := []error{errs[0][1], errs[1][0]}
		if !(shared[0] == nil && errors.Is(shared[1], fencedwrite.ErrAlreadySettled) || shared[1] == nil && errors.Is(shared[0], fencedwrite.ErrAlreadySettled)) {
			t.Fatalf("the shared job's outcomes %v: want one nil and one already settled", shared)
		}
		for i, key := range keys {
			e.wantJob(ids[i], refundjob.StateSucceeded, 1)
			if l := e.ledger(key); l.Status != "refunded" || l.ProviderRefundID == nil || *l.ProviderRefundID != "re_"+key {
				t.Fatalf("ledger %s is %s with %v", key, l.Status, l.ProviderRefundID)
			}
		}
	})
	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("a lost COMMIT reply is re-read job by job, ledger rows deferred %v", deferred), func(t *testing.T) {
			ids, items := e.completions(keys(fmt.Sprintf("lost-%v", deferred), 3)...)
			proxy := dbtest.NewProxy(t, e.db)
			c := dbtest.ClientOn(t, proxy.FirstConnectionDB(fencedwrite.DSNOptions{}))
			ctx := fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeCommit: proxy.CutReplies})
			if deferred {
				ctx = fencedwrite.WithDeferredRows(ctx)
			}
			for i, err := range c.RefundJob.ApplyBatch(ctx, items) {
				wantOutcome(t, err, fencedwrite.ErrAlreadySettled)
				if state, _, ledgerStatus := e.lockedRow(ids[i]); state != fencedwrite.StateSucceeded || ledgerStatus != string(refund.StatusRefunded) {
					t.Fatalf("item %d: already settled, but the job is %s and its ledger %s", i, state, ledgerStatus)
				}
			}
		})
	}
}

// recordKind is a fencedwrite.RowBatch that writes nothing and records the
// rows the runner hands it.
type recordKind struct{ got *[][]fencedwrite.BatchRow }

func (k recordKind) ExecRows(_ context.Context, _ dialect.ExecQuerier, rows []fencedwrite.BatchRow) (int64, error) {
	*k.got = append(*k.got, rows)
	return int64(len(rows)), nil
}

// sliceKind cannot key a map: it is never deferred.
type sliceKind []int

func (sliceKind) ExecRows(context.Context, dialect.ExecQuerier, []fencedwrite.BatchRow) (int64, error) {
	panic("a kind that cannot key a map was deferred")
}

// A business write is deferred only inside a batch run with
// WithDeferredRows, and only with a kind that can key a map; the runner
// hands each kind's rows over once, together, before the COMMIT.
func TestDeferRowOnlyInADeferringBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	var got [][]fencedwrite.BatchRow
	kind := recordKind{&got}
	if e.c.RefundJob.DeferRow(fencedwrite.WithDeferredRows(ctx), kind, "k") {
		t.Fatal("deferred outside any run")
	}
	deferred := map[string]bool{}
	try := func(key string, k fencedwrite.RowBatch) func(context.Context, *ent.Tx) error {
		return func(ctx context.Context, tx *ent.Tx) error {
			deferred[key] = tx.RefundJob.DeferRow(ctx, k, key, "v-"+key)
			return ledger.Refunded(key, "re_"+key)(ctx, tx)
		}
	}
	_, l := e.claim("single")
	if err := e.c.RefundJob.Apply(fencedwrite.WithDeferredRows(ctx), l.Complete("re_single"), try("single", kind)); err != nil || deferred["single"] {
		t.Fatalf("Apply: %v, deferred %v: a single run never defers", err, deferred["single"])
	}
	_, l = e.claim("plain")
	if errs := e.c.RefundJob.ApplyBatch(ctx, []ent.RefundJobBatchItem{{Transition: l.Complete("re_plain"), Then: try("plain", kind)}}); errs[0] != nil || deferred["plain"] {
		t.Fatalf("ApplyBatch without WithDeferredRows: %v, deferred %v", errs[0], deferred["plain"])
	}
	var items []ent.RefundJobBatchItem
	for _, key := range []string{"d-0", "d-1", "odd"} {
		_, l := e.claim(key)
		k := fencedwrite.RowBatch(kind)
		if key == "odd" {
			k = sliceKind{1}
		}
		items = append(items, ent.RefundJobBatchItem{Transition: l.Complete("re_" + key), Then: try(key, k)})
	}
	for i, err := range e.c.RefundJob.ApplyBatch(fencedwrite.WithDeferredRows(ctx), items) {
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	if !deferred["d-0"] || !deferred["d-1"] || deferred["odd"] {
		t.Fatalf("deferred %v: want d-0 and d-1, not the kind that cannot key a map", deferred)
	}
	if len(got) != 1 || len(got[0]) != 2 || got[0][0].Key != "d-0" || got[0][1].Key != "d-1" || got[0][1].Values[0] != "v-d-1" {
		t.Fatalf("the runner handed over %+v, want d-0 and d-1 in one call", got)
	}
}
