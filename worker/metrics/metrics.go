// Package metrics is the worker's Metrics (worker.Metrics) in Prometheus:
// the edge where the metrics library lives, so that the worker package
// depends on none. refundd run serves it on /metrics; a service that embeds
// the worker registers it on its own registry.
//
// Every metric is exported from the start: the counters and gauges at 0,
// and the labelled counters at 0 for every label value the worker is known
// to report, so that a dashboard or an alert on rate() sees each series
// before its first event. Label values are snake_case whatever the worker
// passes ("manual review" is exported as manual_review).
package metrics

import (
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/worker"
)

// The metrics' names.
const (
	NameClaims                = "fencekit_claims_total"
	NameTakeovers             = "fencekit_takeovers_total"
	NameStaleWritesRejected   = "fencekit_stale_writes_rejected_total"
	NameProviderCalls         = "fencekit_provider_calls_total"
	NameTransitions           = "fencekit_transitions_total"
	NameManualReviews         = "fencekit_manual_reviews_total"
	NameClaimsCommitUnknown   = "fencekit_claims_commit_unknown_total"
	NameBudgetWaits           = "fencekit_budget_waits_total"
	NameOldestUnfinishedAge   = "fencekit_oldest_unfinished_job_age_seconds"
	NameReconcilesDue         = "fencekit_reconciles_due"
	NameOldestDueReconcileAge = "fencekit_oldest_due_reconcile_age_seconds"
	NameEvidenceRecorded      = "fencekit_evidence_recorded_total"
	NameAlerts                = "fencekit_alerts_total"
	NameHints                 = "fencekit_hints_total"
)

// Label values known before the first event, exported at 0 (as LabelValue
// writes them).
var (
	// claimActions are the jobs' next actions.
	claimActions = []string{string(refundjob.NextActionRefund), string(refundjob.NextActionReconcile)}
	// writeBacks are the transitions the worker's write-backs apply (as
	// worker.Job.Transition names them).
	writeBacks = []string{"complete", "reschedule", "manual review", "fail"}
	callKinds  = []string{string(worker.CallSend), string(worker.CallResend), string(worker.CallReconcile)}
	sources    = []string{string(evidence.ProviderResponse), string(evidence.Webhook), string(evidence.Reconcile), string(evidence.Operator)}
	alertKinds = worker.AlertKinds()
	hintKinds  = func() []string {
		var out []string
		for _, o := range worker.HintOutcomes() {
			out = append(out, string(o))
		}
		return out
	}()
)

// Prometheus implements worker.Metrics with Prometheus metrics.
type Prometheus struct {
	claims       *prometheus.CounterVec
	takeovers    prometheus.Counter
	stale        *prometheus.CounterVec
	calls        *prometheus.CounterVec
	transitions  *prometheus.CounterVec
	manual       prometheus.Counter
	claimUnknown prometheus.Counter
	budgetWaits  prometheus.Counter
	oldest       prometheus.Gauge
	dueCount     prometheus.Gauge
	dueAge       prometheus.Gauge
	evidence     *prometheus.CounterVec
	alerts       *prometheus.CounterVec
	hints        *prometheus.CounterVec
}

var _ worker.Metrics = (*Prometheus)(nil)

