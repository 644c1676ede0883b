package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// gate holds a worker's reconcile calls until opened.
func gate(open <-chan struct{}) func(*worker.Config) {
	return func(c *worker.Config) {
		c.Hooks.BeforeProviderCall = func(j worker.Job) {
			if j.Action == string(refundjob.NextActionReconcile) {
				<-open
			}
		}
	}
}

// DESIGN.md's provider table, end to end: each asserts what the provider
// executed, not only the job's final state.
func TestWorkerFollowsTheProvidersAnswers(t *testing.T) {
	t.Run("pending, then succeeded: reconciled, completed once", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "pending-ok"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Pending: true})
		settled := make(chan struct{})
		_, ev := f.worker("A", gate(settled))
		// The reconcile is due at once: the next pass may already have
		// claimed it (held by the gate) when the job is read.
		if w := ev.await(t, key, nil); w.err != nil || w.job.Transition != "reschedule" || f.job(key).NextAction != refundjob.NextActionReconcile {
			t.Fatalf("after a pending answer: %v, %s, job %+v; want rescheduled to reconcile", w.err, w.job.Transition, f.job(key))
		}
		if f.job(key).ProviderRefundID == nil {
			t.Fatal("the pending answer's refund id was not saved")
		}
		f.srv.Settle(key)
		close(settled)
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
	})
	t.Run("pending, then failed: the job fails with the provider's reason", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "pending-ko"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Pending: true})
		declined := make(chan struct{})
		_, ev := f.worker("A", gate(declined))
		ev.await(t, key, nil)
		f.srv.Decline(key, "card closed")
		close(declined)
		j := ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateFailed, 1)
		if j.LastError == nil {
			t.Fatal("failed without the reason")
		}
	})
	t.Run("unknown outcome, then reconcile: never a blind resend", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "truncated"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{After: fakeprovider.Truncate})
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m })
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		if m.get(worker.CallResend) != 0 {
			t.Fatalf("resent after an unknown outcome: %v", m.n)
		}
	})
	t.Run("definitive rejection fails the job", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "rejected"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Reject: "charge_disputed"})
		_, ev := f.worker("A", nil)
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateFailed, 0)
	})
	t.Run("rate limited before processing: the same key later", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "limited"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Refuse: 429})
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m })
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		if m.get(worker.CallResend) != 1 || m.get(worker.CallReconcile) != 0 {
			t.Fatalf("calls %v, want the refund sent again with the same key, no reconcile", m.n)
		}
	})
	t.Run("not found inside the key's window: resent with the same key once the lag passed", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "nf-inside"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Refuse: 503}) // 5xx before processing: unknown to the worker
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m })
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		if m.get(worker.CallSend) != 1 || m.get(worker.CallReconcile) != 1 || m.get(worker.CallResend) != 1 {
			t.Fatalf("calls %v, want send, reconcile (not found), resend", m.n)
		}
	})
	t.Run("not found inside the lookup lag: wait, never resend", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{LookupLag: time.Hour})
		const key = "nf-lag"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Refuse: 503})
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m })
		ev.await(t, key, nil) // the send's unknown outcome
		w := ev.await(t, key, nil)
		j := f.job(key)
		if w.err != nil || j.State != refundjob.StateReady || j.NextAction != refundjob.NextActionReconcile || j.NextRunAt.Before(time.Now().Add(30*time.Minute)) {
			t.Fatalf("after not found inside the lag: %v, job %s/%s due %v; want a reconcile about an hour later", w.err, j.State, j.NextAction, j.NextRunAt)
		}
		if m.get(worker.CallResend) != 0 {
			t.Fatalf("resent inside the lookup lag: %v", m.n)
		}
	})
	t.Run("not found outside the key's window: manual review, never resend", func(t *testing.T) {
		const timeout, skew = 5 * time.Second, time.Second
		f := newFleet(t, fakeprovider.Config{KeyRetention: timeout + skew + time.Microsecond})
		const key = "nf-outside"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Refuse: 503})
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m; c.ProviderTimeout, c.SkewMargin = timeout, skew })
		j := ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateManualReview, 0)
		if m.get(worker.CallResend) != 0 || j.ReviewReason == nil {
			t.Fatalf("calls %v, review %v: want manual review with a reason and no resend", m.n, j.ReviewReason)
		}
		if n := m.count(func(c *callKinds) int { return c.manual }); n != 1 {
			t.Fatalf("%d manual reviews counted, want 1", n)
		}
	})
	t.Run("idempotency conflict: manual review, never a new key", func(t *testing.T) {
		// The other request's webhook goes nowhere: sent before the worker
		// starts, it would be refused (503) and redelivered at a moment no
		// test controls, and new evidence sends a job in manual review back
		// to reconcile (TestWorkerWebhooks' subject, not this one's).
		sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		t.Cleanup(sink.Close)
		f := newFleet(t, fakeprovider.Config{WebhookURL: sink.URL, WebhookSecret: webhookSecret})
		const key = "conflict"
		f.enqueue(key)
		other := request(key)
		other.AmountMinor = 99
		if _, err := f.srv.Client().Refund(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		_, ev := f.worker("A", nil)
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateManualReview, 1) // the other request's execution only
		for _, r := range f.srv.Requests() {
			if r.Method == http.MethodPost && r.Key != key {
				t.Fatalf("the worker sent another key: %q", r.Key)
			}
		}
	})
	t.Run("key in use by a concurrent request: reconcile later", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "in-use"
		f.enqueue(key)
		hold := make(chan struct{})
		f.srv.Script(key, fakeprovider.Fault{Hold: hold})
		done := make(chan error, 1)
		go func() { _, err := f.srv.Client().Refund(context.Background(), request(key)); done <- err }()
		waitClosed(t, f.srv.Executed(key, 1), "the concurrent request")
		released := make(chan struct{})
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m; gate(released)(c) })
		w := ev.await(t, key, nil)
		// The reschedule is due at once: the next pass may already have
		// claimed the reconcile (held by the gate) when the job is read.
		if j := f.job(key); w.err != nil || w.job.Transition != "reschedule" || j.NextAction != refundjob.NextActionReconcile {
			t.Fatalf("after key in use: %v, %s, job %s/%s; want rescheduled to reconcile", w.err, w.job.Transition, j.State, j.NextAction)
		}
		close(hold)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		close(released)
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
	})
}

