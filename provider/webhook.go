package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A provider pushes every change of a refund's status to the merchant as a
// webhook: an HTTP POST whose body is one JSON event, signed in the header
// named by WebhookSignatureHeader:
//
//	POST <the merchant's webhook URL>
//	Content-Type: application/json
//	Webhook-Signature: t=1735689600,kid=9c1e5f0a2b7d4e38,v1=5257a869e7ec…(64 hex digits)
//
//	{"id":"evt_12","type":"refund.succeeded","created":1735689600,
//	 "refund":{"id":"re_3","payment":"pay_1","amount":300,"currency":"EUR",
//	           "reference":"op-1","status":"succeeded"}}
//
// In the header, t is the Unix time in seconds at which this delivery was
// signed; v1 is the lower-case hex HMAC-SHA256, keyed with the secret the
// provider and the merchant share, of t in decimal, a dot, and the body
// exactly as sent (the bytes "1735689600.{"id":…}"); kid is WebhookKeyID of
// that secret, so a receiver can tell a request signed with another secret
// from a tampered one. Fields are separated by commas, each appears exactly
// once, and fields with other names are ignored (room for a future v2).
//
// The event's id is unique per event and the same on every redelivery of
// it: de-duplicate on it. created is when the status changed, in Unix
// seconds. reference is the operation key the refund was sent with. The
// refund's status follows the event's type (see EventType). Events of one
// refund may arrive late, twice, or in any order: order them by the refund's
// life (pending, then succeeded or rejected; succeeded, then reversed), never
// by arrival.
const WebhookSignatureHeader = "Webhook-Signature"

// DefaultWebhookTolerance is how far a webhook's signing time may be from the
// receiver's clock, either way, when VerifyWebhook is given no tolerance
// (Stripe's default).
const DefaultWebhookTolerance = 5 * time.Minute

// EventType says which status change a webhook reports.
type EventType string

// The event types a provider sends, with the refund status each carries.
const (
	// EventRefundPending: the refund was accepted and is pending.
	EventRefundPending EventType = "refund.pending"
	// EventRefundSucceeded: the refund succeeded, at once or after pending.
	EventRefundSucceeded EventType = "refund.succeeded"
	// EventRefundFailed: a pending refund was declined; its status is
	// StatusRejected and Reason says why.
	EventRefundFailed EventType = "refund.failed"
	// EventRefundReversed: a refund that had succeeded was reversed; its
	// status is StatusReversed.
	EventRefundReversed EventType = "refund.reversed"
)

// eventStatus is the refund status each known event type carries.
var eventStatus = map[EventType]Status{
	EventRefundPending:   StatusPending,
	EventRefundSucceeded: StatusSucceeded,
	EventRefundFailed:    StatusRejected,
	EventRefundReversed:  StatusReversed,
}

// StatusOf returns the refund status an event of type t carries, and false
// for a type this package does not know.
func (t EventType) StatusOf() (Status, bool) {
	s, ok := eventStatus[t]
	return s, ok
}

// WebhookEvent is one verified webhook.
type WebhookEvent struct {
	// ID is the provider's event id: unique per event, the same on every
	// redelivery of it.
	ID      string
	Type    EventType
	Created time.Time // when the status changed, in UTC, to the second
	// Refund is the refund as of the event, as the provider reports it, with
	// the refund object as Raw. It is not verified against any request: call
	// Verify with the job's request before acting on it.
	Refund Refund
	// Payments is set, and Refund left zero, for an event about a payment
	// as a whole that names none of its refunds (Stripe's charge.refunded):
	// the references the payment goes by (a charge and its payment intent).
	// No operation key can be filed under such an event, but the payment's
	// refunds may have changed.
	Payments []string
	Raw      []byte // the whole body, for the evidence log
}

