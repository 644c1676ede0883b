package history

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Report is what Check found.
type Report struct {
	OK       bool // every job's history is explained and nothing regressed
	TimedOut bool // the time ran out before every job was decided: neither proven nor refuted

	Ops     int // claims, takeovers and writes checked
	Jobs    int
	Unknown int // operations whose outcome is unknown: no return, unknown or error

	// AttemptRegressions counts acknowledged claims and takeovers whose
	// attempt is not above every attempt acknowledged before they were
	// called, or that grant an attempt already granted.
	AttemptRegressions int
	// TerminalRegressions counts jobs acknowledged as succeeded, failed or
	// manual_review at some attempt that later had a claim or takeover
	// acknowledged, or whose final row is not that state at that attempt.
	TerminalRegressions int

	// Failures has one entry per job whose history is not explained, by job.
	Failures []Failure

	undecided int     // jobs left when the time ran out
	failed    [][]*op // the operations of each job that is not linearizable
	pending   int64   // the return of operations whose outcome is unknown
}

// Failure is a job whose history no order of its operations explains.
type Failure struct {
	Job int64
	// Key is the job's operation key, "" when no event of the job named it.
	Key string
	// Reason says in one line what is wrong: "not linearizable: …" or
	// "malformed: …" (the events do not pair into operations).
	Reason string
	// LateWrite names the write that broke the history, when one did: the
	// write that cannot be placed or that took away the rows the
	// unplaceable operation needs, or else an acknowledged write called
	// after a newer attempt's claim or takeover was acknowledged. "" when
	// no write is to blame.
	LateWrite string
	// Explanation lists the job's operations, one a line, then says which
	// one cannot be placed and why.
	Explanation string
}

// what names f's job, with its operation key when known.
func (f Failure) what() string {
	if f.Key == "" {
		return fmt.Sprintf("job %d", f.Job)
	}
	return fmt.Sprintf("job %d (operation key %s)", f.Job, f.Key)
}

// Summary is "ok", or one line saying what failed.
func (r Report) Summary() string {
	if r.OK {
		return "ok"
	}
	var parts []string
	switch len(r.Failures) {
	case 0:
	case 1:
		parts = append(parts, fmt.Sprintf("history of %s is %s", r.Failures[0].what(), r.Failures[0].Reason))
	default:
		parts = append(parts, fmt.Sprintf("%d job histories fail, the first, %s, is %s",
			len(r.Failures), r.Failures[0].what(), r.Failures[0].Reason))
	}
	if len(r.Failures) > 0 && r.Failures[0].LateWrite != "" {
		parts = append(parts, "the late write: "+r.Failures[0].LateWrite)
	}
	if r.AttemptRegressions > 0 {
		parts = append(parts, plural(r.AttemptRegressions, "attempt regression"))
	}
	if r.TerminalRegressions > 0 {
		parts = append(parts, plural(r.TerminalRegressions, "terminal regression"))
	}
	if r.TimedOut {
		parts = append(parts, fmt.Sprintf("timed out with %d of %d jobs undecided, neither proven nor refuted", r.undecided, r.Jobs))
	}
	return strings.Join(parts, "; ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// WriteVisualization writes porcupine's HTML view of the jobs that are not
// linearizable to path: each job's operations on a time line, with the
// longest orders the search found and the rows they lead to.
func (r Report) WriteVisualization(path string) error {
	procs := map[string]int{}
	var ops []porcupine.Operation
	for _, job := range r.failed {
		for _, o := range job {
			procs[o.proc] = 0
		}
	}
	names := make([]string, 0, len(procs))
	for p := range procs {
		names = append(names, p)
	}
	slices.Sort(names)
	for i, p := range names {
		procs[p] = i
	}
	for _, job := range r.failed {
		for _, o := range job {
			ops = append(ops, porcupine.Operation{ClientId: procs[o.proc], Input: o, Call: o.call, Return: o.end(r.pending)})
		}
	}
	byJob := model
	byJob.Partition = func(ops []porcupine.Operation) [][]porcupine.Operation {
		var parts [][]porcupine.Operation
		for i, o := range ops {
			if i == 0 || o.Input.(*op).job != ops[i-1].Input.(*op).job {
				parts = append(parts, nil)
			}
			parts[len(parts)-1] = append(parts[len(parts)-1], o)
		}
		return parts
	}
	_, info := porcupine.CheckOperationsVerbose(byJob, ops, 0)
	if err := porcupine.VisualizePath(byJob, info, path); err != nil {
		return fmt.Errorf("write visualization: %w", err)
	}
	return nil
}