// post sends body to the fleet's webhook endpoint with header.
func (f *fleet) post(body []byte, header string) int {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.hookURL, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if header != "" {
		req.Header.Set(provider.WebhookSignatureHeader, header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Webhooks are evidence: recorded, then acted on through the fence. Out of
// order, duplicated or late, they never move a settled job; unsigned or
// tampered ones are refused and recorded nowhere.
func TestWorkerWebhooks(t *testing.T) {
	t.Run("a webhook wakes a waiting job, which settles after verifying with the provider", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "wh-wake"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Pending: true})
		// The refund.pending webhook of the send is held: delivered after the
		// write-back on its own, it would wake the job before the test looks.
		f.srv.HoldWebhooks(key)
		_, ev := f.worker("A", func(c *worker.Config) { c.PendingDelay = time.Hour })
		ev.await(t, key, nil) // pending: reconcile in an hour
		if j := f.job(key); !j.NextRunAt.After(time.Now().Add(30 * time.Minute)) {
			t.Fatalf("pending job due %v, want an hour later", j.NextRunAt)
		}
		f.srv.Settle(key)
		for _, d := range f.srv.ReleaseWebhooks(key) { // refund.pending, then refund.succeeded
			if d.Status != http.StatusOK {
				t.Fatalf("webhook delivery %+v", d)
			}
		}
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
	})
	t.Run("a webhook before a takeover is evidence the new holder settles on, and moves nothing itself", func(t *testing.T) {
		const key = "wh-before"
		f, release, evA := heldSend(t, key)
		for _, d := range f.srv.ReleaseWebhooks(key) { // delivered while A holds the job, before any takeover
			if d.Status != http.StatusOK {
				t.Fatalf("webhook delivery %+v", d)
			}
		}
		es := f.evidenceOf(key)
		if len(es) != 1 || es[0].Source != evidence.Webhook || es[0].Status != evidence.Succeeded || es[0].ProviderRefundID == "" {
			t.Fatalf("evidence after the webhook: %+v, want one succeeded webhook with its refund id", es)
		}
		if j := f.job(key); j.State != refundjob.StateRunning || j.Attempt != 1 {
			t.Fatalf("the webhook moved the held job to %s at attempt %d", j.State, j.Attempt)
		}
		_, evB := f.worker("B", nil)
		if w := evB.await(t, key, nil); w.err != nil || w.job.Attempt != 2 {
			t.Fatalf("B's write-back: attempt %d, %v; want attempt 2, nil", w.job.Attempt, w.err)
		}
		close(release)
		wantErr(t, evA.await(t, key, nil).err, fencedwrite.ErrSuperseded)
		j := f.wantSettled(key, refundjob.StateSucceeded, 1)
		if j.Attempt != 2 || j.ProviderRefundID == nil || *j.ProviderRefundID != es[0].ProviderRefundID {
			t.Fatalf("job settled at attempt %d with refund %v, want attempt 2 with the webhook's %s", j.Attempt, deref(j.ProviderRefundID), es[0].ProviderRefundID)
		}
	})
	t.Run("a webhook after a takeover settled the job changes nothing", func(t *testing.T) {
		const key = "wh-after"
		f, release, evA := heldSend(t, key)
		w, evB := f.worker("B", nil)
		if got := evB.await(t, key, nil); got.err != nil {
			t.Fatal(got.err)
		}
		before := f.wantSettled(key, refundjob.StateSucceeded, 1)
		for _, d := range f.srv.ReleaseWebhooks(key) { // the provider's webhook comes late
			if d.Status != http.StatusOK {
				t.Fatalf("webhook delivery %+v", d)
			}
		}
		w.ReconcileNow(context.Background())
		close(release)
		wantErr(t, evA.await(t, key, nil).err, fencedwrite.ErrSuperseded)
		after := f.wantSettled(key, refundjob.StateSucceeded, 1)
		if after.Attempt != before.Attempt || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("the settled job changed: attempt %d -> %d, updated %v -> %v", before.Attempt, after.Attempt, before.UpdatedAt, after.UpdatedAt)
		}
		var hooks int
		for _, e := range f.evidenceOf(key) {
			if e.Source == evidence.Webhook {
				hooks++
			}
		}
		if hooks != 1 {
			t.Fatalf("%d webhook observations, want the late one kept", hooks)
		}
	})
	t.Run("a webhook during a takeover waits for the holder, then changes nothing", func(t *testing.T) {
		const key = "wh-during"
		f, release, evA := heldSend(t, key)
		inB := make(chan struct{})
		goOn := make(chan struct{})
		_, evB := f.worker("B", func(c *worker.Config) {
			c.Hooks.AfterProviderCall = func(worker.Job) { close(inB); <-goOn }
		})
		waitClosed(t, inB, "B's reconcile")
		for _, d := range f.srv.ReleaseWebhooks(key) { // delivered while B holds the job
			if d.Status != http.StatusOK {
				t.Fatalf("webhook delivery %+v", d)
			}
		}
		close(goOn)
		if w := evB.await(t, key, nil); w.err != nil {
			t.Fatal(w.err)
		}
		close(release)
		wantErr(t, evA.await(t, key, nil).err, fencedwrite.ErrSuperseded)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
	})
	t.Run("out of order, duplicated and late webhooks never move a settled job", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "wh-order"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Pending: true})
		f.srv.HoldWebhooks(key)
		settled := make(chan struct{})
		w, ev := f.worker("A", gate(settled))
		ev.await(t, key, nil)
		f.srv.Settle(key)
		close(settled)
		ev.settled(t, f, key)
		events := f.srv.HeldWebhooks(key)
		if len(events) != 2 {
			t.Fatalf("held %d webhooks, want pending and succeeded", len(events))
		}
		// succeeded first, then the older pending one, then succeeded again.
		f.srv.ReleaseWebhooks(key, events[1].ID, events[0].ID)
		f.srv.Redeliver(events[1].ID)
		w.ReconcileNow(context.Background())
		j := f.wantSettled(key, refundjob.StateSucceeded, 1)
		var hooks int
		for _, e := range f.evidenceOf(key) {
			if e.Source == evidence.Webhook {
				hooks++
				if e.ProcessedAt == nil {
					t.Errorf("webhook evidence %d left unprocessed", e.ID)
				}
			}
		}
		if hooks != 2 {
			t.Fatalf("%d webhook observations, want 2 (the duplicate is the same row)", hooks)
		}
		_ = j
	})
	t.Run("unsigned, tampered, wrongly signed and stale webhooks are refused and recorded nowhere", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		f.worker("A", nil)
		body := []byte(`{"id":"evt_x","type":"refund.succeeded","created":1,"refund":{"id":"re_x","payment":"p","amount":1,"currency":"EUR","reference":"forged","status":"succeeded"}}`)
		now := time.Now()
		for name, tc := range map[string]struct {
			header string
			body   []byte
			want   int
		}{
			"unsigned":     {"", body, http.StatusUnauthorized},
			"tampered":     {provider.SignWebhook(webhookSecret, now, body), append(bytes.Clone(body), ' '), http.StatusUnauthorized},
			"wrong secret": {provider.SignWebhook([]byte("other"), now, body), body, http.StatusUnauthorized},
			"replayed old": {provider.SignWebhook(webhookSecret, now.Add(-time.Hour), body), body, http.StatusBadRequest},
		} {
			if got := f.post(tc.body, tc.header); got != tc.want {
				t.Errorf("%s: HTTP %d, want %d", name, got, tc.want)
			}
		}
		if es := f.evidenceOf("forged"); len(es) != 0 {
			t.Fatalf("refused webhooks were recorded: %+v", es)
		}
		if got := f.post(body, provider.SignWebhook(webhookSecret, now, body)); got != http.StatusOK {
			t.Fatalf("a good webhook: HTTP %d", got)
		}
		if es := f.evidenceOf("forged"); len(es) != 1 {
			t.Fatalf("a good webhook was not recorded once: %+v", es)
		}
	})
	t.Run("a signed webhook naming an unknown refund id is evidence, not the reconcile's question", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "wh-unknown-id"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{After: fakeprovider.Cut}) // executed, the answer lost
		f.srv.HoldWebhooks(key)                                        // the provider's own webhook never comes
		open := make(chan struct{})
		_, ev := f.worker("A", gate(open))
		if w := ev.await(t, key, nil); w.err != nil || f.job(key).NextAction != refundjob.NextActionReconcile || f.job(key).ProviderRefundID != nil {
			t.Fatalf("after the cut send: %v, job %+v; want a reconcile with no refund id known", w.err, f.job(key))
		}
		// A correctly signed event for the key names a refund id the
		// provider does not know.
		body := []byte(`{"id":"evt_unknown","type":"refund.succeeded","created":1,"refund":{"id":"re_unknown","payment":"pay-` + key +
			`","amount":1250,"currency":"EUR","reference":"` + key + `","status":"succeeded"}}`)
		if code := f.post(body, provider.SignWebhook(webhookSecret, time.Now(), body)); code != http.StatusOK {
			t.Fatalf("signed webhook: HTTP %d", code)
		}
		close(open)
		j := ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		executed := f.srv.Events(key)[0].Refund.ProviderRefundID
		if j.ProviderRefundID == nil || *j.ProviderRefundID != executed {
			t.Fatalf("settled with refund %q, want the one that executed, %q", deref(j.ProviderRefundID), executed)
		}
		for _, r := range f.srv.Requests() {
			if r.Method == http.MethodGet && r.Path == "/v1/refunds/re_unknown" {
				t.Fatal("the reconcile asked the provider by the webhook's unknown refund id")
			}
		}
	})
	t.Run("an oversize body is refused with 413 and recorded nowhere", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		f.worker("A", nil)
		event := `{"id":"evt_big","type":"refund.succeeded","created":1,"refund":{"id":"re_big","payment":"p","amount":1,"currency":"EUR","reference":"big","status":"succeeded"}}`
		// Correctly signed, and one byte too long.
		body := []byte(event + strings.Repeat(" ", 1<<20+1-len(event)))
		if got := f.post(body, provider.SignWebhook(webhookSecret, time.Now(), body)); got != http.StatusRequestEntityTooLarge {
			t.Fatalf("a body of %d bytes: HTTP %d, want 413", len(body), got)
		}
		if es := f.evidenceOf("big"); len(es) != 0 {
			t.Fatalf("an oversize webhook was recorded: %+v", es)
		}
		fits := []byte(event)
		if got := f.post(fits, provider.SignWebhook(webhookSecret, time.Now(), fits)); got != http.StatusOK {
			t.Fatalf("the same event within the limit: HTTP %d", got)
		}
	})
	t.Run("a reversal after success raises an alert and never touches the settled job", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "reversed"
		f.enqueue(key)
		m := newCallKinds()
		w, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m })
		ev.settled(t, f, key)
		before := f.wantSettled(key, refundjob.StateSucceeded, 1)
		sent := f.srv.WebhooksSent(key, len(f.srv.Events(key))+1)
		f.srv.Reverse(key)
		waitClosed(t, sent, "the reversal webhook")
		w.ReconcileNow(context.Background())
		after := f.wantSettled(key, refundjob.StateSucceeded, 1)
		if after.Attempt != before.Attempt || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("the settled job changed: %+v -> %+v", before, after)
		}
		if alerts := m.alerted(); len(alerts) == 0 {
			t.Fatal("no alert for a reversal after success")
		}
	})
}

