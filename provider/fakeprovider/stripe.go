package fakeprovider

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/fencekit/fencekit/provider"
)

// With APIStripe the server speaks the part of Stripe's API that
// provider/stripe uses, with Stripe's words and shapes
// (https://docs.stripe.com/api): form-encoded requests with a bearer key,
// answers and errors in Stripe's JSON, Stripe's signed events.
//
//	POST /v1/refunds                 payment_intent or charge, amount, metadata[fencekit_operation_key]; Idempotency-Key
//	GET  /v1/refunds                 ?payment_intent= or ?charge=, limit, starting_after: newest first, paged
//	GET  /v1/refunds/{id}            a refund, or 404 resource_missing
//	GET  /v1/payment_intents/{id}    a payment intent (amount_received, currency)
//	GET  /v1/charges/{id}            a charge (amount_captured, amount_refunded, currency)
//
// A payment is a PaymentIntent (pi_…, with a charge ch_… of the same suffix)
// or a Charge (ch_…, py_…). A refund is in its payment's currency (it names
// none); its status is succeeded, pending (requires_action when scripted,
// Fault.RequiresAction), or failed: declined, or reversed after it succeeded
// (Stripe reports both as failed, with a failure_reason). Replays carry
// Idempotent-Replayed: true. Errors: 429 rate_limit, 5xx api_error, 400
// idempotency_error for a key held with other parameters, 409
// idempotency_key_in_use, 400 charge_already_refunded, 400 on param amount
// for more than is left, 400 resource_missing for a payment it does not
// have, 400 with the scripted code for a Fault.Reject.
//
// Webhooks are events of stripego.APIVersion signed in Stripe-Signature
// with stripe-go's webhook package: refund.created when a refund executes
// (then charge.refunded, about its charge), refund.updated when a pending
// one succeeds, refund.failed when one is declined or reversed.
//
// Like fencekit's API, it refuses what a faithful client never sends: a
// refund without an Idempotency-Key, or whose key is not its metadata's
// operation key (the attempt never crosses the seam), and parameters
// provider/stripe does not send (parameter_unknown).

// anyStripePayment is what AnyPayment takes an unknown payment to have
// captured, with APIStripe: its first read comes before any refund, so no
// refund's amount can say.
const anyStripePayment = 1_000_000_00

// stripeMetadataKey is provider/stripe's metadata field for the operation
// key (the fake does not import the adapter it tests).
const stripeMetadataKey = "fencekit_operation_key"

type stripeWire struct{}

func (stripeWire) register(s *Server) {
	s.mux.HandleFunc("POST /v1/refunds", s.stripeCreate)
	s.mux.HandleFunc("GET /v1/refunds", s.stripeList)
	s.mux.HandleFunc("GET /v1/refunds/{id}", s.stripeGet)
	s.mux.HandleFunc("GET /v1/payment_intents/{id}", s.stripePayment)
	s.mux.HandleFunc("GET /v1/charges/{id}", s.stripePayment)
}

// stripeError is Stripe's error body.
func stripeError(status int, typ stripego.ErrorType, code stripego.ErrorCode, param, message string) (int, []byte) {
	e := map[string]any{"type": typ, "message": message}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	return status, mustJSON(map[string]any{"error": e})
}

