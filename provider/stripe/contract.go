package stripe

import (
	"time"

	"github.com/fencekit/fencekit/provider"
)

// Stripe's contract, as its documentation states it. Each figure says where.
const (
	// KeyRetention is how long Stripe keeps an idempotency key: "You can
	// remove keys from the system automatically after they're at least 24
	// hours old. We generate a new request if a key is reused after the
	// original is pruned." (https://docs.stripe.com/api/idempotent_requests)
	// A Config may declare less (a test double that forgets sooner), never
	// more.
	KeyRetention = 24 * time.Hour

	// DefaultLookupLag is how long a refund whose answer was lost is given
	// before "not found" means anything. Stripe documents no lag for its
	// list and retrieve endpoints; the lag covers the request itself, which
	// may still be executing at Stripe after the worker's timeout ("If ...
	// the request conflicts with another that's executing concurrently",
	// https://docs.stripe.com/api/idempotent_requests). Inside the key's
	// window a resend after it is safe anyway (Stripe replays the first
	// answer, or answers 409 while the first still runs), so the figure
	// trades a faster recovery against a wasted lookup, not money.
	DefaultLookupLag = time.Minute

	// MetadataKey is the refund's metadata field that carries the
	// operation key: Stripe offers no lookup of a refund by idempotency key,
	// but every refund keeps the metadata it was created with
	// (https://docs.stripe.com/api/metadata) and is listed with it.
	MetadataKey = "fencekit_operation_key"

	// listLimit is the page size of a refund list, Stripe's most ("Limit
	// can range between 1 and 100", https://docs.stripe.com/api/refunds/list).
	listLimit = 100
	// maxListed bounds the refunds one lookup reads: a payment with more
	// is not read to its end, and the lookup says nothing (an unknown
	// outcome) rather than "not found".
	maxListed = 1000
)

// Capabilities is Stripe's contract as fencekit's worker reads it; the
// worker's decisions (worker/internal/decide) follow from it and from the
// answers classified in this package (docs/providers.md has the table).
func (c *Client) Capabilities() provider.Capabilities {
	return provider.Capabilities{
		// The same key with the same parameters is executed at most once
		// while Stripe keeps the key: "Stripe's idempotency works by saving
		// the resulting status code and body of the first request made for
		// any given idempotency key, regardless of whether it succeeds or
		// fails. Subsequent requests with the same key return the same
		// result, including 500 errors." Other parameters under the same
		// key are refused: "The idempotency layer compares incoming
		// parameters to those of the original request and errors if
		// they're not the same" (https://docs.stripe.com/api/idempotent_requests).
		SafeResend: true,
		// 24 hours at least, then a reuse is a new request (KeyRetention):
		// a key first used six months ago protects nothing.
		KeyRetention: c.retention,
		// No lookup by the key: Stripe has none by idempotency key, and
		// none by metadata (the list filters are charge, payment_intent and
		// created, https://docs.stripe.com/api/refunds/list; refunds are not
		// among the objects the Search API covers,
		// https://docs.stripe.com/search#supported-query-fields-for-each-resource).
		LookupByReference: false,
		// The refunds of a payment intent or a charge, newest first, paged
		// (https://docs.stripe.com/api/refunds/list), matched by
		// metadata[fencekit_operation_key] (MetadataKey).
		ListByPayment: true,
		// A refund by its id (https://docs.stripe.com/api/refunds/retrieve),
		// asked only when the payment's list shows nothing for the key.
		LookupByRefundID: true,
		// DefaultLookupLag unless the Config says otherwise.
		LookupLag: c.lookupLag,
	}
}
