package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/worker"
	"github.com/fencekit/fencekit/worker/metrics"
)

// runFlags are refundd run's settings.
type runFlags struct {
	dsn, listen, operatorListen, budgetName string
	// providerConfig: the provider, as the operators' commands see it too
	// (provider.go).
	providerConfig
	workers, budgetBurst                int
	budgetRate, reconcileReserve        float64
	changeBudget, noWebhooks            bool
	lease, scan, stopGrace, httpTimeout time.Duration
	lockWait                            time.Duration
	pendingDelay, retryDelay, lagPoll   time.Duration
	// holder names this process in the attempts log (-holder).
	holder string
	// hooks, not a flag, are the worker's hooks: refundd chaos-agent's
	// (internal/chaos) for the processes of the chaos fleet, none for run.
	hooks worker.Hooks
	// console: the operators' console in the browser (-console-addr).
	console consoleFlags
	// dispatch: the scan alone, or RabbitMQ (-dispatch, -amqp-url).
	dispatch dispatchFlags
	// listening, when set, is told the listeners' addresses once they
	// serve and the worker started (tests listen on port 0): the webhook
	// endpoint's, empty with -no-webhooks, and the operators'.
	listening func(webhooks, operator string)
}

// The HTTP servers' limits besides -http-timeout.
const (
	maxHeaderBytes   = 16 << 10 // a webhook's or a scrape's headers are small
	maxOperatorBody  = 4 << 10  // /metrics and /healthz read no body
	httpIdleTimeout  = 60 * time.Second
	defaultWebhooks  = "127.0.0.1:8080"
	defaultOperators = "127.0.0.1:9090"
)

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", defaultWebhooks, "address of the webhook endpoint (/webhooks only): the provider reaches it, so it faces the internet")
	fs.StringVar(&f.operatorListen, "operator-listen", defaultOperators, "address of /metrics and /healthz, for the operators: keep it off the internet")
	fs.BoolVar(&f.noWebhooks, "no-webhooks", false, "run without the webhook endpoint (no listener, and no $FENCEKIT_WEBHOOK_SECRET needed): the reconciler finds evidence in the provider's lookups only")
	fs.DurationVar(&f.httpTimeout, "http-timeout", 10*time.Second, "on both listeners, how long a client may take to send a request's headers, and its body, and the answer to be written")
	f.providerConfig.register(fs)
	fs.StringVar(&f.budgetName, "budget", worker.DefaultBudgetName, "name of the provider's outbound budget, shared by the fleet")
	fs.Float64Var(&f.budgetRate, "budget-rate", worker.DefaultBudgetRate, "provider calls per second for the whole fleet: must be the fleet's (see -change-budget)")
	fs.IntVar(&f.budgetBurst, "budget-burst", worker.DefaultBudgetBurst, "provider calls the fleet may make at once: must be the fleet's (see -change-budget)")
	fs.BoolVar(&f.changeBudget, "change-budget", false, "when the fleet's budget holds another -budget-rate or -budget-burst, change it for the whole fleet (logged) instead of refusing to start")
	fs.Float64Var(&f.reconcileReserve, "reconcile-reserve", worker.DefaultReconcileReserve, "share of the budget's burst that sends leave to takeovers and reconciles (above 0 and below 1, or -1 for none)")
	fs.IntVar(&f.workers, "workers", worker.DefaultWorkers, "provider calls this process makes at once")
	fs.DurationVar(&f.lease, "lease", worker.DefaultLease, "lease of a claim")
	fs.DurationVar(&f.scan, "scan", worker.DefaultScanInterval, "scheduler pass interval")
	fs.DurationVar(&f.stopGrace, "stop-grace", 10*time.Second, "on SIGTERM, how long calls in flight may finish before they are cancelled")
	fs.DurationVar(&f.lockWait, "lock-wait", fencedwrite.DefaultLockWaitTimeout, "innodb_lock_wait_timeout of the worker's sessions (whole seconds)")
	fs.DurationVar(&f.pendingDelay, "pending-delay", worker.DefaultPendingDelay, "how long after a pending answer the refund is reconciled")
	fs.DurationVar(&f.retryDelay, "retry-delay", worker.DefaultRetryDelay, "how long a job waits after a refusal to process (rate limited, key in use, failed lookup)")
	fs.DurationVar(&f.lagPoll, "lag-poll", worker.DefaultLagPoll, "the least wait inside the provider's lookup-lag window")
	fs.StringVar(&f.holder, "holder", fencedwrite.DefaultHolder(), "this process's name in the attempts log (which process held each attempt it claims or takes over): printable ASCII, at most 255 characters")
	f.console.register(fs)
	f.dispatch.register(fs, true)
}

