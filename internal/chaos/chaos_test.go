package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/internal/brokertest"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/history"
)

// buildRefundd builds the refundd binary the fleet runs (its hidden
// AgentCommand), with tags.
func buildRefundd(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "refundd")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "github.com/fencekit/fencekit/cmd/refundd")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build refundd: %v\n%s", err, out)
	}
	return bin
}

// config is the harness's Config with refundd chaos's defaults, running bin
// in dsn's database, its histories kept in a directory of t's.
func config(t *testing.T, bin string) Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("chaos", flag.PanicOnError))
	c.Exe, c.Dir, c.JSON = bin, t.TempDir(), true
	return c
}

// lastJSON decodes the last line of out, refundd chaos -json's summary.
func lastJSON(t *testing.T, out string) Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("the last line is not the JSON summary: %v\n%s", err, out)
	}
	return s
}

// zombieKinds and zombieModes name the counts of the summary's
// zombie_write_backs: per kind of write-back, how many zombie write-backs
// the fence refused alone in their transaction and in a batch.
var (
	zombieKinds = []string{"complete", "reschedule", "manual_review", "fail"}
	zombieModes = []string{"single", "batched"}
)

// zombieWriteBacks decodes the summary's zombie_write_backs from the last
// line of out (as a map, so that a summary without it reads as zeros).
func zombieWriteBacks(t *testing.T, out string) map[string]map[string]int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s struct {
		Zombies map[string]map[string]int `json:"zombie_write_backs"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("the last line is not the JSON summary: %v\n%s", err, out)
	}
	return s.Zombies
}

// wantEveryZombieWriteBack fails t unless the run's history shows a zombie
// write-back refused by the fence in each kind of write-back, alone and in
// a batch.
func wantEveryZombieWriteBack(t *testing.T, out string) {
	t.Helper()
	got := zombieWriteBacks(t, out)
	for _, kind := range zombieKinds {
		for _, mode := range zombieModes {
			if got[kind][mode] == 0 {
				t.Errorf("no zombie %s write-back (%s) was refused by the fence: zombie_write_backs %v", kind, mode, got)
			}
		}
	}
}

// CI's chaos run: a fleet of three refundd run processes, a few hundred
// refunds, every kind of fault, and the checks. Nothing may be paid twice,
// no settled job may move, no answer may be lost, every job settles, and
// every process's history must be one the state machine allows.
func TestChaosShortRun(t *testing.T) {
	t.Parallel()
	bin := buildRefundd(t, "")
	var out bytes.Buffer
	c := config(t, bin)
	c.Jobs, c.Workers, c.Duration, c.Seed, c.Pause = 240, 3, 25*time.Second, 20261203, 0.05
	err := Run(context.Background(), dbtest.ScratchDSN(t, "_chaos"), c, &out)
	if err != nil {
		t.Fatalf("chaos: %v\n%s", err, out.String())
	}
	s := lastJSON(t, out.String())
	if s.HistoryCheck != "ok" || s.KeysPaidTwice+s.TerminalRegressions+s.AttemptRegressions+s.LostReceipts+s.LedgerMismatches+s.Unfinished != 0 {
		t.Fatalf("chaos passed but its summary shows a failure: %+v", s)
	}
	// The fault phase's real length: it ends once every job settled, or
	// when --duration runs out.
	if s.FaultPhaseSeconds <= 0 || s.FaultPhaseSeconds > c.Duration.Seconds()+60 ||
		(s.FaultPhaseEnd != phaseSettled && s.FaultPhaseEnd != phaseDuration) {
		t.Errorf("fault phase %.1fs, ended when %q: want a real length within --duration %v (plus a deploy's end), ended by settling or by the duration",
			s.FaultPhaseSeconds, s.FaultPhaseEnd, c.Duration)
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
	wantEveryZombieWriteBack(t, out.String())
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

// Whatever the seed, a run exercises the event fencekit exists for: a worker
// frozen past its lease writes back after another worker's takeover
// committed, and the fence refuses it; in each kind of write-back (complete,
// reschedule, manual review, fail), alone in its transaction and in a batch.
// The counts come from the history, not from the plan.
func TestChaosExercisesEveryZombieWriteBack(t *testing.T) {
	bin := buildRefundd(t, "")
	for _, seed := range []uint64{3, 7} {
		t.Run(fmt.Sprintf("seed %d", seed)+" refuses a zombie write-back of every kind, alone and batched", func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			c := config(t, bin)
			c.Jobs, c.Workers, c.Duration, c.Seed = 40, 2, 5*time.Second, seed
			err := Run(context.Background(), dbtest.ScratchDSN(t, "_chaos"), c, &out)
			if err != nil {
				t.Fatalf("chaos: %v\n%s", err, out.String())
			}
			wantEveryZombieWriteBack(t, out.String())
		})
	}
	// --provider stripe: the fleet speaks to the fake taught Stripe's API
	// through the real Stripe adapter (refundd run -provider stripe), with
	// the whole fault mix: Stripe's answers, errors and webhooks. (The third
	// seed runs through Stripe rather than adding a run: the README's test
	// command has no time to spare.)
	t.Run("seed 11 through the Stripe adapter keeps every invariant and refuses every zombie write-back", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		c := config(t, bin)
		c.Provider = ProviderStripe
		c.Jobs, c.Workers, c.Duration, c.Seed = 40, 2, 5*time.Second, 11
		err := Run(context.Background(), dbtest.ScratchDSN(t, "_chaos"), c, &out)
		if err != nil {
			t.Fatalf("chaos: %v\n%s", err, out.String())
		}
		wantEveryZombieWriteBack(t, out.String())
		s := lastJSON(t, out.String())
		if s.Provider != ProviderStripe || s.HistoryCheck != "ok" || s.KeysPaidTwice+s.TerminalRegressions+s.AttemptRegressions+s.LostReceipts+s.LedgerMismatches+s.Unfinished != 0 {
			t.Fatalf("chaos passed but its summary shows a failure: %+v", s)
		}
		if s.Succeeded+s.Failed+s.ManualReview != c.Jobs || s.ProviderExecuted == 0 {
			t.Errorf("settled %d+%d+%d, %d executed: want all %d settled through Stripe's API", s.Succeeded, s.Failed, s.ManualReview, s.ProviderExecuted, c.Jobs)
		}
		t.Logf("%+v", s)
	})
	// --dispatch rabbitmq: the fleet consumes the job ids the chaos process
	// publishes, while its broker connections are cut, the queue is purged
	// and ids are published again (duplicates, and stale ones of settled
	// jobs); every invariant holds as with the scan alone: a message is a
	// hint, never a right.
	t.Run("seed 13 through RabbitMQ, with broker faults, keeps every invariant and refuses every zombie write-back", func(t *testing.T) {
		t.Parallel()
		brokertest.Shared(t)
		var out bytes.Buffer
		c := config(t, bin)
		c.Dispatch, c.AMQPURL = DispatchRabbitMQ, brokertest.URL()
		c.Jobs, c.Workers, c.Duration, c.Seed = 40, 2, 5*time.Second, 13
		err := Run(context.Background(), dbtest.ScratchDSN(t, "_chaos"), c, &out)
		if err != nil {
			t.Fatalf("chaos: %v\n%s", err, out.String())
		}
		s := wantBrokerRun(t, c, out.String())
		if s.FaultsByKind[faultBrokerCut] == 0 || s.FaultsByKind[faultBrokerDuplicate]+s.FaultsByKind[faultBrokerStale] == 0 {
			t.Errorf("no broker cut or no duplicate publish: %v", s.FaultsByKind)
		}
		t.Logf("%+v", s)
	})
	// --dispatch kafka: the same through an in-process Kafka cluster, whose
	// partition leaders move and whose group rebalances while ids are
	// published again.
	t.Run("seed 17 through Kafka, with its faults, keeps every invariant and refuses every zombie write-back", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		c := config(t, bin)
		c.Dispatch = DispatchKafka
		c.Jobs, c.Workers, c.Duration, c.Seed = 40, 2, 5*time.Second, 17
		err := Run(context.Background(), dbtest.ScratchDSN(t, "_chaos"), c, &out)
		if err != nil {
			t.Fatalf("chaos: %v\n%s", err, out.String())
		}
		s := wantBrokerRun(t, c, out.String())
		// At least one broker fault of each kind (issue 33's "Done").
		for _, kind := range []string{faultKafkaLeaderMoved, faultKafkaRebalance, faultBrokerDuplicate, faultBrokerStale} {
			if s.FaultsByKind[kind] == 0 {
				t.Errorf("no %s: %v", kind, s.FaultsByKind)
			}
		}
		t.Logf("%+v", s)
	})
}

// wantBrokerRun checks a run through a broker (c.Dispatch): every zombie
// write-back refused, every invariant kept, every job settled and
// published at least once. It returns the summary.
func wantBrokerRun(t *testing.T, c Config, out string) Summary {
	t.Helper()
	wantEveryZombieWriteBack(t, out)
	s := lastJSON(t, out)
	if s.Dispatch != c.Dispatch || s.HistoryCheck != "ok" || s.KeysPaidTwice+s.TerminalRegressions+s.AttemptRegressions+s.LostReceipts+s.LedgerMismatches+s.Unfinished != 0 {
		t.Fatalf("chaos passed but its summary shows a failure: %+v", s)
	}
	if s.Succeeded+s.Failed+s.ManualReview != c.Jobs {
		t.Errorf("settled %d+%d+%d: want all %d", s.Succeeded, s.Failed, s.ManualReview, c.Jobs)
	}
	if s.BrokerPublished < c.Jobs {
		t.Errorf("%d messages published, want at least one per job (%d)", s.BrokerPublished, c.Jobs)
	}
	return s
}

// The checker must catch a broken fence: the build tag fencekit_broken_fence
// makes "complete" forget the attempt it holds (see fencedrt/broken.go), so
// a zombie's completion lands on a job a newer attempt holds. The database
// trigger cannot tell (the statement declares the row's own attempt); the
// history check must, and must say which job and which writes. Every run
// makes zombie completions meet a job that a newer attempt holds, alone and
// in a batch, so every seed must be caught.
func TestChaosCatchesABrokenFence(t *testing.T) {
	bin := buildRefundd(t, "fencekit_broken_fence")
	for _, seed := range []uint64{7, 8} {
		t.Run(fmt.Sprintf("seed %d", seed)+" is caught by the history check", func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			c := config(t, bin)
			c.Jobs, c.Workers, c.Duration, c.Seed = 40, 2, 5*time.Second, seed
			err := Run(context.Background(), dbtest.ScratchDSN(t, "_chaos"), c, &out)
			if err == nil {
				t.Fatalf("chaos passed with a broken fence:\n%s", out.String())
			}
			if !strings.Contains(err.Error(), "history check") {
				t.Errorf("the failure does not name the history check: %v", err)
			}
			s := lastJSON(t, out.String())
			if s.HistoryCheck == "ok" {
				t.Errorf("history_check is ok with a broken fence: %+v", s)
			}
			text := out.String()
			// The failure names the job's operation key and the late write
			// that broke its history, not only the job's id.
			for _, want := range []string{"(operation key chaos-", "the late write: w", "'s write of attempt"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the failure does not name %q: %v", want, err)
				}
			}
			for _, want := range []string{"not linearizable", "write attempt", "→ succeeded: ok", "takeover", "The late write: "} {
				if !strings.Contains(text, want) {
					t.Errorf("the explanation lacks %q:\n%s", want, text)
				}
			}
			t.Logf("%s", text)
		})
	}
}

// chaos drops and recreates its database: it refuses one whose name does not
// end in _chaos, and bad settings, each named, before touching anything.
func TestChaosRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		set  func(*Config)
		want string
	}{
		{"root@tcp(127.0.0.1:3306)/payments", func(*Config) {}, "the name must end in _chaos"},
		{"", func(c *Config) { c.Workers = 1 }, "--workers must be at least 2"},
		{"", func(c *Config) { c.Jobs = 0 }, "--jobs must be at least 8"},
		{"", func(c *Config) { c.Jobs = 7 }, "--jobs must be at least 8: every run steers that many jobs into zombie write-backs"},
		{"", func(c *Config) { c.Slots = 4 }, "--slots must be at least 8"},
		{"", func(c *Config) { c.Lease = 10 * time.Millisecond }, "--lease must be at least 1s"},
		{"", func(c *Config) { c.Pause = 2 }, "--pause must be a probability"},
		{"", func(c *Config) { c.Duration = 0 }, "--duration must be positive"},
		{"", func(c *Config) { c.Provider = "adyen" }, `--provider "adyen": must be http or stripe`},
	} {
		c := config(t, "refundd")
		tc.set(&c)
		dsn := tc.dsn
		if dsn == "" {
			dsn = "root@tcp(127.0.0.1:3306)/untouched_chaos"
		}
		err := Run(context.Background(), dsn, c, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chaos %+v: %v, want an error containing %q", c, err, tc.want)
		}
	}
}

// A run that exercised no zombie write-back of some kind, alone or in a
// batch, says nothing about the fence there: chaos reports it inconclusive,
// naming what it did not exercise, and fails, even when every check passed.
func TestChaosReportsAnUnexercisedKindAsInconclusive(t *testing.T) {
	every := `{"complete":{"single":1,"batched":2},"reschedule":{"single":1,"batched":1},"manual_review":{"single":3,"batched":1},"fail":{"single":1,"batched":1}}`
	for _, tc := range []struct {
		name, zombies string
		want, notWant []string
	}{
		{"a run without any zombie write-back is inconclusive", `{}`,
			[]string{"inconclusive", "complete alone", "complete in a batch", "reschedule alone", "manual_review in a batch", "fail alone", "fail in a batch"}, nil},
		{"a run without a batched zombie failure is inconclusive and names only that",
			strings.Replace(every, `"fail":{"single":1,"batched":1}`, `"fail":{"single":1,"batched":0}`, 1),
			[]string{"inconclusive", "fail in a batch"}, []string{"fail alone", "complete", "reschedule", "manual_review"}},
		{"a run with every kind alone and in a batch is conclusive", every, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Summary
			if err := json.Unmarshal([]byte(`{"seed":7,"history_check":"ok","zombie_write_backs":`+tc.zombies+`}`), &s); err != nil {
				t.Fatal(err)
			}
			r := &chaosRun{f: Config{JSON: true, Dir: t.TempDir()}}
			r.dir = r.f.Dir
			var out bytes.Buffer
			err := r.report(s, &out)
			if tc.want != nil && !errors.Is(err, ErrInconclusive) {
				t.Errorf("report: %v, want an error matching ErrInconclusive", err)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("report: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("report passed a run that exercised %s; want an error naming %q\n%s", tc.zombies, tc.want, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not name %q: %v", w, err)
				}
			}
			_, missing, _ := strings.Cut(err.Error(), "inconclusive")
			for _, w := range tc.notWant {
				if strings.Contains(missing, w) {
					t.Errorf("the error names %q, which the run exercised: %v", w, err)
				}
			}
		})
	}
}

// The history directory is removed after a run that passed, unless asked
// for (-keep-history, or -history DIR); whenever it stays, chaos prints
// where, and the text summary gives the fault phase's real length.
func TestChaosKeepsTheHistoryWhenAsked(t *testing.T) {
	every := Summary{Seed: 7, HistoryCheck: "ok", FaultPhaseSeconds: 7.25, FaultPhaseEnd: phaseSettled}
	for _, k := range []*history.ZombieCount{&every.ZombieWriteBacks.Complete, &every.ZombieWriteBacks.Reschedule, &every.ZombieWriteBacks.ManualReview, &every.ZombieWriteBacks.Fail} {
		k.Single, k.Batched = 1, 1
	}
	for _, tc := range []struct {
		name       string
		keep, json bool
		wantKept   bool
	}{
		{"a passing run's temporary history is removed", false, false, false},
		{"-keep-history keeps it and prints where", true, false, true},
		{"-keep-history -json prints where before the JSON line", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "fencekit-chaos-1")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			r := &chaosRun{f: Config{KeepHistory: tc.keep, JSON: tc.json, Duration: 25 * time.Second}, dir: dir}
			var out bytes.Buffer
			if err := r.report(every, &out); err != nil {
				t.Fatalf("report: %v\n%s", err, out.String())
			}
			_, statErr := os.Stat(dir)
			if kept := statErr == nil; kept != tc.wantKept {
				t.Errorf("history directory kept: %v, want %v", kept, tc.wantKept)
			}
			if said := strings.Contains(out.String(), "kept in "+dir); said != tc.wantKept {
				t.Errorf("output says where the history is kept: %v, want %v:\n%s", said, tc.wantKept, out.String())
			}
			if tc.json {
				lastJSON(t, out.String())
			} else if !strings.Contains(out.String(), "fault phase 7.2s (up to 25s asked; it ended when every job settled)") {
				t.Errorf("the summary does not give the fault phase's real length:\n%s", out.String())
			}
		})
	}
}
