//go:build !tidb

package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ledger"
)

// Every job settles, whoever enqueued it. After adoption (-keep-defaults,
// so that the legacy application's INSERTs go on working), jobs the legacy
// application inserts have no ledger row: fencekit's worker sends each once
// and settles it, its ledger row opened from the job as it settles, with no
// takeover (before: the completion rolled back, "settle ledger row …
// not requested", and the job was taken over and reconciled every lease).
// A job whose write-back the database refuses for good (a legacy writer set
// a failed job, its ledger row failed, back to ready) goes to manual review
// saying why, instead of looping.
func TestEveryJobSettlesWhoeverEnqueuedIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCutover(t)
	for i := 1; i <= 3; i++ {
		c.legacyEnqueue(i)
	}
	// The legacy application failed legacy-03 before adoption.
	//fencelint:allow the legacy application's own write, before adoption
	if _, err := c.legacyDB().ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE operation_key = 'legacy-03'"); err != nil {
		t.Fatal(err)
	}
	c.refunddOut("adopt", "apply", "-dsn", c.rootDSN, "-keep-defaults", "-columns", "payment_ref=payment_id,amount_minor=amount_cents,created_at=created")

	// After adoption: two jobs inserted by the legacy application, and a
	// legacy writer that puts the failed job back in the queue (observe
	// mode lets it through).
	c.legacyEnqueue(4)
	c.legacyEnqueue(5)
	//fencelint:allow a legacy writer's unfenced write in observe mode: the test's subject
	if _, err := c.legacyDB().ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE operation_key = 'legacy-03'"); err != nil {
		t.Fatal(err)
	}
	var ledgerRows int
	if err := c.root.QueryRow("SELECT COUNT(*) FROM refunds WHERE operation_key IN ('legacy-04', 'legacy-05')").Scan(&ledgerRows); err != nil || ledgerRows != 0 {
		t.Fatalf("the legacy inserts have %d ledger rows before settling (%v), want none", ledgerRows, err)
	}

	c.fencedWorker("f1")
	// The write-backs, in whatever order they come: the four settle, and
	// legacy-03's completion is refused for good, then moved to manual
	// review.
	settled := map[string]bool{}
	var refused, reviewed bool
	timeout := time.After(time.Minute)
	for len(settled) < 4 || !reviewed {
		select {
		case w := <-c.wrote:
			switch {
			case w.job.OperationKey != "legacy-03":
				if w.err == nil && w.job.To == "succeeded" {
					settled[w.job.OperationKey] = true
				}
			case w.job.To == "succeeded":
				refused = errors.Is(w.err, ledger.ErrSettledOtherwise)
			case w.job.To == "manual_review":
				if !refused || w.err != nil {
					t.Fatalf("legacy-03 moved to manual review (%v) without its completion refused for good first", w.err)
				}
				reviewed = true
			}
		case <-timeout:
			t.Fatalf("within a minute: settled %v, legacy-03 refused %v, reviewed %v", settled, refused, reviewed)
		}
	}
	for _, key := range []string{"legacy-01", "legacy-02", "legacy-04", "legacy-05"} {
		var state, status string
		var attempt int64
		if err := c.root.QueryRow("SELECT j.state, j.attempt, r.status FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE j.operation_key = ?", key).
			Scan(&state, &attempt, &status); err != nil || state != "succeeded" || status != "refunded" || attempt != 1 {
			t.Errorf("%s: %s at attempt %d, ledger %s (%v); want succeeded at its first claim, refunded", key, state, attempt, status, err)
		}
		if n := c.srv.Executions(key); n != 1 {
			t.Errorf("%s: the provider executed it %d times", key, n)
		}
	}
	var state, reason string
	if err := c.root.QueryRow("SELECT state, COALESCE(review_reason, '') FROM refund_jobs WHERE operation_key = 'legacy-03'").Scan(&state, &reason); err != nil ||
		state != "manual_review" || !strings.Contains(reason, "could not record the provider's answer") || !strings.Contains(reason, "failed") {
		t.Fatalf("legacy-03: %s, %q (%v); want manual review saying why", state, reason, err)
	}
}
