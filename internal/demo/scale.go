package demo

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/scratchdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// Config are the demo at scale's settings; RegisterFlags names them as
// flags.
type Config struct {
	Jobs     int           // refunds to enqueue
	Workers  int           // worker clients sharing the queue and its budget
	Seed     uint64        // seed of the injected faults (0: a new one, printed)
	JSON     bool          // print the summary as one JSON object on the last line
	Lease    time.Duration // the workers' lease
	Scan     time.Duration // the workers' scan interval
	Deadline time.Duration // give up waiting for the jobs to settle after this long
}

// RegisterFlags registers c's fields as refundd demo's flags, with their
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Jobs, "jobs", 300, "refunds to enqueue")
	fs.IntVar(&c.Workers, "workers", 4, "worker clients sharing the queue and its budget")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the injected faults (0: a new one, printed)")
	fs.BoolVar(&c.JSON, "json", false, "print the summary as one JSON object on the last line")
	fs.DurationVar(&c.Lease, "lease", time.Second, "the workers' lease")
	fs.DurationVar(&c.Scan, "scan", 200*time.Millisecond, "the workers' scan interval")
	fs.DurationVar(&c.Deadline, "deadline", 3*time.Minute, "give up waiting for the jobs to settle after this long")
}

// Summary is what the demo found at the end, from the database and the
// fake provider, not from what the workers believe.
type Summary struct {
	Seed                         uint64         `json:"seed"`
	Jobs                         int            `json:"jobs"`
	Workers                      int            `json:"workers"`
	Succeeded                    int            `json:"succeeded"`
	Failed                       int            `json:"failed"`
	ManualReview                 int            `json:"manual_review"`
	Unfinished                   int            `json:"unfinished"`
	Takeovers                    int64          `json:"takeovers"`
	StaleWritesRejected          int64          `json:"stale_writes_rejected"`
	ProviderCalls                map[string]int `json:"provider_calls"`
	ProviderRefundsExecuted      int            `json:"provider_refunds_executed"`
	OperationKeysPaidMoreThanOne int            `json:"operation_keys_paid_more_than_once"`
	LedgerMismatches             int            `json:"ledger_mismatches"`
	LateEvidenceRecorded         int            `json:"late_evidence_recorded"`
	WebhooksRecorded             int            `json:"webhooks_recorded"`
	Alerts                       int64          `json:"alerts"`
	FaultsInjected               map[string]int `json:"faults_injected"`
	Seconds                      float64        `json:"seconds"`
	JobsPerSecond                float64        `json:"jobs_per_s"`
}

// demoMetrics counts what the demo reports.
type demoMetrics struct {
	worker.NopMetrics
	takeovers, stale, alerts atomic.Int64
	mu                       sync.Mutex
	calls                    map[string]int
}

func (m *demoMetrics) Takeovers(n int)   { m.takeovers.Add(int64(n)) }
func (m *demoMetrics) StaleWrite(string) { m.stale.Add(1) }
func (m *demoMetrics) Alert(string)      { m.alerts.Add(1) }
func (m *demoMetrics) ProviderCall(k worker.CallKind) {
	m.mu.Lock()
	m.calls[string(k)]++
	m.mu.Unlock()
}

// timeline records what happened to one operation key, for the zombie
// episode the demo tells at the end.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	key    string // the key of the paused worker's job, once chosen
	events []string
}

func (tl *timeline) currentKey() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.key
}

func (tl *timeline) add(key, format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if key != tl.key {
		return
	}
	tl.events = append(tl.events, fmt.Sprintf("%7.3fs  ", time.Since(tl.start).Seconds())+fmt.Sprintf(format, args...))
}