func (stripeWire) refusal(why refusal) (int, []byte) {
	const invalid = stripego.ErrorTypeInvalidRequest
	switch why.kind {
	case refusedClosed:
		return stripeError(http.StatusServiceUnavailable, stripego.ErrorTypeAPI, "", "", "The server is closing.")
	case refusedRateLimited:
		return stripeError(http.StatusTooManyRequests, invalid, stripego.ErrorCodeRateLimit, "",
			"Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.")
	case refusedServerError:
		return stripeError(why.status, stripego.ErrorTypeAPI, "", "", "Something went wrong on Stripe's end.")
	case refusedKeyParams:
		return stripeError(http.StatusBadRequest, stripego.ErrorTypeIdempotency, "", "",
			fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", why.key))
	case refusedKeyInUse:
		return stripeError(http.StatusConflict, stripego.ErrorTypeIdempotency, stripego.ErrorCodeIdempotencyKeyInUse, "",
			"There is currently another in-progress request using this Idempotency Key (that probably means you submitted twice, and the other request is still going through): "+why.key)
	case refusedRejected:
		return stripeError(http.StatusBadRequest, invalid, stripego.ErrorCode(why.code), "", "The refund was refused.")
	case refusedNoPayment:
		param := "payment_intent"
		if !strings.HasPrefix(why.payment, "pi_") {
			param = "charge"
		}
		return stripeError(http.StatusBadRequest, invalid, stripego.ErrorCodeResourceMissing, param, fmt.Sprintf("No such %s: '%s'", param, why.payment))
	case refusedAlreadyRefunded:
		return stripeError(http.StatusBadRequest, invalid, stripego.ErrorCodeChargeAlreadyRefunded, "", fmt.Sprintf("Charge %s has already been refunded.", chargeOf(why.payment)))
	case refusedExceeds:
		return stripeError(http.StatusBadRequest, invalid, "", "amount",
			fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", why.amount, why.left))
	case refusedCurrency: // never: a Stripe refund names no currency
	}
	return stripeError(http.StatusBadRequest, invalid, "", "", why.detail)
}

func (stripeWire) replayHeader() string { return "Idempotent-Replayed" }

// chargeOf is the charge of a payment reference: a PaymentIntent's is the
// charge with its suffix.
func chargeOf(ref string) string {
	if id, ok := strings.CutPrefix(ref, "pi_"); ok {
		return "ch_" + id
	}
	return ref
}

// paymentRefs are the references a payment goes by: its charge, and its
// payment intent when it is one.
func paymentRefs(ref string) []string {
	if strings.HasPrefix(ref, "pi_") {
		return []string{chargeOf(ref), ref}
	}
	return []string{ref}
}

// stripeRefund is a refund in Stripe's shape.
func stripeRefund(r *refund) map[string]any {
	status, failure := "succeeded", any(nil)
	switch r.Status {
	case provider.StatusPending:
		status = "pending"
		if r.requiresAction {
			status = "requires_action"
		}
	case provider.StatusRejected:
		status, failure = "failed", r.Reason
		if r.Reason == AsyncDeclineReason {
			failure = "declined"
		}
	case provider.StatusReversed:
		// A refund that fails after it succeeded: Stripe reverses its
		// balance transaction and reports it failed.
		status, failure = "failed", "expired_or_canceled_card"
	}
	var intent any
	if strings.HasPrefix(r.Payment, "pi_") {
		intent = r.Payment
	}
	return map[string]any{
		"id": r.ID, "object": "refund", "amount": r.Amount, "currency": strings.ToLower(r.Currency),
		"charge": chargeOf(r.Payment), "payment_intent": intent, "created": r.created.Unix(),
		"metadata": map[string]string{stripeMetadataKey: r.Reference}, "status": status, "failure_reason": failure,
		"reason": nil, "livemode": false,
	}
}

func (stripeWire) refund(_ *Server, r *refund) []byte { return mustJSON(stripeRefund(r)) }

func (stripeWire) events(r *refund, c change) []eventKind {
	switch c {
	case changeExecuted:
		return []eventKind{{typ: "refund.created"}, {typ: "charge.refunded", payment: true}}
	case changeSettled:
		return []eventKind{{typ: "refund.updated"}}
	}
	return []eventKind{{typ: "refund.failed"}} // declined, or reversed
}

func (stripeWire) eventBody(s *Server, id string, created time.Time, k eventKind, r *refund, p *payment) []byte {
	object := stripeRefund(r)
	if k.payment {
		object = stripeCharge(chargeOf(r.Payment), r.Payment, p)
	}
	return mustJSON(map[string]any{
		"id": id, "object": "event", "api_version": stripego.APIVersion, "created": created.Unix(), "type": k.typ,
		"livemode": false, "pending_webhooks": 1, "request": map[string]any{"id": nil, "idempotency_key": r.Reference},
		"data": map[string]any{"object": object},
	})
}

func (stripeWire) sign(secret []byte, t time.Time, body []byte) (string, string) {
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: string(secret), Timestamp: t})
	return "Stripe-Signature", signed.Header
}

