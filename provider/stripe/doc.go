// Package stripe is fencekit's provider for Stripe's refunds, on Stripe's
// official Go client (github.com/stripe/stripe-go/v84): a provider.Client
// (Client), Stripe's contract as provider.Capabilities (Client.Capabilities,
// each figure citing Stripe's documentation), and Stripe's webhooks verified
// Stripe's way (Webhooks).
//
// A job's refund is created once per operation key: the key is the
// Idempotency-Key (never the attempt) and metadata[fencekit_operation_key],
// by which a reconcile finds the refund among its payment's (Stripe offers
// no lookup by idempotency key). The payment reference is a PaymentIntent
// (pi_…) or a Charge (ch_…, py_…). Before a refund is sent, the payment is
// read and the request's currency and amount checked against it: a Stripe
// refund takes no currency of its own.
//
// What each answer means for the job (package provider's sentinels; the
// worker decides from them, docs/providers.md has the table):
//
//	refund succeeded (verified: metadata key, payment, amount, currency)   nil, StatusSucceeded: complete
//	refund pending or requires_action                                       nil, StatusPending: reconcile later
//	refund failed or canceled                                               *RejectedError: fail
//	429 (rate limited, lock timeout): refused before processing            ErrRateLimited: send again later, same key
//	409, idempotency_key_in_use: the key's first request still runs        ErrKeyInUse: reconcile later
//	400 idempotency_error: the key was used with other parameters          ErrKeyParamsMismatch: manual review
//	charge_already_refunded, amount_too_large, an amount error             ErrAlreadyRefunded: evidence for reconcile
//	a timeout, a reset, a cut or truncated answer, a 5xx, 401/403          ErrOutcomeUnknown: reconcile, never a blind resend
//	another 4xx with a code (charge_disputed, resource_missing, …)          *RejectedError: fail
//	a parameter_* code: a request this client should not have sent         ErrInvalidRequest: manual review
//	an answer about another key, payment, amount or currency               ErrMismatch: manual review
//
// An answer replayed under the key (Idempotent-Replayed: true) is the first
// answer again and is classified the same way: a pending refund replayed
// stays pending, whatever it became since.
package stripe
