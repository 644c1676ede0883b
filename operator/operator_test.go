package operator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// env is one test's database, provider and operators' API.
type env struct {
	d   *dbtest.DB
	c   *ent.Client
	fp  *fakeprovider.Server
	ops *operator.Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	d := dbtest.New(t)
	fp := fakeprovider.Start()
	t.Cleanup(fp.Close)
	c := d.Client()
	ops, err := operator.New(operator.Config{Client: c, Provider: fp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{d: d, c: c, fp: fp, ops: ops}
}

// review enqueues a job for req, claims it and hands it to manual review
// with reason and evidence, as a worker would.
func (e *env) review(t *testing.T, req ent.RefundJobEnqueue, reason, ev string) *ent.RefundJob {
	t.Helper()
	ctx := t.Context()
	job, _, err := e.c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RefundJob.Apply(ctx, l.ManualReview(reason, ev, ""), nil); err != nil {
		t.Fatal(err)
	}
	return e.job(t, job.ID)
}

// rejected records the provider's definitive rejection of key in the
// observation log: the proof a resend needs.
func (e *env) rejected(t *testing.T, key string) {
	t.Helper()
	if _, _, err := evidence.Record(t.Context(), e.c, evidence.Observation{OperationKey: key, Source: evidence.ProviderResponse,
		Status: evidence.Rejected, Payload: []byte(`{"error":{"code":"bank_outage"}}`)}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) job(t *testing.T, id int64) *ent.RefundJob {
	t.Helper()
	j, err := e.c.RefundJob.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// refundAt has the provider execute a refund directly and returns its id.
func (e *env) refundAt(t *testing.T, req provider.RefundRequest) string {
	t.Helper()
	r, err := e.fp.Client().Refund(t.Context(), req)
	if err != nil && !errors.Is(err, provider.ErrRejected) {
		t.Fatalf("provider refund %s: %v", req.OperationKey, err)
	}
	return r.ProviderRefundID
}

func (e *env) audit(t *testing.T, jobID int64) []operator.AuditEntry {
	t.Helper()
	v, err := e.ops.Job(t.Context(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	return v.Audit
}

// requestClosedByRefusal checks that approval request id, refused at its
// approval by approver, is closed, and that the audit reads back the
// refusal with the request's id and the cause the approver was told (says).
func (e *env) requestClosedByRefusal(t *testing.T, id int64, approver, says string) {
	t.Helper()
	a, err := e.ops.Approval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != operator.Declined || a.DecidedBy != approver || !strings.Contains(a.Closed, "was refused") || !strings.Contains(a.Closed, says) {
		t.Fatalf("request %d after a refused approval: %s by %s, closed %q; want it closed by %s saying %q", id, a.Status, a.DecidedBy, a.Closed, approver, says)
	}
	if _, err := e.ops.Approve(t.Context(), id, approver, ""); !errors.Is(err, operator.ErrRequestClosed) {
		t.Fatalf("approving request %d again: %v, want ErrRequestClosed", id, err)
	}
	var refusal *operator.AuditEntry
	for _, en := range e.audit(t, a.JobID) {
		if en.Outcome == "refused" && en.ApprovalID == id {
			refusal = &en
		}
	}
	if refusal == nil || refusal.Operator != approver || refusal.RequestedBy != a.RequestedBy || !strings.Contains(refusal.Refused, says) ||
		!strings.Contains(refusal.Text, fmt.Sprintf("request %d", id)) || strings.Contains(refusal.Text, "request 0") {
		t.Fatalf("the audit of request %d's refusal: %+v", id, refusal)
	}
}

// unchanged checks that a refused resolution left the job and its ledger
// row as they were, and recorded exactly one refusal by who.
func (e *env) refusedAndUnchanged(t *testing.T, before *ent.RefundJob, who string) {
	t.Helper()
	after := e.job(t, before.ID)
	if after.State != refundjob.StateManualReview || after.Attempt != before.Attempt || *after.ReviewEvidence != *before.ReviewEvidence {
		t.Errorf("a refused resolution changed the job: %s@%d %q", after.State, after.Attempt, *after.ReviewEvidence)
	}
	r, err := e.c.Refund.Query().Where(refund.OperationKey(before.OperationKey)).Only(t.Context())
	if err != nil || r.Status != refund.StatusRequested {
		t.Errorf("ledger after a refused resolution: %v %v", r, err)
	}
	a := e.audit(t, before.ID)
	if len(a) != 1 || a[0].Outcome != "refused" || a[0].Operator != who || a[0].StateAfter != "manual_review" || a[0].AttemptAfter != before.Attempt {
		t.Errorf("audit of a refused resolution: %+v", a)
	}
}

func TestResolveSucceededVerifiesTheRefundWithTheProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	e.fp.AddPayment("pay-2", 10_000, "EUR")

	resolve := func(j *ent.RefundJob, refundID string) (operator.Result, error) {
		return e.ops.Resolve(ctx, operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: refundID,
			Reason: "the provider's dashboard shows it", Operator: "alice", SeenAttempt: j.Attempt})
	}

	t.Run("a refund id the provider does not know is refused and audited", func(t *testing.T) {
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-unknown", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "not found after the lag", "lookup: empty")
		_, err := resolve(j, "re_does_not_exist")
		if !errors.Is(err, operator.ErrUnknownRefund) {
			t.Fatalf("resolve with a forged refund id: %v, want ErrUnknownRefund", err)
		}
		e.refusedAndUnchanged(t, j, "alice")
	})

	t.Run("a refund of another payment is refused", func(t *testing.T) {
		other := e.refundAt(t, provider.RefundRequest{OperationKey: "k-other", PaymentRef: "pay-2", AmountMinor: 100, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-payment", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		_, err := resolve(j, other)
		var m *operator.MismatchError
		if !errors.Is(err, operator.ErrRefundMismatch) || !errors.As(err, &m) || m.Field != "payment" || m.Got != "pay-2" {
			t.Fatalf("resolve with another payment's refund: %v, want a payment mismatch", err)
		}
		e.refusedAndUnchanged(t, j, "alice")
	})

	t.Run("a refund of the same payment for another operation is refused", func(t *testing.T) {
		// Two refunds of one payment, same amount and currency: only the
		// reference (the operation key, the provider's idempotency key)
		// tells them apart.
		other := e.refundAt(t, provider.RefundRequest{OperationKey: "k-sibling", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-reference", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		_, err := resolve(j, other)
		var m *operator.MismatchError
		if !errors.Is(err, operator.ErrRefundMismatch) || !errors.As(err, &m) || m.Field != "reference" || m.Got != "k-sibling" || m.Want != "k-reference" {
			t.Fatalf("resolve k-reference with k-sibling's refund %q: %v, want a reference mismatch", other, err)
		}
		e.refusedAndUnchanged(t, j, "alice")
	})

	t.Run("an amount that differs is refused", func(t *testing.T) {
		id := e.refundAt(t, provider.RefundRequest{OperationKey: "k-amount", PaymentRef: "pay-1", AmountMinor: 400, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-amount", PaymentRef: "pay-1", AmountMinor: 500, Currency: "EUR"}, "r", "ev")
		_, err := resolve(j, id)
		var m *operator.MismatchError
		if !errors.As(err, &m) || m.Field != "amount" || m.Got != "4.00 EUR" || m.Want != "5.00 EUR" {
			t.Fatalf("resolve with another amount: %v, want an amount mismatch 4.00 vs 5.00", err)
		}
		e.refusedAndUnchanged(t, j, "alice")
	})

	t.Run("a currency that differs is refused", func(t *testing.T) {
		id := e.refundAt(t, provider.RefundRequest{OperationKey: "k-currency", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-currency", PaymentRef: "pay-1", AmountMinor: 100, Currency: "USD"}, "r", "ev")
		_, err := resolve(j, id)
		var m *operator.MismatchError
		if !errors.As(err, &m) || m.Field != "currency" || m.Got != "EUR" || m.Want != "USD" {
			t.Fatalf("resolve with another currency: %v, want a currency mismatch", err)
		}
		e.refusedAndUnchanged(t, j, "alice")
	})

	t.Run("a pending refund is not a success", func(t *testing.T) {
		e.fp.Script("k-pending", fakeprovider.Fault{Pending: true})
		id := e.refundAt(t, provider.RefundRequest{OperationKey: "k-pending", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-pending", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		if _, err := resolve(j, id); !errors.Is(err, operator.ErrRefundNotSucceeded) {
			t.Fatalf("resolve on a pending refund: %v, want ErrRefundNotSucceeded", err)
		}
		e.refusedAndUnchanged(t, j, "alice")
	})

	t.Run("a verified refund settles the job and the ledger and keeps the earlier evidence", func(t *testing.T) {
		id := e.refundAt(t, provider.RefundRequest{OperationKey: "k-good", PaymentRef: "pay-1", AmountMinor: 1250, Currency: "EUR"})
		const earlier = "reconcile at attempt 1: lookup by reference empty for 10m"
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-good", PaymentRef: "pay-1", AmountMinor: 1250, Currency: "EUR"}, "not found after the lag", earlier)
		res, err := resolve(j, id)
		if err != nil {
			t.Fatal(err)
		}
		after := e.job(t, j.ID)
		if res.State != "succeeded" || res.Attempt != j.Attempt+1 || after.State != refundjob.StateSucceeded || after.Attempt != j.Attempt+1 || *after.ProviderRefundID != id {
			t.Fatalf("after a verified resolution: %+v, job %s@%d", res, after.State, after.Attempt)
		}
		if !strings.HasPrefix(*after.ReviewEvidence, earlier+"\n---\n") || !strings.Contains(*after.ReviewEvidence, "operator alice resolved as succeeded") {
			t.Errorf("the resolution overwrote the earlier evidence: %q", *after.ReviewEvidence)
		}
		r, err := e.c.Refund.Query().Where(refund.OperationKey("k-good")).Only(ctx)
		if err != nil || r.Status != refund.StatusRefunded || *r.ProviderRefundID != id {
			t.Errorf("ledger: %+v %v", r, err)
		}
		a := e.audit(t, j.ID)
		if len(a) != 1 || a[0].ID != res.AuditID || a[0].Outcome != "done" || a[0].Action != "resolve_succeeded" || a[0].Operator != "alice" ||
			a[0].Override || a[0].StateBefore != "manual_review" || a[0].AttemptBefore != j.Attempt || a[0].AttemptAfter != j.Attempt+1 ||
			!strings.Contains(a[0].EvidenceShown, earlier) || !strings.Contains(a[0].EvidenceShown, `"provider_answer"`) || a[0].RecordedAt.IsZero() {
			t.Errorf("audit: %+v", a)
		}
		es, err := evidence.ForKey(ctx, e.c, "k-good")
		if err != nil || len(es) != 1 || es[0].Source != evidence.Operator || es[0].ProviderRefundID != id {
			t.Errorf("the provider's answer is not in the observation log: %+v %v", es, err)
		}
	})

	t.Run("a resolution on an attempt that moved on is refused", func(t *testing.T) {
		id := e.refundAt(t, provider.RefundRequest{OperationKey: "k-stale", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-stale", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		if _, err := e.ops.Resolve(ctx, operator.Resolution{JobID: j.ID, As: operator.AsReconcile, Reason: "ask again", Operator: "carol", SeenAttempt: j.Attempt}); err != nil {
			t.Fatal(err)
		}
		if _, err := resolve(j, id); !errors.Is(err, operator.ErrResolvedElsewhere) {
			t.Fatalf("resolve at an old attempt: %v, want ErrResolvedElsewhere", err)
		}
	})

	t.Run("bad input names the field", func(t *testing.T) {
		for field, r := range map[string]operator.Resolution{
			"operator":  {JobID: 1, As: operator.AsReconcile, Reason: "r", Operator: "  ", SeenAttempt: 1},
			"reason":    {JobID: 1, As: operator.AsReconcile, Reason: "", Operator: "alice", SeenAttempt: 1},
			"as":        {JobID: 1, As: "settle", Reason: "r", Operator: "alice", SeenAttempt: 1},
			"refund-id": {JobID: 1, As: operator.AsSucceeded, Reason: "r", Operator: "alice", SeenAttempt: 1},
			"attempt":   {JobID: 1, As: operator.AsReconcile, Reason: "r", Operator: "alice"},
		} {
			_, err := e.ops.Resolve(ctx, r)
			var in *fencedwrite.FieldError
			if !errors.Is(err, operator.ErrInvalid) || !errors.As(err, &in) || in.Field != field {
				t.Errorf("%s: %v, want an InputError naming %s", field, err, field)
			}
		}
		if _, err := e.ops.Resolve(ctx, operator.Resolution{JobID: 999_999, As: operator.AsReconcile, Reason: "r", Operator: "alice", SeenAttempt: 1}); !errors.Is(err, operator.ErrNotFound) || !strings.Contains(err.Error(), "999999") {
			t.Errorf("an unknown job: %v, want ErrNotFound naming the id", err)
		}
	})
}

func TestOverrideNeedsAReasonAndADifferentApprover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const earlier = "provider lookups lag; dashboard shows re_manual"
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-override", PaymentRef: "pay-1", AmountMinor: 700, Currency: "EUR"}, "not found", earlier)
	r := operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: "re_manual", Override: true,
		Reason: "bank statement line 42 shows the refund", Operator: "alice", SeenAttempt: j.Attempt}

	if _, err := e.ops.Resolve(ctx, r); !errors.Is(err, operator.ErrNeedsApproval) {
		t.Fatalf("an override without approval: %v, want ErrNeedsApproval", err)
	}
	noReason := r
	noReason.Reason = " "
	var in *fencedwrite.FieldError
	if _, err := e.ops.RequestApproval(ctx, noReason); !errors.As(err, &in) || in.Field != "reason" {
		t.Fatalf("an override without a reason: %v, want an InputError naming reason", err)
	}
	req, err := e.ops.RequestApproval(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if req.Status != operator.Pending || req.RequestedBy != "alice" || req.SeenAttempt != j.Attempt {
		t.Fatalf("request: %+v", req)
	}
	for _, same := range []string{"alice", "ALICE"} {
		if _, err := e.ops.Approve(ctx, req.ID, same, "re_manual"); !errors.Is(err, operator.ErrSameOperator) {
			t.Fatalf("approval by the requester (%s): %v, want ErrSameOperator", same, err)
		}
	}
	if _, err := e.ops.Approve(ctx, req.ID, "", "re_manual"); !errors.Is(err, operator.ErrInvalid) {
		t.Fatalf("approval by nobody: %v, want ErrInvalid", err)
	}
	if got := e.job(t, j.ID); got.State != refundjob.StateManualReview {
		t.Fatalf("refused approvals moved the job to %s", got.State)
	}
	// The database holds the four eyes too, whoever writes (TiDB: only
	// where it enforces CHECK constraints, docs/tidb.md).
	if e.d.Engine().DatabaseFence {
		for _, same := range []string{"alice", "ALICE", "Alice"} { // the columns compare bytes (utf8mb4_bin): the trigger must not
			if _, err := e.d.RawDB().Exec("UPDATE refund_approvals SET status = 'approved', decided_by = ? WHERE id = ?", same, req.ID); !dbtest.IsTriggerRefusal(err, "the approver is never the requester") {
				t.Fatalf("the requester approving her own request in the database as %s: %v, want the trigger's refusal", same, err)
			}
		}
	}

	if _, err := e.ops.Approve(ctx, req.ID, "bob", "re_other"); !errors.Is(err, operator.ErrInvalid) {
		t.Fatalf("an override approved without typing its refund id: %v, want ErrInvalid naming confirm", err)
	}
	res, err := e.ops.Approve(ctx, req.ID, "bob", "re_manual")
	if err != nil {
		t.Fatal(err)
	}
	after := e.job(t, j.ID)
	if res.State != "succeeded" || after.State != refundjob.StateSucceeded || *after.ProviderRefundID != "re_manual" || !strings.HasPrefix(*after.ReviewEvidence, earlier) {
		t.Fatalf("after the approved override: %+v, job %s %q", res, after.State, *after.ReviewEvidence)
	}
	a := e.audit(t, j.ID)
	if len(a) != 2 || a[0].Action != "request_approval" || a[0].Operator != "alice" || a[0].Override ||
		a[1].Action != "resolve_succeeded" || a[1].Operator != "bob" || a[1].RequestedBy != "alice" || a[1].ApprovalID != req.ID || !a[1].Override {
		t.Fatalf("audit of an override: %+v", a)
	}
	if _, err := e.ops.Approve(ctx, req.ID, "carol", "re_manual"); !errors.Is(err, operator.ErrRequestClosed) {
		t.Fatalf("a second approval: %v, want ErrRequestClosed", err)
	}
}

func TestResendNeedsApprovalAndNoRefundAtTheProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")

	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-resend", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "rejected: try again", "ev")
	r := operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "the provider rejected it on a bank outage; send again", Operator: "alice", SeenAttempt: j.Attempt}
	if _, err := e.ops.Resolve(ctx, r); !errors.Is(err, operator.ErrNeedsApproval) {
		t.Fatalf("a resend without approval: %v, want ErrNeedsApproval", err)
	}
	req, err := e.ops.RequestApproval(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// "Not found" is no proof that the first request did not execute: the
	// approval is refused, audited with the request, and the request is
	// closed.
	if _, err := e.ops.Approve(ctx, req.ID, "bob", ""); !errors.Is(err, operator.ErrNoProof) {
		t.Fatalf("a resend without proof: %v, want ErrNoProof", err)
	}
	e.requestClosedByRefusal(t, req.ID, "bob", "nothing proves the first request did not pay")
	e.rejected(t, "k-resend")
	req, err = e.ops.RequestApproval(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.ops.Approve(ctx, req.ID, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	after := e.job(t, j.ID)
	if res.State != "ready" || after.State != refundjob.StateReady || after.NextAction != refundjob.NextActionRefund || after.Attempt != j.Attempt+1 {
		t.Fatalf("after an approved resend: %+v, job %s %s@%d", res, after.State, after.NextAction, after.Attempt)
	}

	t.Run("refused when the provider shows a refund for the key", func(t *testing.T) {
		e.refundAt(t, provider.RefundRequest{OperationKey: "k-paid", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"})
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-paid", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "r", "ev")
		req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "send again", Operator: "alice", SeenAttempt: j.Attempt})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.ops.Approve(ctx, req.ID, "bob", ""); !errors.Is(err, operator.ErrRefundExists) {
			t.Fatalf("a resend of a key the provider refunded: %v, want ErrRefundExists", err)
		}
		if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != j.Attempt {
			t.Fatalf("a refused resend moved the job: %s@%d", got.State, got.Attempt)
		}
	})
}

// A second writer moves the job between the approver's read and the fenced
// write: the approval is refused, the request closed as stale, and only the
// other writer's resolution is in place.
func TestApprovalAfterTheJobMovedIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-race", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "r", "ev")
	e.rejected(t, "k-race")
	req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "send again", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	other, err := operator.New(operator.Config{Client: e.d.Client(), Provider: e.fp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	operator.BeforeApply(e.ops, func(id int64) {
		if moved {
			return
		}
		moved = true
		if _, err := other.Resolve(context.Background(), operator.Resolution{JobID: id, As: operator.AsReconcile, Reason: "ask the provider again",
			Operator: "carol", SeenAttempt: j.Attempt}); err != nil {
			t.Errorf("the second writer: %v", err)
		}
	})
	if _, err := e.ops.Approve(ctx, req.ID, "bob", ""); !errors.Is(err, operator.ErrResolvedElsewhere) {
		t.Fatalf("approval after the job moved: %v, want ErrResolvedElsewhere", err)
	}
	if !moved {
		t.Fatal("the second writer never ran")
	}
	after := e.job(t, j.ID)
	if after.State != refundjob.StateReady || after.NextAction != refundjob.NextActionReconcile || after.Attempt != j.Attempt+1 {
		t.Fatalf("job after the race: %s %s@%d, want carol's reconcile at %d", after.State, after.NextAction, after.Attempt, j.Attempt+1)
	}
	v, err := e.ops.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Approvals) != 1 || v.Approvals[0].Status != operator.Stale || v.Approvals[0].DecidedBy != "bob" {
		t.Fatalf("the request after the race: %+v", v.Approvals)
	}
	var actions []string
	for _, a := range v.Audit {
		actions = append(actions, a.Action+"/"+a.Outcome+"/"+a.Operator)
	}
	if got := strings.Join(actions, " "); got != "request_approval/requested/alice resolve_reconcile/done/carol resolve_refund/stale/bob" {
		t.Fatalf("audit after the race: %s", got)
	}
	// Sequentially too: the request is closed now.
	if _, err := e.ops.Approve(ctx, req.ID, "dave", ""); !errors.Is(err, operator.ErrRequestClosed) {
		t.Fatalf("approving a stale request: %v, want ErrRequestClosed", err)
	}
}

// Two second operators approve the same request at once: one carries it
// out, the other is refused, and the job moves once.
func TestTwoApproversOneResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-two", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "r", "ev")
	e.rejected(t, "k-two")
	req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "send again", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	other, err := operator.New(operator.Config{Client: e.d.Client(), Provider: e.fp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var carol operator.Result
	var carolErr error
	operator.BeforeApply(e.ops, func(int64) {
		if carol.JobID == 0 && carolErr == nil {
			carol, carolErr = other.Approve(context.Background(), req.ID, "carol", "")
		}
	})
	_, bobErr := e.ops.Approve(ctx, req.ID, "bob", "")
	if carolErr != nil || carol.Attempt != j.Attempt+1 {
		t.Fatalf("carol's approval: %+v %v", carol, carolErr)
	}
	if !errors.Is(bobErr, operator.ErrResolvedElsewhere) {
		t.Fatalf("bob's approval after carol's: %v, want ErrResolvedElsewhere", bobErr)
	}
	v, err := e.ops.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Attempt != j.Attempt+1 || v.Approvals[0].Status != operator.Approved || v.Approvals[0].DecidedBy != "carol" {
		t.Fatalf("after two approvals: job at %d, request %+v", v.Attempt, v.Approvals[0])
	}
	done := 0
	for _, a := range v.Audit {
		if a.Outcome == "done" {
			done++
		}
	}
	if done != 1 {
		t.Fatalf("%d resolutions audited, want 1: %+v", done, v.Audit)
	}
}

// Two second operators approve the same override at once: the job settles
// once, and the approver whose write lost is told so, never that they
// carried it out (the succeeded state is already in place when their fenced
// write runs, which must not pass for their own earlier commit).
func TestTwoApproversOneOverride(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-two-override", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "r", "ev")
	req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: "re_manual", Override: true,
		Reason: "bank statement shows it", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	other, err := operator.New(operator.Config{Client: e.d.Client(), Provider: e.fp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var carol operator.Result
	var carolErr error
	operator.BeforeApply(e.ops, func(int64) {
		if carol.JobID == 0 && carolErr == nil {
			carol, carolErr = other.Approve(context.Background(), req.ID, "carol", "re_manual")
		}
	})
	bob, bobErr := e.ops.Approve(ctx, req.ID, "bob", "re_manual")
	if carolErr != nil || carol.State != "succeeded" {
		t.Fatalf("carol's approval: %+v %v", carol, carolErr)
	}
	if !errors.Is(bobErr, operator.ErrResolvedElsewhere) {
		t.Fatalf("bob's approval after carol's: %+v %v, want ErrResolvedElsewhere", bob, bobErr)
	}
	v, err := e.ops.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Approvals[0].Status != operator.Approved || v.Approvals[0].DecidedBy != "carol" {
		t.Fatalf("the request after two approvals: %+v", v.Approvals[0])
	}
}

// Two operators resolve the same job as succeeded at once with the same
// verified refund: one resolution is recorded, and the other operator is
// told the job moved, not that their resolution is in the audit.
func TestTwoResolversOneSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	req := ent.RefundJobEnqueue{OperationKey: "k-two-resolvers", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}
	id := e.refundAt(t, provider.RefundRequest{OperationKey: req.OperationKey, PaymentRef: req.PaymentRef, AmountMinor: req.AmountMinor, Currency: req.Currency})
	j := e.review(t, req, "r", "ev")
	other, err := operator.New(operator.Config{Client: e.d.Client(), Provider: e.fp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	r := operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: id, Reason: "the dashboard shows it", SeenAttempt: j.Attempt}
	var carolErr error
	ran := false
	operator.BeforeApply(e.ops, func(int64) {
		if !ran {
			ran = true
			c := r
			c.Operator = "carol"
			_, carolErr = other.Resolve(context.Background(), c)
		}
	})
	r.Operator = "bob"
	res, bobErr := e.ops.Resolve(ctx, r)
	if carolErr != nil {
		t.Fatalf("carol's resolution: %v", carolErr)
	}
	if !errors.Is(bobErr, operator.ErrResolvedElsewhere) {
		t.Fatalf("bob's resolution after carol's: %+v %v, want ErrResolvedElsewhere", res, bobErr)
	}
	done := 0
	for _, a := range e.audit(t, j.ID) {
		if a.Outcome == "done" {
			done++
			if a.Operator != "carol" {
				t.Errorf("resolution audited for %s, want carol", a.Operator)
			}
		}
	}
	if done != 1 {
		t.Fatalf("%d resolutions audited, want 1", done)
	}
}

// The requester cannot approve their own request under a name that reads
// the same: another case, a Cyrillic or full-width look-alike, an invisible
// character. Each is refused before anything is written.
func TestApproverLookAlikesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-lookalike", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "r", "ev")
	req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: "re_manual", Override: true,
		Reason: "bank statement shows it", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	for name, same := range map[string]string{
		"upper case":              "Alice",
		"a trailing space":        "alice ",
		"a Cyrillic a":            "\u0430lice",
		"full-width letters":      "\uff41\uff4c\uff49\uff43\uff45",
		"a zero-width space":      "ali\u200bce",
		"a combining accent":      "alice\u0301",
		"a no-break space inside": "ali\u00a0ce",
	} {
		if _, err := e.ops.Approve(ctx, req.ID, same, "re_manual"); !errors.Is(err, operator.ErrSameOperator) && !errors.Is(err, operator.ErrInvalid) {
			t.Errorf("approval by the requester as %q (%s): %v, want ErrSameOperator or ErrInvalid", same, name, err)
		}
	}
	if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != j.Attempt {
		t.Fatalf("look-alike approvals moved the job to %s@%d", got.State, got.Attempt)
	}
}

// A negative skew margin or provider timeout would widen a key's resend
// window past the provider's retention, where a resend can execute a second
// refund: the configuration is refused, naming the field.
func TestConfigRefusesAWiderResendWindow(t *testing.T) {
	t.Parallel()
	for field, claim := range map[string]fencedwrite.ClaimOptions{
		"Claim.SkewMargin":      {SkewMargin: -48 * time.Hour},
		"Claim.ProviderTimeout": {ProviderTimeout: -time.Hour},
	} {
		var in *fencedwrite.FieldError
		if _, err := operator.New(operator.Config{Client: &ent.Client{}, Claim: claim}); !errors.As(err, &in) || in.Field != field {
			t.Errorf("New with %+v: %v, want an InputError naming %s", claim, err, field)
		}
	}
}

// declared is the fake provider under another contract: what the operator
// API believes about resends and key retention.
type declared struct {
	provider.Client
	caps provider.Capabilities
}

func (d declared) Capabilities() provider.Capabilities { return d.caps }

// A resend is filed and approved only inside the key's safe window, and the
// approval checks again: a window that closed after the request (here: the
// approver's service knows a shorter retention) refuses the approval, and
// a provider without safe resends refuses the request.
func TestResendOnlyInsideTheKeyWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	with := func(caps provider.Capabilities) *operator.Service {
		s, err := operator.New(operator.Config{Client: e.c, Provider: declared{e.fp.Client(), caps}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	caps := e.fp.Client().Capabilities()
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-window", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "rejected", "ev")
	if j.KeyFirstUsedAt == nil {
		t.Fatal("the claim did not start the key's window")
	}
	e.rejected(t, "k-window")
	r := operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "rejected on an outage; send again", Operator: "alice", SeenAttempt: j.Attempt}

	unsafe := caps
	unsafe.SafeResend = false
	if _, err := with(unsafe).RequestApproval(ctx, r); !errors.Is(err, operator.ErrOutsideWindow) {
		t.Fatalf("a resend request to a provider without safe resends: %v, want ErrOutsideWindow", err)
	}
	// The refusal's sentence says the audit entry was written: it was.
	var refusals int
	if err := e.d.RawDB().QueryRowContext(ctx, "SELECT COUNT(*) FROM refund_audit WHERE job_id = ? AND outcome = 'refused' AND operator = 'alice'", j.ID).Scan(&refusals); err != nil || refusals != 1 {
		t.Fatalf("audited refusals of the resend request: %d (%v), want 1", refusals, err)
	}
	req, err := e.ops.RequestApproval(ctx, r)
	if err != nil {
		t.Fatalf("a resend request inside the window: %v", err)
	}
	closed := caps
	closed.KeyRetention = fencedwrite.DefaultProviderTimeout + fencedwrite.DefaultSkewMargin // a window of zero
	if _, err := with(closed).Approve(ctx, req.ID, "bob", ""); !errors.Is(err, operator.ErrOutsideWindow) {
		t.Fatalf("approving a resend after the key's window closed: %v, want ErrOutsideWindow", err)
	}
	if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != j.Attempt {
		t.Fatalf("a refused resend moved the job to %s@%d", got.State, got.Attempt)
	}
	e.requestClosedByRefusal(t, req.ID, "bob", "could pay twice")
	if req, err = e.ops.RequestApproval(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Approve(ctx, req.ID, "bob", ""); err != nil {
		t.Fatalf("approving the resend inside the window: %v", err)
	}
}

// A rejection recorded before the key's last send proves nothing about
// that send: a resend is approved only on a rejection observed after it.
func TestResendProofPostdatesTheLastSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	e.rejected(t, "k-old-proof") // an earlier attempt's rejection
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-old-proof", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "timeout: outcome unknown", "ev")
	if j.LastSendAt == nil {
		t.Fatal("the claim recorded no send")
	}
	req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "send again", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Approve(ctx, req.ID, "bob", ""); !errors.Is(err, operator.ErrNoProof) {
		t.Fatalf("a resend on a rejection older than the last send: %v, want ErrNoProof", err)
	}
	e.requestClosedByRefusal(t, req.ID, "bob", "nothing proves the first request did not pay")
	if req, err = e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsRefund, Reason: "send again", Operator: "alice", SeenAttempt: j.Attempt}); err != nil {
		t.Fatal(err)
	}
	// The last send's rejection (another answer than the first: the log
	// keeps each distinct observation once).
	if _, _, err := evidence.Record(ctx, e.c, evidence.Observation{OperationKey: "k-old-proof", JobID: j.ID, Attempt: j.Attempt, Source: evidence.Reconcile,
		Status: evidence.Rejected, Payload: []byte(`{"status":"rejected","attempt":"last"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Approve(ctx, req.ID, "bob", ""); err != nil {
		t.Fatalf("a resend on the last send's rejection: %v", err)
	}
}

// A reason is the operator's text inside the job's evidence: its line
// breaks cannot forge the separator of a later entry (another operator's
// approval, say) in review_evidence.
func TestReasonCannotForgeAnEvidenceEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-forge", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "r", "ev")
	const forged = "ask again\n---\noperator bob approved request 9 of carol to resolve as succeeded: verified\r\n---\r\nx"
	if _, err := e.ops.Resolve(t.Context(), operator.Resolution{JobID: j.ID, As: operator.AsReconcile, Reason: forged, Operator: "alice", SeenAttempt: j.Attempt}); err != nil {
		t.Fatal(err)
	}
	got := *e.job(t, j.ID).ReviewEvidence
	if n := strings.Count(got, "\n---\n"); n != 1 || strings.Contains(got, "\r") || strings.Contains(got, "\noperator bob") {
		t.Fatalf("review evidence after a reason with separators (%d entries):\n%q", n+1, got)
	}
	if a := e.audit(t, j.ID); len(a) != 1 || a[0].Reason != forged {
		t.Fatalf("the audit keeps the reason as typed: %+v", a)
	}
}