// stripeCharge is payment p, whose reference is ref, as the charge id.
func stripeCharge(id, ref string, p *payment) map[string]any {
	var intent any
	if strings.HasPrefix(ref, "pi_") {
		intent = ref
	}
	return map[string]any{
		"id": id, "object": "charge", "amount": p.amount, "amount_captured": p.amount, "amount_refunded": p.refunded,
		"currency": strings.ToLower(p.currency), "captured": true, "refunded": p.refunded == p.amount,
		"payment_intent": intent, "status": "succeeded", "livemode": false,
	}
}

// stripeAuthorized answers 401 unless the request carries a bearer key, as
// Stripe does.
func stripeAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && key != "" {
		return true
	}
	writeBody(w)(stripeError(http.StatusUnauthorized, stripego.ErrorTypeInvalidRequest, "", "",
		"You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth."))
	return false
}

// stripeParams reads a form (a POST's body, a GET's query), refusing any
// parameter outside allowed (metadata[…] included when allowed holds
// "metadata") as Stripe does: 400 parameter_unknown.
func stripeParams(w http.ResponseWriter, form url.Values, allowed ...string) bool {
	for name := range form {
		base, _, _ := strings.Cut(name, "[")
		if !slices.Contains(allowed, base) {
			writeBody(w)(stripeError(http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeParameterUnknown, name,
				"Received unknown parameter: "+name))
			return false
		}
	}
	return true
}

// stripeCreate serves POST /v1/refunds.
func (s *Server) stripeCreate(w http.ResponseWriter, r *http.Request) {
	if !stripeAuthorized(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		writeBody(w)(stripeError(http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, "", "", "Invalid request body: "+err.Error()))
		return
	}
	form := r.PostForm
	if !stripeParams(w, form, "amount", "payment_intent", "charge", "metadata") {
		return
	}
	bad := func(param, message string) {
		writeBody(w)(stripeError(http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeParameterInvalidEmpty, param, message))
	}
	p := params{Payment: form.Get("payment_intent"), Reference: form.Get("metadata[" + stripeMetadataKey + "]")}
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	key := r.Header.Get("Idempotency-Key")
	switch {
	case (p.Payment == "") == (form.Get("charge") == ""):
		bad("payment_intent", "Exactly one of payment_intent or charge is required.")
		return
	case err != nil || amount <= 0:
		bad("amount", "fakeprovider: a positive amount is required (the fake refunds no rest of a payment)")
		return
	case key == "":
		bad("Idempotency-Key", "fakeprovider: an Idempotency-Key header is required")
		return
	case key != p.Reference:
		bad("metadata", "fakeprovider: the Idempotency-Key must equal metadata["+stripeMetadataKey+"], the operation key")
		return
	}
	if p.Payment == "" {
		p.Payment = form.Get("charge")
	}
	p.Amount = amount
	s.deliver(w, s.process(key, p))
}

