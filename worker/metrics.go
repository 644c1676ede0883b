package worker

import (
	"time"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/worker/internal/decide"
)

// CallKind is the kind of a provider call.
type CallKind string

// The kinds of provider calls. Reconciles as a share of all calls is the
// figure to watch: frequent takeovers in quiet times mean GC pauses, leases
// shorter than the provider's latency, or over-claiming.
const (
	CallSend      CallKind = "send"      // the first send of a key
	CallResend    CallKind = "resend"    // a send of a key an earlier claim may have sent
	CallReconcile CallKind = "reconcile" // a lookup of the key
)

// HintOutcome is what a hint's claim found (Metrics.Hint).
type HintOutcome string

// The outcomes of hints (Client.Hint), as Metrics.Hint reports them.
const (
	HintClaimed     HintOutcome = "claimed"       // the hint's job was claimed by id
	HintNothingToDo HintOutcome = "nothing_to_do" // settled, held, not due or unknown: a stale or duplicated hint
	HintFailed      HintOutcome = "failed"        // the claim rolled back or its COMMIT reply was lost
	HintNotTried    HintOutcome = "not_tried"     // the worker stopped first
)

// HintOutcomes lists every HintOutcome, so that a Metrics implementation
// can export each at 0 before the first.
func HintOutcomes() []HintOutcome {
	return []HintOutcome{HintClaimed, HintNothingToDo, HintFailed, HintNotTried}
}

// The reconciler's alerts (Metrics.Alert); the last two end with the
// evidence's status.
const (
	alertArchivedReversal     = "reversal of an archived refund"
	alertContradictsSucceeded = "evidence contradicts a succeeded refund: "
	alertRefundOfFailed       = "evidence of a refund for a failed job: "
)

// AlertKinds lists every kind of alert the worker reports through
// Metrics.Alert, so that a Metrics implementation can export each at 0
// before the first.
func AlertKinds() []string {
	return []string{
		decide.AlertReversed, decide.AlertSeveralRefund, alertArchivedReversal,
		alertContradictsSucceeded + string(evidence.Reversed),
		alertContradictsSucceeded + string(evidence.Rejected),
		alertContradictsSucceeded + string(evidence.Succeeded),
		alertRefundOfFailed + string(evidence.Succeeded),
		alertRefundOfFailed + string(evidence.Reversed),
	}
}

// Metrics receives the worker's measurements. Implementations must be safe
// for concurrent use; package worker/metrics implements it with Prometheus, so the
// worker itself depends on no metrics library.
type Metrics interface {
	// Claims counts jobs claimed to run now, by action (refund, reconcile).
	Claims(action string, n int)
	// Takeovers counts jobs taken over after their lease expired.
	Takeovers(n int)
	// StaleWrite counts write-backs refused because another claim moved the
	// attempt on, by transition (complete, reschedule, ...).
	StaleWrite(transition string)
	// ProviderCall counts provider calls by kind.
	ProviderCall(kind CallKind)
	// Transition counts applied transitions, by name.
	Transition(name string)
	// ManualReview counts jobs handed to an operator.
	ManualReview()
	// ClaimUnknown counts claims whose COMMIT reply was lost.
	ClaimUnknown()
	// BudgetWait counts scheduler passes that found free slots but no
	// outbound budget.
	BudgetWait()
	// OldestUnfinished reports the age of the oldest job not yet settled.
	OldestUnfinished(age time.Duration)
	// ReconcilesDue reports the reconciles that are due and not yet claimed
	// (counted up to MaxCountedDue), and how long the oldest has been due:
	// unknown outcomes waiting for a slot or a token. It stays near zero
	// while they go before sends.
	ReconcilesDue(n int, oldest time.Duration)
	// Evidence counts observations recorded, by source (provider_response
	// for late answers, webhook, ...).
	Evidence(source string)
	// Alert counts events that need a person: a refund reversed after it
	// succeeded, evidence that contradicts a settled job.
	Alert(kind string)
	// Hint counts hints (a broker's messages, Client.Hint) by what their
	// claim found: claimed against all shows how much of the dispatch the
	// broker carries; the scan claims the rest.
	Hint(outcome HintOutcome)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

func (NopMetrics) Claims(string, int)               {}
func (NopMetrics) Takeovers(int)                    {}
func (NopMetrics) StaleWrite(string)                {}
func (NopMetrics) ProviderCall(CallKind)            {}
func (NopMetrics) Transition(string)                {}
func (NopMetrics) ManualReview()                    {}
func (NopMetrics) ClaimUnknown()                    {}
func (NopMetrics) BudgetWait()                      {}
func (NopMetrics) OldestUnfinished(time.Duration)   {}
func (NopMetrics) ReconcilesDue(int, time.Duration) {}
func (NopMetrics) Evidence(string)                  {}
func (NopMetrics) Alert(string)                     {}
func (NopMetrics) Hint(HintOutcome)                 {}
