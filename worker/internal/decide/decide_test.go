package decide_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/money"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/worker/internal/decide"
)

var (
	now  = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	req  = provider.RefundRequest{OperationKey: "op-1", PaymentRef: "pay_1", AmountMinor: 300, Currency: "EUR"}
	caps = provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByReference: true, LookupLag: 30 * time.Second}
	// window is the key's safe-resend window: retention minus a 3 s
	// provider timeout and a 5 min skew margin.
	window = 24*time.Hour - 3*time.Second - 5*time.Minute
)

func at(d time.Duration) *time.Time {
	t := now.Add(d)
	return &t
}

// answer is the provider's answer about req's refund re_1.
func answer(s provider.Status) provider.Refund {
	return provider.Refund{ProviderRefundID: "re_1", Reference: "op-1", PaymentRef: "pay_1", AmountMinor: 300, Currency: "EUR",
		Status: s, Raw: []byte(`{"id":"re_1","status":"` + string(s) + `"}`)}
}

func with(r provider.Refund, change func(*provider.Refund)) provider.Refund {
	change(&r)
	return r
}

// send is a send's outcome on a key first used a minute ago and sent again
// now (so it may have executed before).
func send(r provider.Refund, err error) decide.Input {
	return decide.Input{Action: decide.Refund, Request: req, Caps: caps, Now: now,
		KeyFirstUsedAt: at(-time.Minute), LastSendAt: at(0), KeyWindow: window, Sent: r, SendErr: err}
}

// firstSend is the outcome of the key's first send.
func firstSend(r provider.Refund, err error) decide.Input {
	in := send(r, err)
	in.KeyFirstUsedAt = in.LastSendAt
	return in
}

// lookup is a reconcile's outcome for a key first used 10 minutes ago and
// last sent 5 minutes ago: past the 30 s lookup lag, inside the window.
func lookup(found []provider.Refund, err error, log ...evidence.Entry) decide.Input {
	return decide.Input{Action: decide.Reconcile, Request: req, Caps: caps, Now: now,
		KeyFirstUsedAt: at(-10 * time.Minute), LastSendAt: at(-5 * time.Minute), KeyWindow: window,
		Found: found, LookupErr: err, Evidence: log}
}

func found(rs ...provider.Refund) []provider.Refund { return rs }

func entry(key string, s evidence.Status) evidence.Entry {
	return evidence.Entry{ID: 7, ReceivedAt: now.Add(-time.Minute), Observation: evidence.Observation{
		OperationKey: key, Source: evidence.Webhook, ProviderRefundID: "re_1", Status: s, Payload: []byte(`{"evt":"` + string(s) + `"}`)}}
}

func edit(in decide.Input, change func(*decide.Input)) decide.Input {
	change(&in)
	return in
}

// want is what a row expects. Fields left zero are expected zero, except
// reason and evidence, which list substrings.
type want struct {
	kind     decide.Kind
	rule     string
	next     decide.Action
	after    time.Duration
	id       string
	alert    string
	reason   []string
	evidence []string
}

type row struct {
	name string
	in   decide.Input
	want want
}

var rejected = &provider.RejectedError{Code: "charge_disputed", Reason: "the charge is disputed"}

// providerTable has one row per line of DESIGN.md's table "What the
// provider says, and what the worker does", in its order.
var providerTable = []row{
	{"verified success completes with the refund id",
		send(answer(provider.StatusSucceeded), nil),
		want{kind: decide.Complete, rule: decide.RuleSendSucceeded, id: "re_1"}},
	{"pending answer reconciles later, never completes, and saves the id",
		send(answer(provider.StatusPending), nil),
		want{kind: decide.Reschedule, rule: decide.RuleSendPending, next: decide.Reconcile, after: decide.DefaultPendingDelay, id: "re_1"}},
	{"definitive rejection fails with the code and the reason",
		send(provider.Refund{}, fmt.Errorf("send refund: %w", rejected)),
		want{kind: decide.Fail, rule: decide.RuleSendRejected, reason: []string{"charge_disputed", "the charge is disputed"}}},
	{"same key with other parameters goes to manual review, never a new key",
		send(provider.Refund{Raw: []byte(`{"error":{"code":"idempotency_params_mismatch"}}`)}, fmt.Errorf("send refund: %w", provider.ErrKeyParamsMismatch)),
		want{kind: decide.ManualReview, rule: decide.RuleSendKeyParamsMismatch, reason: []string{"never mint a new key"},
			evidence: []string{"idempotency_params_mismatch", `operation key "op-1"`}}},
	{"key in use by a concurrent request reconciles later",
		send(provider.Refund{}, fmt.Errorf("send refund: %w", provider.ErrKeyInUse)),
		want{kind: decide.Reschedule, rule: decide.RuleSendKeyInUse, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"in use"}}},
	{"already refunded after a send that may have executed is evidence to reconcile, not a failure",
		send(provider.Refund{}, fmt.Errorf("send refund: already_refunded: %w", provider.ErrAlreadyRefunded)),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, reason: []string{"already_refunded"}}},
	{"exceeds refundable amount after a send that may have executed is evidence to reconcile, not a failure",
		send(provider.Refund{}, fmt.Errorf("send refund: exceeds_refundable_amount: %w", provider.ErrAlreadyRefunded)),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, reason: []string{"exceeds_refundable_amount"}}},
	{"timeout reconciles, never a blind resend",
		send(provider.Refund{}, fmt.Errorf("send refund: %w: %w", provider.ErrOutcomeUnknown, context.DeadlineExceeded)),
		want{kind: decide.Reschedule, rule: decide.RuleSendOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"deadline exceeded"}}},
	{"connection reset reconciles, never a blind resend",
		send(provider.Refund{}, fmt.Errorf("send refund: %w: %w", provider.ErrOutcomeUnknown, syscall.ECONNRESET)),
		want{kind: decide.Reschedule, rule: decide.RuleSendOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"reset"}}},
	{"5xx reconciles, never a blind resend",
		send(provider.Refund{Raw: []byte("bad gateway")}, fmt.Errorf("send refund: provider answered 502 \"\": %w", provider.ErrOutcomeUnknown)),
		want{kind: decide.Reschedule, rule: decide.RuleSendOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"502"}}},
	{"rate limited before processing resends later with the same key",
		send(provider.Refund{}, fmt.Errorf("send refund: %w", provider.ErrRateLimited)),
		want{kind: decide.Reschedule, rule: decide.RuleSendRateLimited, next: decide.Refund, after: decide.DefaultRetryDelay, reason: []string{"rate limited"}}},
}

