package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"sync"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/history"
	"github.com/fencekit/fencekit/worker"
)

// AgentCommand is the hidden refundd command the fleet's processes run:
// refundd run's flags and worker, plus AgentFlags, with the Agent's hooks.
// refundd wires it; it is for this harness only and listed nowhere.
const AgentCommand = "chaos-agent"

// AgentFlags are the settings refundd chaos gives each process of its
// fleet: where to record the history, and where to report each step
// boundary so that the chaos process can inject a fault exactly there.
type AgentFlags struct {
	history, control, proc string
}

// Register registers the agent's flags on AgentCommand's flag set.
func (f *AgentFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.history, "chaos-history", "", "refundd chaos: append this process's history of operations to this file")
	fs.StringVar(&f.control, "chaos-control", "", "refundd chaos: URL the process reports its step boundaries to, and waits on")
	fs.StringVar(&f.proc, "chaos-proc", "", "refundd chaos: this process's name in the history")
}

// Agent records a fleet process's history and stops at each step
// boundary until the chaos process, which may kill, pause or cut it there,
// lets it go on. A nil agent does nothing.
type Agent struct {
	rec     *history.Recorder
	control string
	proc    string
	client  *http.Client

	mu      sync.Mutex
	calls   map[jobAttempt]int64 // provider calls in flight
	writes  map[jobAttempt]int64 // write-backs in flight
	batched map[jobAttempt]int   // write-backs in flight: how many shared their last batch
	resolve map[jobAttempt]int64 // the reconciler's resolutions in flight, by the attempt they move the job to
}

// jobAttempt is a lease: one job at one attempt. A process may hold two of
// one job (a frozen goroutine's and its own takeover's).
type jobAttempt struct {
	Job     int64 `json:"job"`
	Attempt int64 `json:"attempt"`
}

// chaosStep is what a process reports at a step boundary.
type chaosStep struct {
	Proc       string `json:"proc"`
	Step       string `json:"step"`
	What       string `json:"what,omitempty"` // claim or takeover
	Count      int    `json:"count,omitempty"`
	Job        int64  `json:"job,omitempty"`
	Attempt    int64  `json:"attempt,omitempty"`
	Key        string `json:"key,omitempty"`
	Action     string `json:"action,omitempty"` // before_call: refund or reconcile
	Transition string `json:"transition,omitempty"`
	Result     string `json:"result,omitempty"` // wrote_back: the write-back's outcome, as the history records it
	// Batch, at a batch boundary, lists the write-backs that share it.
	Batch []jobAttempt `json:"batch,omitempty"`
}

// The step boundaries.
const (
	stepClaimCommit   = "claim_commit"   // a claim or takeover batch is about to send COMMIT
	stepBeforeCall    = "before_call"    // a job is about to call the provider
	stepAfterAnswer   = "after_answer"   // the provider answered, the write-back has not started
	stepWriteBack     = "write_back"     // a job's transition is decided; its write-back is not sent yet
	stepQueued        = "queued"         // a job's write-back waits for a batcher
	stepBatch         = "batch"          // a write-back batch is about to begin its transaction
	stepBusinessWrite = "business_write" // the job's fenced write applied; the ledger write is next
	stepWriteCommit   = "write_commit"   // a write-back batch is about to send COMMIT
	stepWroteBack     = "wrote_back"     // a job's write-back returned
)

// Open opens the agent's history file. All three flags are required.
func (f AgentFlags) Open() (*Agent, error) {
	if f.history == "" || f.control == "" || f.proc == "" {
		return nil, errors.New("chaos agent: -chaos-history, -chaos-control and -chaos-proc are all required")
	}
	rec, err := history.Open(f.history, f.proc)
	if err != nil {
		return nil, err
	}
	return &Agent{rec: rec, control: f.control, proc: f.proc, client: &http.Client{Timeout: stepTimeout},
		calls: map[jobAttempt]int64{}, writes: map[jobAttempt]int64{}, batched: map[jobAttempt]int{}, resolve: map[jobAttempt]int64{}}, nil
}

// Close closes the agent's history file.
func (a *Agent) Close() {
	if a != nil {
		a.rec.Close()
	}
}

// step reports s and waits until the chaos process lets the process go on
// (it may never: a SIGKILL). Without an answer it goes on.
func (a *Agent) step(s chaosStep) {
	s.Proc = a.proc
	body, _ := json.Marshal(s)
	resp, err := a.client.Post(a.control, "application/json", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close()
	}
}

// claimBatch is one claim or takeover batch being recorded.
type claimBatch struct {
	mu  sync.Mutex
	ids map[int64]int64 // job → its operation in the history
}

type claimBatchKey struct{}

