package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

func openClient(dsn string) (*ent.Client, error) {
	db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
	if err != nil {
		return nil, err
	}
	return ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db))), nil
}

// enqueue enqueues one approved refund request with its ledger row.
func enqueue(ctx context.Context, dsn string, p ent.RefundJobEnqueue, out io.Writer) error {
	c, err := openClient(dsn)
	if err != nil {
		return err
	}
	defer c.Close()
	job, created, err := c.RefundJob.Enqueue(ctx, p, ledger.Open(p))
	switch {
	case errors.Is(err, fencedwrite.ErrKeyArchived):
		fmt.Fprintf(out, "enqueue: %s was enqueued before and its job is archived: nothing to do\n", p.OperationKey)
		return nil
	case err != nil:
		return err
	case created:
		fmt.Fprintf(out, "enqueue: job %d for %s, ready\n", job.ID, p.OperationKey)
	default:
		fmt.Fprintf(out, "enqueue: %s is already job %d (%s at attempt %d): nothing to do\n", p.OperationKey, job.ID, job.State, job.Attempt)
	}
	return nil
}

// jobs lists jobs by state (the manual-review queue with -state
// manual_review), or shows one job with its ledger row and its evidence.
func jobs(ctx context.Context, dsn, state string, id int64, limit int, out io.Writer) error {
	c, err := openClient(dsn)
	if err != nil {
		return err
	}
	defer c.Close()
	if id != 0 {
		return showJob(ctx, c, id, out)
	}
	q := c.RefundJob.Query().Order(ent.Asc(refundjob.FieldID)).Limit(limit)
	if state != "" {
		if err := refundjob.StateValidator(refundjob.State(state)); err != nil {
			return fmt.Errorf("jobs: -state: %w", err)
		}
		q = q.Where(refundjob.StateEQ(refundjob.State(state)))
	}
	list, err := q.All(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOPERATION KEY\tSTATE\tATTEMPT\tNEXT\tAMOUNT\tPROVIDER REFUND\tREASON")
	for _, j := range list {
		reason := deref(j.ReviewReason)
		if reason == "" {
			reason = deref(j.LastError)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d %s\t%s\t%s\n", j.ID, j.OperationKey, j.State, j.Attempt, j.NextAction,
			j.AmountMinor, j.Currency, deref(j.ProviderRefundID), oneLine(reason))
	}
	return tw.Flush()
}

func showJob(ctx context.Context, c *ent.Client, id int64, out io.Writer) error {
	j, err := c.RefundJob.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	fmt.Fprintf(out, "job %d  %s  %s at attempt %d, next %s due %s\n", j.ID, j.OperationKey, j.State, j.Attempt, j.NextAction, j.NextRunAt.Format("2006-01-02T15:04:05.000000Z"))
	fmt.Fprintf(out, "  request      %s %d %s\n", j.PaymentRef, j.AmountMinor, j.Currency)
	fmt.Fprintf(out, "  provider id  %s\n", deref(j.ProviderRefundID))
	if j.LeaseUntil != nil {
		fmt.Fprintf(out, "  lease until  %s\n", j.LeaseUntil.Format("2006-01-02T15:04:05.000000Z"))
	}
	for label, v := range map[string]*string{"last error": j.LastError, "review": j.ReviewReason, "evidence": j.ReviewEvidence} {
		if v != nil {
			fmt.Fprintf(out, "  %-12s %s\n", label, *v)
		}
	}
	if r, err := c.Refund.Query().Where(refund.OperationKey(j.OperationKey)).Only(ctx); err == nil {
		fmt.Fprintf(out, "  ledger       %s %s\n", r.Status, deref(r.ProviderRefundID))
	}
	es, err := evidence.ForKey(ctx, c, j.OperationKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  evidence     %d observation(s)\n", len(es))
	for _, e := range es {
		processed := "unprocessed"
		if e.ProcessedAt != nil {
			processed = "processed"
		}
		fmt.Fprintf(out, "    #%d %s %s %s %s attempt=%d %s: %s\n", e.ID, e.ReceivedAt.Format("15:04:05.000000"), e.Source, e.Status,
			e.ProviderRefundID, e.Attempt, processed, oneLine(string(e.Payload)))
	}
	return nil
}

// resolve is an operator's resolution of a job in manual review, fenced on
// the attempt read: as succeeded (with the provider's refund id and the
// evidence), back to reconcile, or back to refund (only with proof that the
// original refund did not happen and cannot take effect later).
func resolve(ctx context.Context, dsn string, id int64, as, refundID, because string, out io.Writer) error {
	if because == "" {
		return errors.New("resolve: -evidence is required: say what justifies the resolution")
	}
	c, err := openClient(dsn)
	if err != nil {
		return err
	}
	defer c.Close()
	j, err := c.RefundJob.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	var tr *ent.RefundJobTransition
	var fn func(context.Context, *ent.Tx) error
	switch as {
	case "succeeded":
		tr, fn = c.RefundJob.ResolveSucceeded(j, refundID, because), ledger.Refunded(j.OperationKey, refundID)
	case "reconcile":
		tr = c.RefundJob.ResolveReconcile(j, because)
	case "refund":
		tr = c.RefundJob.ResolveRefund(j, because)
	default:
		return fmt.Errorf("resolve: -as must be succeeded, reconcile or refund, got %q", as)
	}
	if err := c.RefundJob.Apply(ctx, tr, fn); err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	fmt.Fprintf(out, "resolve: job %d (%s) resolved as %s at attempt %d\n", j.ID, j.OperationKey, as, j.Attempt+1)
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
