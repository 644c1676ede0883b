package operator_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/migrations"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
)

// A resolution and its audit entry are one: a resolution that rolls back
// after its entry was written leaves no entry, one whose entry cannot be
// written does not happen, and one that commits has exactly its entry.
// An entry written on the pool instead of the resolution's transaction
// (before it or after its commit) fails one of the three.
func TestAuditEntryCommitsWithItsResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	resolve := func(ops *operator.Service, j *ent.RefundJob) (operator.Result, error) {
		return ops.Resolve(ctx, operator.Resolution{JobID: j.ID, As: operator.AsReconcile, Reason: "ask the provider again", Operator: "alice", SeenAttempt: j.Attempt})
	}

	t.Run("a resolution that rolls back leaves no audit entry", func(t *testing.T) {
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-rollback", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		ops, err := operator.New(operator.Config{Client: e.c, Provider: e.fp.Client()})
		if err != nil {
			t.Fatal(err)
		}
		ran := false
		operator.BeforeCommit(ops, func(int64) error { ran = true; return errors.New("the server went away before COMMIT") })
		if _, err := resolve(ops, j); err == nil {
			t.Fatal("a resolution whose transaction failed succeeded")
		}
		if !ran {
			t.Fatal("the hook never ran: the test proves nothing")
		}
		if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != j.Attempt {
			t.Fatalf("the rolled-back resolution moved the job to %s@%d", got.State, got.Attempt)
		}
		if a := e.audit(t, j.ID); len(a) != 0 {
			t.Fatalf("a rolled-back resolution left %d audit entries: %+v", len(a), a)
		}
	})

	t.Run("a resolution whose audit entry cannot be written does not happen", func(t *testing.T) {
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-noaudit", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		// An account that may write jobs but not the audit.
		noAudit := func(db, account string) []string {
			var out []string
			for _, g := range migrations.AppGrants(db, account) {
				if !strings.Contains(g, "`refund_audit`") {
					out = append(out, g)
				}
			}
			return append(out, "GRANT SELECT ON `"+db+"`.`refund_audit` TO "+account)
		}
		app := dbtest.Account(t, e.d.RawDB(), e.d.Name, noAudit)
		dsn, err := fencedwrite.DSN(app.FormatDSN(), fencedwrite.DSNOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := operator.New(operator.Config{Client: dbtest.ClientOn(t, dbtest.OpenDSN(t, dsn)), Provider: e.fp.Client()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resolve(ops, j); err == nil || !strings.Contains(err.Error(), "refund_audit") {
			t.Fatalf("a resolution without its audit entry: %v, want the audit's refusal", err)
		}
		if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != j.Attempt {
			t.Fatalf("a resolution without its audit entry moved the job to %s@%d", got.State, got.Attempt)
		}
	})

	t.Run("a resolution that commits has its audit entry", func(t *testing.T) {
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-commit", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		res, err := resolve(e.ops, j)
		if err != nil {
			t.Fatal(err)
		}
		a := e.audit(t, j.ID)
		if len(a) != 1 || a[0].ID != res.AuditID || a[0].Outcome != "done" || a[0].AttemptBefore != j.Attempt || a[0].AttemptAfter != res.Attempt {
			t.Fatalf("audit of a committed resolution: %+v (result %+v)", a, res)
		}
	})

	t.Run("an approval that rolls back leaves the request pending and no entry", func(t *testing.T) {
		j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-approval-rollback", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
		req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: "re_bank", Override: true,
			Reason: "the bank statement shows it", Operator: "alice", SeenAttempt: j.Attempt})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := operator.New(operator.Config{Client: e.c, Provider: e.fp.Client()})
		if err != nil {
			t.Fatal(err)
		}
		operator.BeforeCommit(ops, func(int64) error { return errors.New("the server went away before COMMIT") })
		if _, err := ops.Approve(ctx, req.ID, "bob", "re_bank"); err == nil {
			t.Fatal("an approval whose transaction failed succeeded")
		}
		a, err := e.ops.Approval(ctx, req.ID)
		if err != nil || a.Status != operator.Pending {
			t.Fatalf("the request after a rolled-back approval: %+v %v", a, err)
		}
		if got := e.audit(t, j.ID); len(got) != 1 || got[0].Outcome != "requested" {
			t.Fatalf("audit after a rolled-back approval: %+v", got)
		}
	})
}