// check refuses settings refundd run must not start with, naming each flag:
// the provider's (checkProvider: an empty webhook secret unless
// -no-webhooks, a provider URL that is not an absolute http(s) URL, …), a
// non-positive -http-timeout.
func (f runFlags) check(secret string) error {
	var errs []error
	errs = append(errs, f.checkProvider(secret))
	if f.httpTimeout <= 0 {
		errs = append(errs, fmt.Errorf("-http-timeout must be positive, got %v", f.httpTimeout))
	}
	if err := fencedwrite.ValidHolder(f.holder); err != nil {
		errs = append(errs, fmt.Errorf("-holder %q: %w", f.holder, err))
	}
	if err := f.console.check(f.listen, f.operatorListen, f.noWebhooks); err != nil {
		errs = append(errs, err)
	}
	if err := f.dispatch.check(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// server is an HTTP server with a deadline on every phase of a request:
// its headers, its body, the answer, and an idle keep-alive connection. A
// body longer than maxBody is refused.
func server(h http.Handler, timeout time.Duration, maxBody int64) *http.Server {
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, maxBody),
		ReadHeaderTimeout: timeout,
		ReadTimeout:       timeout,
		WriteTimeout:      timeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// runWorker serves a real queue: workers, the webhook endpoint on -listen,
// /metrics and /healthz on -operator-listen, until ctx ends (SIGTERM or
// SIGINT); then it stops claiming, lets calls in flight finish for
// stopGrace, cancels the rest, and returns once every job wrote back. The
// webhook secret comes from $FENCEKIT_WEBHOOK_SECRET ($STRIPE_WEBHOOK_SECRET
// with -provider stripe), never from a flag.
func runWorker(ctx context.Context, f runFlags, logOut io.Writer) error {
	secret := os.Getenv(f.secretEnv())
	if err := f.check(secret); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	db, err := fencedwrite.OpenDB(f.dsn, fencedwrite.DSNOptions{LockWaitTimeout: f.lockWait, ReadTimeout: max(fencedwrite.DefaultReadTimeout, f.lockWait+time.Second)})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	log := newLogger(logOut)
	if err := waitForDatabase(ctx, db, f.dsn, log, nil); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	prov, webhooks, err := f.newProvider(secret)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	w, err := worker.New(worker.Config{
		DB:               db,
		Provider:         prov,
		BudgetName:       f.budgetName,
		BudgetRate:       f.budgetRate,
		BudgetBurst:      f.budgetBurst,
		ChangeBudget:     f.changeBudget,
		ReconcileReserve: f.reconcileReserve,
		Workers:          f.workers,
		Lease:            f.lease,
		ScanInterval:     f.scan,
		ProviderTimeout:  f.timeout,
		SkewMargin:       f.skewMargin,
		Holder:           f.holder,
		PendingDelay:     f.pendingDelay,
		RetryDelay:       f.retryDelay,
		LagPoll:          f.lagPoll,
		WebhookSecret:    []byte(secret),
		Webhooks:         webhooks,
		Logger:           log,
		Metrics:          metrics.New(reg),
		Hooks:            f.hooks,
	})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}

	// Webhooks face the internet; metrics and health face the operators:
	// two listeners, and neither serves the other's paths.
	operators := http.NewServeMux()
	operators.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	operators.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) {
		pctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := db.PingContext(pctx); err != nil {
			http.Error(rw, "database: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	servers := map[string]*http.Server{"operator": server(operators, f.httpTimeout, maxOperatorBody)}
	addrs := map[string]string{}
	if !f.noWebhooks {
		webhooks := http.NewServeMux()
		webhooks.Handle("/webhooks", w.WebhookHandler()) // 413 past worker.MaxWebhookBody
		servers["webhook"] = server(webhooks, f.httpTimeout, worker.MaxWebhookBody+1)
	}
	listenAt := map[string]string{"webhook": f.listen, "operator": f.operatorListen}
	if f.console.addr != "" {
		// The console: a listener of its own, with its own limits; every
		// action goes through package operator.
		client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
		// The workers' provider, and the same window as theirs.
		con, err := f.console.newConsole(client, prov, f.providerConfig, f.budgetName, reg, log)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		servers["console"], listenAt["console"] = con.Server(), f.console.addr
	}
	listeners := map[string]net.Listener{}
	closeAll := func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}
	for name, at := range listenAt {
		if servers[name] == nil {
			continue
		}
		ln, err := net.Listen("tcp", at)
		if err != nil {
			closeAll()
			return fmt.Errorf("run: listen for the %s endpoint: %w", name, err)
		}
		listeners[name], addrs[name] = ln, ln.Addr().String()
	}
	served := make(chan error, len(servers))
	for name, srv := range servers {
		serve := srv.Serve
		if name == "console" {
			serve = func(ln net.Listener) error { return f.console.serve(srv, ln) }
		}
		go func() { served <- fmt.Errorf("%s endpoint: %w", name, serve(listeners[name])) }()
	}
	shutdown := func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(shutdownCtx)
		}
	}
	if err := w.Start(ctx); err != nil {
		shutdown()
		if errors.Is(err, worker.ErrBudgetDiffers) {
			return fmt.Errorf("run: %w: pass the fleet's -budget-rate and -budget-burst, or -change-budget to change them for the whole fleet", err)
		}
		return fmt.Errorf("run: %w", err)
	}
	consumed := (<-chan struct{})(nil)
	consumeCtx, stopConsuming := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsuming()
	if f.dispatch.mode != dispatchScan {
		// The broker may be down: the consumer dials until it answers, and
		// the scan claims every due job meanwhile.
		if consumed, err = f.dispatch.consume(consumeCtx, w, log); err != nil {
			_ = w.StopAndCancel(context.Background())
			shutdown()
			return fmt.Errorf("run: %w", err)
		}
	}
	log.Info("refundd running", "listen", addrs["webhook"], "operator_listen", addrs["operator"], "console_addr", addrs["console"], "workers", f.workers, "lease", f.lease,
		"dispatch", f.dispatch.mode)
	if f.console.listening != nil {
		f.console.listening(addrs["console"])
	}
	if f.listening != nil {
		f.listening(addrs["webhook"], addrs["operator"])
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("http server stopped", "err", err)
	}
	// No more messages: those this process holds unacknowledged go back to
	// the queue, for the rest of the fleet.
	stopConsuming()
	if consumed != nil {
		<-consumed
	}
	log.Info("stopping: no more claims; calls in flight finish or are cancelled", "grace", f.stopGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), f.stopGrace)
	err = w.Stop(graceCtx)
	cancel()
	if err != nil {
		_ = w.StopAndCancel(context.Background())
	}
	shutdown()
	log.Info("stopped")
	return nil
}
