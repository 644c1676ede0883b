package operator_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// The status line of jobs the real worker settled or handed to manual
// review, against a provider that offers only a lookup by refund id (as
// docs/operators.md's laptop run): a refund whose answer was lost says
// money may have moved and what to check; a verified one says refunded; a
// declined one says no money moved. Each in plain words, in major units.
func TestStatusOfJobsTheWorkerDecided(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	caps := provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByRefundID: true}
	prov := provider.NewHTTPClient(e.fp.URL(), &http.Client{}, caps)
	ops, err := operator.New(operator.Config{Client: e.c, Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	e.fp.Script("try-lost", fakeprovider.Fault{After: fakeprovider.Cut})
	e.fp.Script("try-declined", fakeprovider.Fault{Reject: "charge_disputed"})
	ids := map[string]int64{}
	for _, key := range []string{"try-lost", "try-paid", "try-declined"} {
		e.fp.AddPayment("pay-"+key, 5000, "EUR")
		req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1150, Currency: "EUR"}
		job, _, err := e.c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
		if err != nil {
			t.Fatal(err)
		}
		ids[key] = job.ID
	}
	wrote := make(chan worker.Job, 16)
	w, err := worker.New(worker.Config{DB: e.d.FencedDB(fencedwrite.DSNOptions{}), Provider: prov, Workers: 3, ScanInterval: time.Hour,
		ReconcileInterval: time.Hour, PendingDelay: time.Microsecond, RetryDelay: time.Microsecond, LagPoll: time.Microsecond,
		BudgetRate: 10_000, BudgetBurst: 10_000, WebhookSecret: []byte("whsec"), Holder: "worker-a.test/1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks:  worker.Hooks{WroteBack: func(j worker.Job, _ error) { wrote <- j }}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.StopAndCancel(context.Background()) })
	// Each job's last write-back: the lost answer's reconcile hands it to
	// manual review; the others settle at once.
	settled := map[string]bool{}
	for len(settled) < 3 {
		select {
		case j := <-wrote:
			if j.To != "ready" {
				settled[j.OperationKey] = true
			}
		case <-time.After(time.Minute): // a safety net; the hook orders the test
			t.Fatalf("the worker did not settle the jobs: %v", settled)
		}
	}
	status := func(key string) (*operator.JobView, string) {
		v, err := ops.Job(ctx, ids[key])
		if err != nil {
			t.Fatal(err)
		}
		return v, v.Status.String()
	}
	lost, line := status("try-lost")
	if want := "Unknown: 11.50 EUR sent " + operator.Stamp(*lost.LastSendAt) + ", the answer was lost, and the provider offers no lookup that can find this refund; " +
		"the provider may have paid. Check reference try-lost at the provider, then decide."; lost.State != "manual_review" || line != want {
		t.Errorf("the lost answer's status:\n%s\nwant\n%s", line, want)
	}
	var texts []string
	for _, e := range lost.Timeline {
		texts = append(texts, e.Text)
	}
	for _, want := range []string{"worker-a.test/1 claimed it (attempt 1) and sent the refund request", "worker-a.test/1 claimed it (attempt 2) to ask the provider about it",
		"worker-a.test/1 handed it to manual review: the answer was lost, and the provider offers no lookup that can find this refund"} {
		if !strings.Contains(strings.Join(texts, "\n"), want) {
			t.Errorf("the timeline lacks %q:\n%s", want, strings.Join(texts, "\n"))
		}
	}
	// Every provider call with its answer or fault, in order after the
	// claim that made it (the calls log): the lost send, then the lookup.
	if len(lost.Calls) != 2 || lost.Calls[0].Kind != "send" || lost.Calls[0].Outcome != "unknown" || lost.Calls[1].Kind != "lookup" {
		t.Errorf("the lost answer's calls: %+v, want the send (unknown) and the lookup", lost.Calls)
	}
	order := []string{"worker-a.test/1 claimed it (attempt 1)", "worker-a.test/1 (attempt 1) sent the refund request; no answer came back",
		"the outcome is unknown, the provider may have paid", "worker-a.test/1 claimed it (attempt 2)", "worker-a.test/1 (attempt 2) asked the provider what became of the refund"}
	joined, at := strings.Join(texts, "\n"), 0
	for _, want := range order {
		i := strings.Index(joined[at:], want)
		if i < 0 {
			t.Errorf("the timeline lacks %q after position %d, in order:\n%s", want, at, joined)
			break
		}
		at += i
	}
	paid, line := status("try-paid")
	var pt []string
	for _, e := range paid.Timeline {
		pt = append(pt, e.Text)
	}
	if len(paid.Calls) != 1 || paid.Calls[0].Outcome != "succeeded" || paid.Calls[0].ProviderRefundID != paid.ProviderRefundID ||
		!strings.Contains(strings.Join(pt, "\n"), "worker-a.test/1 (attempt 1) sent the refund request; it answered: refunded (refund "+paid.ProviderRefundID+"), the money moved") {
		t.Errorf("the paid refund's call: %+v\n%s", paid.Calls, strings.Join(pt, "\n"))
	}
	if want := "Refunded: 11.50 EUR to pay-try-paid, refund " + paid.ProviderRefundID + ", confirmed by the provider."; line != want {
		t.Errorf("the verified refund's status: %s, want %s", line, want)
	}
	if _, line := status("try-declined"); !strings.HasPrefix(line, "Not refunded: the provider declined 11.50 EUR to pay-try-declined (rejected: charge_disputed") ||
		!strings.HasSuffix(line, "No money moved.") {
		t.Errorf("the declined refund's status: %s", line)
	}
	for _, v := range []*operator.JobView{lost, paid} {
		for _, f := range append(v.Facts, v.Engineering...) {
			if strings.Contains(f.Value, "1150") {
				t.Errorf("job %d's fact %s says %q: minor units", v.ID, f.Label, f.Value)
			}
		}
	}
	if !strings.Contains(lost.ReviewEvidence, "amount 11.50 EUR") {
		t.Errorf("the worker's notes do not say the amount in major units:\n%s", lost.ReviewEvidence)
	}
	// A resend's approver sees what the provider last answered (the calls
	// log), beside the amount, the payment and the job's status.
	if _, err := ops.RequestApproval(ctx, operator.Resolution{JobID: lost.ID, As: operator.AsRefund, Reason: "the send was lost; send again", Operator: "rita", SeenAttempt: lost.Attempt}); err != nil {
		t.Fatalf("request a resend: %v", err)
	}
	page, err := ops.Approvals(ctx, true, operator.Page{})
	if err != nil || len(page.Approvals) != 1 || !strings.Contains(page.Approvals[0].LastAnswer, "attempt 2 asked the provider what became of the refund; the provider offers no lookup that can find this refund") {
		t.Fatalf("the resend's approval: %+v, %v; want the provider's last answer", page.Approvals, err)
	}
}
