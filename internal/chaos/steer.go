package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// The steered zombies. Random faults alone may end a run without a single
// zombie write-back reaching the fence, and such a run says nothing about
// the property fencekit exists for. So every run, whatever its seed and its
// number of jobs, also plays the article's story on purpose, in each kind of
// write-back, alone and in a batch:
//
//  1. The steered process (slot 1's first, started alone) claims its first
//     jobs. Before each of their sends, the chaos process scripts the fake
//     provider's answer so that it leads to the planned transition: a
//     success (complete), a pending refund (reschedule), a definitive
//     rejection (fail), or the key already held with other parameters
//     (manual review).
//  2. Each of those write-backs is held at its step boundary (the transition
//     is decided, nothing is sent) until another worker took the job over:
//     its provider call for a later attempt is reported, so the takeover
//     committed and was recorded. That new holder is then held in turn until
//     the zombie has written back, so that the zombie's write meets the job
//     running under the newer attempt (when the held holder's own lease is
//     taken over, the newest holder waits in its place).
//  3. The zombies are let go in an order that decides their batches: with
//     the process's other write-backs waiting, one goes at a time, alone in
//     its batch, and the last of them hold every batcher of the process
//     (their batches wait before they begin); then the rest are let go
//     together, and once each waits for a batcher, one batch is let go:
//     its batcher takes all of them at once.
//
// What each run exercised is measured afterwards from the history
// (history.Zombies), never assumed from this plan.

// Transitions of a write-back, as worker.Job.Transition names them.
const (
	trComplete     = "complete"
	trReschedule   = "reschedule"
	trManualReview = "manual review"
	trFail         = "fail"
)

// steerBatchers is how many write-back transactions a fleet process runs at
// once: refundd run leaves the worker's default. The steering holds that
// many batches to make the next one take every zombie waiting.
const steerBatchers = worker.DefaultWriteBackConns

// steerPlan lists the transitions of the steered write-backs: those let go
// alone (every kind, then completions until there is one for each batcher)
// and those let go together (every kind).
func steerPlan(batchers int) (alone, together []string) {
	kinds := []string{trComplete, trReschedule, trManualReview, trFail}
	alone = append(alone, kinds...)
	for len(alone) < batchers {
		alone = append(alone, trComplete)
	}
	return alone, kinds
}

// steeredJobs is how many jobs every run steers: the least --jobs and
// --slots.
func steeredJobs() int {
	alone, together := steerPlan(steerBatchers)
	return len(alone) + len(together)
}

// steered is one steered write-back and the signals that order it.
type steered struct {
	lease jobAttempt
	key   string
	plan  string // the transition its scripted answer leads to
	alone bool   // let go alone, or together with the others

	got       string        // the transition decided, at the boundary
	plug      bool          // its batch holds a batcher until unplug
	arrived   chan struct{} // at the write-back boundary, held
	takenOver chan struct{} // a newer attempt's holder reached its provider call
	release   chan struct{} // the write-back may go on
	queued    chan struct{} // it waits for a batcher
	inBatch   chan struct{} // a batch took it
	batch     []jobAttempt  // that batch
	unplug    chan struct{} // its batch may begin
	wrote     chan struct{} // its write-back returned

	holder        chan struct{} // closed to let the job's held new holder go on
	holderAttempt int64         // that holder's attempt
}

// steerer plays the steered zombies of one run.
type steerer struct {
	r               *chaosRun
	proc            string // the steered process
	batchers        int
	alone, together []string
	bound           time.Duration // how long the whole episode may take

	mu      sync.Mutex
	zs      []*steered // in plan order
	byLease map[jobAttempt]*steered
	byJob   map[int64]*steered
	sent    map[string]bool        // keys whose first send was seen
	gate    chan struct{}          // non-nil while the steered process's other write-backs wait; closed to open
	passed  map[jobAttempt]bool    // its write-backs let through and not yet taken by a batch
	drained chan struct{}          // closed when passed empties, while someone waits for it
	once    map[chan struct{}]bool // signals closed

	planned chan struct{} // every planned send was scripted
	done    chan struct{} // the episode ended: nothing is held any more
	abort   chan struct{} // let every hold go
	stopped sync.Once
}

