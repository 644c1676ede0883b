package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/fencekit/fencekit/provider"
)

// sendError classifies the error of a refund's creation: every result
// matches exactly one of package provider's sentinels. What it does not
// recognise is an unknown outcome, the safe reading of an answer nobody can
// classify. Codes and statuses are Stripe's
// (https://docs.stripe.com/api/errors, https://docs.stripe.com/error-codes).
func sendError(err error) error {
	var se *stripego.Error
	if !errors.As(err, &se) {
		// No answer: a timeout, a reset, a cut or truncated body, an
		// answer that is not Stripe's JSON. The refund may have executed.
		return fmt.Errorf("%w: %w", provider.ErrOutcomeUnknown, err)
	}
	what := describe(se)
	switch {
	case se.HTTPStatusCode >= 500:
		// Stripe saves and replays even a 500 under the key: whatever ran
		// may have executed, whatever the body says.
		return fmt.Errorf("%s: %w", what, provider.ErrOutcomeUnknown)
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		// Refused before processing (rate limited, or a lock timeout on
		// the payment): nothing executed (https://docs.stripe.com/rate-limits).
		return fmt.Errorf("%s: %w", what, provider.ErrRateLimited)
	case se.Code == stripego.ErrorCodeIdempotencyKeyInUse, se.HTTPStatusCode == http.StatusConflict:
		// "The request conflicts with another request (perhaps due to
		// using the same idempotent key)": this one was not processed; the
		// other may execute.
		return fmt.Errorf("%s: %w", what, provider.ErrKeyInUse)
	case se.Type == stripego.ErrorTypeIdempotency:
		// "Idempotency errors occur when an Idempotency-Key is re-used on
		// a request that does not match the first request's API endpoint
		// and parameters": something may have executed under the key.
		return fmt.Errorf("%s: %w", what, provider.ErrKeyParamsMismatch)
	case se.Code == stripego.ErrorCodeChargeAlreadyRefunded, se.Code == stripego.ErrorCodeAmountTooLarge,
		se.Type == stripego.ErrorTypeInvalidRequest && se.Param == "amount" && se.Code != stripego.ErrorCodeAmountTooSmall:
		// Already refunded, or more than is left to refund: after a send
		// that may have executed, evidence that ours did.
		return fmt.Errorf("%s: %w", what, provider.ErrAlreadyRefunded)
	case strings.HasPrefix(string(se.Code), "parameter_"):
		// Stripe refused the request's shape: this client's bug, not an
		// answer about the refund.
		return fmt.Errorf("%s: %w", what, provider.ErrInvalidRequest)
	case se.HTTPStatusCode == http.StatusUnauthorized, se.HTTPStatusCode == http.StatusForbidden:
		// The key was refused. Nothing was processed, but this is no
		// answer about the refund: the job waits for a key that works.
		return fmt.Errorf("%s: Stripe refused the API key: %w", what, provider.ErrOutcomeUnknown)
	case se.HTTPStatusCode/100 == 4 && se.Code != "":
		// A definitive refusal with a reason (charge_disputed,
		// resource_missing for the payment, …): nothing executed.
		return &provider.RejectedError{Code: string(se.Code), Reason: se.Msg}
	}
	return fmt.Errorf("%s: %w", what, provider.ErrOutcomeUnknown)
}

// readError classifies the error of a read (a payment, a list, a refund):
// a 429 is ErrRateLimited, a payment Stripe does not have a
// *provider.RejectedError, a refused shape ErrInvalidRequest, anything
// else ErrOutcomeUnknown: nothing was learnt.
func readError(err error, what string) error {
	var se *stripego.Error
	switch {
	case !errors.As(err, &se):
		return fmt.Errorf("read %s: %w: %w", what, provider.ErrOutcomeUnknown, err)
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%s: %w", describe(se), provider.ErrRateLimited)
	case what == "payment" && missing(err):
		// Not a rejection of the refund: the key sent nothing, and on a
		// resend an earlier send may have executed (a key of another
		// account, a test key for a live payment): an operator looks, the
		// job is not failed.
		return fmt.Errorf("the payment is not known to this Stripe account (%s), so nothing was sent: check the account of the key and the payment: %w",
			describe(se), provider.ErrInvalidRequest)
	case strings.HasPrefix(string(se.Code), "parameter_"):
		return fmt.Errorf("%s: %w", describe(se), provider.ErrInvalidRequest)
	}
	return fmt.Errorf("%s: %w", describe(se), provider.ErrOutcomeUnknown)
}

