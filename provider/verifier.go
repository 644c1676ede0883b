package provider

import (
	"net/http"
	"time"
)

// A WebhookVerifier checks a webhook request the way its provider signs
// them, and returns the events the request carries. Each provider signs its
// own way: fencekit's scheme (SignedWebhooks) names its secret by a key id;
// Stripe's (package provider/stripe) carries a timestamp and v1 signatures
// in Stripe-Signature and accepts any of several secrets during a rotation.
//
// A nil error means the provider sent body, recently: the events may still
// be duplicates or arrive out of order (de-duplicate on their IDs). Any
// error matches exactly one of the ErrWebhook sentinels and means the
// request proves nothing: answer 4xx and record nothing. A verified request
// may carry no event worth recording (a type the receiver ignores): the
// result is then empty, and the receiver acknowledges it.
type WebhookVerifier interface {
	VerifyWebhook(header http.Header, body []byte, now time.Time) ([]WebhookEvent, error)
}

// SignedWebhooks verifies fencekit's own webhook scheme (see
// WebhookSignatureHeader) with one secret: the scheme of the fake provider
// and of any provider that speaks the API HTTPClient expects. A zero
// Tolerance means DefaultWebhookTolerance; an empty Secret refuses every
// request (ErrWebhookWrongSecret).
type SignedWebhooks struct {
	Secret    []byte
	Tolerance time.Duration
}

var _ WebhookVerifier = SignedWebhooks{}

// VerifyWebhook implements WebhookVerifier with VerifyWebhook (the
// function): one request is one event.
func (v SignedWebhooks) VerifyWebhook(header http.Header, body []byte, now time.Time) ([]WebhookEvent, error) {
	ev, err := VerifyWebhook(v.Secret, header.Get(WebhookSignatureHeader), body, now, v.Tolerance)
	if err != nil {
		return nil, err
	}
	return []WebhookEvent{ev}, nil
}
