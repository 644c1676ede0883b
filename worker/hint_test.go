package worker_test

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

type tried struct {
	id      int64
	claimed bool
	err     error
}

// hint hands w a hint for job id whose outcome goes to out.
func hint(t *testing.T, w *worker.Client, id int64, out chan<- tried) {
	t.Helper()
	if !w.Hint(worker.Hint{ID: id, Done: func(claimed bool, err error) { out <- tried{id, claimed, err} }}) {
		t.Fatalf("the worker refused the hint for job %d", id)
	}
}

func awaitTried(t *testing.T, out <-chan tried) tried {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(patience):
		t.Fatal("no hint was tried")
		return tried{}
	}
}

// A hint (a broker's message) names a job that may be due; the worker claims
// it by id through the same fenced claim as its scan, so a hint is never a
// right: a duplicated or stale one finds nothing to do, and hints spend only
// the sends' tokens.
func TestWorkerHints(t *testing.T) {
	t.Run("a hint claims its job by id before the scan's older sends", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		for i := range 4 {
			f.enqueue(fmt.Sprintf("older-%d", i))
		}
		job := f.enqueue("hinted")
		out := make(chan tried, 10)
		// One token and no refill to speak of: the pass claims one job.
		w, ev := f.newWorker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst = 0.0001, 1 })
		hint(t, w, job.ID, out) // before Start: tried by the first pass
		f.start(w)
		if p := <-ev.passes; p.Claimed != 1 || p.Hinted != 1 {
			t.Fatalf("first pass %+v, want the one token spent on the hinted job", p)
		}
		if r := awaitTried(t, out); !r.claimed || r.err != nil {
			t.Fatalf("hint tried: %+v, want claimed", r)
		}
		ev.settled(t, f, "hinted")
		f.wantSettled("hinted", refundjob.StateSucceeded, 1)
		for i := range 4 {
			if j := f.job(fmt.Sprintf("older-%d", i)); j.State != refundjob.StateReady || j.Attempt != 0 {
				t.Fatalf("older-%d is %s at attempt %d, want never claimed", i, j.State, j.Attempt)
			}
		}
	})

	t.Run("a duplicated hint claims once and the second finds nothing", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		job := f.enqueue("dup")
		out := make(chan tried, 10)
		m := &hintCounts{n: map[worker.HintOutcome]int{}}
		w, ev := f.newWorker("A", func(c *worker.Config) { c.Metrics = m })
		hint(t, w, job.ID, out)
		hint(t, w, job.ID, out)
		f.start(w)
		first, second := awaitTried(t, out), awaitTried(t, out)
		if !first.claimed || first.err != nil {
			t.Fatalf("first hint: %+v, want claimed", first)
		}
		if second.claimed || !errors.Is(second.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("second hint: %+v, want nothing to do (ErrNotClaimable)", second)
		}
		ev.settled(t, f, "dup")
		f.wantSettled("dup", refundjob.StateSucceeded, 1)
		if got := m.get(); got[worker.HintClaimed] != 1 || got[worker.HintNothingToDo] != 1 || len(got) != 2 {
			t.Fatalf("hint metrics %v, want one claimed and one with nothing to do", got)
		}
	})

	t.Run("a stale hint for a settled job or an unknown id finds nothing", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		job := f.enqueue("done")
		w, ev := f.worker("A", nil)
		ev.settled(t, f, "done")
		out := make(chan tried, 10)
		hint(t, w, job.ID, out)
		if r := awaitTried(t, out); r.claimed || !errors.Is(r.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("hint for a settled job: %+v, want nothing to do (ErrNotClaimable)", r)
		}
		hint(t, w, job.ID+1000, out)
		if r := awaitTried(t, out); r.claimed || !errors.Is(r.err, fencedwrite.ErrNotFound) {
			t.Fatalf("hint for an unknown id: %+v, want nothing to do (ErrNotFound)", r)
		}
		f.wantSettled("done", refundjob.StateSucceeded, 1)
	})

	t.Run("hints never put a send ahead of a takeover or a due reconcile", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		f.owed("owed")
		f.stuck("stuck")
		fresh := f.enqueue("fresh")
		out := make(chan tried, 10)
		// Two tokens and no refill to speak of; a burst of 2 keeps no
		// reserve.
		w, ev := f.newWorker("A", func(c *worker.Config) { c.BudgetRate, c.BudgetBurst, c.Workers = 0.0001, 2, 10 })
		hint(t, w, fresh.ID, out)
		f.start(w)
		first := <-ev.passes
		if first.Tokens != 2 || first.TakenOver != 1 || first.Reconciles != 1 || first.Claimed != 0 || first.Hinted != 0 {
			t.Fatalf("first pass %+v, want its 2 tokens spent on the takeover and the due reconcile, none on the hint", first)
		}
		select {
		case r := <-out:
			t.Fatalf("the hint was tried with no token left for sends: %+v", r)
		default:
		}
		ev.allSettled(t, f, "stuck", "owed")
		if j := f.job("fresh"); j.State != refundjob.StateReady || j.Attempt != 0 {
			t.Fatalf("fresh is %s at attempt %d, want never claimed", j.State, j.Attempt)
		}
		// A worker that stops drops the hints it never tried: the broker
		// gives their messages to another.
		if err := w.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r := awaitTried(t, out); r.claimed || !errors.Is(r.err, worker.ErrHintNotTried) {
			t.Fatalf("hint at Stop: %+v, want ErrHintNotTried", r)
		}
		if w.Hint(worker.Hint{ID: fresh.ID}) {
			t.Fatal("a stopped worker took a hint")
		}
	})
}

// hintCounts counts the worker's hint outcomes (Metrics.Hint).
type hintCounts struct {
	worker.NopMetrics
	mu sync.Mutex
	n  map[worker.HintOutcome]int
}

func (h *hintCounts) Hint(o worker.HintOutcome) { h.mu.Lock(); h.n[o]++; h.mu.Unlock() }

func (h *hintCounts) get() map[worker.HintOutcome]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.n)
}