// sendRules are the other rules after a send.
var sendRules = []row{
	{"unreadable answer reconciles, never a blind resend",
		send(provider.Refund{Raw: []byte("<html>")}, fmt.Errorf("send refund: decode refund: %w: invalid character", provider.ErrOutcomeUnknown)),
		want{kind: decide.Reschedule, rule: decide.RuleSendOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"invalid character"}}},
	{"an error no sentinel matches reconciles, never a blind resend",
		send(provider.Refund{}, errors.New("tls: bad certificate")),
		want{kind: decide.Reschedule, rule: decide.RuleSendUnknownError, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"bad certificate"}}},
	{"a success that fails Verify is a mismatch, never a success",
		send(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.AmountMinor = 3000 }), nil),
		want{kind: decide.ManualReview, rule: decide.RuleSendMismatch, reason: []string{"amount 30.00 EUR, want 3.00 EUR"}, evidence: []string{`status "succeeded"`, "amount 30.00 EUR"}}},
	{"a success for another reference is a mismatch, never a success",
		send(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.Reference = "op-2" }), nil),
		want{kind: decide.ManualReview, rule: decide.RuleSendMismatch, reason: []string{`reference "op-2"`}}},
	{"the client's mismatch goes to manual review with the answer as evidence",
		send(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.Currency = "USD" }),
			fmt.Errorf("send refund: verify refund: currency \"USD\", want \"EUR\": %w", provider.ErrMismatch)),
		want{kind: decide.ManualReview, rule: decide.RuleSendMismatch, reason: []string{"currency"}, evidence: []string{"amount 3.00 USD", `"re_1"`}}},
	{"an invalid request was not sent: manual review names the bug",
		send(provider.Refund{}, fmt.Errorf("send refund: validate refund: no currency: %w", provider.ErrInvalidRequest)),
		want{kind: decide.ManualReview, rule: decide.RuleSendInvalidRequest, reason: []string{"not sent", "no currency"}}},
	{"a reversed answer to a send reconciles now and saves the id",
		send(answer(provider.StatusReversed), fmt.Errorf("send refund: refund re_1 reversed: %w", provider.ErrAlreadyRefunded)),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, id: "re_1", reason: []string{"reversed"}}},
	{"a reversed status without an error reconciles now",
		send(answer(provider.StatusReversed), nil),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, id: "re_1", reason: []string{"reversed"}}},
	{"a reversed answer on the key's first send is still our refund: reconcile",
		firstSend(answer(provider.StatusReversed), fmt.Errorf("send refund: refund re_1 reversed: %w", provider.ErrAlreadyRefunded)),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, id: "re_1", reason: []string{"reversed"}}},
	{"already refunded on the key's first send is another refund's doing: manual review, not a reconcile loop",
		firstSend(provider.Refund{}, fmt.Errorf("send refund: already_refunded: %w", provider.ErrAlreadyRefunded)),
		want{kind: decide.ManualReview, rule: decide.RuleSendRefundedElsewhere, reason: []string{"never sent before"}}},
	{"already refunded when the key's first use is unknown may be our refund: reconcile",
		edit(send(provider.Refund{}, fmt.Errorf("send refund: already_refunded: %w", provider.ErrAlreadyRefunded)), func(in *decide.Input) { in.KeyFirstUsedAt = nil }),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, reason: []string{"already_refunded"}}},
	{"a success naming no refund id reconciles to learn it",
		send(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "" }), nil),
		want{kind: decide.Reschedule, rule: decide.RuleSendSucceededNoID, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"no refund id"}}},
	{"a success naming no refund id completes on the id known before",
		edit(send(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "" }), nil), func(in *decide.Input) { in.ProviderRefundID = "re_1" }),
		want{kind: decide.Complete, rule: decide.RuleSendSucceeded, id: "re_1"}},
	{"a success with the id known before completes",
		edit(send(answer(provider.StatusSucceeded), nil), func(in *decide.Input) { in.ProviderRefundID = "re_1" }),
		want{kind: decide.Complete, rule: decide.RuleSendSucceeded, id: "re_1"}},
	{"a success naming another refund than the one known for the key: manual review and alert",
		edit(send(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "re_2" }), nil), func(in *decide.Input) { in.ProviderRefundID = "re_1" }),
		want{kind: decide.ManualReview, rule: decide.RuleSendOtherRefund, alert: decide.AlertSeveralRefund, reason: []string{"re_2", "re_1"}}},
	{"no error but a rejected status is outside the contract: reconcile, never fail",
		send(answer(provider.StatusRejected), nil),
		want{kind: decide.Reschedule, rule: decide.RuleSendUnexpectedAnswer, next: decide.Reconcile, after: decide.DefaultRetryDelay, id: "re_1", reason: []string{`"rejected"`}}},
	{"no error but a status nobody knows: reconcile",
		send(answer("processing"), nil),
		want{kind: decide.Reschedule, rule: decide.RuleSendUnexpectedAnswer, next: decide.Reconcile, after: decide.DefaultRetryDelay, id: "re_1", reason: []string{`"processing"`}}},
	{"an error both rate limited and of unknown outcome reconciles: the careful reading wins",
		send(provider.Refund{}, errors.Join(provider.ErrRateLimited, provider.ErrOutcomeUnknown)),
		want{kind: decide.Reschedule, rule: decide.RuleSendOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"rate limited"}}},
	{"an error both rejected and already refunded reconciles, never fails",
		send(provider.Refund{}, errors.Join(rejected, provider.ErrAlreadyRefunded)),
		want{kind: decide.Reschedule, rule: decide.RuleSendAlreadyRefunded, next: decide.Reconcile, reason: []string{"charge_disputed"}}},
	{"an error both rejected and rate limited reconciles: neither a failure nor a resend",
		send(provider.Refund{}, errors.Join(rejected, provider.ErrRateLimited)),
		want{kind: decide.Reschedule, rule: decide.RuleSendUnknownError, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"charge_disputed"}}},
	{"a rejection that carries no RejectedError fails with its message",
		send(provider.Refund{}, fmt.Errorf("send refund: %w", provider.ErrRejected)),
		want{kind: decide.Fail, rule: decide.RuleSendRejected, reason: []string{"refund rejected"}}},
	{"a typed nil rejection does not panic",
		send(provider.Refund{}, (*provider.RejectedError)(nil)),
		want{kind: decide.Fail, rule: decide.RuleSendRejected, reason: []string{"unprintable"}}},
	{"configured delays replace the defaults",
		edit(send(provider.Refund{}, provider.ErrRateLimited), func(in *decide.Input) { in.Delays = decide.Delays{Retry: 2 * time.Second} }),
		want{kind: decide.Reschedule, rule: decide.RuleSendRateLimited, next: decide.Refund, after: 2 * time.Second, reason: []string{"rate limited"}}},
	{"negative delays take the defaults",
		edit(send(answer(provider.StatusPending), nil), func(in *decide.Input) { in.Delays = decide.Delays{Pending: -time.Second} }),
		want{kind: decide.Reschedule, rule: decide.RuleSendPending, next: decide.Reconcile, after: decide.DefaultPendingDelay, id: "re_1"}},
	{"a send ignores what a lookup would have said",
		edit(send(answer(provider.StatusPending), nil), func(in *decide.Input) {
			in.Found = found(answer(provider.StatusSucceeded))
			in.Evidence = []evidence.Entry{entry("op-1", evidence.Succeeded)}
		}),
		want{kind: decide.Reschedule, rule: decide.RuleSendPending, next: decide.Reconcile, after: decide.DefaultPendingDelay, id: "re_1"}},
}

