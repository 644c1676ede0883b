//go:build !tidb

package worker_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// A payment refunded outside fencekit after the job's first send was
// turned away (its outcome unknown to the worker): the reconcile finds
// nothing, the resend inside the key's window is told "exceeds the
// refundable amount", which is evidence, not a failure. That answer is
// kept in the observation log, and the next reconcile that finds nothing
// hands the job to an operator: at most two sends, never a loop of sends
// and lookups until the key's window closes (the review of issue 34 found
// the loop).
func TestAlreadyRefundedElsewhereEndsInReview(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	c := d.Client()
	ctx := t.Context()
	fp := fakeprovider.Start()
	t.Cleanup(fp.Close)
	fp.AddPayment("pay-ext", 1000, "EUR")
	// The first send is turned away before processing with a 503: to the
	// worker its outcome is unknown.
	fp.Script("k-ext", fakeprovider.Fault{Refuse: 503})
	req := ent.RefundJobEnqueue{OperationKey: "k-ext", PaymentRef: "pay-ext", AmountMinor: 1000, Currency: "EUR"}
	job, _, err := c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan worker.Job, 64)
	w, err := worker.New(worker.Config{DB: d.FencedDB(fencedwrite.DSNOptions{}), Provider: fp.Client(), Workers: 1, ScanInterval: 10 * time.Millisecond,
		ReconcileInterval: time.Hour, PendingDelay: time.Microsecond, RetryDelay: time.Microsecond, LagPoll: time.Microsecond,
		BudgetRate: 10_000, BudgetBurst: 10_000, WebhookSecret: []byte("whsec"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: worker.Hooks{WroteBack: func(j worker.Job, _ error) { wrote <- j }}})
	if err != nil {
		t.Fatal(err)
	}
	// The first write-back (reconcile after the unknown outcome): then the
	// payment is refunded in full outside fencekit, and the worker goes on.
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.StopAndCancel(context.Background()) })
	first := <-wrote
	if first.To != "ready" {
		t.Fatalf("after the turned-away send: %+v, want a reschedule", first)
	}
	if _, err := fp.Client().Refund(ctx, provider.RefundRequest{OperationKey: "k-dashboard", PaymentRef: "pay-ext", AmountMinor: 1000, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case j := <-wrote:
			if j.To == "manual_review" {
				got, err := c.RefundJob.Get(ctx, job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if n := fp.Executions("k-ext"); n != 0 {
					t.Fatalf("the provider executed k-ext %d times", n)
				}
				sends, err := c.RefundJobCall.Query().All(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, s := range sends {
					if s.Kind == "send" {
						n++
					}
				}
				if n > 2 {
					t.Fatalf("%d sends before manual review, want at most 2", n)
				}
				es, err := evidence.ForKey(ctx, c, "k-ext")
				if err != nil || len(es) == 0 || es[0].Status != evidence.Conflict {
					t.Fatalf("the already-refunded answer in the observation log: %+v, %v", es, err)
				}
				t.Logf("manual review at attempt %d after %d sends: %s", got.Attempt, n, deref(got.ReviewReason))
				return
			}
		case <-timeout:
			t.Fatal("the job did not reach manual review within a minute: it loops")
		}
	}
}