// No provider call without a token: the budget is fleet-wide, in the
// database, and reconciles draw from it like sends.
func TestWorkerOutboundBudget(t *testing.T) {
	t.Run("a pass claims no more jobs than tokens", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		for i := range 3 {
			f.enqueue(fmt.Sprintf("budget-%d", i))
		}
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.Metrics = 0.0001, 1, m })
		first := <-ev.passes
		if first.Tokens != 1 || first.Claimed != 1 {
			t.Fatalf("first pass %+v, want one token, one claim", first)
		}
		ev.await(t, "budget-0", nil)
		next := <-ev.passes // woken by the finished job
		if next.Tokens != 0 || next.Claimed != 0 {
			t.Fatalf("pass without budget %+v, want nothing claimed", next)
		}
		if n := m.count(func(c *callKinds) int { return c.budgetWaits }); n < 1 {
			t.Fatal("a pass with free slots and no budget was not counted as a budget wait")
		}
		if n := len(f.srv.Requests()); n != 1 {
			t.Fatalf("%d provider requests with one token", n)
		}
	})
	t.Run("two workers share one budget", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		for i := range 6 {
			f.enqueue(fmt.Sprintf("shared-%d", i))
		}
		tight := func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.BudgetName = 0.0001, 2, "psp" }
		_, a := f.worker("A", tight)
		_, b := f.worker("B", tight)
		<-a.passes
		<-b.passes
		var done int
		for done < 2 {
			select {
			case <-a.wrote:
				done++
			case <-b.wrote:
				done++
			case <-time.After(patience):
				t.Fatal("the two granted jobs did not finish")
			}
		}
		if n := len(f.srv.Requests()); n != 2 {
			t.Fatalf("%d provider requests from two workers sharing two tokens", n)
		}
	})
	t.Run("a reconcile needs a token too", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "budget-reconcile"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{After: fakeprovider.Cut}) // unknown: reconcile next
		_, ev := f.worker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst = 0.0001, 1 })
		if first := <-ev.passes; first.Tokens != 1 || first.Claimed != 1 {
			t.Fatalf("first pass %+v, want the send's token", first)
		}
		ev.await(t, key, nil)
		if j := f.job(key); j.State != refundjob.StateReady || j.NextAction != refundjob.NextActionReconcile {
			t.Fatalf("job %s/%s, want ready to reconcile", j.State, j.NextAction)
		}
		for p := range ev.passes {
			if p.Free > 0 {
				if p.Tokens != 0 || p.Claimed != 0 {
					t.Fatalf("pass %+v claimed a reconcile without a token", p)
				}
				break
			}
		}
		if n := len(f.srv.Requests()); n != 1 {
			t.Fatalf("%d provider requests, want the send only", n)
		}
	})
	t.Run("a send whose reply is cut, then its reconcile, spend two tokens", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "budget-two"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{After: fakeprovider.Cut}) // executed, the answer lost
		m := newCallKinds()
		w, ev := f.worker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.Metrics = 0.0001, 3, m })
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		// Stopped, the worker holds no token it took for a pass and has
		// yet to give back: the row shows what the calls spent.
		if err := w.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if m.get(worker.CallSend) != 1 || m.get(worker.CallReconcile) != 1 {
			t.Fatalf("calls %v, want one send and one reconcile", m.n)
		}
		if left := f.budgetTokens(worker.DefaultBudgetName); left < 1 || left >= 2 {
			t.Fatalf("%.4f tokens left of 3 after a send and a reconcile, want 1", left)
		}
	})
}