// reconcileRules are DESIGN.md's reconcile paragraphs, rule by rule.
var reconcileRules = []row{
	{"lookup finds the refund succeeded: complete",
		lookup(found(answer(provider.StatusSucceeded)), nil),
		want{kind: decide.Complete, rule: decide.RuleReconcileSucceeded, id: "re_1"}},
	{"lookup finds the refund reversed: complete, the refund executed, and alert",
		lookup(found(answer(provider.StatusReversed)), nil),
		want{kind: decide.Complete, rule: decide.RuleReconcileReversed, id: "re_1", alert: decide.AlertReversed}},
	{"lookup finds the refund pending: reconcile later, saving the id",
		lookup(found(answer(provider.StatusPending)), nil),
		want{kind: decide.Reschedule, rule: decide.RuleReconcilePending, next: decide.Reconcile, after: decide.DefaultPendingDelay, id: "re_1"}},
	{"lookup finds the refund rejected: a definitive answer for the same key fails the job",
		lookup(found(with(answer(provider.StatusRejected), func(r *provider.Refund) { r.Reason = "insufficient balance" })), nil),
		want{kind: decide.Fail, rule: decide.RuleReconcileRejected, id: "re_1", reason: []string{"insufficient balance"}}},
	{"rejected while the log says the refund succeeded: manual review, not fail",
		lookup(found(answer(provider.StatusRejected)), nil, entry("op-1", evidence.Succeeded)),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileRejectedVsLog, evidence: []string{"log entry 7", "status succeeded"}}},
	{"rejected after a pending in the log is the refund's life: fail",
		lookup(found(answer(provider.StatusRejected)), nil, entry("op-1", evidence.Pending)),
		want{kind: decide.Fail, rule: decide.RuleReconcileRejected, id: "re_1", reason: []string{"rejected"}}},
	{"a result for the key with another amount is not success: manual review with the answer",
		lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.AmountMinor = 30000 })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileMismatch, reason: []string{"amount 300.00 EUR, want 3.00 EUR"}, evidence: []string{"lookup result 1", "amount 300.00 EUR"}}},
	{"a result for the key with another currency is not success",
		lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.Currency = "USD" })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileMismatch, reason: []string{"currency"}}},
	{"a result for the key on another payment is not success",
		lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.PaymentRef = "pay_2" })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileMismatch, reason: []string{"payment"}}},
	{"a mismatch wins over a verified success for the key",
		lookup(found(answer(provider.StatusSucceeded), with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.AmountMinor = 1 })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileMismatch, reason: []string{"amount 0.01 EUR"}}},
	{"results about other keys are ignored: not found",
		lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.Reference, r.ProviderRefundID = "op-2", "re_9" })), nil),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundResend, next: decide.Refund}},
	{"two refunds for one key: manual review and alert",
		lookup(found(answer(provider.StatusSucceeded), with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "re_2" })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileSeveralRefunds, alert: decide.AlertSeveralRefund, reason: []string{"re_1, re_2"}}},
	{"a refund other than the one known for the key: manual review and alert",
		edit(lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "re_2" })), nil), func(in *decide.Input) { in.ProviderRefundID = "re_1" }),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileSeveralRefunds, alert: decide.AlertSeveralRefund, reason: []string{"re_1, re_2"}}},
	{"the same refund reported pending and succeeded completes",
		lookup(found(answer(provider.StatusPending), answer(provider.StatusSucceeded)), nil),
		want{kind: decide.Complete, rule: decide.RuleReconcileSucceeded, id: "re_1"}},
	{"the same refund reported succeeded and rejected: manual review",
		lookup(found(answer(provider.StatusSucceeded), answer(provider.StatusRejected)), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileContradiction, reason: []string{"rejected and executed"}}},
	{"a status the provider never reports: manual review",
		lookup(found(answer(provider.StatusNotFound)), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileUnknownStatus, reason: []string{`"not_found"`}}},
	{"succeeded with no refund id and none known: manual review",
		lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "" })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileNoRefundID, reason: []string{"no refund id"}}},
	{"succeeded with no refund id does not complete on the id of a pending row",
		lookup(found(answer(provider.StatusPending), with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "" })), nil),
		want{kind: decide.ManualReview, rule: decide.RuleReconcileNoRefundID, reason: []string{"no refund id"}}},
	{"succeeded with no refund id completes on the id known before",
		edit(lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.ProviderRefundID = "" })), nil), func(in *decide.Input) { in.ProviderRefundID = "re_1" }),
		want{kind: decide.Complete, rule: decide.RuleReconcileSucceeded, id: "re_1"}},
	{"lookup rate limited: reconcile later",
		lookup(nil, fmt.Errorf("look up refund: %w", provider.ErrRateLimited)),
		want{kind: decide.Reschedule, rule: decide.RuleLookupRateLimited, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"rate limited"}}},
	{"lookup outcome unknown: reconcile later",
		lookup(nil, fmt.Errorf("look up refund: provider answered 503: %w", provider.ErrOutcomeUnknown)),
		want{kind: decide.Reschedule, rule: decide.RuleLookupOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"503"}}},
	{"lookup fails with an unknown error: reconcile later",
		lookup(nil, errors.New("dns: no such host")),
		want{kind: decide.Reschedule, rule: decide.RuleLookupUnknownError, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"no such host"}}},
	{"lookup results that came with an error are not evidence",
		lookup(found(answer(provider.StatusSucceeded)), fmt.Errorf("look up refund: %w", provider.ErrOutcomeUnknown)),
		want{kind: decide.Reschedule, rule: decide.RuleLookupOutcomeUnknown, next: decide.Reconcile, after: decide.DefaultRetryDelay, reason: []string{"unknown"}}},
	{"no lookup offered: the refund cannot be reconciled, manual review",
		lookup(nil, fmt.Errorf("look up refund: %w", provider.ErrNoLookup), entry("op-1", evidence.Pending)),
		want{kind: decide.ManualReview, rule: decide.RuleLookupNoLookup, reason: []string{"cannot be reconciled"}, evidence: []string{"lookup error", "log entry 7"}}},
	{"lookup invalid request: manual review",
		lookup(nil, fmt.Errorf("build request: %w: bad url", provider.ErrInvalidRequest)),
		want{kind: decide.ManualReview, rule: decide.RuleLookupInvalidRequest, reason: []string{"bad url"}}},
}

