package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// chaosFlags are refundd chaos's settings.
type chaosFlags struct {
	jobs, workers, slots int
	duration, lease      time.Duration
	settle               time.Duration
	seed                 uint64
	json                 bool
	dir, exe             string
	pause                float64
}

// chaosSummary is refundd chaos's result: what was injected, what the fleet
// did, and what the checks found. With -json it is the last line.
type chaosSummary struct {
	Seed                uint64         `json:"seed"`
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
	Seconds             float64        `json:"seconds"`
	History             string         `json:"history_dir"`
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

// chaos runs a fleet of refundd run processes against the database and the
// fake provider through fault proxies, injects faults for f.duration, lets
// the fleet settle every job, and checks the history and the invariants.
func chaos(ctx context.Context, dsn string, f chaosFlags, out io.Writer) (err error) {
	switch {
	case f.jobs < 1:
		return errors.New("chaos: --jobs must be at least 1")
	case f.workers < 2:
		return errors.New("chaos: --workers must be at least 2: one process is paused or killed while the others take over")
	case f.duration <= 0:
		return errors.New("chaos: --duration must be positive")
	case f.lease < time.Second:
		return errors.New("chaos: --lease must be at least 1s")
	case f.pause < 0 || f.pause > 1:
		return errors.New("chaos: --pause must be a probability in [0, 1]")
	}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	if f.exe == "" {
		if f.exe, err = os.Executable(); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
	}
	fmt.Fprintf(out, "chaos: seed %d: %d jobs, %d processes, faults for %v (replay the same faults with --seed %d)\n",
		f.seed, f.jobs, f.workers, f.duration, f.seed)
	if err := recreateNamed(ctx, dsn, "_chaos"); err != nil {
		return err
	}
	if err := migrate(ctx, dsn, false, io.Discard); err != nil {
		return err
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fencekit-chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r := &chaosRun{f: f, dsn: dsn, dir: dir, faults: map[string]int{}, zombies: map[int64]*zombie{},
		rng:    rand.New(rand.NewPCG(f.seed, f.seed^0x5851f42d4c957f2d)),
		secret: fmt.Sprintf("whsec_chaos_%d", f.seed)}
	r.injecting.Store(true)
	started := time.Now()
	s, err := r.run(ctx)
	if err != nil {
		r.stopAll()
		return fmt.Errorf("chaos (seed %d, history in %s): %w", f.seed, dir, err)
	}
	s.Seconds = time.Since(started).Seconds()
	return r.report(s, out)
}

// chaosRun is one run: the fleet, its proxies, the fake provider, and the
// faults injected so far.
type chaosRun struct {
	f      chaosFlags
	dsn    string
	dir    string
	secret string

	rngMu sync.Mutex
	rng   *rand.Rand

	faultMu sync.Mutex
	faults  map[string]int
	logMu   sync.Mutex

	injecting atomic.Bool // faults are injected until the fault phase ends
	stopping  atomic.Bool // the fleet is being stopped: do not restart

	srv        *fakeprovider.Server
	toxics     *toxiproxy.ApiServer
	controlURL string
	lockDB     *sql.DB // the chaos process's own sessions: lock waits and deadlocks

	procMu sync.Mutex
	procs  []*fleetProc
	incarn int

	zombieMu sync.Mutex
	zombies  map[int64]*zombie // job → the frozen process that holds its old lease
}

// zombie is a process frozen with a job's provider answer in hand. The new
// holder's provider call is held until the zombie has written back, so that
// the zombie's write meets the job running under the new attempt: the very
// write the fence exists to refuse.
type zombie struct {
	proc  string
	wrote chan struct{}
}

// fleetProc is one slot of the fleet: its proxies and its current process.
type fleetProc struct {
	slot         int
	startMu      sync.Mutex // held while a process of the slot is replaced
	db, prov     *toxiproxy.Proxy
	mu           sync.Mutex
	name         string
	cmd          *exec.Cmd
	listen       string
	paused, down bool
	exited       chan struct{}
	generation   int
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

func (r *chaosRun) run(ctx context.Context) (chaosSummary, error) {
	f := r.f
	// Proxies break connections on purpose; the driver would log each one.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	cfg, err := mysql.ParseDSN(r.dsn)
	if err != nil {
		return chaosSummary{}, err
	}
	r.lockDB, err = fencedwrite.OpenDB(r.dsn, fencedwrite.DSNOptions{LockWaitTimeout: 30 * time.Second, ReadTimeout: time.Minute})
	if err != nil {
		return chaosSummary{}, err
	}
	defer r.lockDB.Close()
	if _, err := r.lockDB.ExecContext(ctx, "CREATE TABLE chaos_ballast (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		return chaosSummary{}, fmt.Errorf("chaos: ballast table: %w", err)
	}
	if _, err := r.lockDB.ExecContext(ctx, "INSERT INTO chaos_ballast (id, n) WITH RECURSIVE s (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 64) SELECT i, 0 FROM s"); err != nil {
		return chaosSummary{}, fmt.Errorf("chaos: ballast rows: %w", err)
	}

	// The control endpoint: step boundaries and the fleet's webhooks.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return chaosSummary{}, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/step", r.serveStep)
	mux.HandleFunc("/webhooks", r.forwardWebhook)
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	r.controlURL = "http://" + ln.Addr().String()

	r.srv = fakeprovider.StartWith(fakeprovider.Config{
		KeyRetention:  chaosKeyRetention,
		LookupLag:     chaosLookupLag,
		WebhookURL:    r.controlURL + "/webhooks",
		WebhookSecret: []byte(r.secret),
		Background:    true,
		Random: fakeprovider.RandomFaults{
			Seed:      int64(f.seed >> 1),
			RateLimit: 0.02, ServerError: 0.02,
			Cut: 0.04, Latency: 0.04, MaxLatency: 2 * chaosProviderTimeout,
			Pending: 0.1, Decline: 0.3, PendingDelay: chaosPendingDelay,
			LookupLag: 0.05, Reverse: 0.005, ReverseDelay: time.Second,
			WebhookDuplicate: 0.1, WebhookLate: 0.1, MaxWebhookDelay: time.Second,
		},
	})
	defer r.srv.Close()

	if err := r.enqueue(ctx); err != nil {
		return chaosSummary{}, err
	}

	metrics := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	r.toxics = toxiproxy.NewServer(metrics, zerolog.Nop())
	for i := range f.workers {
		p := &fleetProc{slot: i + 1}
		p.db = toxiproxy.NewProxy(r.toxics, fmt.Sprintf("db-%d", p.slot), "127.0.0.1:0", cfg.Addr)
		p.prov = toxiproxy.NewProxy(r.toxics, fmt.Sprintf("provider-%d", p.slot), "127.0.0.1:0", strings.TrimPrefix(r.srv.URL(), "http://"))
		for _, px := range []*toxiproxy.Proxy{p.db, p.prov} {
			if err := px.Start(); err != nil {
				return chaosSummary{}, fmt.Errorf("chaos: start proxy: %w", err)
			}
			defer px.Stop()
		}
		r.procs = append(r.procs, p)
	}
	for _, p := range r.procs {
		p.startMu.Lock()
		err := r.start(ctx, p)
		p.startMu.Unlock()
		if err != nil {
			return chaosSummary{}, err
		}
	}

	// The fault phase: background faults, one rolling restart half-way.
	phase, endPhase := context.WithTimeout(ctx, f.duration)
	defer endPhase()
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
	case <-r.settled(phase, 0.4): // a deploy while the queue is busy
		r.rollingRestart(ctx) // a deploy once begun runs to its end
		select {
		case <-phase.Done():
		case <-done:
		}
	}
	endPhase()
	bg.Wait()
	r.injecting.Store(false)
	r.clearToxics()

	// Faults stop; leases run out; every job must settle.
	settleCtx, cancel := context.WithTimeout(ctx, r.settleTime())
	<-r.settled(settleCtx, 1)
	cancel()
	r.stopAll()
	return r.check(ctx)
}

// settleTime bounds how long the fleet has to settle every job once faults
// stop: leases run out, pending refunds are decided, keys' windows lapse.
func (r *chaosRun) settleTime() time.Duration {
	if r.f.settle > 0 {
		return r.f.settle
	}
	return 10*r.f.lease + time.Minute
}

// enqueue enqueues the jobs, some through sessions whose time zone is not
// UTC: enqueueing must not depend on the session's clock settings.
func (r *chaosRun) enqueue(ctx context.Context) error {
	utc, err := openClient(r.dsn)
	if err != nil {
		return err
	}
	defer utc.Close()
	cfg, _ := mysql.ParseDSN(r.dsn)
	const chunk = 50
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, 4)
	for start := 0; start < r.f.jobs; start += chunk {
		c := utc
		var zoned *ent.Client
		if r.chance(0.1) {
			// A session the fence did not configure: +hh:mm, not UTC.
			zc := cfg.Clone()
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
			for i := start; i < min(start+chunk, r.f.jobs); i++ {
				p := ent.RefundJobEnqueue{OperationKey: fmt.Sprintf("chaos-%06d", i+1), PaymentRef: fmt.Sprintf("pay-%06d", i+1),
					AmountMinor: int64(100 + i%9_900), Currency: "EUR"}
				r.srv.AddPayment(p.PaymentRef, p.AmountMinor, p.Currency)
				if _, _, err := c.RefundJob.Enqueue(ctx, p, ledger.Open(p)); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("chaos: enqueue %s: %w", p.OperationKey, err)
					}
					mu.Unlock()
					return
				}
			}
		}(start, c, zoned)
	}
	wg.Wait()
	return first
}