// budgetTokens reads the tokens a budget holds; at the tests' slow rates
// the refill since is a few thousandths of a token.
func (f *fleet) budgetTokens(name string) float64 {
	f.t.Helper()
	var tokens float64
	if err := f.db.RawDB().QueryRow("SELECT tokens FROM provider_budgets WHERE name = ?", name).Scan(&tokens); err != nil {
		f.t.Fatal(err)
	}
	return tokens
}

// Stop lets a call in flight finish and write back; StopAndCancel cuts it,
// and the job is reconciled (never resent blindly) by the next worker.
func TestWorkerStop(t *testing.T) {
	t.Run("stop waits for the call in flight", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "stop"
		f.enqueue(key)
		release := make(chan struct{})
		f.srv.Script(key, fakeprovider.Fault{Hold: release})
		w, _ := f.worker("A", nil)
		waitClosed(t, f.srv.Executed(key, 1), "the send")
		stopped := make(chan error, 1)
		go func() { stopped <- w.Stop(context.Background()) }()
		select {
		case <-w.Stopped():
			t.Fatal("stopped with a call in flight")
		default:
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		f.wantSettled(key, refundjob.StateSucceeded, 1)
	})
	t.Run("stop and cancel: the next worker reconciles", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "cancel"
		f.enqueue(key)
		release := make(chan struct{})
		defer close(release)
		f.srv.Script(key, fakeprovider.Fault{Hold: release})
		m := newCallKinds()
		w, _ := f.worker("A", nil)
		waitClosed(t, f.srv.Executed(key, 1), "the send")
		if err := w.StopAndCancel(context.Background()); err != nil {
			t.Fatal(err)
		}
		if j := f.job(key); j.State != refundjob.StateReady || j.NextAction != refundjob.NextActionReconcile {
			t.Fatalf("after a cancelled call: %s/%s, want ready to reconcile", j.State, j.NextAction)
		}
		_, ev := f.worker("B", func(c *worker.Config) { c.Metrics = m })
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		if m.get(worker.CallSend)+m.get(worker.CallResend) != 0 {
			t.Fatalf("B sent again: %v", m.n)
		}
	})
	t.Run("a rolling restart of the fleet pays nobody twice", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{Background: true,
			Random: fakeprovider.RandomFaults{Seed: 7, Cut: 0.2, ServerError: 0.1, Pending: 0.2, Decline: 0.3, PendingDelay: 10 * time.Millisecond}})
		const n = 24
		for i := range n {
			f.enqueue(fmt.Sprintf("roll-%d", i))
		}
		settled := func() int {
			c, err := f.c.RefundJob.Query().Where(refundjob.StateIn(refundjob.StateSucceeded, refundjob.StateFailed, refundjob.StateManualReview)).Count(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		fast := func(c *worker.Config) { c.Lease = 200 * time.Millisecond; c.ScanInterval = 20 * time.Millisecond }
		for gen := 0; settled() < n; gen++ {
			if gen > 50 {
				t.Fatalf("%d of %d settled after 50 restarts", settled(), n)
			}
			w, ev := f.worker(fmt.Sprintf("gen-%d", gen), fast)
			// Let this generation write back a few jobs, then restart it
			// with calls in flight.
			for k := 0; k < 3 && settled() < n; k++ {
				select {
				case <-ev.wrote:
				case <-time.After(patience):
					t.Fatalf("generation %d wrote nothing back", gen)
				}
			}
			if err := w.StopAndCancel(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			key := fmt.Sprintf("roll-%d", i)
			if e := f.srv.Executions(key); e > 1 {
				t.Fatalf("%s executed %d times", key, e)
			}
		}
	})
}

