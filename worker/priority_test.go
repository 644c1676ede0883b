package worker_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// owed makes key's job a reconcile that is due now: a claim sent the
// refund, the provider executed it, and the answer was lost, so the job
// waits to be reconciled. Its webhooks are held, so that only the worker's
// own reconcile settles it.
func (f *fleet) owed(key string) {
	f.t.Helper()
	job := f.enqueue(key)
	f.srv.HoldWebhooks(key)
	l, err := f.c.RefundJob.Claim(f.t.Context(), job.ID, fencedwrite.ClaimOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.srv.Client().Refund(f.t.Context(), request(key)); err != nil {
		f.t.Fatal(err)
	}
	if err := f.c.RefundJob.Apply(f.t.Context(), l.Reschedule(refundjob.NextActionReconcile, 0, "", "outcome unknown"), nil); err != nil {
		f.t.Fatal(err)
	}
}

// stuck makes key's job a running one whose holder is gone: claimed with an
// instant lease after the provider executed its refund.
func (f *fleet) stuck(key string) {
	f.t.Helper()
	job := f.enqueue(key)
	f.srv.HoldWebhooks(key)
	if _, err := f.c.RefundJob.Claim(f.t.Context(), job.ID, fencedwrite.ClaimOptions{Lease: time.Microsecond}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.srv.Client().Refund(f.t.Context(), request(key)); err != nil {
		f.t.Fatal(err)
	}
}

// allSettled waits until the jobs of keys are settled by this worker, in
// any order.
func (ev *events) allSettled(t *testing.T, f *fleet, keys ...string) {
	t.Helper()
	left := map[string]bool{}
	for _, k := range keys {
		left[k] = true
	}
	timeout := time.After(patience)
	for len(left) > 0 {
		select {
		case w := <-ev.wrote:
			if j := f.job(w.job.OperationKey); left[w.job.OperationKey] && j.State != refundjob.StateReady && j.State != refundjob.StateRunning {
				delete(left, w.job.OperationKey)
			}
		case <-timeout:
			t.Fatalf("never settled: %v", left)
		}
	}
}

// posts counts the refund requests the provider received.
func (f *fleet) posts() int {
	n := 0
	for _, r := range f.srv.Requests() {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// Unknown outcomes are the money at risk: with the fleet's budget short,
// takeovers and due reconciles are claimed before fresh sends, however long
// the sends have waited, and sends leave a share of the budget to them.
func TestWorkerPutsUnknownOutcomesFirst(t *testing.T) {
	t.Run("takeovers, then due reconciles, then sends, when the budget is short", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		for i := range 6 {
			f.enqueue(fmt.Sprintf("fresh-%d", i)) // due before the reconcile
		}
		f.owed("owed")
		f.stuck("stuck")
		m := newCallKinds()
		// Three tokens, and no refill to speak of; a burst of 3 keeps no
		// reserve.
		_, ev := f.worker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.Workers, c.Metrics = 0.0001, 3, 10, m })
		first := <-ev.passes
		if first.Tokens != 3 || first.TakenOver != 1 || first.Reconciles != 1 || first.Claimed != 1 {
			t.Fatalf("first pass %+v, want its 3 tokens spent on the takeover, the due reconcile and one send", first)
		}
		ev.allSettled(t, f, "stuck", "owed", "fresh-0")
		f.wantSettled("owed", refundjob.StateSucceeded, 1)
		f.wantSettled("stuck", refundjob.StateSucceeded, 1)
		if m.get(worker.CallReconcile) != 2 || m.get(worker.CallSend) != 1 {
			t.Fatalf("calls %v, want the takeover's and the due job's reconciles, and one send", m.n)
		}
		if n := f.posts(); n != 3 { // the two the test made, and one send
			t.Fatalf("%d refund requests, want 3", n)
		}
		for i := 1; i < 6; i++ {
			if j := f.job(fmt.Sprintf("fresh-%d", i)); j.State != refundjob.StateReady || j.Attempt != 0 {
				t.Fatalf("fresh-%d is %s at attempt %d, want never claimed", i, j.State, j.Attempt)
			}
		}
	})

	t.Run("sends leave the reserve to a reconcile that comes due later", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const sends = 12
		cut, hold := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(hold) })
		for i := range sends {
			key := fmt.Sprintf("send-%02d", i)
			f.enqueue(key)
			if i == 0 {
				f.srv.Script(key, fakeprovider.Fault{Hold: cut, After: fakeprovider.Cut}) // executed, the answer lost
			} else {
				f.srv.Script(key, fakeprovider.Fault{Hold: hold})
			}
		}
		m := newCallKinds()
		// Ten tokens and no refill to speak of; the default reserve keeps
		// floor(DefaultReconcileReserve × 10) = 2 of them from sends.
		_, ev := f.worker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.Workers, c.Metrics = 0.0001, 10, 20, m })
		if worker.DefaultReconcileReserve != 0.2 {
			t.Fatalf("DefaultReconcileReserve is %v; this test counts on 0.2", worker.DefaultReconcileReserve)
		}
		first := <-ev.passes
		if first.Tokens != 10 || first.Claimed != 8 || first.Reserved != 2 {
			t.Fatalf("first pass %+v, want 8 sends and 2 tokens left for reconciles", first)
		}
		waitClosed(t, f.srv.Executed("send-00", 1), "the first send")
		close(cut) // its answer is lost: the job waits to be reconciled
		ev.settled(t, f, "send-00")
		f.wantSettled("send-00", refundjob.StateSucceeded, 1)
		if m.get(worker.CallReconcile) != 1 || m.get(worker.CallSend) != 8 {
			t.Fatalf("calls %v, want 8 sends and the cut one's reconcile", m.n)
		}
		if n := f.posts(); n != 8 {
			t.Fatalf("%d refund requests, want 8", n)
		}
		for i := 8; i < sends; i++ {
			if j := f.job(fmt.Sprintf("send-%02d", i)); j.State != refundjob.StateReady || j.Attempt != 0 {
				t.Fatalf("send-%02d is %s at attempt %d, want left for the reserve", i, j.State, j.Attempt)
			}
		}
	})
}

