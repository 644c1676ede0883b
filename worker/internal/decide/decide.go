package decide

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/money"
	"github.com/fencekit/fencekit/provider"
)

// Action is what a job does when it is next claimed. The values are the
// job's next_action column.
type Action string

// The actions.
const (
	// Refund sends the refund request with the job's operation key.
	Refund Action = "refund"
	// Reconcile asks the provider about the operation key; it never sends.
	Reconcile Action = "reconcile"
)

// Kind is the transition the worker applies, through the fenced path.
type Kind int

// The kinds of transition. The zero Kind is no decision; Decide never
// returns it.
const (
	// Complete settles the job as succeeded and records the refund in the
	// ledger, in one transaction. Decision.ProviderRefundID is never empty.
	Complete Kind = iota + 1
	// Reschedule puts the job back to ready: Decision.NextAction after
	// Decision.After, saving Decision.ProviderRefundID when it is set.
	Reschedule
	// ManualReview hands the job to an operator with Decision.Reason and
	// Decision.Evidence.
	ManualReview
	// Fail settles the job as failed on a definitive provider rejection,
	// with Decision.Reason.
	Fail
)

// String returns the kind's name: complete, reschedule, manual_review, fail.
func (k Kind) String() string {
	switch k {
	case Complete:
		return "complete"
	case Reschedule:
		return "reschedule"
	case ManualReview:
		return "manual_review"
	case Fail:
		return "fail"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Default delays, used for the fields of Delays that are zero (or
// negative).
const (
	// DefaultPendingDelay is how long a pending refund waits before it is
	// reconciled.
	DefaultPendingDelay = 30 * time.Second
	// DefaultRetryDelay is how long a job waits after a rate limit, a key in
	// use, an unknown outcome or a failed lookup.
	DefaultRetryDelay = 10 * time.Second
	// DefaultLagPoll is the shortest wait while a send is inside the
	// provider's lookup lag.
	DefaultLagPoll = 5 * time.Second
)

// Delays are how long a rescheduled job waits. Fields that are zero or
// negative take their defaults: Pending DefaultPendingDelay (a pending
// answer, reconciled later), Retry DefaultRetryDelay (rate limited, key in
// use, unknown outcome, lookup failed), LagPoll DefaultLagPoll (the
// minimum wait while inside the lookup-lag window).
type Delays struct{ Pending, Retry, LagPoll time.Duration }

func (d Delays) withDefaults() Delays {
	if d.Pending <= 0 {
		d.Pending = DefaultPendingDelay
	}
	if d.Retry <= 0 {
		d.Retry = DefaultRetryDelay
	}
	if d.LagPoll <= 0 {
		d.LagPoll = DefaultLagPoll
	}
	return d
}

// Input is everything Decide may look at: the provider's answer (or error),
// the provider's capabilities and the job's facts, as read by the worker
// that holds the job.
type Input struct {
	// Action is what the worker just did: sent the refund, or looked it up.
	Action Action
	// Request is the job's request; OperationKey is the idempotency key and
	// the merchant reference.
	Request provider.RefundRequest
	// Caps is what the provider's contract guarantees.
	Caps provider.Capabilities
	// Now is the database's time of the claim. Every window is measured
	// against it; Decide reads no clock.
	Now time.Time
	// KeyFirstUsedAt is when the key was first sent; nil means never.
	KeyFirstUsedAt *time.Time
	// LastSendAt is when a request with the key may last have been sent;
	// nil means never.
	LastSendAt *time.Time
	// KeyWindow is how long after KeyFirstUsedAt a resend with the same key
	// is still safe (the provider's key retention minus the provider timeout
	// minus a skew margin), computed by the caller. Zero or negative: never.
	KeyWindow time.Duration
	// ProviderRefundID is the provider's refund id known before this
	// attempt, if any.
	ProviderRefundID string

	// Sent and SendErr are the send's outcome (Action Refund): what
	// provider.Client.Refund returned.
	Sent    provider.Refund
	SendErr error

	// Found and LookupErr are the lookup's outcome (Action Reconcile): what
	// provider.Client.Lookup returned. Evidence is the observation log for
	// the key (evidence.ForKey), read before deciding; entries about other
	// keys are ignored.
	Found     []provider.Refund
	LookupErr error
	Evidence  []evidence.Entry

	// Delays are the waits of a Reschedule.
	Delays Delays
}

// Decision is the transition the worker applies to the job, through the
// fenced path.
type Decision struct {
	Kind Kind
	// NextAction and After are set for Reschedule only: the job becomes
	// due After from now, to do NextAction. After is never negative.
	NextAction Action
	After      time.Duration
	// ProviderRefundID is the refund id to save. Complete: always set.
	// Others: set when this answer revealed one.
	ProviderRefundID string
	// Reason is, for Reschedule, the last error; for ManualReview, why an
	// operator must look; for Fail, the provider's rejection.
	Reason string
	// Evidence is, for ManualReview, what the operator needs: what the
	// provider said and what the observation log holds. Never empty for a
	// ManualReview.
	Evidence string
	// Alert, when set, must be raised by the worker (log and metric): a
	// reversal after success, two refunds for one key.
	Alert string
	// Rule is the stable name of the rule that decided (the Rule*
	// constants), for logs, metrics and tests.
	Rule string
}

// The rules, in the order Decide checks them. The package documentation
// lists what each decides.
const (
	RuleUnknownAction  = "unknown action"
	RuleNoOperationKey = "job: no operation key"

	RuleSendMismatch          = "send: mismatch"
	RuleSendOtherRefund       = "send: another refund for the key"
	RuleSendKeyParamsMismatch = "send: key reused with other parameters"
	RuleSendOutcomeUnknown    = "send: outcome unknown"
	RuleSendAlreadyRefunded   = "send: already refunded"
	RuleSendRefundedElsewhere = "send: payment refunded before the first send"
	RuleSendKeyInUse          = "send: key in use"
	RuleSendInvalidRequest    = "send: invalid request"
	RuleSendRateLimited       = "send: rate limited"
	RuleSendRejected          = "send: rejected"
	RuleSendUnknownError      = "send: unknown error"
	RuleSendSucceeded         = "send: succeeded"
	RuleSendSucceededNoID     = "send: succeeded without refund id"
	RuleSendPending           = "send: pending"
	RuleSendUnexpectedAnswer  = "send: answer outside the contract"

	RuleLookupNoLookup       = "lookup: no lookup offered"
	RuleLookupInvalidRequest = "lookup: invalid request"
	RuleLookupRateLimited    = "lookup: rate limited"
	RuleLookupOutcomeUnknown = "lookup: outcome unknown"
	RuleLookupUnknownError   = "lookup: unknown error"

	RuleReconcileMismatch       = "reconcile: mismatch"
	RuleReconcileSeveralRefunds = "reconcile: several refunds for the key"
	RuleReconcileUnknownStatus  = "reconcile: unknown status"
	RuleReconcileContradiction  = "reconcile: contradictory answers"
	RuleReconcileReversed       = "reconcile: reversed"
	RuleReconcileSucceeded      = "reconcile: succeeded"
	RuleReconcileNoRefundID     = "reconcile: succeeded without refund id"
	RuleReconcileRejectedVsLog  = "reconcile: rejected against evidence of success"
	RuleReconcileRejected       = "reconcile: rejected"
	RuleReconcilePending        = "reconcile: pending"

	RuleNotFoundLogOfUnsentKey = "not found: evidence for a key never sent"
	RuleNotFoundNeverSent      = "not found: never sent"
	RuleNotFoundInLag          = "not found: inside the lookup lag"
	RuleNotFoundLogOfRefund    = "not found: evidence of a refund"
	RuleNotFoundKnownRefund    = "not found: refund id known"
	RuleNotFoundOtherLog       = "not found: other evidence"
	RuleNotFoundResend         = "not found: resend inside the key's window"
	RuleNotFoundResendUnsafe   = "not found: resend not safe"
)

// Alerts a Decision may carry.
const (
	AlertReversed      = "reversed after success"
	AlertSeveralRefund = "several provider refunds for one operation key"
)

// Decide returns the transition for in. It is pure and total: see the
// package documentation for the rules.
func Decide(in Input) Decision {
	in.Delays = in.Delays.withDefaults()
	switch {
	case in.Action != Refund && in.Action != Reconcile:
		return review(RuleUnknownAction, fmt.Sprintf("unknown action %q: nothing was decided about the refund", string(in.Action)), describeJob(in))
	case in.Request.OperationKey == "":
		return review(RuleNoOperationKey, "the job's request has no operation key: no answer can be matched to it", describeJob(in))
	case in.Action == Refund:
		return afterSend(in)
	default:
		return afterLookup(in)
	}
}

// afterSend decides on the outcome of a send.
func afterSend(in Input) Decision {
	err := in.SendErr
	verifyErr := provider.Verify(in.Request, in.Sent)
	if err == nil && verifyErr != nil {
		err = verifyErr // the client should have caught it; it did not
	}
	// learnt is the refund id a verified answer revealed.
	var learnt string
	if verifyErr == nil {
		learnt = in.Sent.ProviderRefundID
	}
	answer := func() string { return describeSend(in) }

	switch {
	case errors.Is(err, provider.ErrMismatch):
		return review(RuleSendMismatch, "the provider's answer does not match the request: "+errText(err), answer())
	case learnt != "" && in.ProviderRefundID != "" && learnt != in.ProviderRefundID:
		d := review(RuleSendOtherRefund, fmt.Sprintf("the provider names refund %s for this key, which was known as refund %s", learnt, in.ProviderRefundID), answer())
		d.Alert = AlertSeveralRefund
		return d
	case errors.Is(err, provider.ErrKeyParamsMismatch):
		return review(RuleSendKeyParamsMismatch, "the provider holds this operation key with other parameters; something may have executed for it (never mint a new key): "+errText(err), answer())
	case errors.Is(err, provider.ErrOutcomeUnknown):
		return reconcileAfter(RuleSendOutcomeUnknown, in.Delays.Retry, errText(err), learnt)
	case errors.Is(err, provider.ErrAlreadyRefunded) && verifyErr != nil && firstSend(in):
		return review(RuleSendRefundedElsewhere, "the provider says the payment is already refunded, but this key was never sent before: another refund took the amount ("+errText(err)+")", answer())
	case errors.Is(err, provider.ErrAlreadyRefunded):
		return reconcileAfter(RuleSendAlreadyRefunded, 0, errText(err), learnt)
	case errors.Is(err, provider.ErrKeyInUse):
		return reconcileAfter(RuleSendKeyInUse, in.Delays.Retry, errText(err), learnt)
	case errors.Is(err, provider.ErrInvalidRequest):
		return review(RuleSendInvalidRequest, "the request failed the client's checks and was not sent: a bug in the caller or its configuration ("+errText(err)+")", answer())
	case only(err, provider.ErrRateLimited):
		return Decision{Kind: Reschedule, NextAction: Refund, After: in.Delays.Retry, ProviderRefundID: learnt,
			Reason: errText(err), Rule: RuleSendRateLimited}
	case only(err, provider.ErrRejected):
		return Decision{Kind: Fail, ProviderRefundID: learnt, Reason: rejection(err), Rule: RuleSendRejected}
	case err != nil:
		return reconcileAfter(RuleSendUnknownError, in.Delays.Retry, errText(err), learnt)
	}

	// A verified answer with no error.
	switch in.Sent.Status {
	case provider.StatusSucceeded:
		if id := firstNonEmpty(learnt, in.ProviderRefundID); id != "" {
			return Decision{Kind: Complete, ProviderRefundID: id, Rule: RuleSendSucceeded}
		}
		return reconcileAfter(RuleSendSucceededNoID, in.Delays.Retry, "the provider said succeeded but named no refund id", "")
	case provider.StatusPending:
		return reconcileAfter(RuleSendPending, in.Delays.Pending, "refund pending at the provider", learnt)
	case provider.StatusReversed:
		return reconcileAfter(RuleSendAlreadyRefunded, 0, "the provider reports the refund reversed", learnt)
	}
	return reconcileAfter(RuleSendUnexpectedAnswer, in.Delays.Retry,
		fmt.Sprintf("the provider answered status %q without an error", string(in.Sent.Status)), learnt)
}

// sentinels are the errors a provider call may match. Each error from the
// client matches exactly one.
var sentinels = provider.Sentinels()

// only reports whether err matches target and no other sentinel. A resend
// or a failure needs an error that says nothing else: one that breaks the
// client's contract by matching several is read as an unknown outcome.
func only(err, target error) bool {
	if !errors.Is(err, target) {
		return false
	}
	for _, s := range sentinels {
		if s != target && errors.Is(err, s) {
			return false
		}
	}
	return true
}

// firstSend reports whether the send just made is the only one the key
// has seen: its first use is the latest possible send.
func firstSend(in Input) bool {
	return in.KeyFirstUsedAt != nil && in.LastSendAt != nil && in.KeyFirstUsedAt.Equal(*in.LastSendAt)
}

// afterLookup decides on the outcome of a reconcile's lookup.
func afterLookup(in Input) Decision {
	if err := in.LookupErr; err != nil {
		switch {
		case errors.Is(err, provider.ErrNoLookup):
			return review(RuleLookupNoLookup, "the provider offers no lookup for this refund: it cannot be reconciled ("+errText(err)+")", describeLookup(in))
		case errors.Is(err, provider.ErrInvalidRequest):
			return review(RuleLookupInvalidRequest, "the lookup failed the client's checks and was not sent: a bug in the caller or its configuration ("+errText(err)+")", describeLookup(in))
		case errors.Is(err, provider.ErrRateLimited):
			return reconcileAfter(RuleLookupRateLimited, in.Delays.Retry, errText(err), "")
		case errors.Is(err, provider.ErrOutcomeUnknown):
			return reconcileAfter(RuleLookupOutcomeUnknown, in.Delays.Retry, errText(err), "")
		default:
			return reconcileAfter(RuleLookupUnknownError, in.Delays.Retry, errText(err), "")
		}
	}

	var ours []provider.Refund
	for _, r := range in.Found {
		if r.Reference == in.Request.OperationKey {
			ours = append(ours, r)
		}
	}
	if len(ours) == 0 {
		return notFound(in)
	}

	for _, r := range ours {
		if err := provider.Verify(in.Request, r); err != nil {
			return review(RuleReconcileMismatch, "a refund the provider reports for this key does not match the request: "+errText(err), describeLookup(in))
		}
	}

	ids := refundIDs(ours, in.ProviderRefundID)
	if len(ids) > 1 {
		d := review(RuleReconcileSeveralRefunds, "the provider holds several refunds for this operation key: "+strings.Join(ids, ", "), describeLookup(in))
		d.Alert = AlertSeveralRefund
		return d
	}
	// learnt is the refund id this lookup revealed; executedID the one an
	// executed (succeeded or reversed) answer names, else the one known
	// before. A Complete saves executedID and nothing else: an id named only
	// by another row is not proof of which refund executed.
	var learnt, executedID string
	for _, r := range ours {
		if r.ProviderRefundID == "" {
			continue
		}
		learnt = r.ProviderRefundID
		if r.Status == provider.StatusSucceeded || r.Status == provider.StatusReversed {
			executedID = r.ProviderRefundID
		}
	}
	executedID = firstNonEmpty(executedID, in.ProviderRefundID)

	has := map[provider.Status]bool{}
	for _, r := range ours {
		switch r.Status {
		case provider.StatusSucceeded, provider.StatusPending, provider.StatusRejected, provider.StatusReversed:
			has[r.Status] = true
		default:
			return review(RuleReconcileUnknownStatus, fmt.Sprintf("the provider reports status %q for this key, which it never reports", string(r.Status)), describeLookup(in))
		}
	}
	executed := has[provider.StatusSucceeded] || has[provider.StatusReversed]
	switch {
	case executed && has[provider.StatusRejected]:
		return review(RuleReconcileContradiction, "the provider reports this key's refund both rejected and executed", describeLookup(in))
	case executed && executedID == "":
		return review(RuleReconcileNoRefundID, "the provider reports this key's refund executed but the answer names no refund id, and none was known before", describeLookup(in))
	case has[provider.StatusReversed]:
		return Decision{Kind: Complete, ProviderRefundID: executedID, Alert: AlertReversed, Rule: RuleReconcileReversed}
	case has[provider.StatusSucceeded]:
		return Decision{Kind: Complete, ProviderRefundID: executedID, Rule: RuleReconcileSucceeded}
	case has[provider.StatusRejected]:
		if log := logFor(in, evidence.Succeeded, evidence.Reversed); len(log) > 0 {
			return review(RuleReconcileRejectedVsLog, "the provider reports this key's refund rejected, but the observation log says it executed", describeLookup(in))
		}
		r := ours[slices.IndexFunc(ours, func(r provider.Refund) bool { return r.Status == provider.StatusRejected })]
		reason := "rejected"
		if r.Reason != "" {
			reason += ": " + r.Reason
		}
		return Decision{Kind: Fail, ProviderRefundID: learnt, Reason: reason, Rule: RuleReconcileRejected}
	default: // only pending
		return reconcileAfter(RuleReconcilePending, in.Delays.Pending, "refund pending at the provider", learnt)
	}
}

// notFound decides when the lookup found nothing for the key: not proof
// that nothing exists.
func notFound(in Input) Decision {
	providerLog := logExcept(in, evidence.NotFound)
	if in.KeyFirstUsedAt == nil && in.LastSendAt == nil {
		switch {
		case in.ProviderRefundID != "":
			return review(RuleNotFoundLogOfUnsentKey, "the job says its key was never sent, but the provider named refund "+in.ProviderRefundID+" for it", describeLookup(in))
		case len(providerLog) > 0:
			return review(RuleNotFoundLogOfUnsentKey, "the job says its key was never sent, but the observation log holds provider evidence for it", describeLookup(in))
		}
		return Decision{Kind: Reschedule, NextAction: Refund, Rule: RuleNotFoundNeverSent,
			Reason: "not found, and the key was never sent"}
	}

	lagStart := latest(in.KeyFirstUsedAt, in.LastSendAt)
	lagEnd := lagStart.Add(max(in.Caps.LookupLag, 0))
	if in.Now.Before(lagEnd) {
		return reconcileAfter(RuleNotFoundInLag, max(lagEnd.Sub(in.Now), in.Delays.LagPoll),
			fmt.Sprintf("not found, inside the provider's lookup lag (%v) of the send at %s", in.Caps.LookupLag, stamp(lagStart)), "")
	}

	if log := logFor(in, evidence.Succeeded, evidence.Pending, evidence.Reversed); len(log) > 0 {
		return review(RuleNotFoundLogOfRefund, "not found after the lookup-lag window, but the observation log says the refund exists: an operator must check; never resend against it", describeLookup(in))
	}
	if in.ProviderRefundID != "" {
		return review(RuleNotFoundKnownRefund, "not found after the lookup-lag window, but the provider named refund "+in.ProviderRefundID+" for this key before: it exists; never resend against it", describeLookup(in))
	}
	if len(providerLog) > 0 {
		return review(RuleNotFoundOtherLog, "not found after the lookup-lag window; the observation log holds other provider evidence for the key, which proves nothing for a resend", describeLookup(in))
	}

	var why string
	switch {
	case !in.Caps.SafeResend:
		why = "the provider does not guarantee that resending the same key is safe"
	case in.KeyFirstUsedAt == nil:
		why = "the key's first use is unknown, so its window cannot be measured"
	case in.KeyWindow <= 0:
		why = "the key has no window in which a resend is safe"
	case !in.Now.Before(in.KeyFirstUsedAt.Add(in.KeyWindow)):
		why = fmt.Sprintf("the key's window closed at %s", stamp(in.KeyFirstUsedAt.Add(in.KeyWindow)))
	default:
		return Decision{Kind: Reschedule, NextAction: Refund, Rule: RuleNotFoundResend,
			Reason: fmt.Sprintf("not found after the lookup-lag window; resending the same key inside its window (until %s)", stamp(in.KeyFirstUsedAt.Add(in.KeyWindow)))}
	}
	return review(RuleNotFoundResendUnsafe, "not found after the lookup-lag window; resend not safe: "+why, describeLookup(in))
}

// review is a ManualReview decision.
func review(rule, reason, ev string) Decision {
	return Decision{Kind: ManualReview, Reason: reason, Evidence: ev, Rule: rule}
}

// reconcileAfter reschedules a reconcile.
func reconcileAfter(rule string, after time.Duration, reason, refundID string) Decision {
	return Decision{Kind: Reschedule, NextAction: Reconcile, After: max(after, 0), ProviderRefundID: refundID, Reason: reason, Rule: rule}
}

// refundIDs returns the distinct, non-empty refund ids of rs, plus known,
// sorted.
func refundIDs(rs []provider.Refund, known string) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ProviderRefundID)
	}
	ids = append(ids, known)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id string) bool { return id == "" })
}