// notFoundRules are "not found is not proof", rule by rule.
var notFoundRules = []row{
	{"never sent: nothing can exist, refund now",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt = nil, nil }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundNeverSent, next: decide.Refund, reason: []string{"never sent"}}},
	{"never sent, even by a provider without safe resend: refund now",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt, in.Caps.SafeResend = nil, nil, false }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundNeverSent, next: decide.Refund, reason: []string{"never sent"}}},
	{"never sent, but the log holds a success for the key: manual review",
		edit(lookup(nil, nil, entry("op-1", evidence.Succeeded)), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt = nil, nil }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundLogOfUnsentKey, evidence: []string{"log entry 7"}}},
	{"never sent, with only not-found entries in the log: refund now",
		edit(lookup(nil, nil, entry("op-1", evidence.NotFound)), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt = nil, nil }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundNeverSent, next: decide.Refund, reason: []string{"never sent"}}},
	{"inside the lookup lag: reconcile when the lag ends",
		edit(lookup(nil, nil), func(in *decide.Input) { in.LastSendAt = at(-10 * time.Second) }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundInLag, next: decide.Reconcile, after: 20 * time.Second, reason: []string{"lookup lag"}}},
	{"inside the lookup lag, almost over: wait at least LagPoll",
		edit(lookup(nil, nil), func(in *decide.Input) { in.LastSendAt = at(-29 * time.Second) }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundInLag, next: decide.Reconcile, after: decide.DefaultLagPoll, reason: []string{"lookup lag"}}},
	{"inside the lookup lag with a success in the log: wait for the lookup",
		edit(lookup(nil, nil, entry("op-1", evidence.Succeeded)), func(in *decide.Input) { in.LastSendAt = at(-10 * time.Second) }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundInLag, next: decide.Reconcile, after: 20 * time.Second, reason: []string{"lookup lag"}}},
	{"the lag is measured from the last send, not from the key's first use",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt = at(-time.Hour), at(-time.Second) }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundInLag, next: decide.Reconcile, after: 29 * time.Second, reason: []string{"lookup lag"}}},
	{"with no last send recorded, the lag is measured from the first use",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt = at(-time.Second), nil }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundInLag, next: decide.Reconcile, after: 29 * time.Second, reason: []string{"lookup lag"}}},
	{"the lag ends exactly now: resend",
		edit(lookup(nil, nil), func(in *decide.Input) { in.LastSendAt = at(-30 * time.Second) }),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundResend, next: decide.Refund, reason: []string{"inside its window"}}},
	{"after the lag with a success in the log: manual review, never resend against it",
		lookup(nil, nil, entry("op-1", evidence.Succeeded)),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundLogOfRefund, reason: []string{"never resend"}, evidence: []string{"log entry 7", "status succeeded", `"re_1"`, "lookup: nothing found"}}},
	{"after the lag with a pending in the log: manual review",
		lookup(nil, nil, entry("op-1", evidence.Pending)),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundLogOfRefund, evidence: []string{"status pending"}}},
	{"after the lag with a reversal in the log: manual review",
		lookup(nil, nil, entry("op-1", evidence.Reversed)),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundLogOfRefund, evidence: []string{"status reversed"}}},
	{"after the lag, a refund id known for the key is evidence the refund exists: manual review, never resend",
		edit(lookup(nil, nil), func(in *decide.Input) { in.ProviderRefundID = "re_1" }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundKnownRefund, reason: []string{"re_1", "never resend"}, evidence: []string{`known refund id "re_1"`}}},
	{"never sent, but a refund id is known for the key: manual review",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt, in.ProviderRefundID = nil, nil, "re_1" }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundLogOfUnsentKey, reason: []string{"re_1"}}},
	{"after the lag with a rejection in the log: still no proof for a resend, manual review",
		lookup(nil, nil, entry("op-1", evidence.Rejected)),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundOtherLog, evidence: []string{"status rejected"}}},
	{"after the lag with a conflict in the log: manual review",
		lookup(nil, nil, entry("op-1", evidence.Conflict)),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundOtherLog, evidence: []string{"status conflict"}}},
	{"log entries about other keys do not block a resend",
		lookup(nil, nil, entry("op-2", evidence.Succeeded)),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundResend, next: decide.Refund}},
	{"earlier not-found entries in the log do not block a resend",
		lookup(nil, nil, entry("op-1", evidence.NotFound)),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundResend, next: decide.Refund}},
	{"safe resend inside the key's window: refund now with the same key",
		lookup(nil, nil),
		want{kind: decide.Reschedule, rule: decide.RuleNotFoundResend, next: decide.Refund, reason: []string{"same key"}}},
	{"a provider without safe resend: manual review",
		edit(lookup(nil, nil), func(in *decide.Input) { in.Caps.SafeResend = false }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundResendUnsafe,
			reason: []string{"not found after the lookup-lag window; resend not safe: the provider does not guarantee"}}},
	{"the key's window has closed: manual review",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt = at(-window) }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundResendUnsafe, reason: []string{"resend not safe: the key's window closed at 2026-"}}},
	{"the key's first use is unknown: manual review",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyFirstUsedAt = nil }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundResendUnsafe, reason: []string{"first use is unknown"}}},
	{"the key has no window: manual review",
		edit(lookup(nil, nil), func(in *decide.Input) { in.KeyWindow = 0 }),
		want{kind: decide.ManualReview, rule: decide.RuleNotFoundResendUnsafe, reason: []string{"no window"}}},
}

