package worker

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/provider"
)

// MaxWebhookBody bounds a webhook's body: a longer one is refused with 413
// and recorded nowhere.
const MaxWebhookBody = 1 << 20

// WebhookHandler returns the HTTP handler for the provider's webhooks. It
// verifies the request the provider's way (Config.Webhooks: unsigned,
// tampered, wrongly signed and too old or too new requests get a 4xx and
// are recorded nowhere, and so does a body longer than MaxWebhookBody, with
// 413), records each event in the observation log (a duplicate delivery is
// the same row), and has the reconciler act on it through the fence at
// once. It never moves a job itself: out-of-order and late webhooks never
// move a settled job. The one write it makes is the fenced wake-up of a
// payment's jobs waiting to reconcile, for an event about the payment as a
// whole (WebhookEvent.Payments). It answers 200 once every event is
// recorded, and 500 when it could not record one, so that the provider
// delivers the request again.
func (c *Client) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			c.log.Warn("webhook refused: body too large", "limit", MaxWebhookBody)
			http.Error(w, "webhook body too large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, "webhook body unreadable", http.StatusBadRequest)
			return
		}
		evs, err := c.cfg.Webhooks.VerifyWebhook(r.Header, body, c.cfg.Now())
		switch {
		case errors.Is(err, provider.ErrWebhookWrongSecret), errors.Is(err, provider.ErrWebhookTampered), errors.Is(err, provider.ErrWebhookUnsigned):
			c.log.Warn("webhook refused", "err", err)
			http.Error(w, "signature refused", http.StatusUnauthorized)
			return
		case err != nil:
			c.log.Warn("webhook refused", "err", err)
			http.Error(w, "webhook refused: "+err.Error(), http.StatusBadRequest)
			return
		}
		for _, ev := range evs {
			if err := c.actOnWebhook(r.Context(), ev, body); err != nil {
				http.Error(w, "could not record the event; deliver it again", http.StatusInternalServerError)
				return
			}
		}
		c.wakeReconciler()
		w.WriteHeader(http.StatusOK)
	})
}

// actOnWebhook records one verified event in the observation log, or, for an
// event about a payment as a whole, wakes that payment's jobs waiting to
// reconcile. An error means the event was not recorded: the provider must
// deliver it again.
func (c *Client) actOnWebhook(ctx context.Context, ev provider.WebhookEvent, body []byte) error {
	if len(ev.Payments) > 0 {
		c.wakePayment(ctx, ev)
		return nil
	}
	st, ok := statusOf(ev.Refund.Status)
	if !ok || ev.Refund.Reference == "" {
		c.log.Info("webhook ignored: not about a refund's status", "event", ev.ID, "type", ev.Type)
		return nil
	}
	o := evidence.Observation{OperationKey: ev.Refund.Reference, Source: evidence.Webhook, ProviderRefundID: ev.Refund.ProviderRefundID,
		Status: st, Payload: body, EventID: ev.ID}
	id, created, err := evidence.Record(ctx, c.ent, o)
	if err != nil {
		c.log.Error("webhook: record evidence", "operation_key", o.OperationKey, "event", ev.ID, "err", err)
		return err
	}
	if created {
		c.m.Evidence(string(evidence.Webhook))
	}
	c.log.Info("webhook recorded", "operation_key", o.OperationKey, "event", ev.ID, "type", ev.Type, "observation", id, "duplicate", !created)
	return nil
}

// maxPaymentWakeUps bounds the jobs one payment-level webhook wakes.
const maxPaymentWakeUps = 100

// wakePayment wakes, through the fenced wake-up, the jobs of ev's payment
// that wait to reconcile, so that their reconcile asks the provider now: the
// event names no refund, so no operation key can be filed under it, and
// nothing is recorded. Jobs waiting to send are left alone (an early send
// is no news), and so are jobs in manual review (only evidence moves them).
// A wake-up that fails is logged: the job reconciles on its schedule anyway.
func (c *Client) wakePayment(ctx context.Context, ev provider.WebhookEvent) {
	log := c.log.With("event", ev.ID, "type", ev.Type, "payments", ev.Payments)
	jobs, err := c.ent.RefundJob.Query().
		Where(refundjob.PaymentRefIn(ev.Payments...), refundjob.StateEQ(refundjob.StateReady), refundjob.NextActionEQ(refundjob.NextActionReconcile)).
		Limit(maxPaymentWakeUps).All(ctx)
	if err != nil {
		log.Warn("webhook about a payment: read its jobs; they reconcile on their schedule", "err", err)
		return
	}
	for _, job := range jobs {
		if err := c.ent.RefundJob.Apply(ctx, c.ent.RefundJob.WakeUp(job), nil); err != nil {
			log.Info("webhook about a payment: wake-up not applied; the job reconciles on its schedule", "operation_key", job.OperationKey, "attempt", job.Attempt, "err", err)
			continue
		}
		log.Info("webhook about a payment: woke the job to reconcile now", "operation_key", job.OperationKey, "attempt", job.Attempt)
	}
	if len(jobs) > 0 {
		c.Wake()
	}
}