// heldSend starts a fleet whose worker A, on an instant lease, sent key's
// refund and hangs in the call after it executed: release ends the call. The
// key's webhooks are held until the test releases them.
func heldSend(t *testing.T, key string) (*fleet, chan struct{}, *events) {
	t.Helper()
	f := newFleet(t, fakeprovider.Config{})
	f.enqueue(key)
	release := make(chan struct{})
	f.srv.Script(key, fakeprovider.Fault{Hold: release})
	f.srv.HoldWebhooks(key)
	_, evA := f.worker("A", instantLease)
	waitClosed(t, f.srv.Executed(key, 1), "A's send")
	return f, release, evA
}

// oldestMetrics passes on every report of the oldest unfinished job's age.
type oldestMetrics struct {
	worker.NopMetrics
	ages chan time.Duration
}

func (m oldestMetrics) OldestUnfinished(age time.Duration) { m.ages <- age }

// The reconciler reports the age of the oldest job not yet settled, on the
// database's clock: positive while one waits, zero once none does.
func TestWorkerReportsTheOldestUnfinishedJob(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const key = "oldest"
	f.enqueue(key)
	created := f.job(key).CreatedAt
	a := oldestMetrics{ages: make(chan time.Duration, 100)}
	_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = a })
	select {
	case age := <-a.ages:
		if age <= 0 || age > time.Since(created)+time.Minute {
			t.Fatalf("oldest unfinished job reported %v old, want its age since %v", age, created)
		}
	case <-time.After(patience):
		t.Fatal("no report of the oldest unfinished job")
	}
	ev.settled(t, f, key)
	b := oldestMetrics{ages: make(chan time.Duration, 100)}
	f.worker("B", func(c *worker.Config) { c.Metrics = b })
	select {
	case age := <-b.ages:
		if age != 0 {
			t.Fatalf("with every job settled the oldest unfinished is reported %v old, want 0", age)
		}
	case <-time.After(patience):
		t.Fatal("no report of the oldest unfinished job")
	}
}