// dueMetrics passes on every report of the due reconciles.
type dueMetrics struct {
	worker.NopMetrics
	reports chan dueReport
}

type dueReport struct {
	n      int
	oldest time.Duration
}

func (m dueMetrics) ReconcilesDue(n int, oldest time.Duration) { m.reports <- dueReport{n, oldest} }

// The reconciler reports the reconciles that are due and not claimed, and
// how long the oldest has waited: here one that no token is left for.
func TestWorkerReportsTheReconcilesDue(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const first = "spends-the-token"
	f.enqueue(first)
	f.srv.HoldWebhooks(first) // released once the reconcile is due: its delivery runs a reconciler pass
	m := dueMetrics{reports: make(chan dueReport, 100)}
	_, ev := f.worker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.Metrics = 0.0001, 1, m })
	ev.settled(t, f, first) // the budget's only token
	f.owed("waits")
	for _, d := range f.srv.ReleaseWebhooks(first) {
		if d.Status != http.StatusOK {
			t.Fatalf("webhook delivery %+v", d)
		}
	}
	timeout := time.After(patience)
	for {
		select {
		case r := <-m.reports:
			if r.n == 0 {
				continue // a report from before the reconcile was due
			}
			if r.n != 1 || r.oldest <= 0 || r.oldest > time.Minute {
				t.Fatalf("reported %d due, the oldest due for %v; want the one, due since the test made it", r.n, r.oldest)
			}
			if j := f.job("waits"); j.State != refundjob.StateReady || j.Attempt != 1 {
				t.Fatalf("the reconcile is %s at attempt %d: it was claimed without a token", j.State, j.Attempt)
			}
			return
		case <-timeout:
			t.Fatal("no report of the due reconcile")
		}
	}
}