// guards apply whatever the action.
var guards = []row{
	{"an unknown action goes to manual review",
		edit(send(answer(provider.StatusSucceeded), nil), func(in *decide.Input) { in.Action = "settle" }),
		want{kind: decide.ManualReview, rule: decide.RuleUnknownAction, reason: []string{`"settle"`}, evidence: []string{`operation key "op-1"`}}},
	{"a job without an operation key goes to manual review, even with a success",
		edit(send(answer(provider.StatusSucceeded), nil), func(in *decide.Input) { in.Request.OperationKey = "" }),
		want{kind: decide.ManualReview, rule: decide.RuleNoOperationKey}},
	{"a reconcile without an operation key goes to manual review",
		edit(lookup(found(with(answer(provider.StatusSucceeded), func(r *provider.Refund) { r.Reference = "" })), nil), func(in *decide.Input) { in.Request.OperationKey = "" }),
		want{kind: decide.ManualReview, rule: decide.RuleNoOperationKey}},
}

func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got := decide.Decide(r.in)
			w := r.want
			if got.Kind != w.kind || got.Rule != w.rule || got.NextAction != w.next || got.After != w.after ||
				got.ProviderRefundID != w.id || got.Alert != w.alert {
				t.Errorf("got  %s %q next=%q after=%v id=%q alert=%q\nwant %s %q next=%q after=%v id=%q alert=%q\nreason: %s",
					got.Kind, got.Rule, got.NextAction, got.After, got.ProviderRefundID, got.Alert,
					w.kind, w.rule, w.next, w.after, w.id, w.alert, got.Reason)
			}
			for _, s := range w.reason {
				if !strings.Contains(got.Reason, s) {
					t.Errorf("reason %q lacks %q", got.Reason, s)
				}
			}
			for _, s := range w.evidence {
				if !strings.Contains(got.Evidence, s) {
					t.Errorf("evidence lacks %q:\n%s", s, got.Evidence)
				}
			}
			checkShape(t, got)
		})
	}
}

func TestProviderTable(t *testing.T)      { runRows(t, providerTable) }
func TestSendRules(t *testing.T)          { runRows(t, sendRules) }
func TestReconcileRules(t *testing.T)     { runRows(t, reconcileRules) }
func TestNotFoundIsNotProof(t *testing.T) { runRows(t, notFoundRules) }
func TestGuards(t *testing.T)             { runRows(t, guards) }

// allRules lists every rule; each must be exercised by some row.
var allRules = []string{
	decide.RuleUnknownAction, decide.RuleNoOperationKey,
	decide.RuleSendMismatch, decide.RuleSendOtherRefund, decide.RuleSendKeyParamsMismatch, decide.RuleSendOutcomeUnknown,
	decide.RuleSendAlreadyRefunded, decide.RuleSendRefundedElsewhere, decide.RuleSendKeyInUse, decide.RuleSendInvalidRequest,
	decide.RuleSendRateLimited, decide.RuleSendRejected, decide.RuleSendUnknownError, decide.RuleSendSucceeded,
	decide.RuleSendSucceededNoID, decide.RuleSendPending, decide.RuleSendUnexpectedAnswer,
	decide.RuleLookupNoLookup, decide.RuleLookupInvalidRequest, decide.RuleLookupRateLimited, decide.RuleLookupOutcomeUnknown,
	decide.RuleLookupUnknownError,
	decide.RuleReconcileMismatch, decide.RuleReconcileSeveralRefunds, decide.RuleReconcileUnknownStatus,
	decide.RuleReconcileContradiction, decide.RuleReconcileReversed, decide.RuleReconcileSucceeded,
	decide.RuleReconcileNoRefundID, decide.RuleReconcileRejectedVsLog, decide.RuleReconcileRejected, decide.RuleReconcilePending,
	decide.RuleNotFoundLogOfUnsentKey, decide.RuleNotFoundNeverSent, decide.RuleNotFoundInLag, decide.RuleNotFoundLogOfRefund,
	decide.RuleNotFoundKnownRefund, decide.RuleNotFoundOtherLog, decide.RuleNotFoundResend, decide.RuleNotFoundResendUnsafe,
}

