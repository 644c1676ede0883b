package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/worker/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// asRefundd, in the environment, makes the test binary run refundd's main
// with the test binary's arguments: the tests run refundd as a user would,
// without building it.
const asRefundd = "FENCEKIT_TEST_AS_REFUNDD"

func TestMain(m *testing.M) {
	if os.Getenv(asRefundd) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refundd runs refundd's main with args, and returns what it printed on
// stdout and stderr, and its error.
func refundd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asRefundd+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Production commands carry no chaos flag: the chaos harness runs its fleet
// through its own hidden command (chaos.AgentCommand), which refundd's usage
// does not list.
func TestRunCarriesNoChaosFlag(t *testing.T) {
	t.Parallel()
	help, _ := refundd(t, "run", "-h")
	if !strings.Contains(help, "-provider-url") {
		t.Fatalf("refundd run -h does not list run's flags:\n%s", help)
	}
	if strings.Contains(strings.ToLower(help), "chaos") {
		t.Errorf("refundd run -h lists a chaos flag:\n%s", help)
	}
	usage, _ := refundd(t)
	if !strings.Contains(usage, "refundd chaos") || strings.Contains(usage, "chaos-agent") {
		t.Errorf("refundd's usage should list chaos and not its hidden agent command:\n%s", usage)
	}
	agent, _ := refundd(t, "chaos-agent", "-h")
	for _, want := range []string{"-chaos-history", "-chaos-control", "-chaos-proc", "-provider-url"} {
		if !strings.Contains(agent, want) {
			t.Errorf("refundd chaos-agent -h lacks %s:\n%s", want, agent)
		}
	}
}

// refundd run's /metrics shows every metric of the worker before any job
// ran, the labelled counters at 0 with snake_case label values.
func TestRunExportsEveryMetricBeforeAnyJob(t *testing.T) {
	t.Parallel()
	r := startRun(t, migratedDSN(t), "-no-webhooks", "-provider-url", "http://127.0.0.1:9/v1")
	code, body := get(t, r.operator, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	fams, err := func() ([]string, error) {
		reg := prometheus.NewRegistry()
		metrics.New(reg)
		got, err := reg.Gather()
		names := make([]string, len(got))
		for i, f := range got {
			names[i] = f.GetName()
		}
		return names, err
	}()
	if err != nil || len(fams) < 13 {
		t.Fatalf("metrics.New registers %d metrics (%v): %v", len(fams), fams, err)
	}
	for _, name := range fams {
		if !strings.Contains(body, "\n"+name+" 0\n") && !strings.Contains(body, "\n"+name+"{") {
			t.Errorf("/metrics lacks %s before any job", name)
		}
	}
	for _, want := range []string{
		`fencekit_stale_writes_rejected_total{transition="manual_review"} 0`,
		`fencekit_provider_calls_total{kind="reconcile"} 0`,
		`fencekit_takeovers_total 0`,
		`fencekit_claims_total{action="refund"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// refundd run's log lines write durations as people read them ("30s"), not
// as nanoseconds.
func TestRunLogsDurationsReadably(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	r := startRunLogging(t, migratedDSN(t), logs, "-no-webhooks", "-provider-url", "http://127.0.0.1:9/v1", "-lease", "2m30s", "-stop-grace", "1500ms")
	r.stop(t)
	lines := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %v: %s", err, line)
		}
		lines[fmt.Sprint(l["msg"])] = l
	}
	running, stopping := lines["refundd running"], lines["stopping: no more claims; calls in flight finish or are cancelled"]
	if running == nil || stopping == nil {
		t.Fatalf("no start or stop line in the log:\n%s", logs.String())
	}
	if running["lease"] != "2m30s" {
		t.Errorf(`the start line's lease is %#v, want "2m30s": %v`, running["lease"], running)
	}
	if stopping["grace"] != "1.5s" {
		t.Errorf(`the stop line's grace is %#v, want "1.5s": %v`, stopping["grace"], stopping)
	}
}
