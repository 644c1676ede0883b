package operator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
)

func TestQueueSearchAndJobViews(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	e.fp.AddPayment("pay-q", 10_000, "EUR")
	var jobs []*ent.RefundJob
	for i := range 5 {
		jobs = append(jobs, e.review(t, ent.RefundJobEnqueue{OperationKey: fmt.Sprintf("q-%d", i), PaymentRef: "pay-q", AmountMinor: 1250 + int64(i), Currency: "EUR"},
			fmt.Sprintf("reason %d", i), "ev"))
	}

	t.Run("the queue pages oldest first without repeats", func(t *testing.T) {
		var got []int64
		p := operator.Page{Limit: 2}
		for range 4 {
			page, err := e.ops.Queue(ctx, "", p)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				got = append(got, it.ID)
				if it.Age < 0 || it.Since.IsZero() || it.NextRunAt != nil {
					t.Errorf("queue item %+v: want an age, a since, no due time", it)
				}
			}
			if page.Next == "" {
				break
			}
			p.After = page.Next
		}
		if fmt.Sprint(got) != fmt.Sprint([]int64{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[3].ID, jobs[4].ID}) {
			t.Fatalf("queue order %v", got)
		}
		page, _ := e.ops.Queue(ctx, "", operator.Page{Limit: 1})
		if page.Items[0].Amount.String() != "12.50 EUR" || page.Items[0].Reason != "reason 0" {
			t.Errorf("queue item: %s %q", page.Items[0].Amount, page.Items[0].Reason)
		}
	})

	t.Run("search by key, payment and provider refund id", func(t *testing.T) {
		id := e.refundAt(t, provider.RefundRequest{OperationKey: "q-2", PaymentRef: "pay-q", AmountMinor: 1252, Currency: "EUR"})
		if _, err := e.ops.Resolve(ctx, operator.Resolution{JobID: jobs[2].ID, As: operator.AsSucceeded, RefundID: id, Reason: "seen", Operator: "alice", SeenAttempt: jobs[2].Attempt}); err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]struct {
			q    operator.Query
			want []int64
		}{
			"key":       {operator.Query{OperationKey: "q-3"}, []int64{jobs[3].ID}},
			"payment":   {operator.Query{PaymentRef: "pay-q"}, []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[3].ID, jobs[4].ID}},
			"refund id": {operator.Query{ProviderRefundID: id}, []int64{jobs[2].ID}},
			"state":     {operator.Query{State: "succeeded"}, []int64{jobs[2].ID}},
			"nothing":   {operator.Query{PaymentRef: "pay-none"}, nil},
		} {
			page, err := e.ops.Search(ctx, c.q, operator.Page{})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%s: %v, want %v", name, got, c.want)
			}
		}
		page, err := e.ops.Search(ctx, operator.Query{OperationKey: "q-2"}, operator.Page{})
		if err != nil || page.Jobs[0].NextRunAt != nil || page.Jobs[0].NextAction != "" {
			t.Errorf("a settled job shows a next step: %+v %v", page.Jobs, err)
		}
		var in *fencedwrite.FieldError
		if _, err := e.ops.Search(ctx, operator.Query{State: "done"}, operator.Page{}); !errors.As(err, &in) || in.Field != "state" {
			t.Errorf("an unknown state: %v, want an InputError naming state", err)
		}
		if _, err := e.ops.Search(ctx, operator.Query{}, operator.Page{After: "x"}); !errors.As(err, &in) || in.Field != "after" {
			t.Errorf("a bad cursor: %v, want an InputError naming after", err)
		}
	})

	t.Run("a job's view is the same on every read", func(t *testing.T) {
		first, err := e.ops.Job(ctx, jobs[2].ID)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(first)
		for range 3 {
			again, err := e.ops.Job(ctx, jobs[2].ID)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(again); string(a) != string(b) {
				t.Fatalf("two reads differ:\n%s\n%s", a, b)
			}
		}
		if first.Ledger == nil || first.Ledger.Status != "refunded" || len(first.Audit) != 1 || len(first.Evidence) != 1 {
			t.Fatalf("view: %s", a)
		}
		// The attempts log names the process of the claim and the operator
		// of the resolution; the audit says what the resolution was.
		if len(first.Attempts) != 2 || first.Attempts[0].Op != "claim" || first.Attempts[0].Holder != fencedwrite.DefaultHolder() ||
			first.Attempts[0].StartedBy != "claim by "+fencedwrite.DefaultHolder() || first.Attempts[0].LeaseUntil == nil ||
			first.Attempts[1].Op != "resolution" || first.Attempts[1].Holder != "alice" || first.Attempts[1].LeaseUntil != nil ||
			first.Attempts[1].StartedBy != "resolve_succeeded by alice" {
			t.Fatalf("attempts: %+v", first.Attempts)
		}
		// The timeline is in time order, whatever the kind; where the job
		// stands is its status line.
		if first.Timeline[0].Kind != operator.EventEnqueued || !slices.IsSortedFunc(first.Timeline, func(a, b operator.Event) int { return a.At.Compare(b.At) }) {
			t.Fatalf("timeline out of order: %+v", first.Timeline)
		}
		if first.Status.Money != operator.MoneyRefunded || !strings.HasPrefix(first.Status.String(), "Refunded: 12.52 EUR to pay-q, refund ") {
			t.Fatalf("status of a verified settlement: %+v", first.Status)
		}
		// A settled job shows nothing that no longer holds: no review
		// reason, no last error, no last answer, no evidence "not acted on".
		for _, f := range append(append([]operator.Fact(nil), first.Facts...), first.Engineering...) {
			if f.Key == "review" || f.Key == "review-reason" || f.Key == "last-error" || f.Key == "answer" || f.Key == "lease" {
				t.Errorf("a settled job shows %s: %q", f.Label, f.Value)
			}
		}
		for _, ev := range first.Evidence {
			if strings.Contains(ev.Text, "not acted on") {
				t.Errorf("a settled job's evidence says %q", ev.Text)
			}
		}
		if _, err := e.ops.Job(ctx, 424242); !errors.Is(err, operator.ErrNotFound) {
			t.Fatalf("an unknown job: %v", err)
		}
	})
}

