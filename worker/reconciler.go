package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fencekit/fencekit/audit"
	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
)

// reconcileBatch bounds the evidence one reconciler pass reads.
const reconcileBatch = 100

func (c *Client) reconciler() {
	defer c.loops.Done()
	ticker := time.NewTicker(c.cfg.ReconcileInterval)
	defer ticker.Stop()
	for {
		n := c.reconcilePass(c.workCtx)
		if c.hooks.Reconciled != nil {
			c.hooks.Reconciled(n)
		}
		c.report(c.workCtx)
		select {
		case <-c.stop:
			return
		case <-ticker.C:
		case <-c.reconcile:
		}
	}
}

// ReconcileNow runs one reconciler pass and returns how many pieces of
// evidence it acted on: for tests and operators.
func (c *Client) ReconcileNow(ctx context.Context) int { return c.reconcilePass(ctx) }

// reconcilePass reads unprocessed evidence and acts on each piece through
// the fence: it wakes a waiting job, sends a job in manual review back to
// reconcile (attempt+1, an operator resolution), leaves a running job to
// its holder, and, for a settled job, raises an alert when the evidence
// contradicts it (a refund reversed after it succeeded, say): a new
// business process, never a change to the settled job.
func (c *Client) reconcilePass(ctx context.Context) int {
	entries, err := evidence.Unprocessed(ctx, c.ent, reconcileBatch)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.log.Error("reconciler: read evidence", "err", err)
		}
		return 0
	}
	acted := 0
	woke := false
	for _, e := range entries {
		done, wake, err := c.actOn(ctx, e)
		if err != nil {
			c.log.Warn("reconciler: act on evidence; the next pass tries again", "operation_key", e.OperationKey, "observation", e.ID, "err", err)
			continue
		}
		if done {
			acted++
		}
		woke = woke || wake
	}
	if woke {
		c.Wake()
	}
	return acted
}

// actOn acts on one piece of evidence: done means it was marked processed.
func (c *Client) actOn(ctx context.Context, e evidence.Entry) (done, wake bool, err error) {
	log := c.log.With("operation_key", e.OperationKey, "observation", e.ID, "status", e.Status, "source", e.Source)
	job, err := c.ent.RefundJob.Query().Where(refundjob.OperationKey(e.OperationKey)).Only(ctx)
	if ent.IsNotFound(err) {
		// Archived (or never ours): nothing to wake; keep the record.
		if e.Status == evidence.Reversed {
			c.alert(log, alertArchivedReversal)
		}
		return c.markProcessed(ctx, e)
	}
	if err != nil {
		return false, false, fmt.Errorf("read job: %w", err)
	}
	log = log.With("attempt", job.Attempt, "job_id", job.ID)
	mark := func(ctx context.Context, tx *ent.Tx) error { return evidence.MarkProcessed(ctx, tx, e.ID) }
	switch job.State {
	case refundjob.StateReady:
		err := c.ent.RefundJob.Apply(ctx, c.ent.RefundJob.WakeUp(job), mark)
		if err != nil {
			return false, false, fmt.Errorf("wake up: %w", err)
		}
		log.Info("reconciler: woke the job for new evidence")
		return true, true, nil
	case refundjob.StateManualReview:
		note := fmt.Sprintf("reconciler: new evidence, observation %d (%s %s %s); reconcile with the provider", e.ID, e.Source, e.Status, e.ProviderRefundID)
		// The earlier review evidence stays; the wake-up is audited with
		// what woke the job, so its timeline and the queue's departures
		// say why it left manual review.
		tr := c.ent.RefundJob.ResolveReconcile(job, audit.Append(job.ReviewEvidence, note))
		woke := audit.Entry{JobID: job.ID, OperationKey: job.OperationKey, Action: audit.ActionWake, Outcome: audit.OutcomeDone,
			Operator: audit.Reconciler, Reason: note, RefundID: e.ProviderRefundID, EvidenceShown: wakeShown(job, e),
			StateBefore: string(job.State), AttemptBefore: job.Attempt, StateAfter: string(refundjob.StateReady), AttemptAfter: job.Attempt + 1}
		mark := func(ctx context.Context, tx *ent.Tx) error {
			if err := evidence.MarkProcessed(ctx, tx, e.ID); err != nil {
				return err
			}
			_, err := audit.Record(ctx, tx, woke)
			return err
		}
		j := Job{ID: job.ID, Attempt: job.Attempt + 1, OperationKey: job.OperationKey, Action: string(refundjob.NextActionReconcile),
			Transition: tr.Op(), To: string(tr.To())}
		if c.hooks.Resolving != nil {
			c.hooks.Resolving(j)
		}
		err := c.ent.RefundJob.Apply(ctx, tr, mark)
		if c.hooks.Resolved != nil {
			c.hooks.Resolved(j, err)
		}
		if err != nil {
			return false, false, fmt.Errorf("back to reconcile: %w", err)
		}
		log.Info("reconciler: sent the job in manual review back to reconcile")
		return true, true, nil
	case refundjob.StateRunning:
		return false, false, nil // its holder writes back first
	case refundjob.StateSucceeded:
		if e.Status == evidence.Reversed || e.Status == evidence.Rejected ||
			e.ProviderRefundID != "" && job.ProviderRefundID != nil && e.ProviderRefundID != *job.ProviderRefundID && e.Status == evidence.Succeeded {
			c.alert(log, alertContradictsSucceeded+string(e.Status))
		}
		return c.markProcessed(ctx, e)
	default: // failed
		// A pending event that arrives after the decline is history, not a
		// contradiction; a success is.
		if e.Status == evidence.Succeeded || e.Status == evidence.Reversed {
			c.alert(log, alertRefundOfFailed+string(e.Status))
		}
		return c.markProcessed(ctx, e)
	}
}

