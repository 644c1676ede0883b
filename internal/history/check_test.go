package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// script builds a run's events by hand, with times in milliseconds since the
// run began.
type script struct {
	events []Event
	ids    map[string]int64
}

const epoch = int64(1_767_225_600) * 1e9 // times are wall-clock Unix nanoseconds

func claim(job, attempt int64) Event    { return Event{Op: OpClaim, Job: job, Attempt: attempt} }
func takeover(job, attempt int64) Event { return Event{Op: OpTakeover, Job: job, Attempt: attempt} }
func resolve(job, attempt int64) Event  { return Event{Op: OpResolve, Job: job, Attempt: attempt} }
func write(job, attempt int64, to string) Event {
	return Event{Op: OpWrite, Job: job, Attempt: attempt, To: to}
}

// add records that proc called e at call ms and got result at ret ms.
func (s *script) add(proc string, call, ret int64, e Event, result string) *script {
	id := s.call(proc, call, e)
	e.Proc, e.ID, e.Phase, e.T, e.Result = proc, id, PhaseReturn, epoch+ret*1e6, result
	s.events = append(s.events, e)
	return s
}

// pending records that proc called e at call ms and never returned.
func (s *script) pending(proc string, call int64, e Event) *script {
	s.call(proc, call, e)
	return s
}

func (s *script) call(proc string, call int64, e Event) int64 {
	if s.ids == nil {
		s.ids = map[string]int64{}
	}
	s.ids[proc]++
	e.Proc, e.ID, e.Phase, e.T = proc, s.ids[proc], PhaseCall, epoch+call*1e6
	s.events = append(s.events, e)
	return e.ID
}

func row1(state string, attempt int64) Final { return Final{State: state, Attempt: attempt} }

func mustPass(t *testing.T, r Report) {
	t.Helper()
	if !r.OK || r.Summary() != "ok" {
		t.Fatalf("check failed: %s\n%s", r.Summary(), explanations(r))
	}
}

func mustFail(t *testing.T, r Report, job int64) Failure {
	t.Helper()
	if r.OK || r.TimedOut || len(r.Failures) != 1 || r.Failures[0].Job != job {
		t.Fatalf("want job %d to fail alone, got OK=%v TimedOut=%v: %s", job, r.OK, r.TimedOut, r.Summary())
	}
	return r.Failures[0]
}

func explanations(r Report) string {
	var b strings.Builder
	for _, f := range r.Failures {
		b.WriteString(f.Explanation + "\n")
	}
	return b.String()
}