// New registers the worker's metrics on reg, each at 0, and returns them.
// It panics when reg already holds one of them (prometheus.MustRegister).
func New(reg prometheus.Registerer) *Prometheus {
	m := &Prometheus{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameClaims,
			Help: "Jobs claimed to run now, by next action."}, []string{"action"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: NameTakeovers,
			Help: "Jobs taken over after their lease expired. Frequent takeovers in quiet times mean GC pauses, too-short leases or over-claiming."}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameStaleWritesRejected,
			Help: "Write-backs refused because a newer attempt holds the job, by transition."}, []string{"transition"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameProviderCalls,
			Help: "Provider calls by kind: send, resend, reconcile. The reconcile share is reconcile / all."}, []string{"kind"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameTransitions,
			Help: "Fenced transitions applied, by name."}, []string{"transition"}),
		manual: prometheus.NewCounter(prometheus.CounterOpts{Name: NameManualReviews,
			Help: "Jobs handed to an operator."}),
		claimUnknown: prometheus.NewCounter(prometheus.CounterOpts{Name: NameClaimsCommitUnknown,
			Help: "Claims whose COMMIT reply was lost: nothing was sent for them."}),
		budgetWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: NameBudgetWaits,
			Help: "Scheduler passes that had free slots but no outbound budget."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameOldestUnfinishedAge,
			Help: "Age of the oldest job not yet settled (ready or running)."}),
		dueCount: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameReconcilesDue,
			Help: "Reconciles due and not yet claimed (counted up to 10000): unknown outcomes waiting for a slot or a token. Near zero while they go before sends."}),
		dueAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameOldestDueReconcileAge,
			Help: "How long the oldest due reconcile has waited to be claimed."}),
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameEvidenceRecorded,
			Help: "Observations recorded, by source (provider_response: a late answer)."}, []string{"source"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameAlerts,
			Help: "Events that need a person, such as a refund reversed after it succeeded."}, []string{"kind"}),
		hints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameHints,
			Help: "Hints (a broker's messages) by what their claim found: claimed, nothing_to_do (stale or duplicated), failed, not_tried. The scan claims what hints do not."}, []string{"outcome"}),
	}
	for vec, values := range map[*prometheus.CounterVec][]string{
		m.claims: claimActions, m.stale: writeBacks, m.transitions: writeBacks,
		m.calls: callKinds, m.evidence: sources, m.alerts: alertKinds, m.hints: hintKinds,
	} {
		for _, v := range values {
			vec.WithLabelValues(LabelValue(v))
		}
	}
	reg.MustRegister(m.claims, m.takeovers, m.stale, m.calls, m.transitions, m.manual, m.claimUnknown, m.budgetWaits, m.oldest, m.dueCount, m.dueAge, m.evidence, m.alerts, m.hints)
	return m
}

// LabelValue writes v in snake_case: lower case, and every run of
// characters other than letters and digits one underscore, none at either
// end ("manual review" → manual_review, "wake-up" → wake_up).
func LabelValue(v string) string {
	var b strings.Builder
	sep := false
	for _, r := range v {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		sep = true
	}
	return b.String()
}

// The methods of worker.Metrics; each label value goes through LabelValue.

func (m *Prometheus) Claims(action string, n int) {
	m.claims.WithLabelValues(LabelValue(action)).Add(float64(n))
}
func (m *Prometheus) Takeovers(n int)      { m.takeovers.Add(float64(n)) }
func (m *Prometheus) StaleWrite(tr string) { m.stale.WithLabelValues(LabelValue(tr)).Inc() }
func (m *Prometheus) ProviderCall(k worker.CallKind) {
	m.calls.WithLabelValues(LabelValue(string(k))).Inc()
}
func (m *Prometheus) Transition(tr string)               { m.transitions.WithLabelValues(LabelValue(tr)).Inc() }
func (m *Prometheus) ManualReview()                      { m.manual.Inc() }
func (m *Prometheus) ClaimUnknown()                      { m.claimUnknown.Inc() }
func (m *Prometheus) BudgetWait()                        { m.budgetWaits.Inc() }
func (m *Prometheus) OldestUnfinished(age time.Duration) { m.oldest.Set(age.Seconds()) }
func (m *Prometheus) ReconcilesDue(n int, oldest time.Duration) {
	m.dueCount.Set(float64(n))
	m.dueAge.Set(oldest.Seconds())
}
func (m *Prometheus) Evidence(source string) { m.evidence.WithLabelValues(LabelValue(source)).Inc() }
func (m *Prometheus) Alert(kind string)      { m.alerts.WithLabelValues(LabelValue(kind)).Inc() }

// Hint counts a hint by what its claim found.
func (m *Prometheus) Hint(outcome worker.HintOutcome) {
	m.hints.WithLabelValues(LabelValue(string(outcome))).Inc()
}
