package history

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// drawnRun is a run the real system could produce, and the acknowledged
// writes that a stale attempt is bound to break.
type drawnRun struct {
	s     *script
	final map[int64]Final
	stale []staleWrite
}

// staleWrite is an acknowledged write (its call and return events) called
// after a claim or takeover to attempt granted had returned: once that grant
// is placed, no attempt below it can be running again.
type staleWrite struct {
	job       int64
	call, ret int // its events' indices
	granted   int64
}

// drawRun draws operations on a few jobs that take effect (or not) one after
// another at points 10 ms apart, each with a call/return window around its
// point that overlaps its neighbours'. Operations whose outcome is unknown
// took effect or not at random. A last job, run strictly in sequence, makes
// sure there is a write to corrupt.
func drawRun(t *rapid.T) drawnRun {
	jobs := rapid.Int64Range(1, 4).Draw(t, "jobs")
	truth := map[int64]row{}
	for j := int64(1); j <= jobs+1; j++ {
		truth[j] = initial[0]
	}
	run := drawnRun{s: new(script), final: map[int64]Final{}}
	granted := map[int64][]struct{ attempt, ret int64 }{} // acknowledged grants, per job
	record := func(proc string, call, ret int64, e Event, result string) {
		if result == "" {
			run.s.pending(proc, call, e)
			return
		}
		at := len(run.s.events)
		run.s.add(proc, call, ret, e, result)
		switch {
		case result != ResultOK || e.Op == OpProvider:
			return
		case e.Op != OpWrite:
			granted[e.Job] = append(granted[e.Job], struct{ attempt, ret int64 }{e.Attempt, ret})
			return
		}
		w := staleWrite{job: e.Job, call: at, ret: at + 1}
		for _, g := range granted[e.Job] {
			if g.ret < call {
				w.granted = max(w.granted, g.attempt)
			}
		}
		if w.granted >= 2 {
			run.stale = append(run.stale, w)
		}
	}

	n := rapid.IntRange(1, 40).Draw(t, "operations")
	for i := range n {
		job := rapid.Int64Range(1, jobs).Draw(t, "job")
		cur := truth[job]
		e := drawMove(t, job, cur)
		src, dst := (&op{kind: e.Op, attempt: e.Attempt, to: e.To}).source(), row{e.To, e.Attempt}
		if e.Op != OpWrite {
			dst = row{"running", e.Attempt}
		}
		var results []string
		switch {
		case cur == src:
			results = []string{ResultOK, ResultOK, ResultRolledBack, ResultUnknown, ResultError, ""}
		case e.Op == OpWrite && cur == dst:
			results = []string{ResultAlreadySettled, ResultRolledBack, ResultUnknown, ""}
		case e.Op == OpWrite:
			results = []string{ResultSuperseded, ResultRefused, ResultRolledBack, ResultUnknown, ""}
		default:
			results = []string{ResultRefused, ResultRolledBack, ResultUnknown, ResultError, ""}
		}
		result := rapid.SampledFrom(results).Draw(t, "result")
		uncertain := result == "" || result == ResultUnknown || result == ResultError
		if cur == src && (result == ResultOK || uncertain && rapid.Bool().Draw(t, "landed")) {
			truth[job] = dst
		}
		point := int64(i) * 10
		proc := rapid.SampledFrom([]string{"w1.1", "w2.1", "w3.1", "w1.2"}).Draw(t, "proc")
		record(proc, point-rapid.Int64Range(0, 15).Draw(t, "call"), point+rapid.Int64Range(0, 15).Draw(t, "return"), e, result)
		if rapid.IntRange(0, 4).Draw(t, "provider") == 0 {
			record(proc, point-5, point+5, Event{Op: OpProvider, Job: job, Attempt: cur.attempt, Detail: "send"}, ResultOK)
		}
	}

	anchor, t0 := jobs+1, int64(n)*10+100
	record("w9.1", t0, t0+5, claim(anchor, 1), ResultOK)
	record("w9.1", t0+10, t0+15, write(anchor, 1, "ready"), ResultOK)
	record("w9.1", t0+20, t0+25, claim(anchor, 2), ResultOK)
	record("w9.1", t0+30, t0+35, write(anchor, 2, "succeeded"), ResultOK)
	truth[anchor] = row{"succeeded", 2}

	for j, r := range truth {
		run.final[j] = Final{State: r.state, Attempt: r.attempt}
	}
	return run
}

// drawMove draws an operation on a job at row cur: mostly the move the
// state machine allows next, sometimes a stale or impossible one.
func drawMove(t *rapid.T, job int64, cur row) Event {
	next := cur.attempt + 1
	if rapid.IntRange(0, 3).Draw(t, "stale") == 0 {
		next = rapid.Int64Range(1, cur.attempt+1).Draw(t, "stale attempt")
	}
	to := rapid.SampledFrom(writeTargets).Draw(t, "to")
	switch {
	case cur.state == "ready" && rapid.IntRange(0, 5).Draw(t, "other") > 0:
		return claim(job, next)
	case cur.state == "running" && rapid.Bool().Draw(t, "takeover"):
		return takeover(job, next)
	case cur.state != "running" && cur.state != "ready" && rapid.Bool().Draw(t, "retry"):
		return write(job, cur.attempt, cur.state) // a retry finding its write in place
	}
	return write(job, next-1, to)
}

func TestCheckAcceptsLegalRunsAndRefusesStaleWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		run := drawRun(t)
		if r := Check(run.s.events, run.final, 0); !r.OK || r.AttemptRegressions+r.TerminalRegressions != 0 {
			t.Fatalf("legal run refused: %s\n%s", r.Summary(), explanations(r))
		}

		w := rapid.SampledFrom(run.stale).Draw(t, "corrupted write")
		stale := rapid.Int64Range(1, w.granted-1).Draw(t, "stale attempt")
		run.s.events[w.call].Attempt, run.s.events[w.ret].Attempt = stale, stale
		r := Check(run.s.events, run.final, 0)
		if r.OK || len(r.Failures) != 1 || r.Failures[0].Job != w.job {
			t.Fatalf("write of job %d moved to stale attempt %d, want job %d to fail alone: %s",
				w.job, stale, w.job, r.Summary())
		}
		if !strings.HasPrefix(r.Failures[0].Reason, "not linearizable: ") {
			t.Fatalf("reason: %s", r.Failures[0].Reason)
		}
	})
}
