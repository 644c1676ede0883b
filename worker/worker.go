package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/worker/internal/budget"
)

// ErrNotStarted and ErrAlreadyStarted are Start's and Stop's refusals.
var (
	ErrAlreadyStarted = errors.New("worker already started")
	ErrNotStarted     = errors.New("worker not started")
)

// ErrBudgetDiffers is Start's refusal to open the fleet's budget when its
// row holds another rate or burst than Config's and Config.ChangeBudget is
// not set: nothing was changed. Start the process with the fleet's
// settings, or set ChangeBudget to change them for the whole fleet.
var ErrBudgetDiffers = budget.ErrSettingsDiffer

// Client is a worker process's queue client: a scheduler, the workers it
// dispatches to, and a reconciler of evidence.
type Client struct {
	cfg    Config
	opts   fencedwrite.ClaimOptions
	ent    *ent.Client
	log    *slog.Logger
	m      Metrics
	hooks  Hooks
	bucket *budget.Bucket

	wake      chan struct{} // a slot freed or a job became due: run a pass soon
	reconcile chan struct{} // evidence arrived: run a reconciler pass soon
	pendingWB chan writeBackReq
	batcher   sync.WaitGroup

	inflight atomic.Int64

	mu         sync.Mutex
	hints      []Hint // waiting for a pass, in the order they came
	started    bool
	stop       chan struct{} // closed by Stop: claim no more
	stopped    chan struct{} // closed when everything returned
	workCtx    context.Context
	cancelWork context.CancelFunc
	loops      sync.WaitGroup // scheduler and reconciler
	jobs       sync.WaitGroup // jobs in flight
}

// New validates cfg (an error names every bad field and matches
// fencedwrite.ErrInvalid) and returns a Client. It does no I/O.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	if cfg.Lease <= cfg.ProviderTimeout {
		cfg.Logger.Warn("worker lease is not longer than one provider call: jobs will be taken over while their call runs",
			"lease", cfg.Lease, "provider_timeout", cfg.ProviderTimeout)
	}
	return &Client{
		cfg:       cfg,
		opts:      cfg.claimOptions(),
		ent:       ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, cfg.DB))),
		log:       cfg.Logger,
		m:         cfg.Metrics,
		hooks:     cfg.Hooks,
		wake:      make(chan struct{}, 1),
		reconcile: make(chan struct{}, 1),
		pendingWB: make(chan writeBackReq, cfg.Workers),
		stopped:   make(chan struct{}),
	}, nil
}

// Ent is the worker's data-layer client, for callers that enqueue or
// inspect jobs with the same pool.
func (c *Client) Ent() *ent.Client { return c.ent }

// Start opens the outbound budget and starts the scheduler and the
// reconciler. They run until Stop or StopAndCancel; ctx only bounds Start
// itself.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrAlreadyStarted
	}
	// The budget's row is shared by the fleet: a process frozen while it
	// holds the row's lock makes others wait, and a deploy must not fail
	// for it. A transient error is tried again until ctx ends.
	var (
		b       *budget.Bucket
		changed *budget.Change
	)
	err := retryTransient(ctx, func() error {
		var err error
		b, changed, err = budget.Open(ctx, c.cfg.DB, c.cfg.BudgetName, c.cfg.BudgetRate, c.cfg.BudgetBurst, c.cfg.ChangeBudget)
		return err
	}, func(_ time.Duration, err error) {
		c.log.Warn("open the outbound budget: trying again", "err", err)
	})
	if errors.Is(err, budget.ErrSettingsDiffer) {
		return fmt.Errorf("start worker: %w: start with the fleet's settings, or set worker.Config.ChangeBudget to change them for the whole fleet", err)
	}
	if err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	if changed != nil {
		c.log.Warn("changed the fleet's outbound budget: every process of the fleet follows it", "budget", c.cfg.BudgetName,
			"from_rate", changed.FromRate, "from_burst", changed.FromCapacity, "rate", changed.ToRate, "burst", changed.ToCapacity)
	}
	c.bucket = b
	c.started = true
	c.stop = make(chan struct{})
	c.workCtx, c.cancelWork = context.WithCancel(context.Background())
	c.loops.Add(2)
	go c.scheduler()
	go c.reconciler()
	for range c.cfg.WriteBackConns {
		c.batcher.Add(1)
		go c.batchWriteBacks()
	}
	return nil
}