func (c *Client) markProcessed(ctx context.Context, e evidence.Entry) (bool, bool, error) {
	err := evidence.MarkProcessed(ctx, c.ent, e.ID)
	if errors.Is(err, evidence.ErrAlreadyProcessed) {
		return false, false, nil
	}
	return err == nil, false, err
}

func (c *Client) alert(log interface{ Warn(string, ...any) }, kind string) {
	c.m.Alert(kind)
	log.Warn("alert: "+kind+"; a person must start a new business process, the settled job never changes", "alert", kind)
}

// oldestUnfinished is the age of the oldest job not yet settled, on the
// database clock.
const oldestUnfinished = "SELECT COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), " + fencedwrite.ClockUTC + "), 0) " +
	"FROM refund_jobs WHERE state IN ('" + fencedwrite.StateReady + "', '" + fencedwrite.StateRunning + "')"

// MaxCountedDue bounds the count of due reconciles that Metrics.ReconcilesDue
// reports, so that a backlog never makes the report a long scan.
const MaxCountedDue = 10_000

// reconcilesDue counts the due reconciles (up to MaxCountedDue) and the age
// of the oldest on the database clock, on the index ClaimDueReconciles scans:
// a range that ends at the clock, read once (fencedwrite.ScanClock).
var reconcilesDue = fmt.Sprintf("SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(next_run_at), %[1]s), 0) FROM "+
	"(SELECT next_run_at FROM refund_jobs, %[5]s WHERE state = '%[2]s' AND next_action = '%[3]s' AND next_run_at <= %[6]s "+
	"ORDER BY next_run_at LIMIT %[4]d) due", fencedwrite.ClockUTC, fencedwrite.StateReady, fencedwrite.ActionReconcile, MaxCountedDue,
	fencedwrite.ScanClock, fencedwrite.ScanNow)

// report reports the age of the oldest unfinished job and the due
// reconciles.
func (c *Client) report(ctx context.Context) {
	var micros int64
	if c.queryRow(ctx, oldestUnfinished, &micros) {
		c.m.OldestUnfinished(time.Duration(micros) * time.Microsecond)
	}
	var n int
	if c.queryRow(ctx, reconcilesDue, &n, &micros) {
		c.m.ReconcilesDue(n, time.Duration(micros)*time.Microsecond)
	}
}

// queryRow reads the one row of query into dest, and says whether it did.
func (c *Client) queryRow(ctx context.Context, query string, dest ...any) bool {
	rows, err := c.ent.QueryContext(ctx, query)
	if err != nil {
		return false
	}
	defer rows.Close()
	return rows.Next() && rows.Scan(dest...) == nil
}

// wakeShown is what woke a job out of manual review, for its audit entry:
// the review as it stood and the observation.
func wakeShown(job *ent.RefundJob, e evidence.Entry) string {
	b, _ := json.Marshal(struct {
		ReviewReason   string `json:"review_reason,omitempty"`
		ReviewEvidence string `json:"review_evidence,omitempty"`
		Observation    int64  `json:"observation"`
		Source         string `json:"source"`
		Status         string `json:"status"`
		Payload        string `json:"payload"`
	}{orEmpty(job.ReviewReason), orEmpty(job.ReviewEvidence), e.ID, string(e.Source), string(e.Status), string(e.Payload)})
	return string(b)
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
