package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// explain says why no order of h's operations explains every answer. It
// replays porcupine's longest partial order to get the rows the job could be
// at once those operations are placed, and names the operations that could
// come next but cannot apply there.
func (r *run) explain(h *jobHistory, info porcupine.LinearizationInfo) *Failure {
	order := longest(info.PartialLinearizations()[0])
	placed := make([]bool, len(h.ops))
	states := []rows{initial} // states[i]: the rows possible once order[:i] is placed
	for _, i := range order {
		placed[i] = true
		states = append(states, step(states[len(states)-1], h.ops[i]))
	}
	now := states[len(states)-1]
	// An operation can come next unless another one left returned before it
	// was called.
	first := int64(math.MaxInt64)
	for i, o := range h.ops {
		if !placed[i] {
			first = min(first, o.end(r.pending))
		}
	}
	var stuck []*op
	for i, o := range h.ops {
		if !placed[i] && o.call <= first && len(step(now, o)) == 0 {
			stuck = append(stuck, o)
		}
	}
	slices.SortStableFunc(stuck, func(a, b *op) int { return cmp.Compare(a.end(r.pending), b.end(r.pending)) })

	reason := "no order of its operations explains every answer"
	var late *op
	if len(stuck) > 0 {
		o := stuck[0]
		// The operation that took away the rows o needs: the one after the
		// last point where o could apply.
		var cause *op
		for i := len(order) - 1; i >= 0 && cause == nil; i-- {
			if len(step(states[i], o)) > 0 {
				cause = h.ops[order[i]]
			}
		}
		reason = o.refusal(now, cause != nil) + r.because(cause, o)
		switch {
		case o.kind == OpWrite:
			late = o
		case cause != nil && cause.kind == OpWrite:
			late = cause
		}
		for _, other := range stuck[1:] {
			reason += fmt.Sprintf("; nor could %s come next: it needs %s", other.who(), other.needs())
		}
	}
	if late == nil {
		late = lateWrite(h)
	}
	f := &Failure{
		Job:    h.job,
		Key:    h.key,
		Reason: "not linearizable: " + reason,
	}
	explanation := r.list(h, "no order of its operations explains every answer") + reason + "."
	if late != nil {
		f.LateWrite = r.late(late)
		explanation += "\nThe late write: " + f.LateWrite + "."
	}
	f.Explanation = explanation
	return f
}

// lateWrite finds an acknowledged write of h called after a claim or
// takeover of a newer attempt was acknowledged: a write its fence should
// have refused. nil if there is none.
func lateWrite(h *jobHistory) *op {
	for _, w := range h.ops {
		if w.kind != OpWrite || !w.returned || w.result != ResultOK {
			continue
		}
		for _, c := range h.ops {
			if (c.kind == OpClaim || c.kind == OpTakeover) && c.returned && c.result == ResultOK && c.attempt > w.attempt && c.ret < w.call {
				return w
			}
		}
	}
	return nil
}

// late names the write w: who sent it, when, and its answer.
func (r *run) late(w *op) string {
	when := "called at " + r.rel(w.call)
	if w.returned {
		when += ", answered " + w.result + " at " + r.rel(w.ret)
	} else {
		when += ", never answered"
	}
	return w.who() + ", " + when
}

// longest returns the longest of porcupine's partial orders, the first by
// operation ids among equals (porcupine returns them in no fixed order).
func longest(partials [][]int) []int {
	var best []int
	for _, p := range partials {
		if best == nil || len(p) > len(best) || len(p) == len(best) && slices.Compare(p, best) < 0 {
			best = p
		}
	}
	return best
}

// because says how cause, a placed operation, took away the rows o needs.
func (r *run) because(cause, o *op) string {
	switch {
	case cause == nil:
		return ""
	case o.kind == opFinal:
		return fmt.Sprintf(", after %s, which returned at %s", cause.who(), r.rel(cause.ret))
	case cause.ret < o.call:
		return fmt.Sprintf(": %s returned at %s, before that %s was called at %s", cause.who(), r.rel(cause.ret), o.kind, r.rel(o.call))
	}
	return fmt.Sprintf(", after %s, which overlaps it (%s…%s); no other order works either",
		cause.who(), r.rel(cause.call), r.rel(cause.ret))
}

// malformed reports a job whose events do not make a history.
func (r *run) malformed(h *jobHistory) *Failure {
	return &Failure{
		Job:         h.job,
		Key:         h.key,
		Reason:      "malformed: " + h.problems[0],
		Explanation: r.list(h, "its events do not make a history") + strings.Join(h.problems, ".\n") + ".",
	}
}

