package operator

import (
	"time"

	"github.com/fencekit/fencekit/money"
)

// The views. Raw fields (ids, times, the worker's own words) are what the
// database holds, for JSON and for tools; the derived ones (Status, Facts,
// Timeline, Options, every Text and Said) are each fact as a person reads
// it, derived once here so that the console's templates and the CLI's
// tabwriter only lay them out and never disagree. Derived text shows
// attacker-controlled characters (control, bidirectional and other
// invisible characters) made visible (Visible).

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

// Money is where a job's money stands, the first word of its status line.
type Money string

// Where money stands.
const (
	// MoneyNotSent: nothing was ever sent for the request; no money moved.
	MoneyNotSent Money = "not_sent"
	// MoneyUnknown: a refund request was sent and nothing settles what
	// became of it: the provider may have paid.
	MoneyUnknown Money = "unknown"
	// MoneyPending: the provider accepted the refund and has not paid yet.
	MoneyPending Money = "pending"
	// MoneyAtProvider: evidence says the provider paid; the job is not
	// settled yet.
	MoneyAtProvider Money = "refunded_at_provider"
	// MoneyDeclined: the provider declined the last send; the job is not
	// settled yet.
	MoneyDeclined Money = "declined"
	// MoneyRefunded: the job settled as refunded on a refund the provider
	// confirmed.
	MoneyRefunded Money = "refunded"
	// MoneyUnverified: the job settled as refunded by an override, on a
	// refund the provider never confirmed. Permanent.
	MoneyUnverified Money = "refunded_unverified"
	// MoneyNotRefunded: the job failed: the provider declined it.
	MoneyNotRefunded Money = "not_refunded"
)

// StatusLine is a job's money-first status: where the money stands, in a
// word or two (Headline: "Unknown"), and the rest of the line (Text) that
// says what was sent and when, what came back, what the provider says
// now, whether money may have moved and what happens next. String is the
// whole line: "Unknown: 11.50 EUR sent …".
type StatusLine struct {
	Money    Money  `json:"money"`
	Headline string `json:"headline"`
	Text     string `json:"text"`
}

// String is the whole status line.
func (s StatusLine) String() string { return s.Headline + ": " + s.Text }

// Status is a job's status line with the facts it rests on and, for a job
// in manual review, the decisions an operator can take.
type Status struct {
	StatusLine
	// Sent is what was sent and when ("never", or the first and last
	// possible sends).
	Sent string `json:"sent"`
	// Answer is what came back from the last provider call, in plain words.
	Answer string `json:"answer,omitempty"`
	// ProviderSays is the latest the provider said about the request (its
	// latest evidence), or that it said nothing.
	ProviderSays string `json:"provider_says"`
	// Next is what happens next, or what the operator should do.
	Next string `json:"next"`
	// Options are the decisions of an operator, for a job in manual review.
	Options []Option `json:"options,omitempty"`
}

// Option is one decision an operator can take on a job in manual review,
// with the facts it rests on.
type Option struct {
	// Action is how to take it: "resolve_succeeded", "resolve_reconcile",
	// "request_refund" (a second operator), "request_override" (a second
	// operator).
	Action string `json:"action"`
	Title  string `json:"title"`
	// Facts are the facts the decision rests on, each a sentence.
	Facts []string `json:"facts"`
	// Refused, when set, says why the decision cannot be taken now.
	Refused string `json:"refused,omitempty"`
}

// Fact is one labelled fact of a job, in the order both front ends show
// them.
type Fact struct {
	// Key names the fact for tests and page anchors ("amount").
	Key   string `json:"key"`
	Label string `json:"label"`
	Value string `json:"value"`
}