// An approval runs on the attempt the requester saw, never on the job's
// attempt now: a job that left manual review and came back (at a later
// attempt) is not resolved on the old request, which is closed as stale.
func TestApprovalOfAJobThatCameBackIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-back", PaymentRef: "pay-1", AmountMinor: 300, Currency: "EUR"}, "not found after the lookup-lag window; resend not safe: x", "ev")
	req, err := e.ops.RequestApproval(ctx, operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: "re_bank", Override: true,
		Reason: "the bank statement shows it", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	// Another operator sends it back to reconcile; a worker claims it and
	// hands it to manual review again.
	if _, err := e.ops.Resolve(ctx, operator.Resolution{JobID: j.ID, As: operator.AsReconcile, Reason: "ask again", Operator: "carol", SeenAttempt: j.Attempt}); err != nil {
		t.Fatal(err)
	}
	l, err := e.c.RefundJob.Claim(ctx, j.ID, fencedwrite.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RefundJob.Apply(ctx, l.ManualReview("not found after the lookup-lag window; resend not safe: y", "ev2", ""), nil); err != nil {
		t.Fatal(err)
	}
	back := e.job(t, j.ID)
	if back.State != refundjob.StateManualReview || back.Attempt != j.Attempt+2 {
		t.Fatalf("the job is %s@%d, want back in manual review at %d", back.State, back.Attempt, j.Attempt+2)
	}
	a, err := e.ops.Approval(ctx, req.ID)
	if err != nil || !a.JobMoved {
		t.Fatalf("the approval page does not say the job moved since the request: %+v %v", a, err)
	}
	if _, err := e.ops.Approve(ctx, req.ID, "bob", "re_bank"); !errors.Is(err, operator.ErrResolvedElsewhere) {
		t.Fatalf("approving the old request of a job that came back: %v, want ErrResolvedElsewhere", err)
	}
	if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != back.Attempt {
		t.Fatalf("the old request moved the job to %s@%d", got.State, got.Attempt)
	}
	a, err = e.ops.Approval(ctx, req.ID)
	if err != nil || a.Status != operator.Stale || a.DecidedBy != "bob" || !strings.Contains(a.Closed, "had moved") {
		t.Fatalf("the old request after its approval: %+v %v", a, err)
	}
}

// A refund id the provider attributes to another payment or request can
// never settle the job: an override of it is refused when asked for, and
// when the provider learns of it between the request and the approval, the
// approval is refused, audited with the request, and the request closed.
// The refusal never offers an override.
func TestAnotherPaymentsRefundIsNeverApprovable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	e.fp.AddPayment("pay-5", 10_000, "EUR")
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-mine", PaymentRef: "pay-1", AmountMinor: 1150, Currency: "EUR"}, "the provider offers no lookup for this refund: x", "ev")
	other := e.refundAt(t, provider.RefundRequest{OperationKey: "k-theirs", PaymentRef: "pay-5", AmountMinor: 1150, Currency: "EUR"})
	r := operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: other, Override: true, Reason: "looks right", Operator: "alice", SeenAttempt: j.Attempt}

	_, err := e.ops.Resolve(ctx, operator.Resolution{JobID: j.ID, As: operator.AsSucceeded, RefundID: other, Reason: "looks right", Operator: "alice", SeenAttempt: j.Attempt})
	if _, sentence := operator.Explain(err); !errors.Is(err, operator.ErrRefundMismatch) || strings.Contains(sentence, "override:") || strings.Contains(sentence, "ask a second operator") {
		t.Fatalf("resolving with another payment's refund: %v (%q), want a mismatch that offers no override", err, sentence)
	}
	if _, err := e.ops.RequestApproval(ctx, r); !errors.Is(err, operator.ErrRefundMismatch) {
		t.Fatalf("an override of another payment's refund was filed: %v, want ErrRefundMismatch", err)
	}
	if p, _ := e.ops.Approvals(ctx, true, operator.Page{}); len(p.Approvals) != 0 {
		t.Fatalf("pending requests after the refusal: %+v", p.Approvals)
	}

	// The provider does not know the id when the override is asked for;
	// by the approval it is another payment's refund.
	next := nextRefundID(t, other)
	r.RefundID = next
	req, err := e.ops.RequestApproval(ctx, r)
	if err != nil {
		t.Fatalf("an override of a refund id the provider does not know: %v", err)
	}
	if req.Verification == nil || req.Verification.Outcome != operator.VerifyUnknown || req.Amount.String() != "11.50 EUR" || req.PaymentRef != "pay-1" {
		t.Fatalf("the request's facts for its approver: %+v", req)
	}
	if got := e.refundAt(t, provider.RefundRequest{OperationKey: "k-theirs-2", PaymentRef: "pay-5", AmountMinor: 1150, Currency: "EUR"}); got != next {
		t.Fatalf("the provider gave %s, the test expected %s", got, next)
	}
	if _, err := e.ops.Approve(ctx, req.ID, "bob", next); !errors.Is(err, operator.ErrRefundMismatch) {
		t.Fatalf("approving an override of what became another payment's refund: %v, want ErrRefundMismatch", err)
	}
	if got := e.job(t, j.ID); got.State != refundjob.StateManualReview || got.Attempt != j.Attempt {
		t.Fatalf("the refused override moved the job to %s@%d", got.State, got.Attempt)
	}
	e.requestClosedByRefusal(t, req.ID, "bob", "belongs to payment pay-5")
}

