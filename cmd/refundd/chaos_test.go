package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildRefundd builds the refundd binary the fleet runs, with tags.
func buildRefundd(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "refundd")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build refundd: %v\n%s", err, out)
	}
	return bin
}

// lastJSON decodes the last line of out, refundd chaos -json's summary.
func lastJSON(t *testing.T, out string) chaosSummary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s chaosSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("the last line is not the JSON summary: %v\n%s", err, out)
	}
	return s
}

// CI's chaos run: a fleet of three refundd run processes, a few hundred
// refunds, every kind of fault, and the checks. Nothing may be paid twice,
// no settled job may move, no answer may be lost, every job settles, and
// every process's history must be one the state machine allows.
func TestChaosShortRun(t *testing.T) {
	bin := buildRefundd(t, "")
	var out bytes.Buffer
	err := run(context.Background(), []string{"chaos", "-dsn", freshDSN(t, "_chaos"), "-exe", bin, "-history", t.TempDir(),
		"--jobs", "240", "--workers", "3", "--duration", "25s", "--seed", "20261203", "--pause", "0.05", "--json"}, &out)
	if err != nil {
		t.Fatalf("chaos: %v\n%s", err, out.String())
	}
	s := lastJSON(t, out.String())
	if s.HistoryCheck != "ok" || s.KeysPaidTwice+s.TerminalRegressions+s.AttemptRegressions+s.LostReceipts+s.LedgerMismatches+s.Unfinished != 0 {
		t.Fatalf("chaos passed but its summary shows a failure: %+v", s)
	}
	if s.Jobs != 240 || s.Succeeded+s.Failed+s.ManualReview != 240 {
		t.Errorf("jobs %d, settled %d+%d+%d: want all 240 settled", s.Jobs, s.Succeeded, s.Failed, s.ManualReview)
	}
	// The run must have hurt: many faults of many kinds, zombies among
	// them, and late writes the fence refused. (Which boundary draws which
	// fault depends on the processes' timing, so only the kinds drawn
	// dozens of times in a run are required by name.)
	for _, kind := range []string{faultPause, faultProviderLostReply} {
		if s.FaultsByKind[kind] == 0 {
			t.Errorf("no %s fault was injected: %v", kind, s.FaultsByKind)
		}
	}
	if s.FaultsByKind[faultRollingRestart] != 3 {
		t.Errorf("%d processes were restarted in the rolling restart, want all 3 (SIGTERM, drain, exit, start)", s.FaultsByKind[faultRollingRestart])
	}
	if s.FaultsInjected < 100 || len(s.FaultsByKind) < 10 {
		t.Errorf("%d faults of %d kinds: want at least 100 of 10 kinds: %v", s.FaultsInjected, len(s.FaultsByKind), s.FaultsByKind)
	}
	if s.Takeovers == 0 || s.StaleWritesRejected == 0 {
		t.Errorf("takeovers %d, stale writes rejected %d: the run never made a zombie write", s.Takeovers, s.StaleWritesRejected)
	}
	if s.HistoryOps < 2*240 {
		t.Errorf("the history holds %d operations for 240 jobs: it is not recording", s.HistoryOps)
	}
	// The processes are real refundd run daemons: the rolling restart's
	// SIGTERM made each stop claiming, drain and exit (main's signal
	// wiring), and every log line about a job names its operation key and
	// attempt.
	logs, err := filepath.Glob(filepath.Join(s.History, "w*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no process logs in %s: %v", s.History, err)
	}
	drained := 0
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"msg":"stopping: no more claims`)) && bytes.Contains(b, []byte(`"msg":"stopped"`)) {
			drained++
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(line, []byte(`"job_id":`)) && (!bytes.Contains(line, []byte(`"operation_key":`)) || !bytes.Contains(line, []byte(`"attempt":`))) {
				t.Errorf("%s: a line about a job without its operation key and attempt: %s", filepath.Base(name), line)
			}
		}
	}
	if drained < 3 {
		t.Errorf("%d processes logged a graceful stop after SIGTERM (the rolling restart's and the final stop's), want at least 3", drained)
	}
	t.Logf("%+v", s)
}

// The checker must catch a broken fence: the build tag fencekit_broken_fence
// makes "complete" forget the attempt it holds (see fencedrt/broken.go), so
// a zombie's completion lands on a job a newer attempt holds. The database
// trigger cannot tell (the statement declares the row's own attempt); the
// history check must, and must say which job and which writes.
//
// The faults are seeded, but which step each lands on depends on timing: a
// run can end without any zombie's completion landing after a takeover, and
// then its history is linearizable and passing it is right. It happened
// once in about twenty runs, under a full test suite's load (that run's
// history was not kept). So the test tries up to three seeds and needs one
// run that the checker rejects.
func TestChaosCatchesABrokenFence(t *testing.T) {
	bin := buildRefundd(t, "fencekit_broken_fence")
	var (
		out bytes.Buffer
		err error
	)
	for _, seed := range []string{"7", "8", "9"} {
		out.Reset()
		err = run(context.Background(), []string{"chaos", "-dsn", freshDSN(t, "_chaos"), "-exe", bin, "-history", t.TempDir(),
			"--jobs", "60", "--workers", "2", "--duration", "15s", "--seed", seed, "--pause", "0.5", "--json"}, &out)
		if err != nil {
			break
		}
		t.Logf("seed %s: no zombie completed after a takeover; the history is linearizable:\n%s", seed, out.String())
	}
	if err == nil {
		t.Fatalf("chaos passed with a broken fence, three seeds in a row:\n%s", out.String())
	}
	if !strings.Contains(err.Error(), "history check") {
		t.Errorf("the failure does not name the history check: %v", err)
	}
	s := lastJSON(t, out.String())
	if s.HistoryCheck == "ok" {
		t.Errorf("history_check is ok with a broken fence: %+v", s)
	}
	text := out.String()
	for _, want := range []string{"not linearizable", "write attempt", "→ succeeded: ok", "takeover"} {
		if !strings.Contains(text, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, text)
		}
	}
	t.Logf("%s", text)
}

// chaos drops and recreates its database: it refuses one whose name does not
// end in _chaos, and bad settings, each named, before touching anything.
func TestChaosRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-dsn", "root@tcp(127.0.0.1:3306)/payments"}, "the name must end in _chaos"},
		{[]string{"--workers", "1"}, "--workers must be at least 2"},
		{[]string{"--jobs", "0"}, "--jobs must be at least 1"},
		{[]string{"--lease", "10ms"}, "--lease must be at least 1s"},
		{[]string{"--pause", "2"}, "--pause must be a probability"},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
	} {
		err := run(context.Background(), append([]string{"chaos"}, tc.args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chaos %v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
