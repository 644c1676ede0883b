package fencedwrite_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

// The Go layer refuses by itself what the database's triggers would
// refuse: on TiDB there are none, and here they are dropped, so nothing but
// the fenced layer stands between a worker and the row. A takeover of a
// live lease is not claimable, and a superseded item of a write-back batch
// writes nothing, not even its ledger row, whether the batch shares one
// statement per move or not and whether it defers its ledger rows or not.
func TestTheGoLayerRefusesWithoutTheDatabaseFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.db.DropTriggers()
	ctx := t.Context()

	t.Run("a takeover of a live lease is not claimable", func(t *testing.T) {
		job, _ := e.claim("live")
		_, err := e.worker().RefundJob.Takeover(ctx, job.ID, opts)
		wantOutcome(t, err, fencedwrite.ErrNotClaimable)
		leases, err := e.worker().RefundJob.TakeoverExpired(ctx, 10, opts)
		if err != nil || len(leases) != 0 {
			t.Fatalf("TakeoverExpired took %d leases (%v), want none: no lease has expired", len(leases), err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	})

	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("a superseded batch item writes no ledger row (deferred rows %v)", deferred), func(t *testing.T) {
			prefix := fmt.Sprintf("sup-%v", deferred)
			stale := e.enqueue(prefix + "-stale")
			a, b := e.worker(), e.worker()
			staleLease, err := a.RefundJob.Claim(ctx, stale.ID, instant)
			if err != nil {
				t.Fatal(err)
			}
			e.wantLeaseExpired(stale.ID)
			if _, err := b.RefundJob.Takeover(ctx, stale.ID, opts); err != nil {
				t.Fatal(err)
			}
			ids, items := e.completions(keys(prefix, 2)...)
			items = append(items, ent.RefundJobBatchItem{Transition: staleLease.Complete("re_zombie"), Then: ledger.Refunded(prefix+"-stale", "re_zombie")})
			bctx := context.Context(ctx)
			if deferred {
				bctx = fencedwrite.WithDeferredRows(ctx)
			}
			errs := a.RefundJob.ApplyBatch(bctx, items)
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("the live items: %v, %v", errs[0], errs[1])
			}
			wantOutcome(t, errs[2], fencedwrite.ErrSuperseded)
			e.wantJob(stale.ID, refundjob.StateRunning, 2)
			if l := e.ledger(prefix + "-stale"); l.Status != "requested" || l.ProviderRefundID != nil {
				t.Fatalf("the superseded item's ledger row is %s (%v), want requested", l.Status, l.ProviderRefundID)
			}
			for i, id := range ids {
				e.wantJob(id, refundjob.StateSucceeded, 1)
				if l := e.ledger(fmt.Sprintf("%s-%d", prefix, i)); l.Status != "refunded" {
					t.Fatalf("ledger row %d is %s, want refunded", i, l.Status)
				}
			}
		})
	}
}

// Every runner commits through the same sequence, Enqueue's too: its COMMIT
// passes the BeforeCommit signal like Apply's and ApplyBatch's, so a test
// (or the chaos harness) can cut or hold any of them at the same moment.
func TestEveryRunnerCommitsThroughOneSequence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var commits int
	ctx := fencedwrite.WithHooks(t.Context(), fencedwrite.Hooks{BeforeCommit: func() { commits++ }})
	p := request("one-sequence")
	if _, _, err := e.c.RefundJob.Enqueue(ctx, p, ledger.Open(p)); err != nil {
		t.Fatal(err)
	}
	if commits != 1 {
		t.Fatalf("Enqueue's COMMIT passed BeforeCommit %d times, want 1", commits)
	}
	job, err := e.c.RefundJob.Query().Only(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded(p.OperationKey, "re_1")); err != nil {
		t.Fatal(err)
	}
	_, items := e.completions("one-sequence-batch")
	if errs := e.c.RefundJob.ApplyBatch(ctx, items); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if commits != 3 { // Enqueue, Apply, ApplyBatch (completions enqueues with its own context)
		t.Fatalf("BeforeCommit ran %d times, want 3", commits)
	}
}