// stripeList serves GET /v1/refunds: the refunds of a payment intent or a
// charge (or all of them), visible to lookups, newest first, paged by limit
// and starting_after.
func (s *Server) stripeList(w http.ResponseWriter, r *http.Request) {
	if !stripeAuthorized(w, r) {
		return
	}
	q := r.URL.Query()
	if !stripeParams(w, q, "payment_intent", "charge", "limit", "starting_after") {
		return
	}
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeBody(w)(stripeError(http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeParameterInvalidInteger, "limit",
				"Limit can range between 1 and 100."))
			return
		}
		limit = n
	}
	intent, ch, after := q.Get("payment_intent"), q.Get("charge"), q.Get("starting_after")
	s.mu.Lock()
	var data []any
	started, more := after == "", false
	for i := len(s.refunds) - 1; i >= 0; i-- {
		x := s.refunds[i]
		if x.hidden || (intent != "" && x.Payment != intent) || (ch != "" && chargeOf(x.Payment) != ch) {
			continue
		}
		if !started {
			started = x.ID == after
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		data = append(data, stripeRefund(x))
	}
	s.mu.Unlock()
	if data == nil {
		data = []any{}
	}
	writeBody(w)(http.StatusOK, mustJSON(map[string]any{"object": "list", "data": data, "has_more": more, "url": "/v1/refunds"}))
}

// stripeGet serves GET /v1/refunds/{id}.
func (s *Server) stripeGet(w http.ResponseWriter, r *http.Request) {
	if !stripeAuthorized(w, r) || !stripeParams(w, r.URL.Query()) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	i := slices.IndexFunc(s.refunds, func(x *refund) bool { return x.ID == id && !x.hidden })
	var body []byte
	if i >= 0 {
		body = mustJSON(stripeRefund(s.refunds[i]))
	}
	s.mu.Unlock()
	if i < 0 {
		writeBody(w)(stripeError(http.StatusNotFound, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing, "id", "No such refund: '"+id+"'"))
		return
	}
	writeBody(w)(http.StatusOK, body)
}

// stripePayment serves GET /v1/payment_intents/{id} and /v1/charges/{id}:
// the payment as its refunds left it. With AnyPayment, a payment it does
// not know is taken as captured (anyStripePayment in PaymentCurrency).
func (s *Server) stripePayment(w http.ResponseWriter, r *http.Request) {
	if !stripeAuthorized(w, r) || !stripeParams(w, r.URL.Query()) {
		return
	}
	id := r.PathValue("id")
	intents := strings.HasPrefix(r.URL.Path, "/v1/payment_intents/")
	s.mu.Lock()
	ref, p := id, s.payments[id]
	if !intents && p == nil {
		// A payment intent's charge: ch_X of pi_X.
		if pi := "pi_" + strings.TrimPrefix(id, "ch_"); s.payments[pi] != nil {
			ref, p = pi, s.payments[pi]
		}
	}
	if p == nil && s.cfg.AnyPayment && (intents == strings.HasPrefix(id, "pi_")) {
		p = s.anyPayment(id, 0, "")
	}
	var body []byte
	switch {
	case p == nil:
	case intents:
		body = mustJSON(map[string]any{"id": id, "object": "payment_intent", "amount": p.amount, "amount_received": p.amount,
			"currency": strings.ToLower(p.currency), "status": "succeeded", "latest_charge": chargeOf(id), "livemode": false})
	default:
		body = mustJSON(stripeCharge(id, ref, p))
	}
	s.mu.Unlock()
	if body == nil {
		kind := "charge"
		if intents {
			kind = "payment_intent"
		}
		writeBody(w)(stripeError(http.StatusNotFound, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing, "id", fmt.Sprintf("No such %s: '%s'", kind, id)))
		return
	}
	writeBody(w)(http.StatusOK, body)
}

// anyPayment takes ref as a captured payment (Config.AnyPayment): for
// amount in currency with fencekit's API, for anyStripePayment in
// PaymentCurrency with Stripe's. s.mu is held.
func (s *Server) anyPayment(ref string, amount int64, currency string) *payment {
	if s.cfg.API == APIStripe {
		amount, currency = anyStripePayment, s.cfg.PaymentCurrency
	}
	p := &payment{amount: amount, currency: currency}
	s.payments[ref] = p
	return p
}
