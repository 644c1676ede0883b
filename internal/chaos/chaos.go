package chaos

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/history"
	"github.com/fencekit/fencekit/internal/scratchdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// Config are refundd chaos's settings; RegisterFlags names them as flags.
type Config struct {
	Jobs     int           // refunds to enqueue
	Workers  int           // refundd processes in the fleet
	Slots    int           // provider calls each process makes at once
	Duration time.Duration // how long faults are injected at most
	Settle   time.Duration // how long the fleet has to settle once faults stop (0: 10 leases + 1m)
	Lease    time.Duration // the fleet's lease
	Seed     uint64        // the faults' seed (0: a new one, printed)
	Pause    float64       // probability of a SIGSTOP past the lease after a provider answer
	JSON     bool          // print the summary as one JSON object on the last line
	// Dir keeps the histories and logs in this directory (default: a
	// temporary one, removed after a run that passed unless KeepHistory).
	Dir         string
	KeepHistory bool   // keep the history directory after a run that passed, and print where
	Exe         string // the refundd binary the fleet runs (default: this one); it must wire AgentCommand
	// Dispatch is how due jobs reach the fleet: DispatchScan, or
	// DispatchRabbitMQ (the fleet consumes the job ids the chaos process
	// publishes to AMQPURL's broker, and broker faults join the others), or
	// DispatchKafka (the same through an in-process Kafka cluster).
	Dispatch string
	AMQPURL  string
	// Provider is the fleet's provider: ProviderHTTP (the fake's own API),
	// or ProviderStripe (the fake taught Stripe's API, through the real
	// Stripe adapter).
	Provider string
}

// RegisterFlags registers c's fields as refundd chaos's flags, with their
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Jobs, "jobs", 300, "refunds to enqueue")
	fs.IntVar(&c.Workers, "workers", 4, "refundd processes in the fleet")
	fs.IntVar(&c.Slots, "slots", 8, "provider calls each process makes at once (refundd run -workers)")
	fs.DurationVar(&c.Duration, "duration", 60*time.Second, "how long faults are injected at most: the fault phase ends earlier once every job settled (its real length is printed)")
	fs.DurationVar(&c.Settle, "settle", 0, "how long the fleet has to settle every job once faults stop (0: 10 leases + 1m)")
	fs.DurationVar(&c.Lease, "lease", 2*time.Second, "the fleet's lease")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the faults (0: a new one, printed)")
	fs.Float64Var(&c.Pause, "pause", 0.004, "probability that a process is frozen (SIGSTOP) past its lease right after a provider answer")
	fs.BoolVar(&c.JSON, "json", false, "print the summary as one JSON object on the last line")
	fs.StringVar(&c.Dir, "history", "", "keep the histories and logs in this directory (default: a temporary one, removed after a run that passed unless -keep-history)")
	fs.BoolVar(&c.KeepHistory, "keep-history", false, "keep the history directory after a run that passed too, and print where")
	fs.StringVar(&c.Exe, "exe", "", "the refundd binary the fleet runs (default: this one)")
	fs.StringVar(&c.Dispatch, "dispatch", DispatchScan, "how due jobs reach the fleet: scan, rabbitmq (the fleet runs refundd run -dispatch rabbitmq; the chaos process publishes every job's id, and cuts the fleet's broker connections, purges the queue and publishes duplicates and stale ids), or kafka (the same through an in-process Kafka cluster, whose partition leaders move and whose group rebalances)")
	amqpURL := os.Getenv("FENCEKIT_AMQP_URL")
	if amqpURL == "" {
		amqpURL = "amqp://guest:guest@127.0.0.1:5672/"
	}
	fs.StringVar(&c.AMQPURL, "amqp-url", amqpURL, "with --dispatch rabbitmq, the broker's URL (default $FENCEKIT_AMQP_URL, else the local broker); the run uses a queue of its own")
	fs.StringVar(&c.Provider, "provider", ProviderHTTP, "the fleet's provider: http (the fake provider's own API), or stripe (the fake taught Stripe's API, through refundd run -provider stripe: the real Stripe adapter)")
}