// logFor returns the log's entries for the key with one of statuses.
func logFor(in Input, statuses ...evidence.Status) []evidence.Entry {
	var out []evidence.Entry
	for _, e := range in.Evidence {
		if e.OperationKey == in.Request.OperationKey && slices.Contains(statuses, e.Status) {
			out = append(out, e)
		}
	}
	return out
}

// logExcept returns the log's entries for the key with any status but
// except.
func logExcept(in Input, except evidence.Status) []evidence.Entry {
	var out []evidence.Entry
	for _, e := range in.Evidence {
		if e.OperationKey == in.Request.OperationKey && e.Status != except {
			out = append(out, e)
		}
	}
	return out
}

func latest(a, b *time.Time) time.Time {
	switch {
	case a == nil:
		return *b
	case b == nil || a.After(*b):
		return *a
	}
	return *b
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// rejection is a Fail's reason: the provider's code and message.
func rejection(err error) string {
	var re *provider.RejectedError
	if errors.As(err, &re) && re != nil {
		return fmt.Sprintf("rejected: %s: %s", re.Code, re.Reason)
	}
	return errText(err)
}

// errText is err's message. Errors come from outside Decide; one whose
// Error method panics (a typed nil, say) must not make Decide panic.
func errText(err error) (s string) {
	if err == nil {
		return ""
	}
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("unprintable error of type %T", err)
		}
	}()
	return err.Error()
}

