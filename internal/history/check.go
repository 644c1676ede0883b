package history

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Check checks a run's events, job by job, against the model (see the
// package documentation). final holds each job's row as the database holds
// it at the end, read after every process stopped: a job in events must have
// a row there, and a job with a row but no events must still be ready@0. A
// nil final checks the events alone.
//
// timeout bounds the whole check (0: none). Jobs not decided by then leave
// the report TimedOut: neither proven nor refuted.
func Check(events []Event, final map[int64]Final, timeout time.Duration) Report {
	r := split(events, final)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	verdicts := make([]verdict, len(r.jobs))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(r.jobs); i += workers {
				verdicts[i] = r.check(r.jobs[i], deadline)
			}
		})
	}
	wg.Wait()

	rep := Report{Jobs: len(r.jobs), pending: r.pending}
	for i, h := range r.jobs {
		v := verdicts[i]
		for _, o := range h.ops {
			if o.kind != opFinal {
				rep.Ops++
				if o.unknown() {
					rep.Unknown++
				}
			}
		}
		rep.AttemptRegressions += v.attemptRegressions
		if v.terminalRegression {
			rep.TerminalRegressions++
		}
		if v.timedOut {
			rep.undecided++
		}
		if v.failure != nil {
			rep.Failures = append(rep.Failures, *v.failure)
			if len(h.problems) == 0 {
				rep.failed = append(rep.failed, h.ops)
			}
		}
	}
	rep.TimedOut = rep.undecided > 0
	rep.OK = !rep.TimedOut && len(rep.Failures) == 0 && rep.AttemptRegressions == 0 && rep.TerminalRegressions == 0
	return rep
}

// run is a history cut into jobs.
type run struct {
	jobs    []*jobHistory // by job id
	t0      int64         // the first event: explanations show times relative to it
	end     int64         // after every event: the time of the final reads
	pending int64         // after the final reads: the return of an operation whose outcome is unknown
}

// jobHistory is what happened to one job.
type jobHistory struct {
	job      int64
	key      string   // the job's operation key, from the first event that names it
	ops      []*op    // claims, takeovers, writes and the final read, in call order
	provider []*op    // provider calls, in call order
	problems []string // why the events do not make a history
}

func (h *jobHistory) problem(format string, args ...any) {
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
}

// split pairs calls with returns into operations and sorts them by job.
func split(events []Event, final map[int64]Final) *run {
	r := &run{t0: math.MaxInt64}
	byJob := make(map[int64]*jobHistory)
	job := func(id int64) *jobHistory {
		h := byJob[id]
		if h == nil {
			h = &jobHistory{job: id}
			byJob[id] = h
		}
		return h
	}
	type key struct {
		proc string
		id   int64
	}
	calls := make(map[key]*op, len(events)/2+1)
	for _, e := range events {
		r.t0, r.end = min(r.t0, e.T), max(r.end, e.T+1)
		if e.Phase != PhaseCall {
			continue
		}
		h := job(e.Job)
		if h.key == "" {
			h.key = e.Key
		}
		if calls[key{e.Proc, e.ID}] != nil {
			h.problem("%s called operation %d twice", e.Proc, e.ID)
			continue
		}
		o := &op{proc: e.Proc, id: e.ID, kind: e.Op, job: e.Job, attempt: e.Attempt, to: e.To, detail: e.Detail, call: e.T}
		calls[key{e.Proc, e.ID}] = o
		if o.kind == OpProvider {
			h.provider = append(h.provider, o)
		} else {
			h.ops = append(h.ops, o)
		}
	}
	for _, e := range events {
		switch e.Phase {
		case PhaseCall:
		case PhaseReturn:
			o := calls[key{e.Proc, e.ID}]
			switch {
			case o == nil:
				job(e.Job).problem("%s's operation %d returned without a call", e.Proc, e.ID)
			case o.returned:
				job(o.job).problem("%s's operation %d returned twice", e.Proc, e.ID)
			case e.Op != "" && e.Op != o.kind || e.Job != 0 && e.Job != o.job ||
				e.Attempt != 0 && e.Attempt != o.attempt || e.To != "" && e.To != o.to:
				job(o.job).problem("%s's operation %d returned as another operation than it was called", e.Proc, e.ID)
			default:
				o.returned, o.result, o.answer, o.ret = true, e.Result, e.Detail, e.T
			}
		default:
			job(e.Job).problem("%s's operation %d has an event of phase %q", e.Proc, e.ID, e.Phase)
		}
	}
	if r.t0 == math.MaxInt64 {
		r.t0 = 0
	}
	r.pending = r.end + 1
	if final != nil {
		for id, f := range final {
			h := job(id)
			h.ops = append(h.ops, &op{proc: "database", kind: opFinal, job: id, attempt: f.Attempt, to: f.State,
				result: ResultOK, call: r.end, ret: r.end, returned: true})
		}
	}
	for _, h := range byJob {
		validate(h, final != nil)
		r.jobs = append(r.jobs, h)
	}
	slices.SortFunc(r.jobs, func(a, b *jobHistory) int { return cmp.Compare(a.job, b.job) })
	return r
}