// Summary is refundd chaos's result: what was injected, what the fleet
// did, and what the checks found. With -json it is the last line.
type Summary struct {
	Seed     uint64 `json:"seed"`
	Dispatch string `json:"dispatch"`
	Provider string `json:"provider"`
	// BrokerPublished counts the job ids the broker confirmed, the first
	// publish of every job and the duplicates and stale ones alike
	// (--dispatch rabbitmq).
	BrokerPublished     int            `json:"broker_messages_published,omitempty"`
	Jobs                int            `json:"jobs"`
	Processes           int            `json:"processes"`
	Incarnations        int            `json:"incarnations"`
	FaultsInjected      int            `json:"faults_injected"`
	FaultsByKind        map[string]int `json:"faults_by_kind"`
	Takeovers           int            `json:"takeovers"`
	StaleWritesRejected int            `json:"stale_writes_rejected"`
	CommitUnknown       int            `json:"commit_unknown"`
	Succeeded           int            `json:"succeeded"`
	Failed              int            `json:"failed"`
	ManualReview        int            `json:"manual_review"`
	ProviderExecuted    int            `json:"provider_refunds_executed"`
	KeysPaidTwice       int            `json:"keys_paid_twice"`
	TerminalRegressions int            `json:"terminal_regressions"`
	AttemptRegressions  int            `json:"attempt_regressions"`
	LostReceipts        int            `json:"lost_receipts"`
	LedgerMismatches    int            `json:"ledger_mismatches"`
	Unfinished          int            `json:"unfinished"`
	HistoryOps          int            `json:"history_ops"`
	HistoryUnknown      int            `json:"history_unknown"`
	HistoryCheck        string         `json:"history_check"`
	// ZombieWriteBacks counts, from the history, the write-backs sent after
	// another worker's takeover committed and refused by the fence, by kind,
	// alone and in batches (history.Zombies). A run missing any is
	// inconclusive.
	ZombieWriteBacks history.ZombieWrites `json:"zombie_write_backs"`
	// FaultPhaseSeconds is how long faults were really injected: from the
	// fleet's start until every job settled or --duration ran out, whichever
	// came first (FaultPhaseEnd says which).
	FaultPhaseSeconds float64 `json:"fault_phase_seconds"`
	FaultPhaseEnd     string  `json:"fault_phase_end"`
	Seconds           float64 `json:"seconds"`
	History           string  `json:"history_dir"`
}

// Fault kinds, as faults_by_kind names them.
const (
	faultDBCut              = "db_cut"
	faultDBLatency          = "db_latency"
	faultCutClaimCommit     = "cut_after_commit_claim"
	faultCutBatchCommit     = "cut_after_commit_batch_claim"
	faultCutTakeoverCommit  = "cut_after_commit_takeover"
	faultCutCompletion      = "cut_after_commit_completion"
	faultLockWait           = "lock_wait_timeout_1205"
	faultDeadlock           = "deadlock_1213"
	faultPause              = "sigstop_past_lease"
	faultHeldForZombie      = "new_holder_call_held_until_zombie_wrote"
	faultSteeredZombie      = "write_back_held_until_taken_over"
	faultKillBeforeCall     = "sigkill_before_call"
	faultKillAfterAnswer    = "sigkill_after_answer"
	faultKillBeforeCommit   = "sigkill_between_write_and_commit"
	faultRollingRestart     = "rolling_restart_process"
	faultProviderPathCut    = "provider_path_cut"
	faultProviderPathLag    = "provider_path_latency"
	faultSessionTimeZone    = "session_time_zone_not_utc"
	faultProviderLostReply  = "provider_lost_reply"
	faultProviderLateReply  = "provider_late_reply"
	faultProviderRateLimit  = "provider_rate_limited"
	faultProviderError      = "provider_server_error"
	faultProviderLookupLag  = "provider_lookup_lag"
	faultPendingThenFails   = "provider_pending_then_fails"
	faultPendingThenSucceed = "provider_pending_then_succeeds"
	faultReversal           = "provider_reversal"
	faultWebhookDuplicate   = "webhook_duplicated"
	faultWebhookLate        = "webhook_late_out_of_order"
	faultKeyExpired         = "idempotency_key_expired_before_settled"
)