func newSteerer(r *chaosRun, proc string) *steerer {
	alone, together := steerPlan(steerBatchers)
	return &steerer{r: r, proc: proc, batchers: steerBatchers, alone: alone, together: together,
		bound:   min(20*r.f.Lease+time.Minute, stepTimeout/2),
		byLease: map[jobAttempt]*steered{}, byJob: map[int64]*steered{}, sent: map[string]bool{},
		passed: map[jobAttempt]bool{}, once: map[chan struct{}]bool{},
		planned: make(chan struct{}), done: make(chan struct{}), abort: make(chan struct{})}
}

// signal closes ch once; st.mu is held.
func (st *steerer) signal(ch chan struct{}) {
	if !st.once[ch] {
		st.once[ch] = true
		close(ch)
	}
}

// stop lets every hold go: the run is ending, or the episode gave up.
func (st *steerer) stop() {
	st.stopped.Do(func() { close(st.abort) })
}

// active reports whether proc is the steered process with its episode under
// way: no random fault may kill, freeze or cut it meanwhile.
func (st *steerer) active(proc string) bool {
	if proc != st.proc {
		return false
	}
	select {
	case <-st.done:
		return false
	default:
		return true
	}
}

// hold waits for ch, or until the steering lets go or the bound passes.
func (st *steerer) hold(ch <-chan struct{}) bool {
	t := time.NewTimer(st.bound)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-st.abort:
	case <-t.C:
	}
	return false
}

// beforeCall scripts the provider's answer to the steered process's first
// sends, notes a steered job's takeover, and holds its new holder until the
// zombie has written back.
func (st *steerer) beforeCall(ctx context.Context, s chaosStep) {
	st.mu.Lock()
	var z *steered
	fresh := s.Action == string(refundjob.NextActionRefund) && !st.sent[s.Key]
	if s.Action == string(refundjob.NextActionRefund) {
		st.sent[s.Key] = true
	}
	if fresh && s.Proc == st.proc && len(st.zs) < len(st.alone)+len(st.together) {
		i := len(st.zs)
		z = &steered{lease: jobAttempt{s.Job, s.Attempt}, key: s.Key, alone: i < len(st.alone),
			arrived: make(chan struct{}), takenOver: make(chan struct{}), release: make(chan struct{}),
			queued: make(chan struct{}), inBatch: make(chan struct{}), unplug: make(chan struct{}), wrote: make(chan struct{})}
		if z.alone {
			z.plan = st.alone[i]
		} else {
			z.plan = st.together[i-len(st.alone)]
		}
		st.zs = append(st.zs, z)
		st.byLease[z.lease], st.byJob[s.Job] = z, z
		st.mu.Unlock()
		st.script(ctx, z)
		st.mu.Lock()
		if len(st.zs) == len(st.alone)+len(st.together) {
			st.signal(st.planned)
		}
		st.mu.Unlock()
		return
	}
	z = st.byJob[s.Job]
	if z == nil || s.Attempt <= z.lease.Attempt {
		st.mu.Unlock()
		return
	}
	st.signal(z.takenOver)
	if st.once[z.wrote] || s.Attempt <= z.holderAttempt {
		st.mu.Unlock()
		return // the zombie wrote back, or a newer holder waits already
	}
	// One holder per job waits, the newest: a held holder's lease expires
	// too, and a takeover of it must not take one more slot of the fleet
	// for ever (the slots the other zombies' takeovers need). The older one
	// goes on, and its own write-back will meet the newer attempt.
	if z.holder != nil {
		close(z.holder)
	}
	z.holder, z.holderAttempt = make(chan struct{}), s.Attempt
	mine := z.holder
	st.mu.Unlock()
	st.r.count(faultHeldForZombie, 1)
	t := time.NewTimer(st.bound)
	defer t.Stop()
	select {
	case <-z.wrote:
	case <-mine:
	case <-st.abort:
		st.r.logf("steering: %s's call for job %d attempt %d went on before the zombie of attempt %d wrote back", s.Proc, s.Job, s.Attempt, z.lease.Attempt)
	case <-t.C:
		st.r.logf("steering: %s's call for job %d attempt %d went on before the zombie of attempt %d wrote back", s.Proc, s.Job, s.Attempt, z.lease.Attempt)
	}
}