func TestEveryRuleHasARow(t *testing.T) {
	seen := map[string]bool{}
	for _, rows := range [][]row{providerTable, sendRules, reconcileRules, notFoundRules, guards} {
		for _, r := range rows {
			seen[r.want.rule] = true
		}
	}
	names := map[string]bool{}
	for _, rule := range allRules {
		if names[rule] {
			t.Errorf("rule name %q used twice", rule)
		}
		names[rule] = true
		if !seen[rule] {
			t.Errorf("no row exercises rule %q", rule)
		}
	}
	for rule := range seen {
		if !names[rule] {
			t.Errorf("a row expects rule %q, which allRules does not list", rule)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[decide.Kind]string{decide.Complete: "complete", decide.Reschedule: "reschedule",
		decide.ManualReview: "manual_review", decide.Fail: "fail", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

// checkShape checks what every Decision must look like, whatever its
// input.
func checkShape(t interface{ Errorf(string, ...any) }, d decide.Decision) {
	if d.Rule == "" {
		t.Errorf("decision %+v names no rule", d)
	}
	switch d.Kind {
	case decide.Complete:
		if d.ProviderRefundID == "" {
			t.Errorf("%q completes without a refund id", d.Rule)
		}
	case decide.Reschedule:
		if d.NextAction != decide.Refund && d.NextAction != decide.Reconcile {
			t.Errorf("%q reschedules to action %q", d.Rule, d.NextAction)
		}
		if d.After < 0 {
			t.Errorf("%q reschedules %v from now", d.Rule, d.After)
		}
		if d.Reason == "" {
			t.Errorf("%q reschedules without a reason", d.Rule)
		}
	case decide.ManualReview:
		if d.Reason == "" || d.Evidence == "" {
			t.Errorf("%q: manual review without reason (%q) or evidence (%q)", d.Rule, d.Reason, d.Evidence)
		}
	case decide.Fail:
		if d.Reason == "" {
			t.Errorf("%q fails without a reason", d.Rule)
		}
	default:
		t.Errorf("%q: kind %v", d.Rule, d.Kind)
	}
	if d.Kind != decide.Reschedule && (d.NextAction != "" || d.After != 0) {
		t.Errorf("%q: %s with next action %q after %v", d.Rule, d.Kind, d.NextAction, d.After)
	}
}

// Random inputs: a small world of keys, ids, statuses and errors, so that
// matches and collisions are frequent.
var (
	keys         = []string{"op-1", "op-2", ""}
	refundIDs    = []string{"", "re_1", "re_2"}
	statuses     = []provider.Status{provider.StatusSucceeded, provider.StatusPending, provider.StatusRejected, provider.StatusReversed, provider.StatusNotFound, "", "weird"}
	logStatuses  = []evidence.Status{evidence.Succeeded, evidence.Pending, evidence.Rejected, evidence.NotFound, evidence.Conflict, evidence.Reversed, "weird"}
	sentinelErrs = []error{provider.ErrOutcomeUnknown, provider.ErrRateLimited, provider.ErrKeyParamsMismatch, provider.ErrKeyInUse,
		provider.ErrRejected, provider.ErrAlreadyRefunded, provider.ErrMismatch, provider.ErrInvalidRequest, provider.ErrNoLookup}
)

func drawRefund(t *rapid.T, label string) provider.Refund {
	r := provider.Refund{
		ProviderRefundID: rapid.SampledFrom(refundIDs).Draw(t, label+" id"),
		Reference:        rapid.SampledFrom(keys).Draw(t, label+" reference"),
		PaymentRef:       rapid.SampledFrom([]string{"pay_1", "pay_2"}).Draw(t, label+" payment"),
		AmountMinor:      rapid.SampledFrom([]int64{300, 299, 0}).Draw(t, label+" amount"),
		Currency:         rapid.SampledFrom([]string{"EUR", "eur", "USD"}).Draw(t, label+" currency"),
		Status:           rapid.SampledFrom(statuses).Draw(t, label+" status"),
		Reason:           rapid.SampledFrom([]string{"", "why"}).Draw(t, label+" reason"),
	}
	if rapid.Bool().Draw(t, label+" raw") {
		r.Raw = []byte(rapid.StringN(0, 40, -1).Draw(t, label+" body"))
	}
	// Mostly an answer that verifies, so the interesting rules run.
	if rapid.IntRange(0, 3).Draw(t, label+" verifies") > 0 {
		r.Reference, r.PaymentRef, r.AmountMinor, r.Currency = "op-1", "pay_1", 300, "EUR"
	}
	return r
}

func drawError(t *rapid.T, label string) error {
	switch rapid.IntRange(0, 6).Draw(t, label+" kind") {
	case 0:
		return nil
	case 1:
		return rapid.SampledFrom(sentinelErrs).Draw(t, label+" sentinel")
	case 2:
		return fmt.Errorf("wrapped: %w", rapid.SampledFrom(sentinelErrs).Draw(t, label+" sentinel"))
	case 3:
		return &provider.RejectedError{Code: "code", Reason: "reason"}
	case 4:
		return errors.Join(rapid.SampledFrom(sentinelErrs).Draw(t, label+" first"), rapid.SampledFrom(sentinelErrs).Draw(t, label+" second"))
	case 5:
		return rapid.SampledFrom([]error{errors.New("boom"), context.Canceled, (*provider.RejectedError)(nil)}).Draw(t, label+" other")
	}
	return fmt.Errorf("%w: %w", provider.ErrOutcomeUnknown, context.DeadlineExceeded)
}

func drawTime(t *rapid.T, label string) *time.Time {
	if rapid.IntRange(0, 3).Draw(t, label+" nil") == 0 {
		return nil
	}
	return at(-time.Duration(rapid.Int64Range(-int64(time.Minute), int64(48*time.Hour)).Draw(t, label)))
}

func drawDuration(t *rapid.T, label string, lo, hi time.Duration) time.Duration {
	return time.Duration(rapid.Int64Range(int64(lo), int64(hi)).Draw(t, label))
}

func drawInput(t *rapid.T) decide.Input {
	in := decide.Input{
		Action:  rapid.SampledFrom([]decide.Action{decide.Refund, decide.Reconcile, decide.Refund, decide.Reconcile, "", "settle"}).Draw(t, "action"),
		Request: req,
		Caps: provider.Capabilities{
			SafeResend:   rapid.Bool().Draw(t, "safe resend"),
			KeyRetention: 24 * time.Hour,
			LookupLag:    drawDuration(t, "lookup lag", -time.Second, 10*time.Minute),
		},
		Now:              now,
		KeyFirstUsedAt:   drawTime(t, "first use"),
		LastSendAt:       drawTime(t, "last send"),
		KeyWindow:        drawDuration(t, "key window", -time.Hour, 48*time.Hour),
		ProviderRefundID: rapid.SampledFrom([]string{"", "", "re_1", "re_2"}).Draw(t, "known id"),
		Sent:             drawRefund(t, "sent"),
		SendErr:          drawError(t, "send error"),
		LookupErr:        drawError(t, "lookup error"),
		Delays: decide.Delays{
			Pending: drawDuration(t, "pending delay", -time.Second, time.Minute),
			Retry:   drawDuration(t, "retry delay", -time.Second, time.Minute),
			LagPoll: drawDuration(t, "lag poll", -time.Second, time.Minute),
		},
	}
	if rapid.IntRange(0, 9).Draw(t, "no key") == 0 {
		in.Request.OperationKey = ""
	}
	if rapid.Bool().Draw(t, "lookup ok") {
		in.LookupErr = nil
	}
	if rapid.IntRange(0, 3).Draw(t, "first send") == 0 && in.KeyFirstUsedAt != nil {
		in.LastSendAt = in.KeyFirstUsedAt
	}
	// Nothing found and an empty log half the time each, so the not-found
	// rules run often.
	for i := range max(0, rapid.IntRange(-3, 3).Draw(t, "found")) {
		in.Found = append(in.Found, drawRefund(t, fmt.Sprintf("found %d", i)))
	}
	for i := range max(0, rapid.IntRange(-3, 3).Draw(t, "log")) {
		label := fmt.Sprintf("log %d", i)
		in.Evidence = append(in.Evidence, evidence.Entry{ID: int64(i + 1), Observation: evidence.Observation{
			OperationKey:     rapid.SampledFrom(keys).Draw(t, label+" key"),
			Source:           evidence.Webhook,
			ProviderRefundID: rapid.SampledFrom(refundIDs).Draw(t, label+" id"),
			Status:           rapid.SampledFrom(logStatuses).Draw(t, label+" status"),
			Payload:          []byte("p"),
		}})
	}
	return in
}

// verifiedFor returns the answers in rs about in's key that pass Verify.
func verifiedFor(in decide.Input, rs []provider.Refund) []provider.Refund {
	var out []provider.Refund
	for _, r := range rs {
		if in.Request.OperationKey != "" && r.Reference == in.Request.OperationKey && provider.Verify(in.Request, r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// logHoldsProviderEvidence reports whether the log holds evidence from the
// provider about in's key: anything but an earlier "not found". Succeeded,
// pending and reversed say the refund may exist; a rejection or a conflict
// proves nothing for a resend either.
func logHoldsProviderEvidence(in decide.Input) bool {
	for _, e := range in.Evidence {
		if e.OperationKey == in.Request.OperationKey && e.Status != evidence.NotFound {
			return true
		}
	}
	return false
}

// TestDecideInvariants checks, over random inputs, what no rule may ever
// do. Decide must not panic (rapid fails the test if it does).
func TestDecideInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { checkInvariants(t, drawInput(t)) })
}

// TestSendInvariants runs the invariants on sends only.
func TestSendInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawInput(t)
		in.Action = decide.Refund
		checkInvariants(t, in)
	})
}

// TestNotFoundInvariants runs the invariants on lookups that found nothing
// for the key, where a resend is decided: the riskiest rules.
func TestNotFoundInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawInput(t)
		in.Action, in.LookupErr, in.Request.OperationKey = decide.Reconcile, nil, "op-1"
		in.Found = slices.DeleteFunc(in.Found, func(r provider.Refund) bool { return r.Reference == "op-1" })
		checkInvariants(t, in)
	})
}

