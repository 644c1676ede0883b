package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/scratchdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// demoLease is short so that the takeover happens within seconds.
const demoLease = 2 * time.Second

// Zombie plays the article's story against a real database and a fake
// provider: worker A's provider call hangs after the refund executed, A's
// lease expires, B takes over, reconciles and completes; then A comes back
// with the late success. It prints what happened and fails if any fence
// let the zombie through.
func Zombie(ctx context.Context, dsn string, out io.Writer) error {
	if err := scratchdb.Recreate(ctx, dsn, "demo"); err != nil {
		return err
	}
	if err := scratchdb.Migrate(ctx, dsn, out); err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	open := func() (*ent.Client, error) { // one pool per worker: they never share a connection
		db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
		if err != nil {
			return nil, err
		}
		return ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db))), nil
	}
	svc, err := open()
	if err != nil {
		return err
	}
	defer svc.Close()
	a, err := open()
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := open()
	if err != nil {
		return err
	}
	defer b.Close()

	srv := fakeprovider.Start()
	defer srv.Close()
	const key = "refund-123"
	req := provider.RefundRequest{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	srv.AddPayment(req.PaymentRef, 5000, req.Currency)

	// The service enqueues the approved refund request with its ledger row.
	p := ent.RefundJobEnqueue{OperationKey: req.OperationKey, PaymentRef: req.PaymentRef, AmountMinor: req.AmountMinor, Currency: req.Currency}
	job, _, err := svc.RefundJob.Enqueue(ctx, p, ledger.Open(p))
	if err != nil {
		return err
	}
	say("enqueued   %s as job %d: refund %d.%02d %s of %s", key, job.ID, req.AmountMinor/100, req.AmountMinor%100, req.Currency, req.PaymentRef)

	claimOpts := fencedwrite.ClaimOptions{Lease: demoLease}
	la, err := a.RefundJob.Claim(ctx, job.ID, claimOpts)
	if err != nil {
		return err
	}
	say("worker A   claimed job %d: attempt %d, next action %s, lease until %s (database time)", la.ID(), la.Attempt(), la.NextAction(), la.LeaseUntil().Format(time.TimeOnly))

	hold := make(chan struct{})
	srv.Script(key, fakeprovider.Fault{Hold: hold})
	type answer struct {
		r   provider.Refund
		err error
	}
	late := make(chan answer, 1)
	go func() {
		r, err := srv.Client().Refund(ctx, req)
		late <- answer{r, err}
	}()
	<-srv.Executed(key, 1)
	say("worker A   sent %s (idempotency key = operation key); the provider refunded it, but the answer hangs", key)

	// B's scheduler pass: the takeover is refused until the lease has expired
	// on the database's clock.
	var lb *ent.RefundJobLease
	for lb == nil {
		lb, err = b.RefundJob.Takeover(ctx, job.ID, claimOpts)
		switch {
		case errors.Is(err, fencedwrite.ErrNotClaimable):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(demoLease / 10):
			}
		case err != nil:
			return err
		}
	}
	say("worker B   took over job %d after the lease expired: attempt %d, next action %s", lb.ID(), lb.Attempt(), lb.NextAction())

	found, err := srv.Client().Lookup(ctx, provider.Query{OperationKey: key, PaymentRef: req.PaymentRef})
	if err != nil {
		return err
	}
	if len(found) != 1 || found[0].Status != provider.StatusSucceeded {
		return fmt.Errorf("reconcile found %+v, want the succeeded refund", found)
	}
	if err := provider.Verify(req, found[0]); err != nil {
		return err
	}
	refundID := found[0].ProviderRefundID
	if _, _, err := evidence.Record(ctx, b, evidence.Observation{OperationKey: key, JobID: job.ID, Attempt: lb.Attempt(),
		Source: evidence.Reconcile, ProviderRefundID: refundID, Status: evidence.Succeeded, Payload: found[0].Raw}); err != nil {
		return err
	}
	say("worker B   reconciled %s with the same key: succeeded as %s (no second refund sent)", key, refundID)
	if err := b.RefundJob.Apply(ctx, lb.Complete(refundID), ledger.Refunded(key, refundID)); err != nil {
		return err
	}
	say("worker B   completed job %d at attempt %d, and settled the ledger in the same transaction", job.ID, lb.Attempt())

	close(hold)
	got := <-late
	if got.err != nil {
		return fmt.Errorf("worker A's late answer: %w", got.err)
	}
	say("worker A   finally heard back: %s (%s)", got.r.Status, got.r.ProviderRefundID)
	err = a.RefundJob.Apply(ctx, la.Complete(got.r.ProviderRefundID), ledger.Refunded(key, got.r.ProviderRefundID))
	if !errors.Is(err, fencedwrite.ErrSuperseded) {
		return fmt.Errorf("worker A's completion at attempt %d: %v, want it refused as superseded", la.Attempt(), err)
	}
	say("worker A   complete at attempt %d: refused, 0 rows: %v", la.Attempt(), err)
	err = a.RefundJob.Apply(ctx, la.Reschedule(refundjob.NextActionRefund, 0, "", "socket timeout"), nil)
	if !errors.Is(err, fencedwrite.ErrSuperseded) {
		return fmt.Errorf("worker A's reschedule at attempt %d: %v, want it refused as superseded", la.Attempt(), err)
	}
	say("worker A   the article's catch block, \"back to waiting to retry\": refused, 0 rows")
	id, _, err := evidence.Record(ctx, a, evidence.Observation{OperationKey: key, JobID: job.ID, Attempt: la.Attempt(),
		Source: evidence.ProviderResponse, ProviderRefundID: got.r.ProviderRefundID, Status: evidence.Succeeded, Payload: got.r.Raw})
	if err != nil {
		return err
	}
	say("worker A   kept the late receipt as evidence: observation %d", id)

	//fencelint:allow the demo shows the database refusing the article's zombie UPDATE, written raw on purpose
	_, err = a.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID)
	if err == nil {
		return errors.New("the database accepted the zombie's raw UPDATE")
	}
	say("worker A   even a raw UPDATE refund_jobs SET state='ready' WHERE id=%d is refused by the database:\n           %v", job.ID, err)

	final, err := svc.RefundJob.Get(ctx, job.ID)
	if err != nil {
		return err
	}
	ledger, err := svc.Refund.Query().Where(refund.OperationKey(key)).Only(ctx)
	if err != nil {
		return err
	}
	say("result     job %d is %s at attempt %d; ledger is %s; the provider moved money %d time(s) for %s",
		final.ID, final.State, final.Attempt, ledger.Status, srv.Executions(key), key)
	if final.State != refundjob.StateSucceeded || ledger.Status != refund.StatusRefunded || srv.Executions(key) != 1 {
		return errors.New("the customer would have been paid twice")
	}
	return nil
}