// Stop stops claiming, lets the provider calls in flight finish or time out
// and write back through the fence, and returns when everything has
// returned, or with ctx's error when ctx ends first (the work then goes on
// until it is done; StopAndCancel cuts it short).
func (c *Client) Stop(ctx context.Context) error {
	if err := c.beginStop(); err != nil {
		return err
	}
	select {
	case <-c.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop worker: %w", ctx.Err())
	}
}

// StopAndCancel is Stop that also cancels the provider calls in flight.
// A cancelled call's outcome is unknown: its job is rescheduled to
// reconcile (never to resend blindly), through the fence.
func (c *Client) StopAndCancel(ctx context.Context) error {
	if err := c.beginStop(); err != nil {
		return err
	}
	c.cancelWork()
	select {
	case <-c.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop worker: %w", ctx.Err())
	}
}

// Stopped is closed once the worker has stopped and every job it held has
// written back (or given up).
func (c *Client) Stopped() <-chan struct{} { return c.stopped }

func (c *Client) beginStop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return ErrNotStarted
	}
	select {
	case <-c.stop:
		return nil // already stopping
	default:
	}
	close(c.stop)
	go func() {
		c.loops.Wait()
		c.dropHints() // the scheduler is gone: no hint is tried any more
		c.jobs.Wait()
		close(c.pendingWB) // every job has written back
		c.batcher.Wait()
		c.cancelWork()
		close(c.stopped)
	}()
	return nil
}

func (c *Client) stopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// Wake makes the scheduler run a pass soon, without waiting for the next
// scan: after an enqueue or a wake-up, say.
func (c *Client) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Client) wakeReconciler() {
	select {
	case c.reconcile <- struct{}{}:
	default:
	}
}

func (c *Client) scheduler() {
	defer c.loops.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-timer.C:
		case <-c.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		next := c.pass()
		timer.Reset(next)
	}
}