// Scale runs the demo at scale: a fresh database, the fake provider with
// the seed's faults at random, several real workers sharing one budget,
// a few hundred refunds, one worker paused past its lease and resumed. It
// ends with the timeline of that zombie episode and a summary, and fails if
// any key was paid twice, a ledger row parted from its job, or a job is left
// unfinished.
func Scale(ctx context.Context, dsn string, f Config, out io.Writer) error {
	if f.Jobs < 1 || f.Workers < 2 {
		return errors.New("demo: -jobs must be at least 1 and -workers at least 2 (one of them is paused)")
	}
	if f.Seed == 0 {
		f.Seed = uint64(time.Now().UnixNano())
	}
	say := func(format string, args ...any) {
		if !f.JSON {
			fmt.Fprintf(out, format+"\n", args...)
		}
	}
	if err := scratchdb.Recreate(ctx, dsn, "demo"); err != nil {
		return err
	}
	if err := scratchdb.Migrate(ctx, dsn, io.Discard); err != nil {
		return err
	}
	say("seed %d: %d refunds, %d workers, lease %v, scan %v (replay with -seed %d)", f.Seed, f.Jobs, f.Workers, f.Lease, f.Scan, f.Seed)

	// The webhook endpoint of the fleet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var handler atomic.Pointer[http.Handler]
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	})}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	secret := []byte(fmt.Sprintf("whsec_demo_%d", f.Seed))

	rng := rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
	srv := fakeprovider.StartWith(fakeprovider.Config{
		LookupLag:     300 * time.Millisecond,
		WebhookURL:    "http://" + ln.Addr().String() + "/webhooks",
		WebhookSecret: secret,
		Background:    true,
		Random: fakeprovider.RandomFaults{
			Seed:      int64(rng.Uint64() >> 1),
			RateLimit: 0.03, ServerError: 0.03, // refused before processing
			Cut: 0.05, Latency: 0.05, MaxLatency: 800 * time.Millisecond, // lost and hung answers
			Pending: 0.1, Decline: 0.2, PendingDelay: 400 * time.Millisecond,
			LookupLag: 0.05, Reverse: 0.01, ReverseDelay: 300 * time.Millisecond,
			WebhookDuplicate: 0.1, WebhookLate: 0.1, MaxWebhookDelay: 600 * time.Millisecond,
		},
	})
	defer srv.Close()

	svc, err := scratchdb.OpenClient(dsn)
	if err != nil {
		return err
	}
	defer svc.Close()
	for i := range f.Jobs {
		p := ent.RefundJobEnqueue{OperationKey: fmt.Sprintf("refund-%05d", i+1), PaymentRef: fmt.Sprintf("pay-%05d", i+1),
			AmountMinor: int64(100 + rng.IntN(100_000)), Currency: "EUR"}
		srv.AddPayment(p.PaymentRef, p.AmountMinor, p.Currency)
		if _, _, err := svc.RefundJob.Enqueue(ctx, p, ledger.Open(p)); err != nil {
			return err
		}
	}
	say("enqueued %d refunds", f.Jobs)

	tl := &timeline{start: time.Now()}
	m := &demoMetrics{calls: map[string]int{}}
	var paused atomic.Bool     // one worker pauses once, past its lease
	var zombieDone atomic.Bool // and has written back since
	var pausedAttempt atomic.Int64
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := make([]*worker.Client, f.Workers)
	for i := range workers {
		name := fmt.Sprintf("W%d", i+1)
		db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := worker.New(worker.Config{
			DB: db, Provider: srv.Client(), Workers: 8, Lease: f.Lease, ScanInterval: f.Scan,
			ProviderTimeout: 2 * time.Second, PendingDelay: 300 * time.Millisecond, RetryDelay: 100 * time.Millisecond, LagPoll: 100 * time.Millisecond,
			BudgetRate: 2000, BudgetBurst: 200, WebhookSecret: secret, Logger: quiet, Metrics: m,
			Hooks: worker.Hooks{
				BeforeProviderCall: func(j worker.Job) {
					tl.add(j.OperationKey, "%s claimed job %d: attempt %d, next action %s", name, j.ID, j.Attempt, j.Action)
				},
				AfterProviderCall: func(j worker.Job) {
					if i == 0 && j.Action == string(refundjob.NextActionRefund) && paused.CompareAndSwap(false, true) {
						tl.mu.Lock()
						tl.key = j.OperationKey
						tl.mu.Unlock()
						pausedAttempt.Store(j.Attempt)
						tl.add(j.OperationKey, "%s claimed job %d at attempt %d and sent %s; the provider answered", name, j.ID, j.Attempt, j.OperationKey)
						tl.add(j.OperationKey, "%s pauses (a GC pause, a stuck socket) for %v, past its %v lease", name, 3*f.Lease, f.Lease)
						time.Sleep(3 * f.Lease) // the demo's fault: a worker stalled past its lease
						tl.add(j.OperationKey, "%s resumes and writes back at attempt %d", name, j.Attempt)
						return
					}
					tl.add(j.OperationKey, "%s's provider call for attempt %d returned", name, j.Attempt)
				},
				WroteBack: func(j worker.Job, err error) {
					if i == 0 && paused.Load() && j.Attempt == pausedAttempt.Load() && j.OperationKey == tl.currentKey() {
						defer zombieDone.Store(true)
					}
					switch {
					case err == nil:
						tl.add(j.OperationKey, "%s wrote back at attempt %d", name, j.Attempt)
					case errors.Is(err, fencedwrite.ErrSuperseded):
						tl.add(j.OperationKey, "%s's write-back at attempt %d refused by the fence: superseded; the answer is kept as evidence", name, j.Attempt)
					default:
						tl.add(j.OperationKey, "%s's write-back at attempt %d: %v", name, j.Attempt, err)
					}
				},
			},
		})
		if err != nil {
			return err
		}
		if i == 0 {
			h := w.WebhookHandler()
			handler.Store(&h)
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		workers[i] = w
	}

	started := time.Now()
	deadline := time.After(f.Deadline)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	counts := func() map[refundjob.State]int {
		var rows []struct {
			State refundjob.State `json:"state"`
			Count int             `json:"count"`
		}
		if err := svc.RefundJob.Query().GroupBy(refundjob.FieldState).Aggregate(ent.Count()).Scan(ctx, &rows); err != nil {
			return nil
		}
		c := map[refundjob.State]int{}
		for _, r := range rows {
			c[r.State] = r.Count
		}
		return c
	}
	var final map[refundjob.State]int
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-deadline:
			break wait
		case <-tick.C:
			c := counts()
			if !f.JSON {
				fmt.Fprintf(out, "\r%6.1fs  succeeded %4d  failed %3d  manual review %3d  waiting %4d  running %3d  takeovers %3d  stale writes refused %3d ",
					time.Since(started).Seconds(), c[refundjob.StateSucceeded], c[refundjob.StateFailed], c[refundjob.StateManualReview],
					c[refundjob.StateReady], c[refundjob.StateRunning], m.takeovers.Load(), m.stale.Load())
			}
			// Done when every job is settled and the paused worker came back.
			if c[refundjob.StateReady]+c[refundjob.StateRunning] == 0 && (zombieDone.Load() || !paused.Load() && time.Since(started) > 5*f.Lease) {
				break wait
			}
		}
	}
	elapsed := time.Since(started)
	say("")
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, w := range workers {
		_ = w.StopAndCancel(stopCtx)
	}
	final = counts()

	s := Summary{Seed: f.Seed, Jobs: f.Jobs, Workers: f.Workers, Succeeded: final[refundjob.StateSucceeded], Failed: final[refundjob.StateFailed],
		ManualReview: final[refundjob.StateManualReview], Unfinished: final[refundjob.StateReady] + final[refundjob.StateRunning],
		Takeovers: m.takeovers.Load(), StaleWritesRejected: m.stale.Load(), Alerts: m.alerts.Load(),
		Seconds: elapsed.Seconds(), JobsPerSecond: float64(f.Jobs) / elapsed.Seconds()}
	m.mu.Lock()
	s.ProviderCalls = m.calls
	m.mu.Unlock()
	if err := audit(ctx, svc, srv, &s); err != nil {
		return err
	}
	inj := srv.Injected()
	s.FaultsInjected = map[string]int{"rate_limit": inj.RateLimit, "server_error": inj.ServerError, "cut": inj.Cut, "latency": inj.Latency,
		"pending": inj.Pending, "declined": inj.Declined, "paused_worker": boolInt(paused.Load())}

	tl.mu.Lock()
	events := tl.events
	key := tl.key
	tl.mu.Unlock()
	if !f.JSON {
		say("one zombie episode, %s:", key)
		for _, e := range events {
			say("  %s", e)
		}
		if key != "" {
			if j, err := svc.RefundJob.Query().Where(refundjob.OperationKey(key)).Only(ctx); err == nil {
				say("  result: job %d is %s at attempt %d; the provider executed %s %d time(s)", j.ID, j.State, j.Attempt, key, srv.Executions(key))
			}
		}
		say("")
		say("summary: %d refunds in %.1fs (%.0f jobs/s) with %d workers", s.Jobs, s.Seconds, s.JobsPerSecond, s.Workers)
		say("  succeeded %d, failed %d (declined by the provider), manual review %d, unfinished %d", s.Succeeded, s.Failed, s.ManualReview, s.Unfinished)
		say("  takeovers %d, stale writes refused by the fence %d, late answers kept as evidence %d, webhooks recorded %d, alerts %d",
			s.Takeovers, s.StaleWritesRejected, s.LateEvidenceRecorded, s.WebhooksRecorded, s.Alerts)
		say("  provider calls %v; faults injected %v", s.ProviderCalls, s.FaultsInjected)
		say("  refunds the provider executed %d; operation keys paid more than once %d; ledger rows parted from their job %d",
			s.ProviderRefundsExecuted, s.OperationKeysPaidMoreThanOne, s.LedgerMismatches)
		say("the database %s is left in place: refundd jobs -dsn DSN -state manual_review, refundd jobs -dsn DSN -id N (DSN: the demo's, %s unless -dsn named another)",
			scratchdb.Name(dsn), "root@tcp(127.0.0.1:3306)/"+scratchdb.Name(dsn))
	} else {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(b))
	}
	var problems []string
	if s.OperationKeysPaidMoreThanOne > 0 {
		problems = append(problems, fmt.Sprintf("%d operation keys were paid more than once", s.OperationKeysPaidMoreThanOne))
	}
	if s.LedgerMismatches > 0 {
		problems = append(problems, fmt.Sprintf("%d ledger rows parted from their job", s.LedgerMismatches))
	}
	if s.Unfinished > 0 {
		problems = append(problems, fmt.Sprintf("%d jobs left unfinished", s.Unfinished))
	}
	if len(problems) > 0 {
		return errors.New("demo: " + strings.Join(problems, "; "))
	}
	return nil
}