// checkInvariants checks what Decide may never do, whatever the input.
func checkInvariants(t *rapid.T, in decide.Input) {
	d := decide.Decide(in)
	checkShape(t, d)

	if again := decide.Decide(in); !reflect.DeepEqual(again, d) {
		t.Fatalf("not deterministic: %+v then %+v", d, again)
	}

	switch {
	// Never complete without a verified succeeded or reversed answer
	// for the key, and only on that answer's id (or the one known).
	case d.Kind == decide.Complete:
		var answers []provider.Refund
		switch in.Action {
		case decide.Refund:
			if in.SendErr == nil && in.Sent.Status == provider.StatusSucceeded {
				answers = verifiedFor(in, []provider.Refund{in.Sent})
			}
		case decide.Reconcile:
			if in.LookupErr == nil {
				for _, r := range verifiedFor(in, in.Found) {
					if r.Status == provider.StatusSucceeded || r.Status == provider.StatusReversed {
						answers = append(answers, r)
					}
				}
			}
		}
		if len(answers) == 0 {
			t.Fatalf("%q completes without a verified success for the key", d.Rule)
		}
		ok := d.ProviderRefundID == in.ProviderRefundID
		for _, r := range answers {
			ok = ok || d.ProviderRefundID == r.ProviderRefundID
		}
		if !ok {
			t.Fatalf("%q completes on refund id %q, which no answer named", d.Rule, d.ProviderRefundID)
		}

	// A resend: after a send only when rate limited; after a lookup only
	// when nothing for the key came back, no refund id is known, the log
	// holds no provider evidence for the key, and either the key was never
	// sent, or SafeResend, inside the window and past the lag.
	case d.Kind == decide.Reschedule && d.NextAction == decide.Refund:
		switch in.Action {
		case decide.Refund:
			if !errors.Is(in.SendErr, provider.ErrRateLimited) {
				t.Fatalf("%q resends after %v", d.Rule, in.SendErr)
			}
			for _, s := range sentinelErrs {
				if s != provider.ErrRateLimited && errors.Is(in.SendErr, s) {
					t.Fatalf("%q resends after %v, which also says %v", d.Rule, in.SendErr, s)
				}
			}
		case decide.Reconcile:
			if in.LookupErr != nil {
				t.Fatalf("%q resends after a failed lookup %v", d.Rule, in.LookupErr)
			}
			for _, r := range in.Found {
				if r.Reference == in.Request.OperationKey {
					t.Fatalf("%q resends although the lookup returned %+v for the key", d.Rule, r)
				}
			}
			if logHoldsProviderEvidence(in) {
				t.Fatalf("%q resends against provider evidence in the log", d.Rule)
			}
			if in.ProviderRefundID != "" {
				t.Fatalf("%q resends although the provider named refund %s for the key", d.Rule, in.ProviderRefundID)
			}
			if in.KeyFirstUsedAt == nil && in.LastSendAt == nil {
				break // never sent
			}
			last := in.KeyFirstUsedAt
			if last == nil || (in.LastSendAt != nil && in.LastSendAt.After(*last)) {
				last = in.LastSendAt
			}
			switch {
			case !in.Caps.SafeResend:
				t.Fatalf("%q resends a sent key on a provider without safe resend", d.Rule)
			case in.KeyFirstUsedAt == nil || !in.Now.Before(in.KeyFirstUsedAt.Add(in.KeyWindow)):
				t.Fatalf("%q resends a key outside its window", d.Rule)
			case in.Now.Before(last.Add(in.Caps.LookupLag)):
				t.Fatalf("%q resends inside the lookup lag", d.Rule)
			}
		default:
			t.Fatalf("%q resends on action %q", d.Rule, in.Action)
		}

	// Fail only on a definitive rejection: after a send, an error that
	// is ErrRejected; after a lookup, a verified rejected answer.
	case d.Kind == decide.Fail:
		switch in.Action {
		case decide.Refund:
			if !errors.Is(in.SendErr, provider.ErrRejected) {
				t.Fatalf("%q fails the job after %v", d.Rule, in.SendErr)
			}
			for _, s := range sentinelErrs {
				if s != provider.ErrRejected && errors.Is(in.SendErr, s) {
					t.Fatalf("%q fails the job after %v, which also says %v", d.Rule, in.SendErr, s)
				}
			}
		case decide.Reconcile:
			rejected := false
			for _, r := range verifiedFor(in, in.Found) {
				rejected = rejected || r.Status == provider.StatusRejected
			}
			if in.LookupErr != nil || !rejected {
				t.Fatalf("%q fails the job without a verified rejection for the key", d.Rule)
			}
		default:
			t.Fatalf("%q fails on action %q", d.Rule, in.Action)
		}
	}

	// An unknown outcome never ends the job, and is never resent.
	if in.Action == decide.Refund && errors.Is(in.SendErr, provider.ErrOutcomeUnknown) {
		if d.Kind == decide.Fail || d.Kind == decide.Complete || (d.Kind == decide.Reschedule && d.NextAction == decide.Refund) {
			t.Fatalf("%q: %s after an unknown outcome", d.Rule, d.Kind)
		}
	}
	// A reversal is always raised.
	if d.Rule == decide.RuleReconcileReversed && d.Alert == "" {
		t.Fatalf("reversal without an alert")
	}
	// A reschedule waits one of the configured (or default) delays, or
	// the rest of the lookup lag.
	if d.Kind == decide.Reschedule {
		delays := in.Delays
		if delays.Pending <= 0 {
			delays.Pending = decide.DefaultPendingDelay
		}
		if delays.Retry <= 0 {
			delays.Retry = decide.DefaultRetryDelay
		}
		if delays.LagPoll <= 0 {
			delays.LagPoll = decide.DefaultLagPoll
		}
		switch {
		case d.Rule == decide.RuleNotFoundInLag:
			if d.After < delays.LagPoll {
				t.Fatalf("inside the lag, waits %v, less than LagPoll %v", d.After, delays.LagPoll)
			}
		case d.After != 0 && d.After != delays.Pending && d.After != delays.Retry:
			t.Fatalf("%q waits %v, none of the delays %+v", d.Rule, d.After, delays)
		}
	}
}