// missing reports whether err is Stripe's 404 resource_missing.
func missing(err error) bool {
	var se *stripego.Error
	return errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound && se.Code == stripego.ErrorCodeResourceMissing
}

// describe names a Stripe error by its status, type, code and message.
func describe(se *stripego.Error) string {
	s := fmt.Sprintf("Stripe answered %d %s", se.HTTPStatusCode, se.Type)
	if se.Code != "" {
		s += " " + string(se.Code)
	}
	if se.Param != "" {
		s += " (param " + se.Param + ")"
	}
	if se.Msg != "" {
		s += ": " + se.Msg
	}
	return s
}

// errorBody is the raw body of Stripe's error answer, for the evidence log.
func errorBody(err error) []byte {
	var se *stripego.Error
	if errors.As(err, &se) && se.LastResponse != nil {
		return se.LastResponse.RawJSON
	}
	return nil
}

// rawOf is the raw body of an answer, when stripe-go kept it.
func rawOf(re *stripego.Refund) []byte {
	if re != nil && re.LastResponse != nil {
		return re.LastResponse.RawJSON
	}
	return nil
}

// refundOf reads a Stripe refund. The payment reference is the one of the
// request's kind (its payment intent or its charge); for a refund whose
// request is unknown (a webhook's, a lookup by id), the payment intent when
// there is one. raw is the answer's body; nil means the refund as decoded.
// A status outside Stripe's documented five is ErrOutcomeUnknown.
func refundOf(re *stripego.Refund, kind paymentKind, raw []byte) (provider.Refund, error) {
	r := provider.Refund{
		ProviderRefundID: re.ID,
		Reference:        re.Metadata[MetadataKey],
		AmountMinor:      re.Amount,
		Currency:         string(re.Currency),
		Raw:              raw,
	}
	intent, ch := "", ""
	if re.PaymentIntent != nil {
		intent = re.PaymentIntent.ID
	}
	if re.Charge != nil {
		ch = re.Charge.ID
	}
	switch {
	case kind == charge:
		r.PaymentRef = ch
	case kind == paymentIntent || intent != "":
		r.PaymentRef = intent
	default:
		r.PaymentRef = ch
	}
	status, ok := statusOf(re.Status)
	if !ok {
		return provider.Refund{}, fmt.Errorf("read refund %s: status %q: %w", re.ID, re.Status, provider.ErrOutcomeUnknown)
	}
	r.Status = status
	if status == provider.StatusRejected {
		r.Reason = string(re.Status)
		if re.FailureReason != "" {
			r.Reason += ": " + string(re.FailureReason)
		}
	}
	if r.Raw == nil {
		r.Raw, _ = json.Marshal(re) // a decoded refund always encodes
	}
	return r, nil
}

// statusOf maps Stripe's refund statuses (https://docs.stripe.com/api/refunds/object:
// "pending, requires_action, succeeded, failed, or canceled") to
// fencekit's. requires_action waits for the customer, so it is pending;
// failed and canceled are definitive. A refund can fail after it succeeded
// (its failure_balance_transaction then reverses the first one,
// https://docs.stripe.com/refunds#failed-refunds): it is still failed, and
// the worker weighs it against the evidence of its success.
func statusOf(s stripego.RefundStatus) (provider.Status, bool) {
	switch s {
	case stripego.RefundStatusSucceeded:
		return provider.StatusSucceeded, true
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		return provider.StatusPending, true
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		return provider.StatusRejected, true
	}
	return "", false
}