// start starts a new process in p's slot and waits until it serves;
// p.startMu is held.
func (r *chaosRun) start(ctx context.Context, p *fleetProc) error {
	r.procMu.Lock()
	r.incarn++
	r.procMu.Unlock()
	p.mu.Lock()
	p.generation++
	name := fmt.Sprintf("w%d.%d", p.slot, p.generation)
	p.mu.Unlock()
	cfg, _ := mysql.ParseDSN(r.dsn)
	cfg.Addr = p.db.Listen
	args := []string{"run",
		"-dsn", cfg.FormatDSN(),
		"-provider-url", "http://" + p.prov.Listen,
		"-provider-key-retention", chaosKeyRetention.String(),
		"-provider-lookup-lag", chaosLookupLag.String(),
		"-provider-skew-margin", "2s",
		"-listen", "127.0.0.1:0",
		"-workers", fmt.Sprint(r.f.slots),
		"-lease", r.f.lease.String(),
		"-scan", chaosScan.String(),
		"-provider-timeout", chaosProviderTimeout.String(),
		"-budget-rate", "5000", "-budget-burst", "500",
		"-stop-grace", chaosStopGrace.String(),
		"-lock-wait", "1s",
		"-pending-delay", chaosPendingDelay.String(),
		"-retry-delay", "200ms",
		"-lag-poll", "100ms",
		"-chaos-history", filepath.Join(r.dir, name+".jsonl"),
		"-chaos-control", r.controlURL + "/step",
		"-chaos-proc", name,
	}
	cmd := exec.Command(r.f.exe, args...)
	// A fleet process never outlives refundd chaos.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "FENCEKIT_WEBHOOK_SECRET="+r.secret)
	logf, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: start %s: %w", name, err)
	}
	listening := make(chan string, 1)
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logf.Write(append(line, '\n'))
			if bytes.Contains(line, []byte(`"msg":"refundd running"`)) {
				var l struct{ Listen string }
				if json.Unmarshal(line, &l) == nil {
					select {
					case listening <- l.Listen:
					default:
					}
				}
			}
		}
	}()
	exited := make(chan struct{})
	p.mu.Lock()
	p.name, p.cmd, p.listen, p.paused, p.down, p.exited = name, cmd, "", false, false, exited
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.down = true
		p.mu.Unlock()
		close(exited)
	}()
	select {
	case addr := <-listening:
		p.mu.Lock()
		p.listen = addr
		p.mu.Unlock()
		go r.supervise(ctx, p, exited)
		return nil
	case <-exited:
		return fmt.Errorf("chaos: %s exited before serving; see %s", name, filepath.Join(r.dir, name+".log"))
	case <-time.After(30 * time.Second):
		return fmt.Errorf("chaos: %s did not serve within 30s; see %s", name, filepath.Join(r.dir, name+".log"))
	}
}

