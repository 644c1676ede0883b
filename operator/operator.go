// Package operator is the operators' API to the refund queue: the manual
// review queue, a job's timeline, search, and the resolutions, verified with
// the provider and audited. The CLI (refundd jobs, resolve, approve) and the
// browser console both go through it; neither writes a job by itself.
//
// Every action is recorded in refund_audit, an append-only table the
// database guards (triggers refuse UPDATE and DELETE and stamp the time from
// the database's clock; the application's account holds only INSERT and
// SELECT on it): who (an operator identity, never empty), when, which job,
// the action, the reason, the evidence shown, and the job's state and
// attempt before and after. A resolution's audit entry commits in the same
// transaction as the fenced write of the job, so there is never one without
// the other. Refusals that reached the provider (an unknown or mismatched
// refund id) are recorded too, with the state unchanged.
//
// Resolutions are fenced on the attempt the operator saw (Resolution.
// SeenAttempt): a job that moved since is never resolved on stale
// information (ErrResolvedElsewhere).
//
//   - As succeeded: the refund id is looked up at the provider and must
//     belong to this operation (key, payment, amount, currency) and be
//     succeeded. Otherwise the resolution is refused (ErrUnknownRefund,
//     ErrRefundMismatch, ErrRefundNotSucceeded), unless a second operator
//     approves an override (Resolution.Override with RequestApproval and
//     Approve), which the audit marks.
//   - As reconcile: back to ready, to ask the provider again. One operator.
//   - As refund: send again with the same key. It moves money, so it always
//     needs a second operator's approval, and it is refused outside the
//     key's safe window, when the provider shows a refund for the key, and
//     without proof that the original did not execute (a rejection for the
//     same key; never "not found").
//
// A resolution never overwrites the job's earlier evidence: the new text is
// appended to review_evidence, and the audit entry keeps what was shown.
package operator

import (
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
)

// Defaults of Config and Page.
const (
	// DefaultLookupTimeout bounds one provider lookup of a verification.
	DefaultLookupTimeout = 10 * time.Second
	// DefaultLimit is a page's size when Page.Limit is zero.
	DefaultLimit = 50
	// MaxLimit bounds Page.Limit.
	MaxLimit = 1000
	// MaxOperatorLen bounds an operator identity.
	MaxOperatorLen = 128
	// MaxReasonLen bounds a reason.
	MaxReasonLen = 4096
)

// Config configures a Service.
type Config struct {
	// Client is the fenced data layer (required).
	Client *ent.Client
	// Provider verifies refund ids and resends. Nil refuses every action
	// that needs the provider with ErrProviderUnavailable.
	Provider provider.Client
	// LookupTimeout bounds each provider lookup; DefaultLookupTimeout when
	// zero.
	LookupTimeout time.Duration
	// Claim gives the provider timeout and skew margin that, with the
	// provider's declared key retention, make a key's safe resend window
	// (fencedwrite.ClaimOptions.KeyWindow), as the workers compute it.
	// Zero fields take fencedwrite's defaults.
	Claim fencedwrite.ClaimOptions
}

// Service is the operators' API over one database and one provider. Its
// methods are safe for concurrent use.
type Service struct {
	c       *ent.Client
	prov    provider.Client
	timeout time.Duration
	claim   fencedwrite.ClaimOptions
	hooks   hooks
}

// New returns a Service for cfg, or an *InputError naming the bad field.
func New(cfg Config) (*Service, error) {
	if cfg.Client == nil {
		return nil, inputErr("Client", "is required")
	}
	if cfg.LookupTimeout < 0 {
		return nil, inputErr("LookupTimeout", "must not be negative, got %v", cfg.LookupTimeout)
	}
	// Negative margins would widen a key's resend window past the
	// provider's retention, where a resend can execute a second refund.
	if cfg.Claim.SkewMargin < 0 {
		return nil, inputErr("Claim.SkewMargin", "must not be negative (it would widen the resend window), got %v", cfg.Claim.SkewMargin)
	}
	if cfg.Claim.ProviderTimeout < 0 {
		return nil, inputErr("Claim.ProviderTimeout", "must not be negative (it would widen the resend window), got %v", cfg.Claim.ProviderTimeout)
	}
	if cfg.LookupTimeout == 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	return &Service{c: cfg.Client, prov: cfg.Provider, timeout: cfg.LookupTimeout, claim: cfg.Claim}, nil
}

// Action is how an operator resolves a job in manual review.
type Action string

// The resolutions.
const (
	// AsSucceeded settles the job as succeeded with a verified provider
	// refund id, and its ledger row as refunded, in one transaction.
	AsSucceeded Action = "succeeded"
	// AsReconcile sends the job back to ready, due now, to reconcile.
	AsReconcile Action = "reconcile"
	// AsRefund sends the job back to ready, due now, to send the refund
	// again with the same key. Needs approval.
	AsRefund Action = "refund"
)

// Resolution is one operator's decision about a job in manual review.
type Resolution struct {
	JobID int64
	As    Action
	// RefundID is the provider's refund id (AsSucceeded only, required).
	RefundID string
	// Reason says why (required): it goes into the audit and is appended
	// to the job's evidence.
	Reason string
	// Operator is who decides (required: a login name, CheckOperator).
	Operator string
	// SeenAttempt is the job's attempt as the operator saw it (required):
	// the resolution is fenced on it.
	SeenAttempt int64
	// Override (AsSucceeded only) settles the job although the refund id
	// did not verify. Only through RequestApproval and a second operator's
	// Approve; the audit marks it.
	Override bool
}

// Result is what an action did.
type Result struct {
	JobID   int64
	State   string // the job's state afterwards
	Attempt int64  // the job's attempt afterwards
	AuditID int64  // the audit entry of the action
	// RequestID is the approval request an approval carried out.
	RequestID int64
}