// Hooks are the worker's hooks that record the process's history and
// report each step boundary. A nil agent's are none.
func (a *Agent) Hooks() worker.Hooks {
	if a == nil {
		return worker.Hooks{}
	}
	return worker.Hooks{
		ClaimContext: func(ctx context.Context, what string) context.Context {
			b := &claimBatch{ids: map[int64]int64{}}
			ctx = context.WithValue(ctx, claimBatchKey{}, b)
			return fencedwrite.WithHooks(ctx, fencedwrite.Hooks{ClaimsCommitting: func(cs []fencedwrite.Claiming) {
				b.mu.Lock()
				for _, c := range cs {
					b.ids[c.ID] = a.rec.Call(history.Event{Op: what, Job: c.ID, Attempt: c.Attempt})
				}
				b.mu.Unlock()
				a.step(chaosStep{Step: stepClaimCommit, What: what, Count: len(cs)})
			}})
		},
		Claimed: func(ctx context.Context, what string, jobs []worker.Job, err error) {
			b, _ := ctx.Value(claimBatchKey{}).(*claimBatch)
			if b == nil {
				return
			}
			got := map[int64]bool{}
			for _, j := range jobs {
				got[j.ID] = true
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			for job, op := range b.ids {
				result := history.ResultRolledBack
				switch {
				case got[job]:
					result = history.ResultOK
				case errors.Is(err, fencedwrite.ErrCommitUnknown):
					result = history.ResultUnknown
				case err == nil:
					// A COMMIT acknowledged without this job's lease cannot
					// happen; say so rather than guess.
					result = history.ResultUnknown
				}
				a.rec.Return(op, history.Event{Op: what, Job: job, Result: result})
			}
		},
		BeforeProviderCall: func(j worker.Job) {
			a.step(chaosStep{Step: stepBeforeCall, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Action: j.Action})
			op := a.rec.Call(history.Event{Op: history.OpProvider, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Detail: j.Action})
			a.mu.Lock()
			a.calls[jobAttempt{j.ID, j.Attempt}] = op
			a.mu.Unlock()
		},
		AfterProviderCall: func(j worker.Job) {
			a.mu.Lock()
			op := a.calls[jobAttempt{j.ID, j.Attempt}]
			delete(a.calls, jobAttempt{j.ID, j.Attempt})
			a.mu.Unlock()
			a.rec.Return(op, history.Event{Op: history.OpProvider, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Detail: j.Answer, Result: history.ResultOK})
			a.step(chaosStep{Step: stepAfterAnswer, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey})
		},
		BeforeWriteBack: func(j worker.Job) {
			// The chaos process may hold the write-back here until another
			// worker took the job over: the write is called, and sent, after.
			a.step(chaosStep{Step: stepWriteBack, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Transition: j.Transition})
			op := a.rec.Call(history.Event{Op: history.OpWrite, Job: j.ID, Attempt: j.Attempt, To: j.To, Key: j.OperationKey, Detail: j.Transition})
			a.mu.Lock()
			a.writes[jobAttempt{j.ID, j.Attempt}] = op
			a.mu.Unlock()
		},
		WriteBackQueued: func(j worker.Job) {
			a.step(chaosStep{Step: stepQueued, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Transition: j.Transition})
		},
		BeforeBusinessWrite: func(_ context.Context, j worker.Job) {
			a.step(chaosStep{Step: stepBusinessWrite, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Transition: j.Transition})
		},
		BatchContext: func(ctx context.Context, jobs []worker.Job) context.Context {
			batch := make([]jobAttempt, len(jobs))
			a.mu.Lock()
			for i, j := range jobs {
				batch[i] = jobAttempt{j.ID, j.Attempt}
				a.batched[batch[i]] = len(jobs)
			}
			a.mu.Unlock()
			// The chaos process may hold the batch here, and its batcher:
			// write-backs queued meanwhile share the next batch.
			a.step(chaosStep{Step: stepBatch, Count: len(jobs), Batch: batch})
			return fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeCommit: func() { a.step(chaosStep{Step: stepWriteCommit}) }})
		},
		Resolving: func(j worker.Job) {
			op := a.rec.Call(history.Event{Op: history.OpResolve, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Detail: j.Transition})
			a.mu.Lock()
			a.resolve[jobAttempt{j.ID, j.Attempt}] = op
			a.mu.Unlock()
		},
		Resolved: func(j worker.Job, err error) {
			ja := jobAttempt{j.ID, j.Attempt}
			a.mu.Lock()
			op, ok := a.resolve[ja]
			delete(a.resolve, ja)
			a.mu.Unlock()
			result := writeResult(err)
			if result == history.ResultAlreadySettled {
				result = history.ResultOK // the re-read found this very resolution landed
			}
			if ok {
				a.rec.Return(op, history.Event{Op: history.OpResolve, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Result: result})
			}
		},
		WroteBack: func(j worker.Job, err error) {
			ja := jobAttempt{j.ID, j.Attempt}
			a.mu.Lock()
			op, ok := a.writes[ja]
			batch := a.batched[ja]
			delete(a.writes, ja)
			delete(a.batched, ja)
			a.mu.Unlock()
			result := writeResult(err)
			if ok {
				a.rec.Return(op, history.Event{Op: history.OpWrite, Job: j.ID, Attempt: j.Attempt, To: j.To, Key: j.OperationKey, Result: result, Batch: batch})
			}
			a.step(chaosStep{Step: stepWroteBack, Job: j.ID, Attempt: j.Attempt, Key: j.OperationKey, Transition: j.Transition, Result: result})
		},
	}
}

// writeResult names a write-back's outcome for the history. An outcome the
// runner could not pin down is unknown: the checker then allows both.
func writeResult(err error) string {
	switch {
	case err == nil:
		return history.ResultOK
	case errors.Is(err, fencedwrite.ErrCommitUnknown):
		return history.ResultUnknown
	case errors.Is(err, fencedwrite.ErrAlreadySettled):
		return history.ResultAlreadySettled
	case errors.Is(err, fencedwrite.ErrSuperseded):
		return history.ResultSuperseded
	case errors.Is(err, fencedwrite.ErrRolledBack), errors.Is(err, fencedwrite.ErrInvalid):
		return history.ResultRolledBack
	default: // ErrCommitUnknown, ErrUnexpectedState, ErrFoundRowsOff
		return history.ResultUnknown
	}
}

// stepTimeout bounds how long the chaos process may hold a step: a pause
// past the lease, or a steered zombie's episode (steerer.bound), at most.
const stepTimeout = 10 * time.Minute
