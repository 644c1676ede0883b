package worker

import (
	"errors"
	"io"
	"net/http"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/provider"
)

// MaxWebhookBody bounds a webhook's body: a longer one is refused with 413
// and recorded nowhere.
const MaxWebhookBody = 1 << 20

// WebhookHandler returns the HTTP handler for the provider's webhooks. It
// verifies the signature and the timestamp (unsigned, tampered, wrongly
// signed and too old or too new requests get a 4xx and are recorded
// nowhere, and so does a body longer than MaxWebhookBody, with 413), records the event in the observation log (a duplicate delivery
// is the same row), and has the reconciler act on it through the fence at
// once. It never writes a job itself: out-of-order and late webhooks never
// move a settled job. It answers 200 once the event is recorded, and 500
// when it could not record it, so that the provider delivers it again.
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
		ev, err := provider.VerifyWebhook(c.cfg.WebhookSecret, r.Header.Get(provider.WebhookSignatureHeader), body, c.cfg.Now(), c.cfg.WebhookTolerance)
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
		st, ok := statusOf(ev.Refund.Status)
		if !ok || ev.Refund.Reference == "" {
			c.log.Info("webhook ignored: not about a refund's status", "event", ev.ID, "type", ev.Type)
			w.WriteHeader(http.StatusOK)
			return
		}
		o := evidence.Observation{OperationKey: ev.Refund.Reference, Source: evidence.Webhook, ProviderRefundID: ev.Refund.ProviderRefundID,
			Status: st, Payload: body, EventID: ev.ID}
		id, created, err := evidence.Record(r.Context(), c.ent, o)
		if err != nil {
			c.log.Error("webhook: record evidence", "operation_key", o.OperationKey, "event", ev.ID, "err", err)
			http.Error(w, "could not record the event; deliver it again", http.StatusInternalServerError)
			return
		}
		if created {
			c.m.Evidence(string(evidence.Webhook))
		}
		c.log.Info("webhook recorded", "operation_key", o.OperationKey, "event", ev.ID, "type", ev.Type, "observation", id, "duplicate", !created)
		c.wakeReconciler()
		w.WriteHeader(http.StatusOK)
	})
}
