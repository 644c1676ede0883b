package fakeprovider

import (
	"fmt"
	"net/http"
	"time"

	"github.com/fencekit/fencekit/provider"
)

// The APIs a Server speaks (Config.API).
const (
	// APIFencekit is the API provider.HTTPClient expects: JSON bodies,
	// lookups by reference, fencekit's signed webhooks.
	APIFencekit = "fencekit"
	// APIStripe is Stripe's refunds API, as provider/stripe speaks it: see
	// stripe.go.
	APIStripe = "stripe"
)

// wire is an API the server speaks: its routes, and how its answers and its
// webhooks look. The state behind every API is the same (payments, keys,
// refunds, faults, events); only the words differ.
type wire interface {
	// register adds the API's routes to s.mux.
	register(s *Server)
	// refund is r as an answer shows it. s.mu is held.
	refund(s *Server, r *refund) []byte
	// refusal is the answer to a request refused (or spoilt) as why says.
	refusal(why refusal) (int, []byte)
	// replayHeader names the header that marks an answer replayed under
	// its key, "" for none.
	replayHeader() string
	// events are the webhook events a change of a refund becomes, in order.
	events(r *refund, c change) []eventKind
	// eventBody is the body of the event id of kind k about r (and its
	// payment p), created at created. s.mu is held.
	eventBody(s *Server, id string, created time.Time, k eventKind, r *refund, p *payment) []byte
	// sign returns the signature header of body sent at t with secret.
	sign(secret []byte, t time.Time, body []byte) (name, value string)
}

var wires = map[string]wire{APIFencekit: fencekitWire{}, APIStripe: stripeWire{}}

// refusalKind says why a request is refused.
type refusalKind int

const (
	refusedInvalid         refusalKind = iota // the request cannot be read (detail)
	refusedClosed                             // the server is closing
	refusedRateLimited                        // 429 before processing
	refusedServerError                        // a 5xx (status), before processing or after it (processed)
	refusedKeyParams                          // key held with other parameters
	refusedKeyInUse                           // key's first request still in flight
	refusedRejected                           // a scripted definitive rejection (code)
	refusedNoPayment                          // no such payment
	refusedCurrency                           // the payment is in another currency (detail)
	refusedAlreadyRefunded                    // the payment is fully refunded
	refusedExceeds                            // more than is left to refund (amount, left)
)

// refusal is why a request is refused, with what the answer may say.
type refusal struct {
	kind         refusalKind
	status       int    // refusedServerError's status
	processed    bool   // refusedServerError after processing
	code, detail string // refusedRejected's code; refusedInvalid's and refusedCurrency's detail
	key, payment string
	amount, left int64
}

// change is what happened to a refund.
type change int

const (
	changeExecuted change = iota // created, succeeded or pending
	changeSettled                // pending, then succeeded
	changeDeclined               // pending, then rejected
	changeReversed               // succeeded, then reversed
)

// eventKind is one webhook event a change becomes: its type, and whether it
// is about the payment as a whole rather than the refund.
type eventKind struct {
	typ     provider.EventType
	payment bool
}

// fencekitWire is APIFencekit.
type fencekitWire struct{}

func (fencekitWire) register(s *Server) {
	s.mux.HandleFunc("POST /v1/refunds", s.create)
	s.mux.HandleFunc("GET /v1/refunds", s.list)
	s.mux.HandleFunc("GET /v1/refunds/{id}", s.get)
}

func (fencekitWire) refund(_ *Server, r *refund) []byte { return mustJSON(r) }

func (fencekitWire) refusal(why refusal) (int, []byte) {
	switch why.kind {
	case refusedClosed:
		return errorBody(http.StatusServiceUnavailable, "unavailable", "server closed")
	case refusedRateLimited:
		return errorBody(http.StatusTooManyRequests, "rate_limited", "too many requests")
	case refusedServerError:
		if why.processed {
			return errorBody(why.status, "internal_error", "failed after processing")
		}
		return errorBody(why.status, "internal_error", "failed before processing")
	case refusedKeyParams:
		return errorBody(http.StatusConflict, "idempotency_params_mismatch", "key was used with other parameters")
	case refusedKeyInUse:
		return errorBody(http.StatusConflict, "idempotency_key_in_use", "a request with this key is in progress")
	case refusedRejected:
		return errorBody(http.StatusUnprocessableEntity, why.code, "rejected by the provider")
	case refusedNoPayment:
		return errorBody(http.StatusUnprocessableEntity, "payment_not_found", "no such payment")
	case refusedCurrency:
		return errorBody(http.StatusUnprocessableEntity, "currency_mismatch", "payment is in "+why.detail)
	case refusedAlreadyRefunded:
		return errorBody(http.StatusUnprocessableEntity, "already_refunded", "payment is fully refunded")
	case refusedExceeds:
		return errorBody(http.StatusUnprocessableEntity, "exceeds_refundable_amount", fmt.Sprintf("refundable amount is %d", why.left))
	}
	return errorBody(http.StatusBadRequest, "invalid_request", why.detail)
}

func (fencekitWire) replayHeader() string { return "" }

func (fencekitWire) events(r *refund, c change) []eventKind {
	typ := provider.EventRefundSucceeded
	switch {
	case c == changeExecuted && r.Status == provider.StatusPending:
		typ = provider.EventRefundPending
	case c == changeDeclined:
		typ = provider.EventRefundFailed
	case c == changeReversed:
		typ = provider.EventRefundReversed
	}
	return []eventKind{{typ: typ}}
}

func (fencekitWire) eventBody(_ *Server, id string, created time.Time, k eventKind, r *refund, _ *payment) []byte {
	return mustJSON(struct {
		ID      string             `json:"id"`
		Type    provider.EventType `json:"type"`
		Created int64              `json:"created"`
		Refund  *refund            `json:"refund"`
	}{id, k.typ, created.Unix(), r})
}

func (fencekitWire) sign(secret []byte, t time.Time, body []byte) (string, string) {
	return provider.WebhookSignatureHeader, provider.SignWebhook(secret, t, body)
}
