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
	"github.com/fencekit/fencekit/internal/money"
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

// Amount is a refund amount in minor units of its currency.
type Amount struct {
	Minor    int64  `json:"minor"`
	Currency string `json:"currency"`
}

// Major is the amount in major units with the currency's ISO 4217
// exponent, exactly: "12.50" for 1250 EUR, "1250" for 1250 JPY.
func (a Amount) Major() string { return money.Format(a.Minor, a.Currency) }

// String is the major amount and the currency: "12.50 EUR".
func (a Amount) String() string { return a.Major() + " " + a.Currency }

// Page asks for one page of a list: at most Limit items (DefaultLimit when
// zero, at most MaxLimit) after the cursor After (empty: from the start).
// Cursors are keyset positions: a page never repeats or skips a row because
// rows were added before it.
type Page struct {
	Limit int
	After string
}

// JobSummary is one line of a list of jobs.
type JobSummary struct {
	ID           int64  `json:"id"`
	OperationKey string `json:"operation_key"`
	PaymentRef   string `json:"payment_ref"`
	Amount       Amount `json:"amount"`
	State        string `json:"state"`
	Attempt      int64  `json:"attempt"`
	NextAction   string `json:"next_action,omitempty"`
	// NextRunAt is when a ready job is due; nil for every other state.
	NextRunAt        *time.Time `json:"next_run_at,omitempty"`
	ProviderRefundID string     `json:"provider_refund_id,omitempty"`
	// Reason is the review reason, else the last error.
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// JobsPage is one page of jobs; Next is the cursor of the following page,
// empty at the end.
type JobsPage struct {
	Jobs []JobSummary `json:"jobs"`
	Next string       `json:"next,omitempty"`
}

// QueueItem is a job waiting in manual review.
type QueueItem struct {
	JobSummary
	// Since is when the job entered manual review (database time); Age is
	// how long ago that was, by the database's clock.
	Since time.Time     `json:"since"`
	Age   time.Duration `json:"age_ns"`
}

// QueuePage is one page of the manual review queue, oldest first.
type QueuePage struct {
	Items []QueueItem `json:"items"`
	Next  string      `json:"next,omitempty"`
}

// Departure is a job that left manual review: who or what took it out
// (an operator's resolution, or the reconciler woken by new evidence), and
// why.
type Departure struct {
	JobID        int64     `json:"job_id"`
	OperationKey string    `json:"operation_key"`
	At           time.Time `json:"at"`
	Action       string    `json:"action"`
	Operator     string    `json:"operator"`
	Why          string    `json:"why"`
	StateAfter   string    `json:"state_after"`
	AttemptAfter int64     `json:"attempt_after"`
	AuditID      int64     `json:"audit_id"`
}

// DeparturesPage is one page of departures from the queue, newest first.
type DeparturesPage struct {
	Departures []Departure `json:"departures"`
	Next       string      `json:"next,omitempty"`
}

// Query selects jobs for Search. Empty fields do not filter; the others
// must all match.
type Query struct {
	OperationKey     string `json:"operation_key,omitempty"`
	PaymentRef       string `json:"payment_ref,omitempty"`
	ProviderRefundID string `json:"provider_refund_id,omitempty"`
	State            string `json:"state,omitempty"`
}

// Evidence is one entry of the observation log.
type Evidence struct {
	ID               int64      `json:"id"`
	Source           string     `json:"source"`
	Status           string     `json:"status"`
	ProviderRefundID string     `json:"provider_refund_id,omitempty"`
	Attempt          int64      `json:"attempt,omitempty"`
	ReceivedAt       time.Time  `json:"received_at"`
	ProcessedAt      *time.Time `json:"processed_at,omitempty"`
	Payload          string     `json:"payload"`
}

// AuditEntry is one recorded operator (or reconciler) action.
type AuditEntry struct {
	ID           int64  `json:"id"`
	JobID        int64  `json:"job_id"`
	OperationKey string `json:"operation_key"`
	// Action is resolve_succeeded, resolve_reconcile, resolve_refund,
	// request_approval, decline, or wake (the reconciler, on new evidence).
	Action string `json:"action"`
	// Outcome is done, requested, refused, declined or stale.
	Outcome       string    `json:"outcome"`
	Operator      string    `json:"operator"`
	RequestedBy   string    `json:"requested_by,omitempty"`
	ApprovalID    int64     `json:"approval_id,omitempty"`
	Reason        string    `json:"reason"`
	RefundID      string    `json:"refund_id,omitempty"`
	Override      bool      `json:"override"`
	EvidenceShown string    `json:"evidence_shown"`
	StateBefore   string    `json:"state_before"`
	AttemptBefore int64     `json:"attempt_before"`
	StateAfter    string    `json:"state_after"`
	AttemptAfter  int64     `json:"attempt_after"`
	RecordedAt    time.Time `json:"recorded_at"`
}

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// The statuses of an approval request.
const (
	Pending  ApprovalStatus = "pending"
	Approved ApprovalStatus = "approved"
	Declined ApprovalStatus = "declined"
	// Stale: the job moved before a second operator approved; nothing was
	// done.
	Stale ApprovalStatus = "stale"
)

// Approval is a request for a second operator's approval of a resolution.
type Approval struct {
	ID           int64          `json:"id"`
	JobID        int64          `json:"job_id"`
	OperationKey string         `json:"operation_key"`
	As           Action         `json:"as"`
	RefundID     string         `json:"refund_id,omitempty"`
	Override     bool           `json:"override"`
	Reason       string         `json:"reason"`
	RequestedBy  string         `json:"requested_by"`
	SeenAttempt  int64          `json:"seen_attempt"`
	RequestedAt  time.Time      `json:"requested_at"`
	Status       ApprovalStatus `json:"status"`
	DecidedBy    string         `json:"decided_by,omitempty"`
	DecidedAt    *time.Time     `json:"decided_at,omitempty"`
}

// ApprovalsPage is one page of approval requests, oldest first.
type ApprovalsPage struct {
	Approvals []Approval `json:"approvals"`
	Next      string     `json:"next,omitempty"`
}

// LedgerRow is the job's row in the business ledger (refunds).
type LedgerRow struct {
	Status           string     `json:"status"`
	ProviderRefundID string     `json:"provider_refund_id,omitempty"`
	SettledAt        *time.Time `json:"settled_at,omitempty"`
}

// EventKind names a timeline event's kind.
type EventKind string

// The kinds of timeline events.
const (
	EventEnqueued  EventKind = "enqueued"
	EventClaimed   EventKind = "claimed"    // a process claimed the job (the attempts log)
	EventTakenOver EventKind = "taken_over" // a process took over an expired lease (the attempts log)
	EventEvidence  EventKind = "evidence"   // a provider response, a reconcile result, an operator finding
	EventWebhook   EventKind = "webhook"
	EventAudit     EventKind = "audit" // an operator's action, a request, an approval
	EventWoken     EventKind = "woken" // new evidence took the job out of manual review
	EventSettled   EventKind = "settled"
	EventNow       EventKind = "now" // where the job stands
)

// Event is one line of a job's timeline.
type Event struct {
	At      time.Time `json:"at"`
	Kind    EventKind `json:"kind"`
	Attempt int64     `json:"attempt,omitempty"`
	Ref     int64     `json:"ref,omitempty"` // the evidence's or audit entry's id
	Text    string    `json:"text"`
}

// JobView is one job with everything an operator needs to decide: the
// request, the row, the ledger, the evidence, the audit, the approval
// requests and a timeline of them all. Every list is in a deterministic
// order (time, then kind, then id).
type JobView struct {
	JobSummary
	LeaseUntil     *time.Time `json:"lease_until,omitempty"`
	KeyFirstUsedAt *time.Time `json:"key_first_used_at,omitempty"`
	LastSendAt     *time.Time `json:"last_send_at,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	ReviewReason   string     `json:"review_reason,omitempty"`
	ReviewEvidence string     `json:"review_evidence,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	Ledger         *LedgerRow `json:"ledger,omitempty"`
	Evidence       []Evidence `json:"evidence"`
	// Webhooks are the evidence entries the provider pushed.
	Webhooks  []Evidence   `json:"webhooks"`
	Audit     []AuditEntry `json:"audit"`
	Approvals []Approval   `json:"approvals"`
	// Attempts lists every attempt from 1 to the job's, with what started
	// it and the evidence seen at it.
	Attempts []Attempt `json:"attempts"`
	Timeline []Event   `json:"timeline"`
}

// Attempt is one fencing token of a job: what started it (the attempts
// log's claim, takeover or resolution), which process or operator held it,
// when, its lease, and the evidence its holder recorded. An attempt taken
// before the attempts log existed has no row: its Op is empty and StartedBy
// says "a claim or a takeover (not recorded)".
type Attempt struct {
	Attempt int64 `json:"attempt"`
	// Op is fencedwrite.AttemptClaim, AttemptTakeover or
	// AttemptResolution; empty when the log has no row.
	Op string `json:"op,omitempty"`
	// Holder is the process that claimed or took over the attempt
	// (ClaimOptions.Holder), or the operator who resolved.
	Holder     string     `json:"holder,omitempty"`
	ClaimedAt  *time.Time `json:"claimed_at,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	StartedBy  string     `json:"started_by"`
	AuditID    int64      `json:"audit_id,omitempty"`
	Evidence   []int64    `json:"evidence"`
}