// validate sorts h's operations by call and notes those the model cannot read.
func validate(h *jobHistory, final bool) {
	byCall := func(a, b *op) int {
		if c := cmp.Compare(a.call, b.call); c != 0 {
			return c
		}
		return cmp.Compare(a.ret, b.ret)
	}
	slices.SortStableFunc(h.ops, byCall)
	slices.SortStableFunc(h.provider, byCall)
	if h.job == 0 {
		h.problem("operations name no job")
	}
	if final && (len(h.ops) == 0 || h.ops[len(h.ops)-1].kind != opFinal) {
		h.problem("the database's final rows have none for this job")
	}
	for _, o := range h.ops {
		switch {
		case o.kind != OpClaim && o.kind != OpTakeover && o.kind != OpResolve && o.kind != OpWrite && o.kind != opFinal:
			h.problem("%s's operation %d is %q, not a claim, takeover, resolution, provider call or write", o.proc, o.id, o.kind)
		case o.kind == OpWrite && !slices.Contains(writeTargets, o.to):
			h.problem("%s's write %d targets %q, not one of %v", o.proc, o.id, o.to, writeTargets)
		case o.returned && !slices.Contains(results, o.result):
			h.problem("%s's operation %d returned %q, not one of %v", o.proc, o.id, o.result, results)
		case o.returned && o.ret < o.call:
			h.problem("%s's operation %d returned before it was called", o.proc, o.id)
		}
	}
}

var (
	writeTargets = []string{fencedwrite.StateReady, fencedwrite.StateSucceeded, fencedwrite.StateFailed, fencedwrite.StateManualReview}
	results      = []string{ResultOK, ResultAlreadySettled, ResultSuperseded, ResultRefused, ResultRolledBack, ResultUnknown, ResultError}
)

// verdict is what Check found about one job.
type verdict struct {
	failure            *Failure
	timedOut           bool
	attemptRegressions int
	terminalRegression bool
}

// check decides one job's history before deadline (zero: none).
func (r *run) check(h *jobHistory, deadline time.Time) verdict {
	if len(h.problems) > 0 {
		return verdict{failure: r.malformed(h)}
	}
	v := verdict{attemptRegressions: attemptRegressions(h.ops), terminalRegression: terminalRegression(h.ops)}
	var timeout time.Duration
	if !deadline.IsZero() {
		if timeout = time.Until(deadline); timeout <= 0 {
			v.timedOut = true
			return v
		}
	}
	ops := make([]porcupine.Operation, len(h.ops))
	for i, o := range h.ops {
		ops[i] = porcupine.Operation{Input: o, Call: o.call, Return: o.end(r.pending)}
	}
	switch res, info := porcupine.CheckOperationsVerbose(model, ops, timeout); res {
	case porcupine.Unknown:
		v.timedOut = true
	case porcupine.Illegal:
		v.failure = r.explain(h, info)
	}
	return v
}

// attemptRegressions counts the acknowledged claims, takeovers and
// resolutions of ops whose attempt is not above every attempt acknowledged
// before they were called, or that grant an attempt granted before (in call
// order).
func attemptRegressions(ops []*op) int {
	var grants []*op
	for _, o := range ops {
		if (o.kind == OpClaim || o.kind == OpTakeover || o.kind == OpResolve) && o.result == ResultOK {
			grants = append(grants, o)
		}
	}
	byReturn := slices.Clone(grants)
	slices.SortFunc(byReturn, func(a, b *op) int { return cmp.Compare(a.ret, b.ret) })
	n, done, highest := 0, 0, int64(math.MinInt64)
	granted := make(map[int64]bool)
	for _, g := range grants { // in call order
		for ; done < len(byReturn) && byReturn[done].ret < g.call; done++ {
			highest = max(highest, byReturn[done].attempt)
		}
		if g.attempt <= highest || granted[g.attempt] {
			n++
		}
		granted[g.attempt] = true
	}
	return n
}

// terminalRegression reports whether a job acknowledged as settled for good
// (succeeded, failed, manual_review) moved again: a later or higher claim,
// takeover or resolution was acknowledged, or its final row is another. A
// job in manual review leaves it through a resolution to the next attempt
// (the reconciler's, for new evidence, or an operator's): once one was
// acknowledged, or may have landed, where the job went from there is the
// linearizability check's to judge.
func terminalRegression(ops []*op) bool {
	for _, w := range ops {
		if w.kind != OpWrite || w.to == fencedwrite.StateReady || w.result != ResultOK && w.result != ResultAlreadySettled {
			continue
		}
		if w.to == fencedwrite.StateManualReview && slices.ContainsFunc(ops, func(o *op) bool {
			return o.kind == OpResolve && o.attempt == w.attempt+1 && (o.result == ResultOK || o.unknown())
		}) {
			continue
		}
		for _, o := range ops {
			switch o.kind {
			case OpClaim, OpTakeover, OpResolve:
				if o.result == ResultOK && (o.attempt > w.attempt || o.call > w.ret) {
					return true
				}
			case opFinal:
				if (row{o.to, o.attempt}) != w.target() {
					return true
				}
			}
		}
	}
	return false
}
