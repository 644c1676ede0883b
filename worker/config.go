package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
)

// Defaults for Config, from DESIGN.md: the demo's numbers, not production
// advice. Tune Lease from the provider's P99 latency, the deploy hand-over
// time and the refund SLO; shorter leases mean false takeovers that burn
// reconcile quota, longer ones leave refunds stuck.
const (
	DefaultWorkers          = 10
	DefaultLease            = fencedwrite.DefaultLease           // 30 s
	DefaultScanInterval     = 5 * time.Second                    // a scheduler pass every 5 s
	DefaultProviderTimeout  = fencedwrite.DefaultProviderTimeout // 3 s
	DefaultBudgetRate       = 50.0                               // provider calls per second, fleet-wide
	DefaultBudgetBurst      = 100
	DefaultPendingDelay     = 30 * time.Second // a pending refund is reconciled this much later
	DefaultRetryDelay       = 10 * time.Second // rate limited, key in use, lookup failed
	DefaultLagPoll          = 5 * time.Second  // the least wait inside the lookup-lag window
	DefaultWebhookTolerance = provider.DefaultWebhookTolerance
	DefaultBudgetName       = "default"
	DefaultWriteBackBatch   = 32 // write-backs settled in one transaction at most
	DefaultWriteBackConns   = 4  // write-back transactions in flight at once
	// DefaultReconcileReserve is the share of the fleet budget's capacity
	// that sends leave to takeovers and reconciles (Config.ReconcileReserve).
	DefaultReconcileReserve = 0.2
	// NoReconcileReserve, as Config.ReconcileReserve, keeps no reserve: sends
	// may spend every token the unknown outcomes did not take first.
	NoReconcileReserve = -1.0

	// MaxWorkers bounds Config.Workers.
	MaxWorkers = 10_000
)

// Config configures a Client. A zero field takes its default; New validates
// the result once and names every bad field.
type Config struct {
	// DB is the pool the worker uses, opened with fencedwrite.OpenDB (the
	// fence relies on its settings). Required.
	DB *sql.DB
	// Provider is the payment provider. Required. Its Capabilities decide
	// whether a resend is ever safe and how long a lookup may lag.
	Provider provider.Client
	// BudgetName names the provider's outbound budget, shared by every
	// process that uses the same name on the same database.
	BudgetName string
	// BudgetRate is the provider calls per second the whole fleet may make
	// (sends, resends and reconciles alike); BudgetBurst the most it may
	// make at once.
	BudgetRate  float64
	BudgetBurst int
	// ChangeBudget lets Start change the fleet's budget to BudgetRate and
	// BudgetBurst when its row holds others: the whole fleet's calls follow
	// the change, which Start logs. Without it, Start refuses a budget whose
	// settings differ (ErrBudgetDiffers) and changes nothing: one process
	// started with another rate must not rewrite the fleet's.
	ChangeBudget bool
	// ReconcileReserve is the share of the fleet budget's capacity (its
	// burst) that sends leave to takeovers and reconciles: the unknown
	// outcomes, the money at risk. A pass claims expired leases first, then
	// due reconciles, and these may spend every token it took; then it
	// claims sends only with the tokens above floor(ReconcileReserve ×
	// capacity), so that a reconcile that comes due while sends saturate
	// the budget finds tokens waiting. DefaultReconcileReserve when zero;
	// NoReconcileReserve keeps none; otherwise above 0 and below 1.
	ReconcileReserve float64
	// Workers is how many provider calls this process makes at once: its
	// slots. A pass claims no more jobs than free slots and tokens.
	Workers int
	// Lease is how long a claim keeps others from taking over. Expiry only
	// opens the race: write rights end when another takeover commits.
	Lease time.Duration
	// ScanInterval is how often the scheduler looks for due jobs and
	// expired leases when nothing wakes it sooner.
	ScanInterval time.Duration
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// SkewMargin covers clock differences between us and the provider, in
	// the idempotency key's window.
	SkewMargin time.Duration
	// Holder names this process in the attempts log (which process held
	// each attempt it claims or takes over): printable ASCII, at most
	// fencedwrite.MaxHolderLen characters. Empty means
	// fencedwrite.DefaultHolder ("hostname/pid").
	Holder string
	// PendingDelay, RetryDelay and LagPoll are how long a rescheduled job
	// waits: after a pending answer, after a refusal to process (rate
	// limited, key in use, failed lookup), and at least, inside the
	// provider's lookup-lag window.
	PendingDelay, RetryDelay, LagPoll time.Duration
	// WriteBackBatch is how many write-backs of jobs that finish together
	// are settled in one transaction (ent's ApplyBatch: each still fenced
	// on its own attempt with its own ledger write). Write-backs are never
	// held back to fill a batch: a batch is whatever is waiting when the
	// previous one commits. 1 settles each job in its own transaction.
	WriteBackBatch int
	// WriteBackConns is how many write-back transactions run at once, each
	// on its own connection of DB. One serialises every write-back on
	// one connection's round trips; the jobs of different batches are
	// distinct rows, so more never contend on a lock.
	WriteBackConns int
	// ReconcileInterval is how often unprocessed evidence is read; a
	// webhook triggers a pass at once. ScanInterval when zero.
	ReconcileInterval time.Duration
	// WebhookSecret verifies the provider's webhook signatures; the webhook
	// handler refuses every request when it is empty.
	WebhookSecret []byte
	// WebhookTolerance is how far a webhook's signing time may be from
	// Now.
	WebhookTolerance time.Duration
	// Webhooks verifies the provider's webhooks its own way (Stripe's
	// signatures: provider/stripe). Nil means fencekit's scheme,
	// provider.SignedWebhooks with WebhookSecret and WebhookTolerance.
	Webhooks provider.WebhookVerifier
	// Now is the clock webhook timestamps are checked against; time.Now
	// when nil. Leases and key windows never use it: they use the
	// database's clock.
	Now func() time.Time
	// Logger receives the worker's logs; slog.Default() when nil. Every
	// line about a job carries operation_key and attempt.
	Logger *slog.Logger
	// Metrics receives the worker's measurements; NopMetrics when nil.
	Metrics Metrics
	// Hooks are test signals; see Hooks.
	Hooks Hooks
}