// Timings of the fleet: short, so that leases expire and keys lapse within
// a run.
const (
	chaosScan            = 250 * time.Millisecond
	chaosProviderTimeout = time.Second
	chaosKeyRetention    = 20 * time.Second
	chaosLookupLag       = 300 * time.Millisecond
	chaosPendingDelay    = 500 * time.Millisecond
	chaosStopGrace       = 2 * time.Second
)

// Run runs a fleet of refundd processes (AgentCommand) against dsn's
// database and the fake provider through fault proxies, injects faults for
// f.Duration or until every job settled, lets the fleet settle every job,
// and checks the history and the invariants. It drops and recreates dsn's
// database, whose name must end in _chaos. It returns an error naming the
// checks that failed, or wrapping ErrInconclusive.
func Run(ctx context.Context, dsn string, f Config, out io.Writer) (err error) {
	switch {
	case f.Jobs < steeredJobs():
		return fmt.Errorf("chaos: --jobs must be at least %d: every run steers that many jobs into zombie write-backs (each kind, alone and in a batch)", steeredJobs())
	case f.Slots < steeredJobs():
		return fmt.Errorf("chaos: --slots must be at least %d: the steered process holds that many zombie write-backs at once", steeredJobs())
	case f.Workers < 2:
		return errors.New("chaos: --workers must be at least 2: one process is paused or killed while the others take over")
	case f.Duration <= 0:
		return errors.New("chaos: --duration must be positive")
	case f.Lease < time.Second:
		return errors.New("chaos: --lease must be at least 1s")
	case f.Pause < 0 || f.Pause > 1:
		return errors.New("chaos: --pause must be a probability in [0, 1]")
	case f.Dispatch != DispatchScan && f.Dispatch != DispatchRabbitMQ && f.Dispatch != DispatchKafka && f.Dispatch != "":
		return fmt.Errorf("chaos: --dispatch %q: must be %s, %s or %s", f.Dispatch, DispatchScan, DispatchRabbitMQ, DispatchKafka)
	case f.Provider != ProviderHTTP && f.Provider != ProviderStripe && f.Provider != "":
		return fmt.Errorf("chaos: --provider %q: must be %s or %s", f.Provider, ProviderHTTP, ProviderStripe)
	}
	if f.Dispatch == "" {
		f.Dispatch = DispatchScan
	}
	if f.Provider == "" {
		f.Provider = ProviderHTTP
	}
	if f.Seed == 0 {
		f.Seed = uint64(time.Now().UnixNano())
	}
	if f.Exe == "" {
		if f.Exe, err = os.Executable(); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
	}
	fmt.Fprintf(out, "chaos: seed %d: %d jobs, %d processes, faults for up to %v, less once every job settled (replay the same faults with --seed %d)\n",
		f.Seed, f.Jobs, f.Workers, f.Duration, f.Seed)
	if err := scratchdb.Recreate(ctx, dsn, "chaos"); err != nil {
		return err
	}
	if err := scratchdb.Migrate(ctx, dsn, io.Discard); err != nil {
		return err
	}
	dir := f.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fencekit-chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	r := &chaosRun{f: f, dsn: dsn, cfg: cfg, dir: dir, faults: map[string]int{}, zombies: map[int64]*zombie{}, requests: map[string]provider.RefundRequest{},
		rng:    rand.New(rand.NewPCG(f.Seed, f.Seed^0x5851f42d4c957f2d)),
		secret: fmt.Sprintf("whsec_chaos_%d", f.Seed)}
	r.steer = newSteerer(r, "w1.1") // slot 1's first process
	if f.Dispatch == DispatchRabbitMQ {
		if r.broker, err = newBrokerRun(ctx, f.AMQPURL, f.Seed); err != nil {
			return err
		}
		defer r.broker.close()
	}
	if f.Dispatch == DispatchKafka {
		if r.kafka, err = newKafkaRun(f.Seed); err != nil {
			return err
		}
		defer r.kafka.close()
	}
	r.injecting.Store(true)
	started := time.Now()
	s, err := r.run(ctx)
	if err != nil {
		r.stopAll()
		return fmt.Errorf("chaos (seed %d, history in %s): %w", f.Seed, dir, err)
	}
	s.Seconds = time.Since(started).Seconds()
	return r.report(s, out)
}