// Why VerifyWebhook refuses a request. Every error it returns matches
// exactly one of these. Whatever the reason, the receiver answers 4xx and
// records nothing: an unverified body is not evidence.
var (
	// ErrWebhookUnsigned means the request carries no signature header, or
	// an empty one.
	ErrWebhookUnsigned = errors.New("webhook not signed")

	// ErrWebhookMalformed means the signature header cannot be read (t, kid
	// or v1 missing or repeated, t not a positive decimal number of seconds,
	// kid or v1 not hex of the right length), or the signed body is not an
	// event of this format. A malformed body under a valid signature is the
	// provider's bug, not an attack; it is refused all the same.
	ErrWebhookMalformed = errors.New("webhook malformed")

	// ErrWebhookWrongSecret means the request was signed with another secret
	// than the receiver's (its kid names another key), or the receiver has
	// no secret. It usually means a misconfigured secret, or a secret being
	// rotated: a receiver that accepts two secrets during a rotation tries
	// the other one.
	ErrWebhookWrongSecret = errors.New("webhook signed with another secret")

	// ErrWebhookTampered means the request names the receiver's secret but
	// its signature does not match its timestamp and body: one of them was
	// changed after signing, or the signature was forged.
	ErrWebhookTampered = errors.New("webhook signature does not match")

	// ErrWebhookTooOld means an authentic request was signed longer ago than
	// the tolerance: a replay, or a delivery held too long. Providers
	// re-sign every redelivery, so a genuine event comes back with a fresh
	// timestamp.
	ErrWebhookTooOld = errors.New("webhook timestamp too old")

	// ErrWebhookTooNew means an authentic request was signed further in the
	// future than the tolerance: the provider's clock and the receiver's
	// disagree by more than the tolerance.
	ErrWebhookTooNew = errors.New("webhook timestamp in the future")
)

// keyIDLabel is what WebhookKeyID signs: a fixed message, so that the key id
// is a function of the secret that reveals nothing an attacker could not
// already learn from any signed webhook.
const keyIDLabel = "fencekit webhook key id"

// WebhookKeyID names secret in a signature header: the first 8 bytes of
// HMAC-SHA256(secret, "fencekit webhook key id"), in lower-case hex. Logging
// it is safe; it tells which secret a sender or receiver is configured with.
func WebhookKeyID(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyIDLabel))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// SignWebhook returns the WebhookSignatureHeader value for body sent at t
// with secret: "t=<unix seconds>,kid=<WebhookKeyID(secret)>,v1=<hex hmac>".
// Sign the exact bytes that are sent. It panics if secret is empty: an
// unkeyed signature proves nothing.
func SignWebhook(secret []byte, t time.Time, body []byte) string {
	if len(secret) == 0 {
		panic("provider: SignWebhook with an empty secret")
	}
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",kid=" + WebhookKeyID(secret) + ",v1=" + hex.EncodeToString(webhookMAC(secret, ts, body))
}

func webhookMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifyWebhook checks a webhook's signature header against body and
// secret, and its signing time against now: it must lie within tolerance
// of now, either way (DefaultWebhookTolerance when tolerance <= 0). Only
// then does it parse body into the event. The signature is compared in
// constant time.
//
// A nil error means the provider holding secret sent this body, recently;
// the event may still be a duplicate or arrive out of order (de-duplicate on
// its ID). Any error matches exactly one of the ErrWebhook sentinels and
// means the request proves nothing: answer 4xx and record nothing.
func VerifyWebhook(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) (WebhookEvent, error) {
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	if strings.TrimSpace(header) == "" {
		return WebhookEvent{}, fmt.Errorf("verify webhook: no %s header: %w", WebhookSignatureHeader, ErrWebhookUnsigned)
	}
	sig, err := parseSignature(header)
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("verify webhook: %w", err)
	}
	if len(secret) == 0 {
		return WebhookEvent{}, fmt.Errorf("verify webhook: receiver has no secret: %w", ErrWebhookWrongSecret)
	}
	if subtle.ConstantTimeCompare([]byte(sig.kid), []byte(WebhookKeyID(secret))) != 1 {
		return WebhookEvent{}, fmt.Errorf("verify webhook: key id %s is not the receiver's: %w", sig.kid, ErrWebhookWrongSecret)
	}
	if !hmac.Equal(sig.v1, webhookMAC(secret, sig.ts, body)) {
		return WebhookEvent{}, fmt.Errorf("verify webhook: %w", ErrWebhookTampered)
	}
	signed := time.Unix(sig.t, 0)
	switch age := now.Sub(signed); {
	case age > tolerance:
		return WebhookEvent{}, fmt.Errorf("verify webhook: signed %v ago, tolerance %v: %w", age, tolerance, ErrWebhookTooOld)
	case -age > tolerance:
		return WebhookEvent{}, fmt.Errorf("verify webhook: signed %v ahead, tolerance %v: %w", -age, tolerance, ErrWebhookTooNew)
	}
	ev, err := decodeEvent(body)
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("verify webhook: %w", err)
	}
	return ev, nil
}