// A Lease no longer than ProviderTimeout is allowed (tests use leases of a
// microsecond to expire them at once) but New logs a warning: such a lease
// is taken over while its provider call still runs, and every takeover
// costs a reconcile.

// Job identifies a job a worker holds, for hooks and logs.
type Job struct {
	ID           int64
	Attempt      int64
	OperationKey string
	Action       string // refund or reconcile
	// Answer is what the provider answered (its status and refund id, or
	// the error), once the call returned; set only when
	// Hooks.AfterProviderCall is, which is where it is for.
	Answer string
	// Transition is the write-back's transition (complete, reschedule,
	// manual_review, fail) and To the state it moves the job to, once
	// decided.
	Transition, To string
}

// Hooks are test signals: functions the worker calls at the moments a test
// needs to order workers around, instead of sleeping (like River's
// testsignal). Each Client has its own. They run on the worker's goroutines;
// a hook that blocks holds that worker there.
type Hooks struct {
	// BeforeProviderCall runs after the claim committed, before the
	// provider is called.
	BeforeProviderCall func(Job)
	// AfterProviderCall runs after the provider answered (or failed), before
	// the write-back: block here to pause a worker past its lease.
	AfterProviderCall func(Job)
	// WroteBack runs after the write-back, with its outcome (nil,
	// or an error matching a fencedwrite outcome).
	WroteBack func(Job, error)
	// WriteBackContext, when set, derives the write-back's context: tests
	// attach the data layer's own signals (fencedwrite.WithHooks) to cut the
	// COMMIT's reply, say.
	WriteBackContext func(context.Context, Job) context.Context
	// ClaimContext, when set, derives the context of each claim ("claim":
	// the due reconciles, then the other due jobs) or takeover ("takeover")
	// batch: attach fencedwrite.WithHooks to see the claims before their
	// COMMIT, or to cut its reply.
	ClaimContext func(ctx context.Context, what string) context.Context
	// Claimed runs after each claim or takeover batch, with the context
	// ClaimContext derived, the jobs it leased and its error.
	Claimed func(ctx context.Context, what string, jobs []Job, err error)
	// BatchContext, when set, derives the context of each batched
	// write-back transaction (fencedwrite.WithHooks: its COMMIT), with the
	// jobs whose write-backs share it, before the transaction begins: a
	// hook that blocks holds the batch, and its batcher, there.
	BatchContext func(ctx context.Context, jobs []Job) context.Context
	// WriteBackQueued runs once a write-back was handed to the batcher,
	// before it waits for its batch's outcome: a write-back queued while
	// every batcher is busy joins the next batch. Its BatchContext may run
	// before or after it.
	WriteBackQueued func(Job)
	// BeforeWriteBack runs once the write-back's transition is decided
	// (Job.Transition and Job.To are set), before it is applied.
	BeforeWriteBack func(Job)
	// BeforeBusinessWrite runs inside a write-back's transaction, after the
	// job's fenced write applied and right before the business write that
	// goes with it (the ledger's): the job's row is locked by then.
	BeforeBusinessWrite func(context.Context, Job)
	// Resolving runs before the reconciler sends a job in manual review
	// back to reconcile for new evidence (an operator resolution: attempt+1),
	// with Job.Attempt the attempt it moves the job to; Resolved runs after,
	// with its outcome (nil, or an error matching a fencedwrite outcome).
	Resolving func(Job)
	Resolved  func(Job, error)
	// Pass runs after each scheduler pass with what it claimed.
	Pass func(PassResult)
	// Reconciled runs after each reconciler pass with how many pieces of
	// evidence it acted on.
	Reconciled func(n int)
}

