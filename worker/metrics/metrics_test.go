package metrics

import (
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencekit/fencekit/worker"
)

// every lists each metric the worker exports and the label values it must
// show before the first event (DESIGN.md's operations list, and what a
// dashboard of the reconcile share needs).
var every = map[string][]string{
	"fencekit_claims_total":                      {"refund", "reconcile"},
	"fencekit_takeovers_total":                   nil,
	"fencekit_stale_writes_rejected_total":       {"complete", "reschedule", "manual_review", "fail"},
	"fencekit_provider_calls_total":              {"send", "resend", "reconcile"},
	"fencekit_transitions_total":                 {"complete", "reschedule", "manual_review", "fail"},
	"fencekit_manual_reviews_total":              nil,
	"fencekit_claims_commit_unknown_total":       nil,
	"fencekit_budget_waits_total":                nil,
	"fencekit_oldest_unfinished_job_age_seconds": nil,
	"fencekit_reconciles_due":                    nil,
	"fencekit_oldest_due_reconcile_age_seconds":  nil,
	"fencekit_evidence_recorded_total":           {"provider_response", "webhook", "reconcile", "operator"},
	"fencekit_alerts_total":                      {"reversed_after_success", "several_provider_refunds_for_one_operation_key"},
	"fencekit_hints_total":                       {"claimed", "nothing_to_do", "failed", "not_tried"},
}

// series is one exported series: its labels and its value.
type series struct {
	labels map[string]string
	value  float64
}

// gather scrapes reg: every metric's series, by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string][]series {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]series{}
	for _, f := range fams {
		byName[f.GetName()] = []series{}
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}, value: m.GetGauge().GetValue()}
			if c := m.GetCounter(); c != nil {
				s.value = c.GetValue()
			}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			byName[f.GetName()] = append(byName[f.GetName()], s)
		}
	}
	return byName
}

// A scrape before any job shows every metric at 0, and every labelled
// counter with each label value the worker is known to report: a rate()
// or an alert has a series from the start.
func TestEveryMetricIsExportedFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg)
	got := gather(t, reg)
	for name, labels := range every {
		if len(got[name]) == 0 {
			t.Errorf("%s is not exported before the first event", name)
			continue
		}
		seen := map[string]bool{}
		for _, s := range got[name] {
			if s.value != 0 {
				t.Errorf("%s%v = %v before any event, want 0", name, s.labels, s.value)
			}
			for _, v := range s.labels {
				seen[v] = true
			}
		}
		for _, l := range labels {
			if !seen[l] {
				t.Errorf("%s has no series for %q before the first event (has %v)", name, l, seen)
			}
		}
	}
	if len(got) != len(every) {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("exported %d metrics, the test knows %d: %v", len(got), len(every), names)
	}
}

var snakeCase = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// Label values are snake_case, whatever the worker passes: transitions
// ("manual review"), alerts in prose, with punctuation.
func TestLabelValuesAreSnakeCase(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Claims("reconcile", 2)
	m.StaleWrite("manual review")
	m.Transition("wake-up")
	m.ProviderCall(worker.CallResend)
	m.Evidence("provider_response")
	m.Alert("evidence contradicts a succeeded refund: pending") // not a kind the worker reports: exported all the same
	m.Alert("Reversed after success")
	m.Takeovers(1)
	m.OldestUnfinished(1500 * time.Millisecond)
	got := gather(t, reg)
	for name, ss := range got {
		for _, s := range ss {
			for l, v := range s.labels {
				if !snakeCase.MatchString(v) {
					t.Errorf("%s{%s=%q}: the label value is not snake_case", name, l, v)
				}
			}
		}
	}
	for name, want := range map[string]map[string]float64{
		"fencekit_stale_writes_rejected_total": {"manual_review": 1},
		"fencekit_transitions_total":           {"wake_up": 1},
		"fencekit_alerts_total":                {"evidence_contradicts_a_succeeded_refund_pending": 1, "reversed_after_success": 1},
		"fencekit_claims_total":                {"reconcile": 2},
	} {
		for _, s := range got[name] {
			for _, v := range s.labels {
				if w, ok := want[v]; ok && s.value != w {
					t.Errorf("%s{%s}: %v, want %v", name, v, s.value, w)
				}
				delete(want, v)
			}
		}
		if len(want) > 0 {
			t.Errorf("%s lacks %v", name, want)
		}
	}
	for in, want := range map[string]string{"manual review": "manual_review", "wake-up": "wake_up", " -x- ": "x", "provider_response": "provider_response", "A  B": "a_b"} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