// maxRaw bounds each raw body quoted in a Decision's Evidence; the full
// bodies stay in the observation log and the worker's logs.
const maxRaw = 2048

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func stampOf(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return stamp(*t)
}

// describeJob is the job's facts, for an operator.
func describeJob(in Input) string {
	r := in.Request
	return fmt.Sprintf("job: action %q, operation key %q, payment %q, amount %s, known refund id %q, key first used %s, last send %s, decided at %s",
		string(in.Action), r.OperationKey, r.PaymentRef, amount(r.AmountMinor, r.Currency), in.ProviderRefundID,
		stampOf(in.KeyFirstUsedAt), stampOf(in.LastSendAt), stamp(in.Now))
}

// amount is an amount as people read it: major units and the currency
// ("11.50 EUR"), never the minor units the provider and the table hold.
func amount(minor int64, currency string) string {
	return money.Format(minor, currency) + " " + currency
}

func describeRefund(r provider.Refund) string {
	s := fmt.Sprintf("refund id %q, reference %q, payment %q, amount %s, status %q", r.ProviderRefundID, r.Reference,
		r.PaymentRef, amount(r.AmountMinor, r.Currency), string(r.Status))
	if r.Reason != "" {
		s += fmt.Sprintf(", reason %q", r.Reason)
	}
	if len(r.Raw) > 0 {
		s += ", body " + quoteRaw(r.Raw)
	}
	return s
}

