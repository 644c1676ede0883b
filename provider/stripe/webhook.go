package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/fencekit/fencekit/provider"
)

// SignatureHeader is the header Stripe signs its webhooks in:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of t.body>[,v1=…]", one v1 per
// secret the endpoint signs with while a secret is being rolled
// (https://docs.stripe.com/webhooks#verify-events).
const SignatureHeader = "Stripe-Signature"

// The event types the worker acts on (https://docs.stripe.com/api/events/types).
const (
	// EventRefundCreated, EventRefundUpdated and EventRefundFailed carry the
	// refund: recorded as evidence under its metadata's operation key.
	EventRefundCreated = "refund.created"
	EventRefundUpdated = "refund.updated"
	EventRefundFailed  = "refund.failed"
	// EventChargeRefunded carries the charge, not the refund ("Listen to
	// refund.created for information about the refund"; the charge no
	// longer embeds its refunds since API version 2022-11-15,
	// https://docs.stripe.com/changelog/2022-11-15/deprecates-charges-auto-expand):
	// it names the payment (WebhookEvent.Payment), whose jobs waiting to
	// reconcile are woken through the fence.
	EventChargeRefunded = "charge.refunded"
)

// Webhooks verifies Stripe's webhooks with stripe-go's webhook package: the
// Stripe-Signature header's timestamp and v1 signatures against each
// endpoint secret in turn, and the timestamp within Tolerance. It
// implements provider.WebhookVerifier.
type Webhooks struct {
	// Secrets are the endpoint's signing secrets (whsec_…). A request
	// signed with any of them is accepted: during a roll, Stripe signs with
	// the old and the new secret (one v1 each) until the old one expires,
	// and a receiver given both accepts either while its configuration
	// changes.
	Secrets []string
	// Tolerance is how old a signature may be; webhook.DefaultTolerance (5
	// minutes, Stripe's) when zero. Stripe re-signs every redelivery, so a
	// genuine event comes back with a fresh timestamp.
	Tolerance time.Duration
}

var _ provider.WebhookVerifier = Webhooks{}

// VerifyWebhook implements provider.WebhookVerifier. stripe-go measures the
// signature's age against the machine's clock, so now is not used.
//
// Errors: no header ErrWebhookUnsigned; an unreadable header or a body that
// is not an event of stripe-go's API version's release train
// (stripego.APIVersion: set the endpoint's version to it)
// ErrWebhookMalformed; no secret ErrWebhookWrongSecret; no v1 signature
// matching any secret ErrWebhookTampered (Stripe's header names no key, so
// a wrong secret and a changed body look the same); a signature older than
// Tolerance ErrWebhookTooOld. stripe-go refuses an old timestamp before it
// checks the signature.
//
// A refund event (refund.created, refund.updated, refund.failed) gives one
// event whose Refund is the refund, its Reference the operation key of its
// metadata (empty for a refund fencekit did not make: the receiver ignores
// it); charge.refunded gives one event naming the payment; any other type
// gives none.
func (v Webhooks) VerifyWebhook(header http.Header, body []byte, _ time.Time) ([]provider.WebhookEvent, error) {
	sig := header.Get(SignatureHeader)
	if strings.TrimSpace(sig) == "" {
		return nil, fmt.Errorf("verify Stripe webhook: no %s header: %w", SignatureHeader, provider.ErrWebhookUnsigned)
	}
	if len(v.Secrets) == 0 {
		return nil, fmt.Errorf("verify Stripe webhook: receiver has no secret: %w", provider.ErrWebhookWrongSecret)
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = webhook.DefaultTolerance
	}
	var (
		ev  stripego.Event
		err error
	)
	for _, secret := range v.Secrets {
		if secret == "" {
			continue
		}
		ev, err = webhook.ConstructEventWithOptions(body, sig, secret, webhook.ConstructEventOptions{Tolerance: tolerance})
		if !errors.Is(err, webhook.ErrNoValidSignature) {
			break // verified, or refused whatever the secret
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, webhook.ErrNotSigned):
		return nil, fmt.Errorf("verify Stripe webhook: %w", provider.ErrWebhookUnsigned)
	case errors.Is(err, webhook.ErrInvalidHeader):
		return nil, fmt.Errorf("verify Stripe webhook: %s header unreadable: %w", SignatureHeader, provider.ErrWebhookMalformed)
	case errors.Is(err, webhook.ErrNoValidSignature):
		return nil, fmt.Errorf("verify Stripe webhook: no v1 signature matches any of the receiver's %d secrets (another secret, or a body changed after signing): %w",
			len(v.Secrets), provider.ErrWebhookTampered)
	case errors.Is(err, webhook.ErrTooOld):
		return nil, fmt.Errorf("verify Stripe webhook: signed more than %v ago: %w", tolerance, provider.ErrWebhookTooOld)
	default:
		// Signed, but not an event this client reads: a malformed body or
		// another API version.
		return nil, fmt.Errorf("verify Stripe webhook: %w: %w", provider.ErrWebhookMalformed, err)
	}
	return eventsOf(ev, body)
}

// eventsOf reads a verified event. Every error wraps ErrWebhookMalformed.
func eventsOf(ev stripego.Event, body []byte) ([]provider.WebhookEvent, error) {
	if ev.ID == "" || ev.Created <= 0 || ev.Data == nil {
		return nil, fmt.Errorf("decode Stripe event: no id, created time or data: %w", provider.ErrWebhookMalformed)
	}
	out := provider.WebhookEvent{ID: ev.ID, Type: provider.EventType(ev.Type), Created: time.Unix(ev.Created, 0).UTC(), Raw: body}
	switch string(ev.Type) {
	case EventRefundCreated, EventRefundUpdated, EventRefundFailed:
		var re stripego.Refund
		if err := json.Unmarshal(ev.Data.Raw, &re); err != nil || re.ID == "" {
			return nil, fmt.Errorf("decode Stripe event %s: %s without a refund: %w", ev.ID, ev.Type, provider.ErrWebhookMalformed)
		}
		r, err := refundOf(&re, anyPayment, ev.Data.Raw)
		if err != nil {
			return nil, fmt.Errorf("decode Stripe event %s: %w: %w", ev.ID, provider.ErrWebhookMalformed, err)
		}
		if string(ev.Type) == EventRefundFailed && r.Status != provider.StatusRejected {
			return nil, fmt.Errorf("decode Stripe event %s: %s with refund status %q: %w", ev.ID, ev.Type, re.Status, provider.ErrWebhookMalformed)
		}
		out.Refund = r
	case EventChargeRefunded:
		var ch stripego.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil || ch.ID == "" {
			return nil, fmt.Errorf("decode Stripe event %s: %s without a charge: %w", ev.ID, ev.Type, provider.ErrWebhookMalformed)
		}
		out.Payments = []string{ch.ID}
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			out.Payments = append(out.Payments, ch.PaymentIntent.ID)
		}
	default:
		return nil, nil // acknowledged, not acted on
	}
	return []provider.WebhookEvent{out}, nil
}