// list introduces a failure of job h and lists its operations in call
// order, one a line.
func (r *run) list(h *jobHistory, headline string) string {
	all := slices.Concat(h.ops, h.provider)
	slices.SortStableFunc(all, func(a, b *op) int { return cmp.Compare(a.call, b.call) })
	width := 0
	for _, o := range all {
		width = max(width, len(o.proc))
	}
	var b strings.Builder
	what := fmt.Sprintf("job %d", h.job)
	if h.key != "" {
		what += " (operation key " + h.key + ")"
	}
	fmt.Fprintf(&b, "%s: %s.\nIts operations in call order (seconds since the run's first event):\n", what, headline)
	for _, o := range all {
		when := "at the end"
		switch {
		case o.kind == opFinal:
		case o.returned:
			when = r.rel(o.call) + "…" + r.rel(o.ret)
		default:
			when = r.rel(o.call) + "…"
		}
		fmt.Fprintf(&b, "  %-23s  %-*s  %s\n", when, width, o.proc, o.describe())
	}
	return b.String()
}

// rel shows time t relative to the run's first event.
func (r *run) rel(t int64) string {
	return fmt.Sprintf("+%.6fs", float64(t-r.t0)/1e9)
}

// describe shows o as a line of a job's listing.
func (o *op) describe() string {
	var what string
	switch o.kind {
	case OpClaim:
		what = fmt.Sprintf("claim attempt %d", o.attempt)
	case OpTakeover:
		what = fmt.Sprintf("takeover to attempt %d", o.attempt)
	case OpResolve:
		what = fmt.Sprintf("resolve to attempt %d (→ %s)", o.attempt, o.target().state)
	case OpWrite:
		what = fmt.Sprintf("write attempt %d → %s", o.attempt, o.to)
	case OpProvider:
		what = fmt.Sprintf("provider %s for attempt %d", o.detail, o.attempt)
	case opFinal:
		return "final row " + o.source().String()
	default:
		what = fmt.Sprintf("%s attempt %d", o.kind, o.attempt)
	}
	switch {
	case !o.returned:
		return what + ": no return"
	case o.answer != "":
		return fmt.Sprintf("%s: %s (%s)", what, o.answer, o.result)
	}
	return what + ": " + o.result
}

// who names o in a sentence.
func (o *op) who() string {
	switch o.kind {
	case OpClaim:
		return fmt.Sprintf("%s's claim of attempt %d", o.proc, o.attempt)
	case OpTakeover:
		return fmt.Sprintf("%s's takeover to attempt %d", o.proc, o.attempt)
	case OpResolve:
		return fmt.Sprintf("%s's resolution to attempt %d (→ %s)", o.proc, o.attempt, o.target().state)
	case OpWrite:
		return fmt.Sprintf("%s's write of attempt %d (→ %s)", o.proc, o.attempt, o.to)
	}
	return "the final row " + o.source().String()
}

// refusal says that o cannot apply to the rows in states. If moved, an
// operation placed before it took away the rows it needs; if not, no
// operation that can come before it makes them.
func (o *op) refusal(states rows, moved bool) string {
	var what string
	switch {
	case o.kind == opFinal:
		what = fmt.Sprintf("the database ends with the row at %s", o.source())
	case o.result == ResultAlreadySettled:
		what = fmt.Sprintf("%s found the job already settled as asked", o.who())
	case o.result == ResultSuperseded || o.result == ResultRefused:
		what = fmt.Sprintf("%s was answered %s", o.who(), o.result)
	default:
		what = fmt.Sprintf("%s was acknowledged", o.who())
	}
	switch {
	case !moved:
		return fmt.Sprintf("%s, but no operation that can come before it leaves the job at %s (the longest order found leaves it at %s)",
			what, o.needs(), states)
	case o.result == ResultSuperseded || o.result == ResultRefused:
		return fmt.Sprintf("%s, but by then the job could only be %s, so its fence would have matched", what, states)
	case o.kind == OpClaim || o.kind == OpTakeover || o.kind == OpResolve:
		return fmt.Sprintf("%s, but by then the job could only be %s, not %s", what, states, o.source())
	}
	return fmt.Sprintf("%s, but by then the job could only be %s", what, states)
}

// needs says which row o needs to apply.
func (o *op) needs() string {
	switch o.result {
	case ResultAlreadySettled:
		return fmt.Sprintf("%s or %s", o.source(), o.target())
	case ResultSuperseded, ResultRefused:
		return "any row but " + o.source().String()
	}
	return o.source().String()
}
