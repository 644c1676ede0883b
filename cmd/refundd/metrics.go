package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencekit/fencekit/worker"
)

// promMetrics is the worker's Metrics in Prometheus: the edge where the
// metrics library lives, so the worker package depends on none.
type promMetrics struct {
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
}

var _ worker.Metrics = (*promMetrics)(nil)

func newPromMetrics(reg prometheus.Registerer) *promMetrics {
	m := &promMetrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencekit_claims_total",
			Help: "Jobs claimed to run now, by next action."}, []string{"action"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "fencekit_takeovers_total",
			Help: "Jobs taken over after their lease expired. Frequent takeovers in quiet times mean GC pauses, too-short leases or over-claiming."}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencekit_stale_writes_rejected_total",
			Help: "Write-backs refused because a newer attempt holds the job, by transition."}, []string{"transition"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencekit_provider_calls_total",
			Help: "Provider calls by kind: send, resend, reconcile. The reconcile share is reconcile / all."}, []string{"kind"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencekit_transitions_total",
			Help: "Fenced transitions applied, by name."}, []string{"transition"}),
		manual: prometheus.NewCounter(prometheus.CounterOpts{Name: "fencekit_manual_reviews_total",
			Help: "Jobs handed to an operator."}),
		claimUnknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "fencekit_claims_commit_unknown_total",
			Help: "Claims whose COMMIT reply was lost: nothing was sent for them."}),
		budgetWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "fencekit_budget_waits_total",
			Help: "Scheduler passes that had free slots but no outbound budget."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fencekit_oldest_unfinished_job_age_seconds",
			Help: "Age of the oldest job not yet settled (ready or running)."}),
		dueCount: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fencekit_reconciles_due",
			Help: "Reconciles due and not yet claimed (counted up to 10000): unknown outcomes waiting for a slot or a token. Near zero while they go before sends."}),
		dueAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fencekit_oldest_due_reconcile_age_seconds",
			Help: "How long the oldest due reconcile has waited to be claimed."}),
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencekit_evidence_recorded_total",
			Help: "Observations recorded, by source (provider_response: a late answer)."}, []string{"source"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencekit_alerts_total",
			Help: "Events that need a person, such as a refund reversed after it succeeded."}, []string{"kind"}),
	}
	reg.MustRegister(m.claims, m.takeovers, m.stale, m.calls, m.transitions, m.manual, m.claimUnknown, m.budgetWaits, m.oldest, m.dueCount, m.dueAge, m.evidence, m.alerts)
	return m
}

func (m *promMetrics) Claims(action string, n int)        { m.claims.WithLabelValues(action).Add(float64(n)) }
func (m *promMetrics) Takeovers(n int)                    { m.takeovers.Add(float64(n)) }
func (m *promMetrics) StaleWrite(tr string)               { m.stale.WithLabelValues(tr).Inc() }
func (m *promMetrics) ProviderCall(k worker.CallKind)     { m.calls.WithLabelValues(string(k)).Inc() }
func (m *promMetrics) Transition(tr string)               { m.transitions.WithLabelValues(tr).Inc() }
func (m *promMetrics) ManualReview()                      { m.manual.Inc() }
func (m *promMetrics) ClaimUnknown()                      { m.claimUnknown.Inc() }
func (m *promMetrics) BudgetWait()                        { m.budgetWaits.Inc() }
func (m *promMetrics) OldestUnfinished(age time.Duration) { m.oldest.Set(age.Seconds()) }
func (m *promMetrics) ReconcilesDue(n int, oldest time.Duration) {
	m.dueCount.Set(float64(n))
	m.dueAge.Set(oldest.Seconds())
}
func (m *promMetrics) Evidence(source string) { m.evidence.WithLabelValues(source).Inc() }
func (m *promMetrics) Alert(kind string)      { m.alerts.WithLabelValues(kind).Inc() }
