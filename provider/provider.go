// Package provider is fencekit's seam to a payment provider: the refund a
// worker asks for, the answers it can get, and what each answer lets it
// conclude (see the errors in this package).
//
// The only identity that crosses this seam is the operation key. The fencing
// attempt never does: two attempts of one job are one refund, and there is no
// field that could carry an attempt to the provider.
//
// The provider also pushes each change of a refund's status as a signed
// webhook; WebhookSignatureHeader documents the format, SignWebhook signs one
// and VerifyWebhook checks one.
package provider

import (
	"context"
	"time"
)

// RefundRequest is one refund as the provider sees it. OperationKey is sent
// as both the idempotency key and the merchant reference, so resends and
// lookups of the same job name the same refund.
type RefundRequest struct {
	OperationKey string
	PaymentRef   string
	AmountMinor  int64
	Currency     string
}

// Status is the state of a refund as the provider reports it.
type Status string

const (
	// StatusSucceeded: the money moved.
	StatusSucceeded Status = "succeeded"
	// StatusPending: the provider accepted the refund but has not settled
	// it; it may still succeed or be rejected. Never complete a job on it.
	StatusPending Status = "pending"
	// StatusRejected: the provider will not execute this refund.
	StatusRejected Status = "rejected"
	// StatusReversed: the refund succeeded and was reversed afterwards (the
	// money came back to the merchant). It is news about a refund that did
	// execute: never a reason to refund again, and never a change to a job
	// already settled (record it and raise an alert).
	StatusReversed Status = "reversed"
	// StatusNotFound is what a reconcile concludes when a lookup returns
	// nothing. No provider answer carries it, and it is not proof that no
	// refund exists: lookups lag, and an old request may still be queued.
	StatusNotFound Status = "not_found"
)

// Refund is a provider's answer about one refund.
type Refund struct {
	ProviderRefundID string
	Reference        string // the operation key the refund was sent with
	PaymentRef       string
	AmountMinor      int64
	Currency         string
	Status           Status
	Reason           string // why it was rejected, when it was
	Raw              []byte // the provider's response body, for the evidence log
}

// Query asks about the refund of one operation key. The key is the
// question: the client looks the refund up by it (the merchant reference),
// and by listing the payment's refunds, as the provider offers. A refund id
// is asked only when those find nothing, or when the provider offers no
// lookup by the key: one that names a refund the provider does not know
// (an id from an unverified source, say) never hides the key's refund.
type Query struct {
	OperationKey string
	PaymentRef   string
	// ProviderRefundID is a refund id the provider is said to have given
	// the key: the job's, learnt from a verified answer, or one the
	// observation log holds.
	ProviderRefundID string
}

// Capabilities is what a provider's contract guarantees. Each provider
// declares them explicitly; the worker decides from them whether it may
// resend and how long a lookup must be given before "not found" means
// anything.
type Capabilities struct {
	// SafeResend: the same key with the same parameters is executed at most
	// once while the key is retained, so resending it is safe.
	SafeResend bool
	// KeyRetention is how long the provider remembers a key after its first
	// use. After that a resend executes again.
	KeyRetention time.Duration
	// LookupByReference, LookupByRefundID and ListByPayment are the lookups
	// the provider offers. There may be none by idempotency key.
	LookupByReference bool
	LookupByRefundID  bool
	ListByPayment     bool
	// LookupLag is how long a fresh refund may be invisible to lookups.
	LookupLag time.Duration
}

// Client talks to one payment provider.
type Client interface {
	// Capabilities returns what the provider's contract guarantees.
	Capabilities() Capabilities

	// Refund sends req and returns the provider's answer, verified against
	// req (see Verify). A nil error means StatusSucceeded or StatusPending;
	// any other answer is an error matching one of this package's sentinels,
	// which says what the caller may conclude. The returned Refund carries
	// the raw response (if any) even with an error, for the evidence log.
	// ctx's deadline is the provider timeout.
	Refund(ctx context.Context, req RefundRequest) (Refund, error)

	// Lookup returns the refunds the provider reports for q's operation key
	// (see Query for the order of its lookups). An empty result means
	// nothing was found, which is not proof that no refund exists.
	// Results are not verified; call Verify before acting on one. A failed
	// lookup says nothing about the refund: it returns ErrNoLookup,
	// ErrRateLimited, ErrInvalidRequest (a misconfigured client) or
	// ErrOutcomeUnknown (nothing was learnt).
	Lookup(ctx context.Context, q Query) ([]Refund, error)
}