// audit fills in what the database and the provider say.
func audit(ctx context.Context, c *ent.Client, srv *fakeprovider.Server, s *Summary) error {
	jobs, err := c.RefundJob.Query().All(ctx)
	if err != nil {
		return err
	}
	ledgers, err := c.Refund.Query().All(ctx)
	if err != nil {
		return err
	}
	ledgerOf := map[string]*ent.Refund{}
	for _, r := range ledgers {
		ledgerOf[r.OperationKey] = r
	}
	for _, j := range jobs {
		n := srv.Executions(j.OperationKey)
		s.ProviderRefundsExecuted += n
		if n > 1 {
			s.OperationKeysPaidMoreThanOne++
		}
		r := ledgerOf[j.OperationKey]
		want := map[refundjob.State]string{refundjob.StateSucceeded: "refunded", refundjob.StateFailed: "failed"}[j.State]
		if want == "" {
			want = "requested"
		}
		if r == nil || string(r.Status) != want {
			s.LedgerMismatches++
		}
	}
	var entries []evidence.Entry
	for _, j := range jobs {
		es, err := evidence.ForKey(ctx, c, j.OperationKey)
		if err != nil {
			return err
		}
		entries = append(entries, es...)
	}
	for _, e := range entries {
		switch e.Source {
		case evidence.ProviderResponse:
			s.LateEvidenceRecorded++
		case evidence.Webhook:
			s.WebhooksRecorded++
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