// The operator reads amounts in the evidence as people do: in major units
// with the currency's decimals ("11.50 EUR"), never the minor units the
// table holds labelled as major ("1150 EUR", which an operator reads as a
// thousand euros). Whatever the amount and the currency, every manual
// review's evidence and every mismatch's reason says it that way.
func TestEvidenceSaysAmountsInMajorUnits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cur := rapid.SampledFrom([]string{"EUR", "JPY", "KWD", "CLF", "USD"}).Draw(t, "currency")
		minor := rapid.Int64Range(1, 1e12).Draw(t, "minor")
		other := rapid.Int64Range(1, 1e12).Filter(func(v int64) bool { return v != minor }).Draw(t, "provider's minor")
		r := req
		r.AmountMinor, r.Currency = minor, cur
		a := answer(provider.StatusSucceeded)
		a.AmountMinor, a.Currency = other, cur
		for name, in := range map[string]decide.Input{
			"a send answered for another amount": edit(send(a, nil), func(in *decide.Input) { in.Request = r }),
			"a lookup found another amount":      edit(lookup(found(a), nil), func(in *decide.Input) { in.Request = r }),
		} {
			d := decide.Decide(in)
			if d.Kind != decide.ManualReview {
				t.Fatalf("%s: %v, want a manual review", name, d.Kind)
			}
			for _, want := range []string{money.Format(minor, cur) + " " + cur, money.Format(other, cur) + " " + cur} {
				if !strings.Contains(d.Evidence+d.Reason, "amount "+want) {
					t.Fatalf("%s: the evidence and reason never say amount %s:\n%s\n%s", name, want, d.Reason, d.Evidence)
				}
			}
			for _, v := range []int64{minor, other} {
				if money.Exponent(cur) > 0 && strings.Contains(d.Evidence+d.Reason, fmt.Sprintf("amount %d %s", v, cur)) {
					t.Fatalf("%s: minor units labelled as major (amount %d %s):\n%s", name, v, cur, d.Evidence)
				}
			}
		}
	})
}