// chaosRun is one run: the fleet, its proxies, the fake provider, and the
// faults injected so far.
type chaosRun struct {
	f      Config
	dsn    string
	cfg    *mysql.Config // dsn, parsed
	dir    string
	secret string

	rngMu sync.Mutex
	rng   *rand.Rand

	faultMu sync.Mutex
	faults  map[string]int
	logMu   sync.Mutex

	injecting  atomic.Bool // faults are injected until the fault phase ends
	faultsFrom time.Time   // when the fault phase began: the fleet's start
	stopping   atomic.Bool // the fleet is being stopped: do not restart

	srv        *fakeprovider.Server
	controlURL string
	lockDB     *sql.DB // the chaos process's own sessions: lock waits and deadlocks
	steer      *steerer

	reqMu    sync.Mutex
	requests map[string]provider.RefundRequest // by operation key, as enqueued

	broker *brokerRun // --dispatch rabbitmq; nil with the scan alone
	kafka  *kafkaRun  // --dispatch kafka

	procMu sync.Mutex
	procs  []*fleetProc
	incarn int

	zombieMu sync.Mutex
	zombies  map[int64]*zombie // job → the frozen process that holds its old lease
}

// logf notes what the chaos process itself did wrong, in chaos.log.
func (r *chaosRun) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	f, err := os.OpenFile(filepath.Join(r.dir, "chaos.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

func (r *chaosRun) chance(p float64) bool {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.Float64() < p
}

func (r *chaosRun) intn(n int) int {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.IntN(n)
}

func (r *chaosRun) count(kind string, n int) {
	if n == 0 {
		return
	}
	r.faultMu.Lock()
	r.faults[kind] += n
	r.faultMu.Unlock()
}

func (r *chaosRun) run(ctx context.Context) (Summary, error) {
	f := r.f
	// Proxies break connections on purpose; the driver would log each one.
	// Its logger is global: refundd chaos quiets it before calling Run, and
	// tests do so through dbtest, before any test runs (a write here raced
	// with a parallel run's DSN parse).
	var err error
	r.lockDB, err = fencedwrite.OpenDB(r.dsn, fencedwrite.DSNOptions{LockWaitTimeout: 30 * time.Second, ReadTimeout: time.Minute})
	if err != nil {
		return Summary{}, err
	}
	defer r.lockDB.Close()
	if _, err := r.lockDB.ExecContext(ctx, "CREATE TABLE chaos_ballast (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		return Summary{}, fmt.Errorf("chaos: ballast table: %w", err)
	}
	if _, err := r.lockDB.ExecContext(ctx, "INSERT INTO chaos_ballast (id, n) WITH RECURSIVE s (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 64) SELECT i, 0 FROM s"); err != nil {
		return Summary{}, fmt.Errorf("chaos: ballast rows: %w", err)
	}

	// The control endpoint: step boundaries and the fleet's webhooks.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Summary{}, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/step", r.serveStep)
	mux.HandleFunc("/webhooks", r.forwardWebhook)
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	r.controlURL = "http://" + ln.Addr().String()

	r.srv = fakeprovider.StartWith(fakeprovider.Config{
		API:           r.fakeAPI(),
		KeyRetention:  chaosKeyRetention,
		LookupLag:     chaosLookupLag,
		WebhookURL:    r.controlURL + "/webhooks",
		WebhookSecret: []byte(r.secret),
		Background:    true,
		Random: fakeprovider.RandomFaults{
			Seed:      int64(f.Seed >> 1),
			RateLimit: 0.02, ServerError: 0.02,
			Cut: 0.04, Latency: 0.04, MaxLatency: 2 * chaosProviderTimeout,
			Pending: 0.1, Decline: 0.3, PendingDelay: chaosPendingDelay,
			LookupLag: 0.05, Reverse: 0.005, ReverseDelay: time.Second,
			WebhookDuplicate: 0.1, WebhookLate: 0.1, MaxWebhookDelay: time.Second,
		},
	})
	defer r.srv.Close()

	if err := r.enqueue(ctx); err != nil {
		return Summary{}, err
	}
	if r.broker != nil {
		// Every job's id waits in the queue for the fleet's consumers,
		// which race the fleet's scans for them.
		if err := r.broker.publishAll(ctx); err != nil {
			return Summary{}, err
		}
	}
	if r.kafka != nil {
		if err := r.kafka.publishAll(ctx); err != nil {
			return Summary{}, err
		}
	}

	metrics := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	toxics := toxiproxy.NewServer(metrics, zerolog.Nop())
	for i := range f.Workers {
		p := &fleetProc{slot: i + 1}
		p.db = toxiproxy.NewProxy(toxics, fmt.Sprintf("db-%d", p.slot), "127.0.0.1:0", r.cfg.Addr)
		p.prov = toxiproxy.NewProxy(toxics, fmt.Sprintf("provider-%d", p.slot), "127.0.0.1:0", strings.TrimPrefix(r.srv.URL(), "http://"))
		proxies := []*toxiproxy.Proxy{p.db, p.prov}
		if r.broker != nil {
			p.amqp = newBrokerProxy(toxics, p.slot, r.broker.addr)
			proxies = append(proxies, p.amqp)
		}
		for _, px := range proxies {
			if err := px.Start(); err != nil {
				return Summary{}, fmt.Errorf("chaos: start proxy: %w", err)
			}
			defer px.Stop()
		}
		r.procs = append(r.procs, p)
	}
	// The steered process starts alone, so that its first claims are the
	// steered jobs; the others start once their answers are scripted.
	go r.steer.drive()
	r.faultsFrom = time.Now() // faults begin with the first process
	for i, p := range r.procs {
		p.startMu.Lock()
		err := r.start(ctx, p)
		p.startMu.Unlock()
		if err != nil {
			return Summary{}, err
		}
		if i == 0 {
			select {
			case <-r.steer.planned:
			case <-r.steer.done:
			case <-time.After(30 * time.Second):
				r.logf("steering: %s did not send its first %d refunds within 30s; the others start anyway", r.steer.proc, steeredJobs())
			}
		}
	}

	// The fault phase: background faults, one rolling restart half-way.
	phase, endPhase := context.WithTimeout(ctx, f.Duration)
	defer endPhase()
	ended := phaseDuration
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		r.backgroundFaults(phase)
	}()
	done := r.settled(phase, 1)
	select {
	case <-phase.Done():
	case <-done:
		ended = phaseSettled
	case <-r.settled(phase, 0.4): // a deploy while the queue is busy
		r.rollingRestart(ctx) // a deploy once begun runs to its end
		select {
		case <-phase.Done():
		case <-done:
			ended = phaseSettled
		}
	}
	if ctx.Err() != nil {
		ended = phaseInterrupted
	}
	endPhase()
	bg.Wait()
	if r.kafka != nil {
		r.kafka.members.Wait()
	}
	r.injecting.Store(false)
	faultPhase := time.Since(r.faultsFrom)
	r.clearToxics()

	// Faults stop; leases run out; every job must settle.
	settleCtx, cancel := context.WithTimeout(ctx, r.settleTime())
	<-r.settled(settleCtx, 1)
	cancel()
	if r.kafka != nil {
		r.kafkaStaleAtTheEnd(ctx)
	}
	r.stopAll()
	sum, err := r.check(ctx)
	sum.FaultPhaseSeconds, sum.FaultPhaseEnd = faultPhase.Seconds(), ended
	return sum, err
}

// How the fault phase ended, as Summary.FaultPhaseEnd says.
const (
	phaseSettled     = "every job settled"
	phaseDuration    = "--duration ran out"
	phaseInterrupted = "interrupted"
)

// settleTime bounds how long the fleet has to settle every job once faults
// stop: leases run out, pending refunds are decided, keys' windows lapse.
func (r *chaosRun) settleTime() time.Duration {
	if r.f.Settle > 0 {
		return r.f.Settle
	}
	return 10*r.f.Lease + time.Minute
}

// enqueue enqueues the jobs, some through sessions whose time zone is not
// UTC: enqueueing must not depend on the session's clock settings.
func (r *chaosRun) enqueue(ctx context.Context) error {
	utc, err := scratchdb.OpenClient(r.dsn)
	if err != nil {
		return err
	}
	defer utc.Close()
	const chunk = 50
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, 4)
	for start := 0; start < r.f.Jobs; start += chunk {
		c := utc
		var zoned *ent.Client
		if r.chance(0.1) {
			// A session the fence did not configure: +hh:mm, not UTC.
			zc := r.cfg.Clone()
			zc.Params = map[string]string{"time_zone": fmt.Sprintf("'+%02d:00'", 1+r.intn(12))}
			zc.ParseTime, zc.Loc = true, time.UTC
			db, err := sql.Open("mysql", zc.FormatDSN())
			if err != nil {
				return err
			}
			zoned = ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
			c = zoned
			r.count(faultSessionTimeZone, 1)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(start int, c, zoned *ent.Client) {
			defer func() {
				if zoned != nil {
					zoned.Close()
				}
				<-sem
				wg.Done()
			}()
			for i := start; i < min(start+chunk, r.f.Jobs); i++ {
				p := ent.RefundJobEnqueue{OperationKey: fmt.Sprintf("chaos-%06d", i+1), PaymentRef: r.paymentRef(i + 1),
					AmountMinor: int64(100 + i%9_900), Currency: "EUR"}
				r.srv.AddPayment(p.PaymentRef, p.AmountMinor, p.Currency)
				r.reqMu.Lock()
				r.requests[p.OperationKey] = provider.RefundRequest{OperationKey: p.OperationKey, PaymentRef: p.PaymentRef, AmountMinor: p.AmountMinor, Currency: p.Currency}
				r.reqMu.Unlock()
				job, _, err := c.RefundJob.Enqueue(ctx, p, ledger.Open(p))
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("chaos: enqueue %s: %w", p.OperationKey, err)
					}
					mu.Unlock()
					return
				}
				if r.broker != nil {
					r.broker.mu.Lock()
					r.broker.ids = append(r.broker.ids, job.ID)
					r.broker.mu.Unlock()
				}
				if r.kafka != nil {
					r.kafka.add(job.ID, job.OperationKey)
				}
			}
		}(start, c, zoned)
	}
	wg.Wait()
	return first
}

// settled is closed once at least share of the jobs are neither ready nor
// running, polling the database, or never if ctx ends first.
func (r *chaosRun) settled(ctx context.Context, share float64) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			var n int
			err := r.lockDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM refund_jobs WHERE state IN ('ready', 'running')").Scan(&n)
			if err == nil && float64(r.f.Jobs-n) >= share*float64(r.f.Jobs) {
				close(done)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}