// OnIt is an operator's "I'm on it" mark on a job in manual review: shown
// to the others until the job leaves review or the operator lets go.
type OnIt struct {
	Operator string    `json:"operator"`
	Since    time.Time `json:"since"`
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
	// Reason is the review reason, else the last error (the worker's words,
	// on one line); ReasonKind its kind (ReasonKinds), for a job in manual
	// review.
	Reason     string    `json:"reason,omitempty"`
	ReasonKind string    `json:"reason_kind,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Status is the job's money-first status line.
	Status StatusLine `json:"status"`
	// Unverified is set on a job settled by an override: for good.
	Unverified *Unverified `json:"unverified,omitempty"`
	// OnIt is the operator who said they are on it, while the job is in
	// manual review at the attempt they saw.
	OnIt *OnIt `json:"on_it,omitempty"`
}

// ReasonLabel is the label of the job's kind of review reason, for a job
// in manual review.
func (j JobSummary) ReasonLabel() string {
	if k, ok := kindByKey(j.ReasonKind); ok {
		return k.Label
	}
	return ""
}

// Unverified marks a job settled as refunded by an override: on a refund
// id the provider never confirmed, asked for by one operator and approved by
// another. The mark is derived from the audit, which nobody can change: it
// stays on the job for good.
type Unverified struct {
	RefundID    string    `json:"refund_id"`
	RequestedBy string    `json:"requested_by"`
	ApprovedBy  string    `json:"approved_by"`
	RequestID   int64     `json:"request_id"`
	At          time.Time `json:"at"`
	AuditID     int64     `json:"audit_id"`
}

// Text says what the mark means.
func (u *Unverified) Text() string {
	return "UNVERIFIED: settled by an override on refund " + Visible(u.RefundID) + ", which the provider never confirmed (asked by " +
		Visible(u.RequestedBy) + ", approved by " + Visible(u.ApprovedBy) + ", " + Stamp(u.At) + ")"
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
// (an operator's resolution, an approved request, or the reconciler woken
// by new evidence), why, and whether a settlement was verified.
type Departure struct {
	JobID        int64     `json:"job_id"`
	OperationKey string    `json:"operation_key"`
	At           time.Time `json:"at"`
	Action       string    `json:"action"`
	Operator     string    `json:"operator"`
	// RequestedBy is the requester of an approved request; Operator then
	// approved it.
	RequestedBy string `json:"requested_by,omitempty"`
	// Verified is false for a settlement by override; true for every other
	// settlement. Nil when the job did not settle.
	Verified     *bool  `json:"verified,omitempty"`
	Why          string `json:"why"`
	StateAfter   string `json:"state_after"`
	AttemptAfter int64  `json:"attempt_after"`
	AuditID      int64  `json:"audit_id"`
	// Text says all of it in one sentence.
	Text string `json:"text"`
}

// Unverified reports whether the departure settled the job by an
// override, on a refund the provider never confirmed.
func (d Departure) Unverified() bool { return d.Verified != nil && !*d.Verified }

// DeparturesPage is one page of departures from the queue, newest first.
type DeparturesPage struct {
	Departures []Departure `json:"departures"`
	Next       string      `json:"next,omitempty"`
}

// Query selects jobs for Search. Empty fields do not filter; the others
// must all match. With Prefix, OperationKey, PaymentRef and
// ProviderRefundID match the values that start with them.
type Query struct {
	OperationKey     string `json:"operation_key,omitempty"`
	PaymentRef       string `json:"payment_ref,omitempty"`
	ProviderRefundID string `json:"provider_refund_id,omitempty"`
	State            string `json:"state,omitempty"`
	Prefix           bool   `json:"prefix,omitempty"`
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
	// Text says what it is, in plain words.
	Text string `json:"text"`
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
	Outcome       string `json:"outcome"`
	Operator      string `json:"operator"`
	RequestedBy   string `json:"requested_by,omitempty"`
	ApprovalID    int64  `json:"approval_id,omitempty"`
	Reason        string `json:"reason"`
	RefundID      string `json:"refund_id,omitempty"`
	Override      bool   `json:"override"`
	EvidenceShown string `json:"evidence_shown"`
	// Refused is, for a refusal, what the operator was told and why (the
	// cause the entry keeps); Verification what the provider said about
	// the refund id, when it was asked.
	Refused       string        `json:"refused,omitempty"`
	Verification  *Verification `json:"verification,omitempty"`
	StateBefore   string        `json:"state_before"`
	AttemptBefore int64         `json:"attempt_before"`
	StateAfter    string        `json:"state_after"`
	AttemptAfter  int64         `json:"attempt_after"`
	RecordedAt    time.Time     `json:"recorded_at"`
	// Text says what happened, in plain words.
	Text string `json:"text"`
}

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// The statuses of an approval request.
const (
	Pending  ApprovalStatus = "pending"
	Approved ApprovalStatus = "approved"
	// Declined: a second operator declined it, its requester withdrew it,
	// or the approval was refused (Closed says which).
	Declined ApprovalStatus = "declined"
	// Stale: the job moved before a second operator approved; nothing was
	// done.
	Stale ApprovalStatus = "stale"
)

// Approval is a request for a second operator's approval of a resolution,
// with the facts the approver decides on.
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

	// The facts: the job's request (payment, amount) and where it stands
	// now, and whether it moved since the request was made (then approving
	// is refused); for an override, the verification at request time (the
	// provider's answer, field by field).
	PaymentRef   string        `json:"payment_ref"`
	Amount       Amount        `json:"amount"`
	JobStatus    StatusLine    `json:"job_status"`
	JobMoved     bool          `json:"job_moved"`
	Verification *Verification `json:"verification,omitempty"`
	// LastAnswer is what the provider answered to the job's last call (the
	// calls log), in plain words: for a resend, what the provider last
	// said about the key; empty when no call was recorded.
	LastAnswer string `json:"last_answer,omitempty"`
	// Asks says what the request asks for, in a sentence.
	Asks string `json:"asks"`
	// Closed says how a closed request was closed: by whom, and why (the
	// decliner's reason, or the refusal's cause).
	Closed string `json:"closed,omitempty"`
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
	EventEvidence  EventKind = "evidence"   // a provider response, a reconcile result, an operator's verification
	EventWebhook   EventKind = "webhook"
	EventFence     EventKind = "fence"   // the fence refused a write of a superseded attempt
	EventAudit     EventKind = "audit"   // an operator's action, a request, an approval, a refusal
	EventWoken     EventKind = "woken"   // new evidence took the job out of manual review
	EventCall      EventKind = "call"    // a worker's provider call and its answer or fault (the calls log)
	EventWorker    EventKind = "worker"  // the worker's last write-back: where the job went, and why
	EventSettled   EventKind = "settled" // the ledger row settled
)

// Event is one line of a job's timeline: its time on the database's clock
// and what happened, in plain words.
type Event struct {
	At      time.Time `json:"at"`
	Kind    EventKind `json:"kind"`
	Attempt int64     `json:"attempt,omitempty"`
	Ref     int64     `json:"ref,omitempty"` // the evidence's or audit entry's id
	Text    string    `json:"text"`
}

// JobView is one job with everything an operator needs to decide: the
// status line and its options, the facts, the request, the row, the ledger,
// the evidence, the audit, the approval requests and a timeline of them
// all. Every list is in a deterministic order (time, then kind, then id).
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

	// Detail is the status line with its facts and options.
	Detail Status `json:"detail"`
	// Facts are the job's facts as people read them, in order; Engineering
	// the worker's own words and figures (second, on their own).
	Facts       []Fact `json:"facts"`
	Engineering []Fact `json:"engineering"`

	Evidence []Evidence `json:"evidence"`
	// Webhooks are the evidence entries the provider pushed.
	Webhooks  []Evidence   `json:"webhooks"`
	Audit     []AuditEntry `json:"audit"`
	Approvals []Approval   `json:"approvals"`
	// Attempts lists every attempt from 1 to the job's, with what started
	// it and the evidence seen at it.
	Attempts []Attempt `json:"attempts"`
	// Calls are the provider calls the workers wrote back, one per
	// attempt whose write-back landed (the calls log), in order.
	Calls    []Call  `json:"calls"`
	Timeline []Event `json:"timeline"`
}

// Call is one provider call of an attempt, as its worker wrote it back:
// what it asked (a send or a lookup), what came back or the fault, when the
// answer was in (the database clock).
type Call struct {
	Attempt int64 `json:"attempt"`
	// Kind is send or lookup.
	Kind string `json:"kind"`
	// Outcome is succeeded, pending, rejected, not_found, conflict,
	// rate_limited, already_refunded, unknown (a fault: nobody knows what
	// happened), refused (the client's own checks: nothing was sent, or
	// the answer did not match) or no_lookup (nothing could be asked).
	Outcome          string    `json:"outcome"`
	ProviderRefundID string    `json:"provider_refund_id,omitempty"`
	Detail           string    `json:"detail"`
	AnsweredAt       time.Time `json:"answered_at"`
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