func TestCheck(t *testing.T) {
	t.Run("a clean run of several jobs passes", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(1, 1), ResultOK).
			add("w2.1", 5, 12, claim(2, 1), ResultOK).
			add("w1.1", 20, 30, write(1, 1, "ready"), ResultOK).
			add("w2.1", 25, 40, write(2, 1, "ready"), ResultRolledBack). // retried below
			add("w3.1", 28, 35, claim(1, 2), ResultOK).                  // overlaps nothing of job 1 it depends on
			add("w2.1", 41, 50, write(2, 1, "ready"), ResultOK).
			add("w1.1", 45, 60, claim(2, 2), ResultOK). // called before w2.1's write returned
			add("w4.1", 100, 110, takeover(1, 3), ResultOK).
			add("w4.1", 120, 130, write(1, 3, "succeeded"), ResultOK).
			add("w3.1", 125, 135, write(1, 2, "ready"), ResultSuperseded). // the zombie is fenced off
			add("w1.1", 70, 80, write(2, 2, "manual_review"), ResultOK)
		s.events = append(s.events, Event{Proc: "w4.1", ID: 99, Phase: PhaseCall, T: epoch + 115e6, Op: OpProvider, Job: 1, Attempt: 3, Detail: "reconcile"})
		r := Check(s.events, map[int64]Final{1: row1("succeeded", 3), 2: row1("manual_review", 2), 3: row1("ready", 0)}, 0)
		mustPass(t, r)
		if r.Jobs != 3 || r.Ops != 11 || r.Unknown != 0 {
			t.Errorf("got %d jobs, %d ops, %d unknown; want 3, 11, 0", r.Jobs, r.Ops, r.Unknown)
		}
	})

	t.Run("a zombie's write after a takeover is caught", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(17, 1), ResultOK).
			add("w2.1", 100, 110, takeover(17, 2), ResultOK).
			add("w1.1", 200, 210, write(17, 1, "ready"), ResultOK)
		f := mustFail(t, Check(s.events, map[int64]Final{17: row1("running", 2)}, 0), 17)
		for _, want := range []string{
			"job 17",
			"  +0.000000s…+0.010000s    w1.1      claim attempt 1: ok\n",
			"  +0.200000s…+0.210000s    w1.1      write attempt 1 → ready: ok\n",
			"  at the end               database  final row running@2\n",
			"w1.1's write of attempt 1 (→ ready) was acknowledged, but by then the job could only be running@2: " +
				"w2.1's takeover to attempt 2 returned at +0.110000s, before that write was called at +0.200000s.",
		} {
			if !strings.Contains(f.Explanation, want) {
				t.Errorf("explanation lacks %q:\n%s", want, f.Explanation)
			}
		}
		if !strings.HasPrefix(f.Reason, "not linearizable: w1.1's write of attempt 1") {
			t.Errorf("reason: %s", f.Reason)
		}
	})

	t.Run("a failure names the operation key and the late write", func(t *testing.T) {
		keyed := func(e Event) Event { e.Key = "refund-17"; return e }
		s := new(script).
			add("w1.1", 0, 10, claim(17, 1), ResultOK).
			add("w2.1", 100, 110, takeover(17, 2), ResultOK).
			add("w1.1", 200, 210, keyed(write(17, 1, "succeeded")), ResultOK)
		r := Check(s.events, map[int64]Final{17: row1("succeeded", 2)}, 0)
		f := mustFail(t, r, 17)
		const late = "w1.1's write of attempt 1 (→ succeeded), called at +0.200000s, answered ok at +0.210000s"
		if f.Key != "refund-17" || f.LateWrite != late {
			t.Errorf("failure names key %q and late write %q, want refund-17 and %q", f.Key, f.LateWrite, late)
		}
		for _, want := range []string{"job 17 (operation key refund-17)", "the late write: " + late} {
			if !strings.Contains(r.Summary(), want) {
				t.Errorf("summary lacks %q: %s", want, r.Summary())
			}
		}
		if !strings.Contains(f.Explanation, "job 17 (operation key refund-17): ") || !strings.Contains(f.Explanation, "The late write: "+late+".") {
			t.Errorf("explanation lacks the key or the late write:\n%s", f.Explanation)
		}
	})

	t.Run("a failure without a late write names none", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(18, 1), ResultOK).
			add("w2.1", 5, 15, claim(18, 1), ResultOK) // two holders of one attempt
		r := Check(s.events, map[int64]Final{18: row1("running", 1)}, 0)
		f := mustFail(t, r, 18)
		if f.LateWrite != "" || strings.Contains(r.Summary(), "late write") {
			t.Errorf("no write was made, yet the failure names one: %q; %s", f.LateWrite, r.Summary())
		}
	})

	t.Run("a write that never returned may or may not have landed", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(5, 1), ResultOK).
			pending("w1.1", 20, write(5, 1, "succeeded"))
		for _, final := range []Final{row1("running", 1), row1("succeeded", 1)} {
			r := Check(s.events, map[int64]Final{5: final}, 0)
			mustPass(t, r)
			if r.Unknown != 1 {
				t.Errorf("final %v: %d unknown operations, want 1", final, r.Unknown)
			}
		}
		for _, final := range []Final{row1("ready", 1), row1("succeeded", 2)} {
			f := mustFail(t, Check(s.events, map[int64]Final{5: final}, 0), 5)
			if !strings.Contains(f.Reason, "the database ends with the row at "+row{final.State, final.Attempt}.String()+
				", but no operation that can come before it leaves the job at "+row{final.State, final.Attempt}.String()+
				" (the longest order found leaves it at running@1 or succeeded@1)") {
				t.Errorf("final %v: reason %s", final, f.Reason)
			}
		}

		takenOver := new(script).
			add("w1.1", 0, 10, claim(5, 1), ResultOK).
			add("w1.1", 20, 30, write(5, 1, "ready"), ResultUnknown).
			add("w2.1", 500, 510, takeover(5, 2), ResultOK)
		mustPass(t, Check(takenOver.events, map[int64]Final{5: row1("running", 2)}, 0))
	})

	t.Run("a claim whose commit is unknown explains a takeover two attempts on", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(8, 1), ResultOK).
			add("w1.1", 20, 30, write(8, 1, "ready"), ResultOK).
			add("w2.1", 40, 50, claim(8, 2), ResultUnknown).
			add("w3.1", 100, 110, takeover(8, 3), ResultOK)
		mustPass(t, Check(s.events, map[int64]Final{8: row1("running", 3)}, 0))

		without := new(script).
			add("w1.1", 0, 10, claim(8, 1), ResultOK).
			add("w1.1", 20, 30, write(8, 1, "ready"), ResultOK).
			add("w3.1", 100, 110, takeover(8, 3), ResultOK)
		f := mustFail(t, Check(without.events, map[int64]Final{8: row1("running", 3)}, 0), 8)
		if !strings.Contains(f.Reason, "w3.1's takeover to attempt 3 was acknowledged, but no operation that can come before it leaves the job at running@2 (the longest order found leaves it at ready@1)") {
			t.Errorf("reason: %s", f.Reason)
		}
	})

	t.Run("a commit whose outcome is unknown may land after its worker gave up", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 5, claim(8, 1), ResultOK).
			add("w1.1", 6, 8, write(8, 1, "ready"), ResultOK).
			add("w2.1", 10, 20, claim(8, 2), ResultUnknown).
			add("w1.1", 30, 40, write(8, 1, "ready"), ResultAlreadySettled). // still ready@1 after w2.1 gave up
			add("w3.1", 50, 60, takeover(8, 3), ResultOK)                    // so w2.1's claim landed after 30
		mustPass(t, Check(s.events, map[int64]Final{8: row1("running", 3)}, 0))
	})

	t.Run("a write superseded while its fence would have matched fails", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(3, 1), ResultOK).
			add("w1.1", 20, 30, write(3, 1, "ready"), ResultSuperseded)
		f := mustFail(t, Check(s.events, map[int64]Final{3: row1("running", 1)}, 0), 3)
		if !strings.Contains(f.Reason, "was answered superseded, but by then the job could only be running@1, so its fence would have matched") {
			t.Errorf("reason: %s", f.Reason)
		}
	})

	t.Run("a write retried after a lost commit reply is already settled", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(4, 1), ResultOK).
			add("w1.1", 20, 30, write(4, 1, "succeeded"), ResultUnknown).
			add("w1.1", 40, 50, write(4, 1, "succeeded"), ResultAlreadySettled)
		mustPass(t, Check(s.events, map[int64]Final{4: row1("succeeded", 1)}, 0))
		f := mustFail(t, Check(s.events, map[int64]Final{4: row1("running", 1)}, 0), 4)
		if !strings.Contains(f.Reason, "the database ends with the row at running@1, but by then the job could only be succeeded@1, after w1.1's write of attempt 1 (→ succeeded), which returned at +0.050000s") {
			t.Errorf("reason: %s", f.Reason)
		}
	})

	t.Run("a job settled for good and claimed again is a terminal regression", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(6, 1), ResultOK).
			add("w1.1", 20, 30, write(6, 1, "succeeded"), ResultOK).
			add("w2.1", 40, 50, claim(6, 2), ResultOK)
		r := Check(s.events, map[int64]Final{6: row1("running", 2)}, 0)
		mustFail(t, r, 6)
		if r.TerminalRegressions != 1 || r.AttemptRegressions != 0 {
			t.Errorf("got %d terminal and %d attempt regressions, want 1 and 0", r.TerminalRegressions, r.AttemptRegressions)
		}
		if !strings.HasSuffix(r.Summary(), "; 1 terminal regression") {
			t.Errorf("summary: %s", r.Summary())
		}
	})

	t.Run("a job settled for good moves again in other ways", func(t *testing.T) {
		for name, c := range map[string]struct {
			s     *script
			final Final
		}{
			"its attempt granted again after": {new(script).
				add("w1.1", 0, 10, claim(6, 1), ResultOK).
				add("w1.1", 20, 30, write(6, 1, "failed"), ResultOK).
				add("w2.1", 40, 50, claim(6, 1), ResultOK), row1("failed", 1)},
			"a takeover during the write": {new(script).
				add("w1.1", 0, 10, claim(6, 1), ResultOK).
				add("w1.1", 20, 30, write(6, 1, "failed"), ResultOK).
				add("w2.1", 15, 35, takeover(6, 2), ResultOK), row1("failed", 1)},
			"no move, but another final row": {new(script).
				add("w1.1", 0, 10, claim(6, 1), ResultOK).
				add("w1.1", 20, 30, write(6, 1, "failed"), ResultAlreadySettled), row1("running", 1)},
		} {
			r := Check(c.s.events, map[int64]Final{6: c.final}, 0)
			mustFail(t, r, 6)
			if r.TerminalRegressions != 1 {
				t.Errorf("%s: %d terminal regressions, want 1", name, r.TerminalRegressions)
			}
		}
	})

	t.Run("a job in manual review that the reconciler sends back to reconcile may be claimed again", func(t *testing.T) {
		// Job 264 of a 300-job run: manual review at attempt 4 for evidence
		// of a pending refund, the refund declined, the reconciler's
		// resolution to ready@5, a claim to 6 that fails it.
		s := new(script).
			add("w2.1", 0, 1, claim(264, 1), ResultOK).
			add("w2.1", 1, 2, write(264, 1, "ready"), ResultOK).
			add("w2.2", 2, 3, claim(264, 2), ResultOK).
			add("w2.2", 3, 4, write(264, 2, "ready"), ResultOK).
			add("w2.3", 4, 5, claim(264, 3), ResultOK).
			add("w2.3", 5, 6, write(264, 3, "ready"), ResultOK).
			add("w2.3", 7, 10, claim(264, 4), ResultOK).
			add("w2.3", 20, 30, write(264, 4, "manual_review"), ResultOK).
			add("w3.3", 200, 210, resolve(264, 5), ResultOK).
			add("w3.3", 270, 280, claim(264, 6), ResultOK).
			add("w3.3", 290, 300, write(264, 6, "failed"), ResultOK)
		r := Check(s.events, map[int64]Final{264: row1("failed", 6)}, 0)
		mustPass(t, r)
	})

	t.Run("a resolution whose outcome is unknown may explain the next claim, or not have landed", func(t *testing.T) {
		base := func() *script {
			return new(script).
				add("w1.1", 0, 10, claim(8, 1), ResultOK).
				add("w1.1", 20, 30, write(8, 1, "manual_review"), ResultOK).
				add("w2.1", 40, 50, resolve(8, 2), ResultUnknown)
		}
		mustPass(t, Check(base().add("w2.1", 60, 70, claim(8, 3), ResultOK).events, map[int64]Final{8: row1("running", 3)}, 0))
		mustPass(t, Check(base().events, map[int64]Final{8: row1("manual_review", 1)}, 0))
	})

	t.Run("a job in manual review claimed again without a resolution is a terminal regression", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(8, 1), ResultOK).
			add("w1.1", 20, 30, write(8, 1, "manual_review"), ResultOK).
			add("w2.1", 40, 50, resolve(8, 2), ResultRolledBack).
			add("w2.1", 60, 70, claim(8, 3), ResultOK)
		r := Check(s.events, map[int64]Final{8: row1("running", 3)}, 0)
		mustFail(t, r, 8)
		if r.TerminalRegressions != 1 {
			t.Errorf("got %d terminal regressions, want 1", r.TerminalRegressions)
		}
	})

	t.Run("a resolution acknowledged while the job was not in manual review fails", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(8, 1), ResultOK).
			add("w2.1", 40, 50, resolve(8, 2), ResultOK)
		f := mustFail(t, Check(s.events, map[int64]Final{8: row1("ready", 2)}, 0), 8)
		for _, want := range []string{"w2.1      resolve to attempt 2 (→ ready): ok", "w2.1's resolution to attempt 2 (→ ready) was acknowledged"} {
			if !strings.Contains(f.Explanation, want) {
				t.Errorf("explanation lacks %q:\n%s", want, f.Explanation)
			}
		}
	})

	t.Run("a lower attempt granted after a higher one returned is an attempt regression", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(9, 1), ResultOK).
			add("w3.1", 40, 50, takeover(9, 4), ResultOK).
			add("w1.1", 60, 70, takeover(9, 2), ResultOK)
		r := Check(s.events, map[int64]Final{9: row1("running", 4)}, 0)
		mustFail(t, r, 9)
		if r.AttemptRegressions != 1 {
			t.Errorf("got %d attempt regressions, want 1", r.AttemptRegressions)
		}
	})

	t.Run("one attempt granted twice is an attempt regression", func(t *testing.T) {
		s := new(script).
			add("w1.1", 0, 10, claim(9, 1), ResultOK).
			add("w2.1", 5, 15, claim(9, 1), ResultOK).
			add("w3.1", 20, 30, takeover(9, 2), ResultOK).
			add("w1.1", 40, 50, takeover(9, 2), ResultOK)
		r := Check(s.events, map[int64]Final{9: row1("running", 2)}, 0)
		mustFail(t, r, 9)
		if r.AttemptRegressions != 2 || r.TerminalRegressions != 0 {
			t.Errorf("got %d attempt and %d terminal regressions, want 2 and 0", r.AttemptRegressions, r.TerminalRegressions)
		}
	})

	t.Run("a job no worker touched must still be ready at attempt 0", func(t *testing.T) {
		mustPass(t, Check(nil, map[int64]Final{1: row1("ready", 0)}, 0))
		f := mustFail(t, Check(nil, map[int64]Final{1: row1("ready", 1)}, 0), 1)
		if !strings.Contains(f.Reason, "the database ends with the row at ready@1, but no operation that can come before it leaves the job at ready@1 (the longest order found leaves it at ready@0)") {
			t.Errorf("reason: %s", f.Reason)
		}
	})

	t.Run("a job with events but no final row is malformed", func(t *testing.T) {
		s := new(script).add("w1.1", 0, 10, claim(2, 1), ResultOK)
		f := mustFail(t, Check(s.events, map[int64]Final{}, 0), 2)
		if f.Reason != "malformed: the database's final rows have none for this job" {
			t.Errorf("reason: %s", f.Reason)
		}
		mustPass(t, Check(s.events, nil, 0))
	})

	t.Run("a return without its call is malformed", func(t *testing.T) {
		s := new(script).add("w1.1", 0, 10, claim(2, 1), ResultOK)
		s.events = s.events[1:]
		f := mustFail(t, Check(s.events, nil, 0), 2)
		if f.Reason != "malformed: w1.1's operation 1 returned without a call" {
			t.Errorf("reason: %s", f.Reason)
		}
	})
}

func TestSummary(t *testing.T) {
	r := Report{TimedOut: true, Jobs: 10, undecided: 3, AttemptRegressions: 2}
	want := "2 attempt regressions; timed out with 3 of 10 jobs undecided, neither proven nor refuted"
	if got := r.Summary(); got != want {
		t.Errorf("summary:\n got %s\nwant %s", got, want)
	}
}

func TestWriteVisualization(t *testing.T) {
	s := new(script).
		add("w1.1", 0, 10, claim(17, 1), ResultOK).
		add("w2.1", 100, 110, takeover(17, 2), ResultOK).
		add("w1.1", 200, 210, write(17, 1, "ready"), ResultOK)
	r := Check(s.events, map[int64]Final{17: row1("running", 2)}, 0)
	path := filepath.Join(t.TempDir(), "job17.html")
	if err := r.WriteVisualization(path); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<html", "w1.1 write attempt 1 → ready: ok", "running@2"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("visualization lacks %q", want)
		}
	}
}