// nextRefundID is the id the fake provider gives its next refund.
func nextRefundID(t *testing.T, last string) string {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(last, "re_"))
	if err != nil {
		t.Fatalf("refund id %q: %v", last, err)
	}
	return "re_" + strconv.Itoa(n+1)
}

// A refund id another job of fencekit's holds is never this job's, even
// when the provider cannot be asked about it (no lookup by refund id: the
// job's own lookups list only its own refunds, where it is missing, which
// alone would count as "unknown" and allow an override). fencekit's own
// records refuse it, the request and the approval alike; and an id other
// than the one the provider named for this very request is refused too.
func TestARefundIDAnotherJobHoldsIsNeverApprovable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	noByID := provider.NewHTTPClient(e.fp.URL(), &http.Client{}, provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByReference: true, ListByPayment: true})
	ops, err := operator.New(operator.Config{Client: e.c, Provider: noByID})
	if err != nil {
		t.Fatal(err)
	}
	e.fp.AddPayment("pay-1", 10_000, "EUR")
	e.fp.AddPayment("pay-5", 10_000, "EUR")
	// Job 5's refund, settled: fencekit holds re_… for request k-five.
	five := ent.RefundJobEnqueue{OperationKey: "k-five", PaymentRef: "pay-5", AmountMinor: 1150, Currency: "EUR"}
	j5, _, err := e.c.RefundJob.Enqueue(ctx, five, ledger.Open(five))
	if err != nil {
		t.Fatal(err)
	}
	theirs := e.refundAt(t, provider.RefundRequest{OperationKey: "k-five", PaymentRef: "pay-5", AmountMinor: 1150, Currency: "EUR"})
	l, err := e.c.RefundJob.Claim(ctx, j5.ID, fencedwrite.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RefundJob.Apply(ctx, l.Complete(theirs), ledger.Refunded("k-five", theirs)); err != nil {
		t.Fatal(err)
	}
	mine := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-mine", PaymentRef: "pay-1", AmountMinor: 1150, Currency: "EUR"}, "the answer was lost", "ev")
	r := operator.Resolution{JobID: mine.ID, As: operator.AsSucceeded, RefundID: theirs, Override: true, Reason: "looks right", Operator: "alice", SeenAttempt: mine.Attempt}
	req, err := ops.RequestApproval(ctx, r)
	if _, sentence := operator.Explain(err); !errors.Is(err, operator.ErrRefundMismatch) || !strings.Contains(sentence, "fencekit's own records give refund "+theirs+" to request k-five (payment pay-5)") ||
		strings.Contains(sentence, "ask a second operator") {
		t.Fatalf("an override of another job's refund id, the provider unable to tell: %+v, %v (%q); want fencekit's records to refuse it", req, err, sentence)
	}
	if _, err := ops.Resolve(ctx, operator.Resolution{JobID: mine.ID, As: operator.AsSucceeded, RefundID: theirs, Reason: "looks right", Operator: "alice", SeenAttempt: mine.Attempt}); !errors.Is(err, operator.ErrRefundMismatch) {
		t.Fatalf("resolving with another job's refund id: %v, want ErrRefundMismatch", err)
	}
	if got := e.job(t, mine.ID); got.State != refundjob.StateManualReview || got.Attempt != mine.Attempt {
		t.Fatalf("the refusals moved the job to %s@%d", got.State, got.Attempt)
	}
}
