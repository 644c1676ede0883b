package fencedwrite_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// Refunded, reply lost: the provider executes A's refund but A does not
// hear back in time. B's takeover reconciles with the same operation key and
// does not refund again; A's late success is evidence, and lands in the
// observation log.
func TestRefundedButReplyLost(t *testing.T) {
	t.Parallel()
	t.Run("the late success is recorded as evidence, not written", func(t *testing.T) {
		const key = "refund-late"
		e, srv, req := withProvider(t, key)
		ctx := t.Context()
		job := e.enqueue(key)
		hold := make(chan struct{})
		srv.Script(key, fakeprovider.Fault{Hold: hold}) // executes, then the answer hangs
		a, b := e.worker(), e.worker()

		la, err := a.RefundJob.Claim(ctx, job.ID, instant)
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			r   provider.Refund
			err error
		}
		late := make(chan answer, 1)
		go func() { // worker A's provider call
			r, err := srv.Client().Refund(ctx, req)
			late <- answer{r, err}
		}()
		<-srv.Executed(key, 1)

		e.wantLeaseExpired(job.ID)
		lb, err := b.RefundJob.Takeover(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		found, err := srv.Client().Lookup(ctx, provider.Query{OperationKey: key, PaymentRef: req.PaymentRef})
		if err != nil || len(found) != 1 || found[0].Status != provider.StatusSucceeded {
			t.Fatalf("B's reconcile found %+v, %v; want the succeeded refund", found, err)
		}
		if err := provider.Verify(req, found[0]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := evidence.Record(ctx, b, evidence.Observation{OperationKey: key, JobID: job.ID, Attempt: lb.Attempt(),
			Source: evidence.Reconcile, ProviderRefundID: found[0].ProviderRefundID, Status: evidence.Succeeded, Payload: found[0].Raw}); err != nil {
			t.Fatal(err)
		}
		if err := b.RefundJob.Apply(ctx, lb.Complete(found[0].ProviderRefundID), ledger.Refunded(key, found[0].ProviderRefundID)); err != nil {
			t.Fatal(err)
		}

		close(hold) // A finally hears the success
		got := <-late
		if got.err != nil || got.r.Status != provider.StatusSucceeded {
			t.Fatalf("A's late answer: %+v, %v", got.r, got.err)
		}
		err = a.RefundJob.Apply(ctx, la.Complete(got.r.ProviderRefundID), ledger.Refunded(key, got.r.ProviderRefundID))
		wantOutcome(t, err, fencedwrite.ErrSuperseded)
		// A lost its fence but keeps the receipt.
		id, created, err := evidence.Record(ctx, a, evidence.Observation{OperationKey: key, JobID: job.ID, Attempt: la.Attempt(),
			Source: evidence.ProviderResponse, ProviderRefundID: got.r.ProviderRefundID, Status: evidence.Succeeded, Payload: got.r.Raw})
		if err != nil || !created {
			t.Fatalf("record A's late success: id=%d created=%v err=%v", id, created, err)
		}

		e.wantJob(job.ID, refundjob.StateSucceeded, 2)
		if l := e.ledger(key); l.Status != refund.StatusRefunded {
			t.Fatalf("ledger is %s, want refunded", l.Status)
		}
		if n := srv.Executions(key); n != 1 {
			t.Fatalf("the provider moved money %d times for %s, want once", n, key)
		}
		wantSameKeyEverywhere(t, srv, key)
		log, err := evidence.ForKey(ctx, e.c, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != 2 || log[1].Source != evidence.ProviderResponse || log[1].Attempt != 1 || log[1].ProviderRefundID != got.r.ProviderRefundID {
			t.Fatalf("observation log = %+v, want B's reconcile then A's late success at attempt 1", log)
		}
	})

	t.Run("a cut reply makes the takeover reconcile, never resend", func(t *testing.T) {
		const key = "refund-cut"
		e, srv, req := withProvider(t, key)
		ctx := t.Context()
		job := e.enqueue(key)
		srv.Script(key, fakeprovider.Fault{After: fakeprovider.Cut}) // executes, then the connection drops
		a, b := e.worker(), e.worker()

		la, err := a.RefundJob.Claim(ctx, job.ID, instant)
		if err != nil {
			t.Fatal(err)
		}
		_, err = srv.Client().Refund(ctx, req)
		if !errors.Is(err, provider.ErrOutcomeUnknown) {
			t.Fatalf("a cut answer: %v, want outcome unknown", err)
		}
		// A stalls before its catch block; its lease expires; B takes over.
		e.wantLeaseExpired(job.ID)
		lb, err := b.RefundJob.Takeover(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if lb.NextAction() != refundjob.NextActionReconcile {
			t.Fatalf("takeover next action %s, want reconcile", lb.NextAction())
		}
		found, err := srv.Client().Lookup(ctx, provider.Query{OperationKey: key, PaymentRef: req.PaymentRef})
		if err != nil || len(found) != 1 {
			t.Fatalf("reconcile: %+v, %v", found, err)
		}
		if err := b.RefundJob.Apply(ctx, lb.Complete(found[0].ProviderRefundID), ledger.Refunded(key, found[0].ProviderRefundID)); err != nil {
			t.Fatal(err)
		}
		// A's catch block finally runs: "waiting to retry". It writes nothing.
		err = a.RefundJob.Apply(ctx, la.Reschedule(refundjob.NextActionReconcile, 0, "", "socket timeout"), nil)
		wantOutcome(t, err, fencedwrite.ErrSuperseded)
		e.wantJob(job.ID, refundjob.StateSucceeded, 2)
		if n := srv.Executions(key); n != 1 {
			t.Fatalf("the provider moved money %d times, want once", n)
		}
		wantSameKeyEverywhere(t, srv, key)
	})
}

// withProvider starts a test database and a fake provider that knows the
// payment of key's request.
func withProvider(t *testing.T, key string) (*env, *fakeprovider.Server, provider.RefundRequest) {
	t.Helper()
	e := newEnv(t)
	srv := fakeprovider.Start()
	t.Cleanup(srv.Close)
	p := request(key)
	srv.AddPayment(p.PaymentRef, 10_000, p.Currency)
	return e, srv, provider.RefundRequest{OperationKey: key, PaymentRef: p.PaymentRef, AmountMinor: p.AmountMinor, Currency: p.Currency}
}

// wantSameKeyEverywhere checks the provider saw one refund request, with the
// operation key as idempotency key, and only lookups by that key after it.
func wantSameKeyEverywhere(t *testing.T, srv *fakeprovider.Server, key string) {
	t.Helper()
	var posts int
	for _, r := range srv.Requests() {
		switch r.Method {
		case http.MethodPost:
			posts++
			if r.Key != key {
				t.Errorf("a refund request used idempotency key %q, want %q", r.Key, key)
			}
		case http.MethodGet:
			if ref := r.Query.Get("reference"); ref != "" && ref != key {
				t.Errorf("a lookup asked about %q, want %q", ref, key)
			}
		}
	}
	if posts != 1 {
		t.Errorf("the provider received %d refund requests, want 1", posts)
	}
}
