package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fencekit/fencekit/money"
)

// What a provider call can answer besides success. Every error from Refund
// matches (errors.Is) exactly one of these; match them with errors.Is and
// RejectedError with errors.As.
var (
	// ErrOutcomeUnknown means no trustworthy answer arrived: a timeout, a
	// reset, a cut or truncated response, a 5xx, or an answer this client
	// cannot read. For Refund, the refund may or may not have executed, and
	// may still execute later: reconcile with the same operation key; never
	// resend blindly and never mark the job failed. For Lookup, nothing was
	// learnt.
	ErrOutcomeUnknown = errors.New("provider outcome unknown")

	// ErrRateLimited means the provider refused the request before
	// processing it: nothing executed. Retry later with the same key.
	ErrRateLimited = errors.New("provider rate limited the request")

	// ErrKeyParamsMismatch means the provider already holds this operation
	// key with different parameters. Nothing executed for this request, but
	// something may have executed for the key: send the job to manual
	// review. Never mint a new key to get past it.
	ErrKeyParamsMismatch = errors.New("idempotency key reused with different parameters")

	// ErrKeyInUse means another request with the same key is in flight at
	// the provider; this one was not processed. The other one may execute:
	// reconcile later, do not resend now.
	ErrKeyInUse = errors.New("idempotency key in use by a concurrent request")

	// ErrRejected means the provider definitively refused the refund (not
	// refundable, invalid): nothing executed and a resend gets the same
	// answer. Fail the job with the reason. The error is a *RejectedError.
	ErrRejected = errors.New("refund rejected")

	// ErrAlreadyRefunded means the provider answered "already refunded" or
	// "exceeds refundable amount", or reported this key's refund as
	// reversed. After a send that may have executed this is evidence that
	// our refund went through, not a failure: reconcile.
	ErrAlreadyRefunded = errors.New("payment already refunded")

	// ErrMismatch means the provider's answer names a different reference,
	// payment, amount or currency than the request. Something was executed or
	// reported that was not asked for: never complete the job on it and
	// never resend; send it to manual review with the answer as evidence.
	ErrMismatch = errors.New("provider answer does not match the request")

	// ErrInvalidRequest means the request failed local checks (a missing
	// field, a bad base URL) and was not sent, or the provider refused its
	// shape before processing it (Stripe's parameter_* errors). It is a bug
	// in the caller or its configuration, not an answer about the refund:
	// it says nothing about it.
	ErrInvalidRequest = errors.New("invalid refund request")

	// ErrNoLookup means the provider offers no lookup for the fields of the
	// query; nothing was asked.
	ErrNoLookup = errors.New("no lookup offered for the query")
)

// Sentinels returns the errors above, in the order they are declared: every
// error from Client.Refund matches exactly one of them.
func Sentinels() []error {
	return []error{ErrOutcomeUnknown, ErrRateLimited, ErrKeyParamsMismatch, ErrKeyInUse, ErrRejected,
		ErrAlreadyRefunded, ErrMismatch, ErrInvalidRequest, ErrNoLookup}
}

// RejectedError is a definitive rejection. It matches ErrRejected.
type RejectedError struct {
	Code   string // the provider's error code, e.g. payment_not_found
	Reason string // the provider's message
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("refund rejected: %s: %s", e.Code, e.Reason)
}

func (e *RejectedError) Unwrap() error { return ErrRejected }

// Verify checks that a provider's answer r is about req: same reference
// (operation key), payment, amount and currency. A non-nil error wraps
// ErrMismatch and lists every difference. Workers call it before completing
// a job on a Refund, including one found by Lookup.
func Verify(req RefundRequest, r Refund) error {
	var diffs []string
	if r.Reference != req.OperationKey {
		diffs = append(diffs, fmt.Sprintf("reference %q, want %q", r.Reference, req.OperationKey))
	}
	if r.PaymentRef != req.PaymentRef {
		diffs = append(diffs, fmt.Sprintf("payment %q, want %q", r.PaymentRef, req.PaymentRef))
	}
	if r.AmountMinor != req.AmountMinor {
		// In major units with the request's currency, as people read them
		// ("amount 30.00 EUR, want 3.00 EUR"), never minor units.
		diffs = append(diffs, fmt.Sprintf("amount %s %s, want %s %s", money.Format(r.AmountMinor, req.Currency), req.Currency,
			money.Format(req.AmountMinor, req.Currency), req.Currency))
	}
	if !strings.EqualFold(r.Currency, req.Currency) {
		diffs = append(diffs, fmt.Sprintf("currency %q, want %q", r.Currency, req.Currency))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("verify refund: %s: %w", strings.Join(diffs, ", "), ErrMismatch)
	}
	return nil
}

func (req RefundRequest) validate() error {
	switch {
	case req.OperationKey == "":
		return fmt.Errorf("validate refund: no operation key: %w", ErrInvalidRequest)
	case req.PaymentRef == "":
		return fmt.Errorf("validate refund: no payment: %w", ErrInvalidRequest)
	case req.AmountMinor <= 0:
		return fmt.Errorf("validate refund: amount %d: %w", req.AmountMinor, ErrInvalidRequest)
	case req.Currency == "":
		return fmt.Errorf("validate refund: no currency: %w", ErrInvalidRequest)
	}
	return nil
}