// A job's view says which process held each attempt, after a takeover moved
// the row on (the zombie operators ask about), and which operator's
// resolution took the next: from the attempts log, written with each claim,
// takeover and resolution.
func TestJobViewNamesEveryAttemptsHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	req := ent.RefundJobEnqueue{OperationKey: "held-1", PaymentRef: "pay-h", AmountMinor: 990, Currency: "EUR"}
	job, _, err := e.c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Client().RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Microsecond, Holder: "worker-a.example/101"}); err != nil {
		t.Fatal(err)
	}
	var expired bool
	if err := e.d.RawDB().QueryRow("SELECT lease_until < "+fencedwrite.ClockUTC+" FROM refund_jobs WHERE id = ?", job.ID).Scan(&expired); err != nil || !expired {
		t.Fatalf("the lease has not expired on the database clock (%v)", err)
	}
	lb, err := e.d.Client().RefundJob.Takeover(ctx, job.ID, fencedwrite.ClaimOptions{Holder: "worker-b.example/202"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RefundJob.Apply(ctx, lb.ManualReview("not found after the lag window", "{}", ""), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Resolve(ctx, operator.Resolution{JobID: job.ID, As: operator.AsReconcile, Reason: "ask again", Operator: "alice", SeenAttempt: 2}); err != nil {
		t.Fatal(err)
	}
	v, err := e.ops.Job(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ op, holder string }{{"claim", "worker-a.example/101"}, {"takeover", "worker-b.example/202"}, {"resolution", "alice"}}
	if len(v.Attempts) != len(want) {
		t.Fatalf("attempts: %+v", v.Attempts)
	}
	for i, w := range want {
		a := v.Attempts[i]
		if a.Attempt != int64(i+1) || a.Op != w.op || a.Holder != w.holder || a.ClaimedAt == nil || (a.LeaseUntil == nil) != (w.op == "resolution") {
			t.Errorf("attempt %d: %+v, want %s by %s", i+1, a, w.op, w.holder)
		}
	}
	if !v.Attempts[1].LeaseUntil.Equal(lb.LeaseUntil()) || !v.Attempts[1].ClaimedAt.Equal(lb.ClaimedAt()) {
		t.Errorf("the takeover's lease %v from %v, its lease says %v from %v", v.Attempts[1].LeaseUntil, v.Attempts[1].ClaimedAt, lb.LeaseUntil(), lb.ClaimedAt())
	}
	var kinds []operator.EventKind
	for _, ev := range v.Timeline {
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Contains(kinds, operator.EventClaimed) || !slices.Contains(kinds, operator.EventTakenOver) {
		t.Errorf("the timeline lacks the claim or the takeover: %v", kinds)
	}
}
