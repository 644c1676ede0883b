package worker_test

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// The worker through the real Stripe adapter (provider/stripe), against the
// fake provider speaking Stripe's API: Stripe's answers become DESIGN.md's
// decisions, and Stripe's webhooks, verified Stripe's way, are evidence
// acted on through the fence.
func TestWorkerWithStripe(t *testing.T) {
	stripeFleet := func(t *testing.T) *fleet {
		return newFleet(t, fakeprovider.Config{API: fakeprovider.APIStripe})
	}
	t.Run("a cut answer is reconciled from the payment's refunds: paid once", func(t *testing.T) {
		t.Parallel()
		f := stripeFleet(t)
		const key = "st-cut"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{After: fakeprovider.Cut})
		_, ev := f.worker("A", nil)
		ev.settled(t, f, key)
		j := f.wantSettled(key, refundjob.StateSucceeded, 1)
		if j.ProviderRefundID == nil || *j.ProviderRefundID == "" {
			t.Fatal("completed without Stripe's refund id")
		}
	})
	t.Run("requires_action waits, then succeeds on Stripe's refund.updated", func(t *testing.T) {
		t.Parallel()
		f := stripeFleet(t)
		const key = "st-action"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Pending: true, RequiresAction: true})
		f.srv.HoldWebhooks(key)
		_, ev := f.worker("A", func(c *worker.Config) { c.PendingDelay = time.Hour })
		if w := ev.await(t, key, nil); w.err != nil || w.job.Transition != "reschedule" {
			t.Fatalf("after requires_action: %+v; want rescheduled to reconcile", w)
		}
		f.srv.Settle(key)
		var updated string
		for _, e := range f.srv.HeldWebhooks(key) {
			if e.Type == "refund.updated" {
				updated = e.ID
			}
		}
		for _, d := range f.srv.ReleaseWebhooks(key, updated) {
			if d.Status != http.StatusOK || !bytes.HasPrefix([]byte(d.Header), []byte("t=")) {
				t.Fatalf("webhook delivery %+v, want a Stripe-signed delivery acknowledged", d)
			}
		}
		es := f.evidenceOf(key)
		if len(es) != 1 || es[0].Source != evidence.Webhook || es[0].Status != evidence.Succeeded || es[0].ProviderRefundID == "" {
			t.Fatalf("evidence %+v, want Stripe's refund.updated recorded as a succeeded webhook", es)
		}
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
	})
	t.Run("charge.refunded wakes the payment's job waiting to reconcile, and records nothing", func(t *testing.T) {
		t.Parallel()
		f := stripeFleet(t)
		const key = "st-charge"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{Pending: true})
		f.srv.HoldWebhooks(key)
		_, ev := f.worker("A", func(c *worker.Config) { c.PendingDelay = time.Hour })
		ev.await(t, key, nil) // pending: reconcile in an hour
		held := f.srv.HeldWebhooks(key)
		i := slices.IndexFunc(held, func(e provider.WebhookEvent) bool { return e.Type == "charge.refunded" })
		if i < 0 || len(held[i].Payments) == 0 {
			t.Fatalf("held events %+v, want charge.refunded", held)
		}
		for _, d := range f.srv.ReleaseWebhooks(key, held[i].ID) {
			if d.Status != http.StatusOK {
				t.Fatalf("webhook delivery %+v", d)
			}
		}
		// Woken: the job is claimed and reconciled now, not in an hour.
		if w := ev.await(t, key, nil); w.job.Action != "reconcile" {
			t.Fatalf("after charge.refunded: %+v, want the job reconciled at once", w)
		}
		if es := f.evidenceOf(key); len(es) != 0 {
			t.Fatalf("evidence %+v: charge.refunded names no refund, so nothing is filed under the key", es)
		}
	})
	t.Run("a webhook not signed Stripe's way is refused and recorded nowhere", func(t *testing.T) {
		t.Parallel()
		f := stripeFleet(t)
		const key = "st-forged"
		f.enqueue(key)
		f.worker("A", func(c *worker.Config) { c.ScanInterval = time.Hour })
		body := []byte(`{"id":"evt_x","object":"event","type":"refund.updated","created":1,"data":{"object":{"id":"re_x","status":"succeeded","metadata":{"fencekit_operation_key":"` + key + `"}}}}`)
		// fencekit's own scheme, with the right secret: not Stripe's.
		if code := f.post(body, provider.SignWebhook(webhookSecret, time.Now(), body)); code != http.StatusUnauthorized {
			t.Fatalf("answered %d, want 401", code)
		}
		if es := f.evidenceOf(key); len(es) != 0 {
			t.Fatalf("evidence %+v", es)
		}
	})
}