type signature struct {
	ts  string // t as sent: the signed text
	t   int64
	kid string
	v1  []byte
}

// parseSignature reads "t=…,kid=…,v1=…". Every error wraps
// ErrWebhookMalformed.
func parseSignature(header string) (signature, error) {
	var sig signature
	seen := map[string]bool{}
	for part := range strings.SplitSeq(header, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return signature{}, fmt.Errorf("read signature: field %q has no value: %w", part, ErrWebhookMalformed)
		}
		switch name {
		case "t", "kid", "v1":
		default:
			continue
		}
		if seen[name] {
			return signature{}, fmt.Errorf("read signature: %s twice: %w", name, ErrWebhookMalformed)
		}
		seen[name] = true
		switch name {
		case "t":
			t, err := strconv.ParseInt(value, 10, 64)
			if err != nil || t <= 0 || strings.TrimLeft(value, "0123456789") != "" {
				return signature{}, fmt.Errorf("read signature: t %q: %w", value, ErrWebhookMalformed)
			}
			sig.ts, sig.t = value, t
		case "kid":
			if b, err := hex.DecodeString(value); err != nil || len(b) != 8 {
				return signature{}, fmt.Errorf("read signature: kid %q: %w", value, ErrWebhookMalformed)
			}
			sig.kid = strings.ToLower(value)
		case "v1":
			b, err := hex.DecodeString(value)
			if err != nil || len(b) != sha256.Size {
				return signature{}, fmt.Errorf("read signature: v1 is not %d hex digits: %w", 2*sha256.Size, ErrWebhookMalformed)
			}
			sig.v1 = b
		}
	}
	for _, name := range []string{"t", "kid", "v1"} {
		if !seen[name] {
			return signature{}, fmt.Errorf("read signature: no %s: %w", name, ErrWebhookMalformed)
		}
	}
	return sig, nil
}

type wireEvent struct {
	ID      string          `json:"id"`
	Type    EventType       `json:"type"`
	Created int64           `json:"created"`
	Refund  json.RawMessage `json:"refund"`
}

// decodeEvent parses a verified body. Every error wraps ErrWebhookMalformed.
// Events of a type this package does not know are returned as they are, for
// the receiver to acknowledge and ignore; a refund event must carry a refund
// whose status agrees with its type.
func decodeEvent(body []byte) (WebhookEvent, error) {
	var w wireEvent
	if err := json.Unmarshal(body, &w); err != nil {
		return WebhookEvent{}, fmt.Errorf("decode event: %w: %w", ErrWebhookMalformed, err)
	}
	switch {
	case w.ID == "":
		return WebhookEvent{}, fmt.Errorf("decode event: no id: %w", ErrWebhookMalformed)
	case w.Type == "":
		return WebhookEvent{}, fmt.Errorf("decode event %s: no type: %w", w.ID, ErrWebhookMalformed)
	case w.Created <= 0:
		return WebhookEvent{}, fmt.Errorf("decode event %s: no created time: %w", w.ID, ErrWebhookMalformed)
	}
	ev := WebhookEvent{ID: w.ID, Type: w.Type, Created: time.Unix(w.Created, 0).UTC(), Raw: body}
	want, known := w.Type.StatusOf()
	if !known && (len(w.Refund) == 0 || string(w.Refund) == "null") {
		return ev, nil
	}
	var r wireRefund
	if err := json.Unmarshal(w.Refund, &r); err != nil {
		return WebhookEvent{}, fmt.Errorf("decode event %s: refund: %w: %w", w.ID, ErrWebhookMalformed, err)
	}
	switch {
	case r.ID == "" || r.Reference == "":
		return WebhookEvent{}, fmt.Errorf("decode event %s: refund without id or reference: %w", w.ID, ErrWebhookMalformed)
	case known && Status(r.Status) != want:
		return WebhookEvent{}, fmt.Errorf("decode event %s: %s with refund status %q: %w", w.ID, w.Type, r.Status, ErrWebhookMalformed)
	}
	ev.Refund = Refund{
		ProviderRefundID: r.ID,
		Reference:        r.Reference,
		PaymentRef:       r.Payment,
		AmountMinor:      r.Amount,
		Currency:         r.Currency,
		Status:           Status(r.Status),
		Reason:           r.Reason,
		Raw:              w.Refund,
	}
	return ev, nil
}