// script makes the provider answer z's send so that the worker decides z's
// planned transition.
func (st *steerer) script(ctx context.Context, z *steered) {
	switch z.plan {
	case trComplete:
		st.r.srv.Script(z.key, fakeprovider.Fault{})
	case trReschedule:
		st.r.srv.Script(z.key, fakeprovider.Fault{Pending: true, SettleAfter: chaosPendingDelay})
	case trFail:
		st.r.srv.Script(z.key, fakeprovider.Fault{Reject: "not_refundable"})
	case trManualReview:
		// The key is taken with other parameters first (a request the
		// provider rejects, so that nothing executes): the worker's send,
		// served normally (no random fault), gets
		// idempotency_params_mismatch.
		req, ok := st.r.request(z.key)
		if !ok {
			st.r.logf("steering: no enqueued request for %s", z.key)
			return
		}
		st.r.srv.Script(z.key, fakeprovider.Fault{Reject: "chaos_other_parameters"}, fakeprovider.Fault{})
		req.AmountMinor-- // less than the payment: Stripe's adapter checks it against the payment before it sends
		if _, err := st.r.client().Refund(ctx, req); err == nil {
			st.r.logf("steering: the request taking %s with other parameters was not rejected", z.key)
		}
	}
}

// writeBack holds a steered write-back until the driver lets it go, and the
// steered process's other write-backs while its gate is closed.
func (st *steerer) writeBack(s chaosStep) {
	ja := jobAttempt{s.Job, s.Attempt}
	st.mu.Lock()
	if s.Proc != st.proc {
		st.mu.Unlock()
		return
	}
	if z := st.byLease[ja]; z != nil && !st.once[z.arrived] {
		z.got = s.Transition
		st.signal(z.arrived)
		st.mu.Unlock()
		st.hold(z.release)
		st.mu.Lock()
		st.passed[ja] = true
		st.mu.Unlock()
		return
	}
	for st.gate != nil {
		gate := st.gate
		st.mu.Unlock()
		st.hold(gate)
		st.mu.Lock()
		if st.gate == gate { // gave up waiting
			break
		}
	}
	st.passed[ja] = true
	st.mu.Unlock()
}

// queued notes that a steered write-back waits for a batcher.
func (st *steerer) queued(s chaosStep) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if z := st.byLease[jobAttempt{s.Job, s.Attempt}]; z != nil && s.Proc == st.proc {
		st.signal(z.queued)
	}
}

// batch notes which write-backs a batch of the steered process took, and
// holds a plug's batch, and its batcher, until the driver unplugs it.
func (st *steerer) batch(s chaosStep) {
	if s.Proc != st.proc {
		return
	}
	st.mu.Lock()
	var plug *steered
	for _, ja := range s.Batch {
		delete(st.passed, ja)
		if z := st.byLease[ja]; z != nil && !st.once[z.inBatch] {
			z.batch = s.Batch
			st.signal(z.inBatch)
			if z.plug {
				plug = z
			}
		}
	}
	if st.drained != nil && len(st.passed) == 0 {
		st.signal(st.drained)
		st.drained = nil
	}
	st.mu.Unlock()
	if plug != nil {
		st.hold(plug.unplug)
	}
}

// wroteBack lets the new holders of a steered job go on.
func (st *steerer) wroteBack(s chaosStep) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if z := st.byLease[jobAttempt{s.Job, s.Attempt}]; z != nil && s.Proc == st.proc {
		st.signal(z.wrote)
	}
}