// PassResult is what one scheduler pass did: its free slots, the tokens it
// took from the fleet budget, the expired leases it took over, the due
// reconciles it claimed, the other due jobs (sends) it claimed, of which
// Hinted through hints (Client.Hint) by id, and the tokens it did not spend
// on sends because they were the reserve of unknown outcomes
// (Config.ReconcileReserve).
type PassResult struct {
	Free, Tokens, TakenOver, Reconciles, Claimed, Hinted, Reserved int
}

func (c Config) withDefaults() Config {
	if c.BudgetName == "" {
		c.BudgetName = DefaultBudgetName
	}
	if c.BudgetRate == 0 {
		c.BudgetRate = DefaultBudgetRate
	}
	if c.BudgetBurst == 0 {
		c.BudgetBurst = DefaultBudgetBurst
	}
	if c.ReconcileReserve == 0 {
		c.ReconcileReserve = DefaultReconcileReserve
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.ScanInterval == 0 {
		c.ScanInterval = DefaultScanInterval
	}
	if c.ProviderTimeout == 0 {
		c.ProviderTimeout = DefaultProviderTimeout
	}
	if c.SkewMargin == 0 {
		c.SkewMargin = fencedwrite.DefaultSkewMargin
	}
	if c.PendingDelay == 0 {
		c.PendingDelay = DefaultPendingDelay
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.LagPoll == 0 {
		c.LagPoll = DefaultLagPoll
	}
	if c.WriteBackBatch == 0 {
		c.WriteBackBatch = DefaultWriteBackBatch
	}
	if c.WriteBackConns == 0 {
		c.WriteBackConns = DefaultWriteBackConns
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = c.ScanInterval
	}
	if c.WebhookTolerance == 0 {
		c.WebhookTolerance = DefaultWebhookTolerance
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Webhooks == nil {
		c.Webhooks = provider.SignedWebhooks{Secret: c.WebhookSecret, Tolerance: c.WebhookTolerance}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &fencedwrite.FieldError{Field: "worker.Config." + field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.DB == nil:
		bad("DB", "is required: open it with fencedwrite.OpenDB")
	case !fencedwrite.IsFencedPool(c.DB):
		bad("DB", "is not a fenced pool: open it with fencedwrite.OpenDB (or sql.OpenDB of fencedwrite.NewConnector), whose sessions are verified; the worker's evidence and budget writes run on it outside the fenced runner")
	}
	if c.Provider == nil {
		bad("Provider", "is required")
	}
	if len(c.BudgetName) > 64 {
		bad("BudgetName", "must be at most 64 characters, got %d", len(c.BudgetName))
	}
	if c.BudgetRate <= 0 {
		bad("BudgetRate", "must be positive, got %v", c.BudgetRate)
	}
	if c.BudgetBurst < 1 {
		bad("BudgetBurst", "must be at least 1, got %d", c.BudgetBurst)
	}
	if c.ReconcileReserve != NoReconcileReserve && !(c.ReconcileReserve > 0 && c.ReconcileReserve < 1) {
		bad("ReconcileReserve", "must be above 0 and below 1 (a share of the budget's capacity), or NoReconcileReserve, got %v", c.ReconcileReserve)
	}
	if c.WriteBackBatch < 1 || c.WriteBackBatch > 1000 {
		bad("WriteBackBatch", "must be between 1 and 1000, got %d", c.WriteBackBatch)
	}
	if c.WriteBackConns < 1 || c.WriteBackConns > 64 {
		bad("WriteBackConns", "must be between 1 and 64, got %d", c.WriteBackConns)
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		bad("Workers", "must be between 1 and %d, got %d", MaxWorkers, c.Workers)
	}
	for name, d := range map[string]time.Duration{"ScanInterval": c.ScanInterval, "ProviderTimeout": c.ProviderTimeout,
		"PendingDelay": c.PendingDelay, "RetryDelay": c.RetryDelay, "LagPoll": c.LagPoll, "ReconcileInterval": c.ReconcileInterval,
		"WebhookTolerance": c.WebhookTolerance} {
		if d <= 0 {
			bad(name, "must be positive, got %v", d)
		}
	}
	if c.Holder != "" {
		if err := fencedwrite.ValidHolder(c.Holder); err != nil {
			bad("Holder", "%s", err.Error())
		}
	}
	if c.Provider != nil {
		o := c.claimOptions()
		o.Holder = "" // checked above, under its own name
		if err := o.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// claimOptions are the claims' options: the lease, and the key's window
// from the provider's declared retention.
func (c Config) claimOptions() fencedwrite.ClaimOptions {
	o := fencedwrite.ClaimOptions{Lease: c.Lease, ProviderTimeout: c.ProviderTimeout, SkewMargin: c.SkewMargin, Holder: c.Holder}
	if c.Provider != nil {
		o.KeyRetention = c.Provider.Capabilities().KeyRetention
	}
	return o
}