func quoteRaw(b []byte) string {
	if len(b) > maxRaw {
		return fmt.Sprintf("%q (%d more bytes)", b[:maxRaw], len(b)-maxRaw)
	}
	return fmt.Sprintf("%q", b)
}

// describeSend is what the provider answered to a send, and the job.
func describeSend(in Input) string {
	var b strings.Builder
	b.WriteString(describeJob(in))
	if in.SendErr != nil {
		b.WriteString("\nsend error: " + errText(in.SendErr))
	}
	b.WriteString("\nsend answer: " + describeRefund(in.Sent))
	return b.String()
}

// describeLookup is what the lookup returned and what the log holds about
// the key, and the job.
func describeLookup(in Input) string {
	var b strings.Builder
	b.WriteString(describeJob(in))
	b.WriteString(fmt.Sprintf("\nprovider: safe resend %v, key retention %v, lookup lag %v; key window %v",
		in.Caps.SafeResend, in.Caps.KeyRetention, in.Caps.LookupLag, in.KeyWindow))
	switch {
	case in.LookupErr != nil:
		b.WriteString("\nlookup error: " + errText(in.LookupErr))
	case len(in.Found) == 0:
		b.WriteString("\nlookup: nothing found")
	}
	for i, r := range in.Found {
		fmt.Fprintf(&b, "\nlookup result %d: %s", i+1, describeRefund(r))
	}
	n := 0
	for _, e := range in.Evidence {
		if e.OperationKey != in.Request.OperationKey {
			continue
		}
		n++
		fmt.Fprintf(&b, "\nlog entry %d: source %s, status %s, refund id %q, attempt %d, received %s, payload %s",
			e.ID, e.Source, e.Status, e.ProviderRefundID, e.Attempt, stamp(e.ReceivedAt), quoteRaw(e.Payload))
	}
	if n == 0 {
		b.WriteString("\nlog: no entry for the key")
	}
	return b.String()
}