// drive plays the episode: it waits for every steered write-back to be held
// and taken over, then lets them go alone and together. Whatever happens, it
// ends with nothing held.
func (st *steerer) drive() {
	complete := false
	defer func() {
		st.mu.Lock()
		if st.gate != nil {
			close(st.gate)
			st.gate = nil
		}
		close(st.done)
		st.mu.Unlock()
		if !complete {
			st.stop()
		}
	}()
	deadline := time.Now().Add(st.bound)
	wait := func(ch <-chan struct{}, what string) bool {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-ch:
			return true
		case <-st.abort:
		case <-t.C:
			st.r.logf("steering: gave up waiting for %s after %v; the run may be inconclusive", what, st.bound)
		}
		return false
	}
	if !wait(st.planned, fmt.Sprintf("the first %d sends of %s", len(st.alone)+len(st.together), st.proc)) {
		return
	}
	st.mu.Lock()
	zs := append([]*steered(nil), st.zs...)
	st.mu.Unlock()
	for _, z := range zs {
		if !wait(z.arrived, fmt.Sprintf("the write-back of job %d attempt %d", z.lease.Job, z.lease.Attempt)) ||
			!wait(z.takenOver, fmt.Sprintf("a takeover of job %d", z.lease.Job)) {
			return
		}
		st.r.count(faultSteeredZombie, 1)
		if z.got != z.plan {
			st.r.logf("steering: job %d was to write back %s and decided %s", z.lease.Job, z.plan, z.got)
		}
	}

	// The steered process's other write-backs wait, and those already let
	// through are taken by a batch: from now on, nothing but the zombies
	// reaches its batchers.
	st.mu.Lock()
	st.gate = make(chan struct{})
	var drained chan struct{}
	if len(st.passed) > 0 {
		st.drained = make(chan struct{})
		drained = st.drained
	}
	alone, together := zs[:len(st.alone)], zs[len(st.alone):]
	for i, z := range alone {
		z.plug = i >= len(alone)-st.batchers
	}
	st.mu.Unlock()
	if drained != nil && !wait(drained, "the steered process's write-backs already let through") {
		return
	}

	// One at a time, each alone in its batch; the last ones hold every
	// batcher.
	var plugs []*steered
	for _, z := range alone {
		close(z.release)
		if !wait(z.inBatch, fmt.Sprintf("a batch to take job %d", z.lease.Job)) {
			return
		}
		if len(z.batch) != 1 {
			st.r.logf("steering: job %d was to go alone and shared its batch %v", z.lease.Job, z.batch)
		}
		if z.plug {
			plugs = append(plugs, z)
		}
	}
	// Together: every one waits for a batcher, then one batcher is let go
	// and takes them all.
	for _, z := range together {
		close(z.release)
	}
	for _, z := range together {
		if !wait(z.queued, fmt.Sprintf("job %d to wait for a batcher", z.lease.Job)) {
			return
		}
	}
	if len(plugs) == 0 {
		st.r.logf("steering: no batch holds a batcher; the zombies let go together may not share one")
		return
	}
	close(plugs[0].unplug)
	for _, z := range together {
		if !wait(z.inBatch, fmt.Sprintf("a batch to take job %d", z.lease.Job)) {
			return
		}
		if len(z.batch) != len(together) {
			st.r.logf("steering: job %d was to share a batch with %d write-backs and shared %v", z.lease.Job, len(together), z.batch)
		}
	}
	for _, p := range plugs[1:] {
		close(p.unplug)
	}
	// The episode lasts until every zombie has its answer: a fault on the
	// steered process's paths before then would roll its write-back back
	// rather than let the fence refuse it.
	for _, z := range zs {
		if !wait(z.wrote, fmt.Sprintf("the zombie write-back of job %d", z.lease.Job)) {
			return
		}
	}
	complete = true
}

// request is the refund request enqueued with key.
func (r *chaosRun) request(key string) (provider.RefundRequest, bool) {
	r.reqMu.Lock()
	defer r.reqMu.Unlock()
	req, ok := r.requests[key]
	return req, ok
}