// supervise restarts p's process when it dies (a SIGKILL), unless the fleet
// is stopping or something else already replaced it.
func (r *chaosRun) supervise(ctx context.Context, p *fleetProc, exited chan struct{}) {
	<-exited
	for !r.stopping.Load() && ctx.Err() == nil {
		p.startMu.Lock()
		p.mu.Lock()
		current := p.exited == exited
		p.mu.Unlock()
		if !current || r.stopping.Load() {
			p.startMu.Unlock()
			return
		}
		err := r.start(ctx, p)
		p.startMu.Unlock()
		if err == nil {
			return
		}
		r.logf("restart %s: %v; trying again", p.name, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// signal sends sig to p's current process.
func (p *fleetProc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.cmd == nil || p.cmd.Process == nil {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

// procByName finds the slot whose current process is name.
func (r *chaosRun) procByName(name string) *fleetProc {
	for _, p := range r.procs {
		p.mu.Lock()
		ok := p.name == name
		p.mu.Unlock()
		if ok {
			return p
		}
	}
	return nil
}

// serveStep is where a process waits at a step boundary while the chaos
// process decides whether to inject a fault exactly there.
func (r *chaosRun) serveStep(w http.ResponseWriter, req *http.Request) {
	var s chaosStep
	if err := json.NewDecoder(req.Body).Decode(&s); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.Step == stepWroteBack {
		r.zombieMu.Lock()
		if z := r.zombies[s.Job]; z != nil && z.proc == s.Proc {
			close(z.wrote)
			delete(r.zombies, s.Job)
		}
		r.zombieMu.Unlock()
		return
	}
	if s.Step == stepBeforeCall {
		r.zombieMu.Lock()
		z := r.zombies[s.Job]
		r.zombieMu.Unlock()
		if z != nil && z.proc != s.Proc {
			r.count(faultHeldForZombie, 1)
			select {
			case <-z.wrote:
			case <-time.After(2 * r.f.lease):
				// The zombie died or never wrote back: stop waiting for it.
				r.zombieMu.Lock()
				if r.zombies[s.Job] == z {
					delete(r.zombies, s.Job)
				}
				r.zombieMu.Unlock()
			}
		}
	}
	p := r.procByName(s.Proc)
	if p == nil || !r.injecting.Load() {
		return
	}
	switch s.Step {
	case stepClaimCommit:
		if r.chance(0.02) {
			kind := faultCutTakeoverCommit
			if s.What == "claim" {
				kind = faultCutClaimCommit
				if s.Count > 1 {
					kind = faultCutBatchCommit
				}
			}
			r.cutReplies(p, kind)
		}
	case stepBeforeCall:
		if r.chance(0.004) {
			r.kill(p, faultKillBeforeCall)
		}
	case stepAfterAnswer:
		switch {
		case r.chance(0.004):
			r.kill(p, faultKillAfterAnswer)
		case r.chance(r.f.pause):
			r.pause(p, s)
		}
	case stepBusinessWrite:
		if s.Transition != "complete" && s.Transition != "fail" {
			return // only these write the ledger row the faults lock
		}
		switch {
		case r.chance(0.01):
			r.lockWait(req.Context(), s)
		case r.chance(0.01):
			r.deadlock(s)
		}
	case stepWriteCommit:
		switch {
		case r.chance(0.004):
			r.kill(p, faultKillBeforeCommit)
		case r.chance(0.02):
			r.cutReplies(p, faultCutCompletion)
		}
	}
}

// cutReplies makes p's database proxy reset every connection as soon as the
// server answers anything: the COMMIT the process is about to send reaches
// the server and runs, and its reply is lost.
func (r *chaosRun) cutReplies(p *fleetProc, kind string) {
	name := fmt.Sprintf("cut-%d", time.Now().UnixNano())
	if _, err := p.db.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"` + name + `","type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`)); err != nil {
		return
	}
	r.count(kind, 1)
	time.AfterFunc(300*time.Millisecond, func() { _ = p.db.Toxics.RemoveToxic(context.Background(), name) })
}

// kill SIGKILLs p's process where it stands; its supervisor restarts it.
func (r *chaosRun) kill(p *fleetProc, kind string) {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if p.signal(syscall.SIGKILL) {
		r.count(kind, 1)
		<-exited
	}
}

// pause SIGSTOPs p's process past its lease and resumes it: a zombie
// with a provider answer in hand, whose jobs others take over meanwhile.
func (r *chaosRun) pause(p *fleetProc, s chaosStep) {
	r.zombieMu.Lock()
	if r.zombies[s.Job] != nil {
		r.zombieMu.Unlock()
		return
	}
	r.zombies[s.Job] = &zombie{proc: s.Proc, wrote: make(chan struct{})}
	r.zombieMu.Unlock()
	if !p.signal(syscall.SIGSTOP) {
		r.zombieMu.Lock()
		delete(r.zombies, s.Job)
		r.zombieMu.Unlock()
		return
	}
	r.count(faultPause, 1)
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	time.Sleep(r.f.lease + 4*chaosScan) // the fault itself: a process frozen past its lease
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	p.signal(syscall.SIGCONT)
}

// lockWait holds the job's ledger row locked past the process's lock wait
// timeout (1 s): its ledger write fails with 1205 and the write-back rolls
// back.
func (r *chaosRun) lockWait(ctx context.Context, s chaosStep) {
	tx, err := r.lockDB.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return
	}
	var id int64
	if err := tx.QueryRow("SELECT id FROM refunds WHERE operation_key = ? FOR UPDATE", s.Key).Scan(&id); err != nil {
		_ = tx.Rollback()
		return
	}
	r.count(faultLockWait, 1)
	time.AfterFunc(1500*time.Millisecond, func() { _ = tx.Rollback() })
}

// deadlock makes the write-back's transaction one side of a deadlock: the
// chaos session, made heavier by ballast so that the server picks the
// write-back as the victim, locks the job's ledger row, then asks for the
// job's row, which the write-back holds, while the write-back asks for the
// ledger row.
func (r *chaosRun) deadlock(s chaosStep) {
	ctx := context.Background()
	tx, err := r.lockDB.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	if _, err := tx.Exec("UPDATE chaos_ballast SET n = n + 1"); err != nil {
		_ = tx.Rollback()
		return
	}
	var id int64
	if err := tx.QueryRow("SELECT id FROM refunds WHERE operation_key = ? FOR UPDATE", s.Key).Scan(&id); err != nil {
		_ = tx.Rollback()
		return
	}
	go func() {
		defer tx.Rollback()
		var job int64
		err := tx.QueryRow("SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE", s.Job).Scan(&job)
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || me.Number != 1213 {
			// The write-back was the victim (or finished first); a 1213 here
			// means the chaos session was, and nothing was injected.
			if err == nil {
				r.count(faultDeadlock, 1)
			}
		}
	}()
}

// backgroundFaults cuts and slows the processes' paths at random until ctx
// ends.
func (r *chaosRun) backgroundFaults(ctx context.Context) {
	tick := time.NewTicker(400 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := r.procs[r.intn(len(r.procs))]
		name := fmt.Sprintf("bg-%d", time.Now().UnixNano())
		var (
			px   *toxiproxy.Proxy
			spec string
			kind string
			hold = time.Duration(50+r.intn(500)) * time.Millisecond
		)
		switch r.intn(6) {
		case 0:
			px, kind, spec = p.db, faultDBCut, `"type":"reset_peer","stream":"upstream","toxicity":1,"attributes":{"timeout":0}`
		case 1:
			px, kind = p.db, faultDBLatency
			spec = fmt.Sprintf(`"type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}`, 20+r.intn(300), r.intn(50))
		case 2:
			px, kind, spec = p.prov, faultProviderPathCut, `"type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}`
		case 3:
			px, kind = p.prov, faultProviderPathLag
			spec = fmt.Sprintf(`"type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}`, 100+r.intn(1200), r.intn(100))
		default:
			continue // a quiet tick
		}
		if _, err := px.Toxics.AddToxicJson(strings.NewReader(`{"name":"` + name + `",` + spec + `}`)); err != nil {
			continue
		}
		r.count(kind, 1)
		time.AfterFunc(hold, func() { _ = px.Toxics.RemoveToxic(context.Background(), name) })
	}
}

// rollingRestart restarts every process of the fleet in turn, as a deploy
// does: SIGTERM, wait for it to write back and exit, start the new one.
func (r *chaosRun) rollingRestart(ctx context.Context) {
	for _, p := range r.procs {
		if ctx.Err() != nil {
			return
		}
		// A frozen process is deployed once it thaws.
		for wait := time.Now().Add(3 * r.f.lease); ; {
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if !paused || time.Now().After(wait) || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Holding startMu, the supervisor cannot restart the process too.
		p.startMu.Lock()
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if p.signal(syscall.SIGTERM) {
			<-exited
		}
		var err error
		for try := 0; try < 5 && ctx.Err() == nil; try++ {
			if err = r.start(ctx, p); err == nil {
				break
			}
			r.logf("rolling restart of slot %d: %v; trying again", p.slot, err)
		}
		p.startMu.Unlock()
		if err != nil {
			// The supervisor takes the slot over from here.
			p.mu.Lock()
			failed := p.exited
			p.mu.Unlock()
			go r.supervise(ctx, p, failed)
			continue
		}
		r.count(faultRollingRestart, 1)
	}
}

func (r *chaosRun) clearToxics() {
	for _, p := range r.procs {
		for _, px := range []*toxiproxy.Proxy{p.db, p.prov} {
			px.Toxics.ResetToxics(context.Background())
		}
	}
}

// stopAll stops the fleet: SIGTERM, then SIGKILL for a process that does
// not exit in time.
func (r *chaosRun) stopAll() {
	r.stopping.Store(true)
	for _, p := range r.procs {
		p.startMu.Lock() // no restart from now on
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGTERM)
	}
	for _, p := range r.procs {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if exited != nil {
			select {
			case <-exited:
			case <-time.After(chaosStopGrace + 10*time.Second):
				p.signal(syscall.SIGKILL)
				<-exited
			}
		}
		p.startMu.Unlock()
	}
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
			if err == nil && float64(r.f.jobs-n) >= share*float64(r.f.jobs) {
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

// forwardWebhook hands a webhook of the fake provider to a process of the
// fleet that is up; a paused or dead one makes the provider retry.
func (r *chaosRun) forwardWebhook(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var up []string
	for _, p := range r.procs {
		p.mu.Lock()
		if !p.down && !p.paused && p.listen != "" {
			up = append(up, p.listen)
		}
		p.mu.Unlock()
	}
	if len(up) == 0 {
		http.Error(w, "no process is up", http.StatusServiceUnavailable)
		return
	}
	fwd, _ := http.NewRequestWithContext(req.Context(), http.MethodPost, "http://"+up[r.intn(len(up))]+"/webhooks", bytes.NewReader(body))
	fwd.Header = req.Header.Clone()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(fwd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}

// check reads what happened, from the histories, the database and the fake
// provider, and checks it.
func (r *chaosRun) check(ctx context.Context) (chaosSummary, error) {
	s := chaosSummary{Seed: r.f.seed, Jobs: r.f.jobs, Processes: r.f.workers, Incarnations: r.incarn, History: r.dir}
	c, err := openClient(r.dsn)
	if err != nil {
		return s, err
	}
	defer c.Close()
	jobs, err := c.RefundJob.Query().All(ctx)
	if err != nil {
		return s, err
	}
	final := map[int64]history.Final{}
	byKey := map[string]*ent.RefundJob{}
	for _, j := range jobs {
		final[j.ID] = history.Final{State: string(j.State), Attempt: j.Attempt}
		byKey[j.OperationKey] = j
		switch j.State {
		case "succeeded":
			s.Succeeded++
		case "failed":
			s.Failed++
		case "manual_review":
			s.ManualReview++
		default:
			s.Unfinished++
		}
		if j.KeyFirstUsedAt != nil && j.UpdatedAt.Sub(*j.KeyFirstUsedAt) > chaosKeyRetention {
			r.count(faultKeyExpired, 1)
		}
	}
	events, err := history.Load(r.dir)
	if err != nil {
		return s, err
	}
	rep := history.Check(events, final, 5*time.Minute)
	s.HistoryOps, s.HistoryUnknown = rep.Ops, rep.Unknown
	s.TerminalRegressions, s.AttemptRegressions = rep.TerminalRegressions, rep.AttemptRegressions
	s.HistoryCheck = rep.Summary()
	if !rep.OK {
		var b strings.Builder
		for _, fl := range rep.Failures {
			fmt.Fprintf(&b, "%s\n\n", fl.Explanation)
		}
		_ = os.WriteFile(filepath.Join(r.dir, "explanation.txt"), []byte(b.String()), 0o644)
		_ = rep.WriteVisualization(filepath.Join(r.dir, "history.html"))
	}

	// What the fleet did, from the history.
	writes := map[[2]int64]history.Event{} // job, attempt → the write-back's return
	for _, e := range events {
		if e.Phase != history.PhaseReturn {
			continue
		}
		switch {
		case e.Op == history.OpTakeover && e.Result == history.ResultOK:
			s.Takeovers++
		case e.Op == history.OpWrite && e.Result == history.ResultSuperseded:
			s.StaleWritesRejected++
		}
		if e.Result == history.ResultUnknown && e.Op != history.OpProvider {
			s.CommitUnknown++
		}
		if e.Op == history.OpWrite {
			writes[[2]int64{e.Job, e.Attempt}] = e
		}
	}

	// The observation log.
	// The observation log: what it knows of each key (the same evidence is
	// one row, whichever attempt recorded it first).
	known := map[string]bool{} // key, provider refund id, status
	dedup := map[string]bool{}
	rows, err := r.lockDB.QueryContext(ctx, "SELECT operation_key, COALESCE(provider_refund_id, ''), provider_status, dedup_key FROM refund_observations")
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var key, refundID, status, dk string
		if err := rows.Scan(&key, &refundID, &status, &dk); err != nil {
			rows.Close()
			return s, err
		}
		known[key+" "+refundID+" "+status] = true
		dedup[dk] = true
	}
	rows.Close()
	var problems []string
	// Every answer whose write-back did not land is in the log.
	for _, e := range events {
		if e.Op != history.OpProvider || e.Phase != history.PhaseReturn {
			continue
		}
		wb, ok := writes[[2]int64{e.Job, e.Attempt}]
		if !ok || wb.Result == history.ResultOK || wb.Result == history.ResultAlreadySettled {
			continue
		}
		for _, a := range evidenceOf(e.Key, e.Detail) {
			if !known[e.Key+" "+a] {
				s.LostReceipts++
				problems = append(problems, fmt.Sprintf("job %d attempt %d: the provider answered %q, the write-back was %s, and the answer is not in the observation log", e.Job, e.Attempt, e.Detail, wb.Result))
			}
		}
	}
	// Every webhook a process acknowledged is in the log.
	for _, d := range r.srv.WebhookDeliveries() {
		if d.Status >= 200 && d.Status < 300 && !dedup["event:webhook:"+d.EventID] {
			s.LostReceipts++
			problems = append(problems, fmt.Sprintf("webhook %s (%s of %s) was acknowledged but is not in the observation log", d.EventID, d.Type, d.Key))
		}
	}
	// Executions at the provider, and the ledger.
	ledgers, err := c.Refund.Query().All(ctx)
	if err != nil {
		return s, err
	}
	ledgerOf := map[string]*ent.Refund{}
	for _, l := range ledgers {
		ledgerOf[l.OperationKey] = l
	}
	lookups := r.srv.Client()
	for key, j := range byKey {
		n := r.srv.Executions(key)
		s.ProviderExecuted += n
		if n > 1 {
			s.KeysPaidTwice++
			problems = append(problems, fmt.Sprintf("%s was executed %d times by the provider", key, n))
		}
		if n > 0 {
			found, err := lookups.Lookup(ctx, provider.Query{OperationKey: key})
			if err != nil {
				return s, fmt.Errorf("chaos: look up %s: %w", key, err)
			}
			for _, fr := range found {
				if fr.Status != provider.StatusSucceeded {
					continue
				}
				ok := j.State == "succeeded" && j.ProviderRefundID != nil && *j.ProviderRefundID == fr.ProviderRefundID ||
					j.State == "manual_review" && (j.ReviewEvidence != nil && *j.ReviewEvidence != "" || known[key+" "+fr.ProviderRefundID+" succeeded"])
				if !ok {
					s.LostReceipts++
					problems = append(problems, fmt.Sprintf("%s: the provider executed refund %s, but job %d is %s", key, fr.ProviderRefundID, j.ID, j.State))
				}
			}
		}
		want := map[string]string{"succeeded": "refunded", "failed": "failed"}[string(j.State)]
		if want == "" {
			want = "requested"
		}
		if l := ledgerOf[key]; l == nil || string(l.Status) != want {
			s.LedgerMismatches++
			problems = append(problems, fmt.Sprintf("%s: job %d is %s but its ledger row is not %s", key, j.ID, j.State, want))
		}
	}
	inj := r.srv.Injected()
	r.count(faultProviderLostReply, inj.Cut)
	r.count(faultProviderLateReply, inj.Latency)
	r.count(faultProviderRateLimit, inj.RateLimit)
	r.count(faultProviderError, inj.ServerError)
	r.count(faultProviderLookupLag, inj.LookupLag)
	r.count(faultPendingThenFails, inj.Declined)
	r.count(faultPendingThenSucceed, inj.Pending-inj.Declined)
	r.count(faultReversal, inj.Reversal)
	r.count(faultWebhookDuplicate, inj.WebhookDuplicate)
	r.count(faultWebhookLate, inj.WebhookLate)
	r.faultMu.Lock()
	s.FaultsByKind = r.faults
	for _, n := range r.faults {
		s.FaultsInjected += n
	}
	r.faultMu.Unlock()
	if len(problems) > 0 {
		sort.Strings(problems)
		_ = os.WriteFile(filepath.Join(r.dir, "invariants.txt"), []byte(strings.Join(problems, "\n")+"\n"), 0o644)
	}
	return s, nil
}

// evidenceOf lists, as "refund-id status", what a provider answer to key's
// job carries that the worker keeps as evidence when its write-back does not
// land: the status of a send ("succeeded re_1"), or each refund of key a
// lookup found ("found 1 [key succeeded re_1]").
func evidenceOf(key, detail string) []string {
	statuses := map[string]bool{"succeeded": true, "pending": true, "rejected": true, "reversed": true}
	if rest, ok := strings.CutPrefix(detail, "found "); ok {
		_, list, _ := strings.Cut(rest, "[")
		var out []string
		for _, item := range strings.Split(strings.TrimSuffix(list, "]"), ", ") {
			f := strings.Fields(item)
			if len(f) == 3 && f[0] == key && statuses[f[1]] {
				out = append(out, f[2]+" "+f[1])
			}
		}
		return out
	}
	if f := strings.Fields(detail); len(f) == 2 && statuses[f[0]] {
		return []string{f[1] + " " + f[0]}
	}
	return nil
}

// report prints the summary and fails when a check did.
func (r *chaosRun) report(s chaosSummary, out io.Writer) error {
	var failed []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{s.KeysPaidTwice, "operation keys paid twice"},
		{s.TerminalRegressions, "terminal states left"},
		{s.AttemptRegressions, "attempts not strictly increasing"},
		{s.LostReceipts, "receipts lost"},
		{s.LedgerMismatches, "ledger rows parted from their job"},
		{s.Unfinished, "jobs unfinished"},
	} {
		if c.n > 0 {
			failed = append(failed, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if s.HistoryCheck != "ok" {
		failed = append(failed, "history check: "+s.HistoryCheck)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "explanation.txt")); err == nil {
		fmt.Fprintf(out, "the history is not one the state machine allows:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "invariants.txt")); err == nil {
		fmt.Fprintf(out, "invariants broken:\n%s", b)
	}
	if r.f.json {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(b))
	} else {
		kinds := make([]string, 0, len(s.FaultsByKind))
		for k := range s.FaultsByKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		fmt.Fprintf(out, "chaos: %d jobs in %.0fs, %d processes (%d incarnations)\n", s.Jobs, s.Seconds, s.Processes, s.Incarnations)
		fmt.Fprintf(out, "  faults injected %d:\n", s.FaultsInjected)
		for _, k := range kinds {
			fmt.Fprintf(out, "    %-40s %d\n", k, s.FaultsByKind[k])
		}
		fmt.Fprintf(out, "  succeeded %d, failed %d, manual review %d, unfinished %d\n", s.Succeeded, s.Failed, s.ManualReview, s.Unfinished)
		fmt.Fprintf(out, "  takeovers %d, stale writes rejected %d, outcomes unknown %d\n", s.Takeovers, s.StaleWritesRejected, s.CommitUnknown)
		fmt.Fprintf(out, "  provider executions %d, keys paid twice %d, terminal regressions %d, lost receipts %d, ledger mismatches %d\n",
			s.ProviderExecuted, s.KeysPaidTwice, s.TerminalRegressions, s.LostReceipts, s.LedgerMismatches)
		fmt.Fprintf(out, "  history: %d operations (%d unknown): %s\n", s.HistoryOps, s.HistoryUnknown, s.HistoryCheck)
	}
	if len(failed) > 0 {
		return fmt.Errorf("chaos (seed %d, history in %s): %s", s.Seed, r.dir, strings.Join(failed, "; "))
	}
	if r.f.dir == "" {
		_ = os.RemoveAll(r.dir)
	}
	return nil
}