// pass claims as many jobs as there are free slots and outbound tokens,
// dispatches them, and says when to look again. Unknown outcomes go first:
// expired leases, then due reconciles, which may spend every token; sends
// get only the tokens above the reserve (Config.ReconcileReserve).
func (c *Client) pass() time.Duration {
	ctx := c.workCtx
	free := c.cfg.Workers - int(c.inflight.Load())
	res := PassResult{Free: free}
	defer func() {
		if c.hooks.Pass != nil {
			c.hooks.Pass(res)
		}
	}()
	if free <= 0 {
		return c.cfg.ScanInterval // a job that finishes wakes the scheduler
	}
	// A batch claim takes at most fencedwrite.MaxBatch jobs.
	want := min(free, fencedwrite.MaxBatch)
	g, err := c.bucket.Take(ctx, want)
	if err != nil {
		c.log.Error("take outbound budget", "err", err)
		return c.cfg.ScanInterval
	}
	res.Tokens = g.Granted
	if g.Granted == 0 {
		c.m.BudgetWait()
		return min(max(g.RetryIn, time.Millisecond), c.cfg.ScanInterval)
	}
	taken, err := c.claimBatch(ctx, "takeover", c.ent.RefundJob.TakeoverExpired, g.Granted)
	rest := g.Granted - len(taken)
	var owed, due []*ent.RefundJobLease
	if rest > 0 && err == nil {
		owed, err = c.claimBatch(ctx, "claim", c.ent.RefundJob.ClaimDueReconciles, rest)
		rest -= len(owed)
	}
	// The budget held g.Left + rest tokens once the unknown outcomes took
	// theirs: sends may spend what is above the reserve.
	reserve := c.reserve(g.Capacity)
	sendable := max(0, min(rest, int(math.Floor(g.Left+float64(rest)-float64(reserve)))))
	// Hints (a broker's messages) name the jobs to send first, with the
	// sends' tokens only: never ahead of an unknown outcome. The scan of due
	// sends takes what they leave, and is the safety net for a hint that
	// was lost.
	var hinted []*ent.RefundJobLease
	if sendable > 0 && err == nil {
		hinted, err = c.claimHints(ctx, sendable)
	}
	if sendable > len(hinted) && err == nil {
		due, err = c.claimBatch(ctx, "claim", c.ent.RefundJob.ClaimDue, sendable-len(hinted))
	}
	due = append(hinted, due...)
	res.TakenOver, res.Reconciles, res.Claimed, res.Hinted, res.Reserved = len(taken), len(owed), len(due), len(hinted), rest-sendable
	unused := g.Granted - len(taken) - len(owed) - len(due)
	if unused > 0 {
		if err := c.bucket.Return(context.WithoutCancel(ctx), unused); err != nil {
			c.log.Warn("return unused outbound budget", "tokens", unused, "err", err)
		}
	}
	c.m.Takeovers(len(taken))
	for _, l := range slices.Concat(taken, owed, due) {
		c.m.Claims(string(l.NextAction()), 1)
		c.inflight.Add(1)
		c.jobs.Add(1)
		go c.run(l)
	}
	switch {
	case err != nil:
		return c.cfg.ScanInterval
	case unused == 0 && g.Granted < want:
		// The budget, not the work, was the limit: look again when the next
		// token is due.
		return min(max(g.RetryIn, time.Millisecond), c.cfg.ScanInterval)
	case sendable < rest && len(due) == sendable:
		// The reserve, not the work, held sends back: look again when a
		// token above it is due.
		above := float64(reserve) + 1 - (g.Left + float64(unused))
		wait := time.Duration(math.Min(above/g.Rate*float64(time.Second), float64(c.cfg.ScanInterval)))
		return min(max(wait, time.Millisecond), c.cfg.ScanInterval)
	}
	// Either nothing more is due, or the slots are full and a finishing job
	// wakes the scheduler.
	return c.cfg.ScanInterval
}

// reserve is how many of a budget of this capacity sends leave to unknown
// outcomes.
func (c *Client) reserve(capacity float64) int {
	if c.cfg.ReconcileReserve <= 0 {
		return 0
	}
	return int(math.Floor(c.cfg.ReconcileReserve * capacity))
}

// claimBatch runs one batch claim (what is "claim" or "takeover") of up to
// limit jobs.
func (c *Client) claimBatch(ctx context.Context, what string, claim func(context.Context, int, fencedwrite.ClaimOptions) ([]*ent.RefundJobLease, error), limit int) ([]*ent.RefundJobLease, error) {
	if c.hooks.ClaimContext != nil {
		ctx = c.hooks.ClaimContext(ctx, what)
	}
	leases, err := claim(ctx, limit, c.opts)
	c.claimed(what, err)
	if c.hooks.Claimed != nil {
		jobs := make([]Job, len(leases))
		for i, l := range leases {
			jobs[i] = jobOf(l)
		}
		c.hooks.Claimed(ctx, what, jobs, err)
	}
	return leases, err
}

func jobOf(l *ent.RefundJobLease) Job {
	return Job{ID: l.ID(), Attempt: l.Attempt(), OperationKey: l.Request().OperationKey, Action: string(l.NextAction())}
}

func (c *Client) claimed(what string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, fencedwrite.ErrCommitUnknown):
		// Do not call the provider and do not retry: the next pass reads
		// the truth (a claim that landed is taken over after its lease).
		c.m.ClaimUnknown()
		c.log.Warn(what+": commit outcome unknown; nothing sent", "err", err)
	case errors.Is(err, context.Canceled):
	case nothingToDo(err):
		// A hint's claim by id found the job settled, held or not due.
		c.log.Debug(what+": nothing to do", "err", err)
	default:
		c.log.Error(what, "err", err)
	}
}
