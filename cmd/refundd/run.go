package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/worker"
)

// runFlags are refundd run's settings.
type runFlags struct {
	dsn, listen, providerURL, budgetName string
	workers, budgetBurst                 int
	budgetRate                           float64
	lease, scan, timeout, stopGrace      time.Duration
	safeResend                           bool
	keyRetention, lookupLag, skewMargin  time.Duration
	lockWait                             time.Duration
	pendingDelay, retryDelay, lagPoll    time.Duration
	// chaos: set by refundd chaos for the processes of its fleet.
	chaos chaosAgentFlags
	// listening, when set, is told the HTTP endpoint's address once it
	// listens (tests listen on port 0).
	listening func(addr string)
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address of the HTTP endpoint: /webhooks, /metrics, /healthz")
	fs.StringVar(&f.providerURL, "provider-url", "", "base URL of the payment provider's refund API (required)")
	fs.BoolVar(&f.safeResend, "provider-safe-resend", true, "the provider's contract: the same key with the same parameters executes at most once while retained")
	fs.DurationVar(&f.keyRetention, "provider-key-retention", 24*time.Hour, "how long the provider keeps an idempotency key")
	fs.DurationVar(&f.lookupLag, "provider-lookup-lag", 0, "how long a new refund may be invisible to the provider's lookups")
	fs.DurationVar(&f.skewMargin, "provider-skew-margin", fencedwrite.DefaultSkewMargin, "clock difference allowed between us and the provider, taken off the key's window")
	fs.StringVar(&f.budgetName, "budget", worker.DefaultBudgetName, "name of the provider's outbound budget, shared by the fleet")
	fs.Float64Var(&f.budgetRate, "budget-rate", worker.DefaultBudgetRate, "provider calls per second for the whole fleet")
	fs.IntVar(&f.budgetBurst, "budget-burst", worker.DefaultBudgetBurst, "provider calls the fleet may make at once")
	fs.IntVar(&f.workers, "workers", worker.DefaultWorkers, "provider calls this process makes at once")
	fs.DurationVar(&f.lease, "lease", worker.DefaultLease, "lease of a claim")
	fs.DurationVar(&f.scan, "scan", worker.DefaultScanInterval, "scheduler pass interval")
	fs.DurationVar(&f.timeout, "provider-timeout", worker.DefaultProviderTimeout, "bound of one provider call")
	fs.DurationVar(&f.stopGrace, "stop-grace", 10*time.Second, "on SIGTERM, how long calls in flight may finish before they are cancelled")
	fs.DurationVar(&f.lockWait, "lock-wait", fencedwrite.DefaultLockWaitTimeout, "innodb_lock_wait_timeout of the worker's sessions (whole seconds)")
	fs.DurationVar(&f.pendingDelay, "pending-delay", worker.DefaultPendingDelay, "how long after a pending answer the refund is reconciled")
	fs.DurationVar(&f.retryDelay, "retry-delay", worker.DefaultRetryDelay, "how long a job waits after a refusal to process (rate limited, key in use, failed lookup)")
	fs.DurationVar(&f.lagPoll, "lag-poll", worker.DefaultLagPoll, "the least wait inside the provider's lookup-lag window")
	f.chaos.register(fs)
}

// runWorker serves a real queue: workers, the webhook endpoint, /metrics
// and /healthz, until ctx ends (SIGTERM or SIGINT); then it stops claiming,
// lets calls in flight finish for stopGrace, cancels the rest, and returns
// once every job wrote back. The webhook secret comes from
// $FENCEKIT_WEBHOOK_SECRET, never from a flag.
func runWorker(ctx context.Context, f runFlags, logOut io.Writer) error {
	if f.providerURL == "" {
		return errors.New("run: -provider-url is required")
	}
	db, err := fencedwrite.OpenDB(f.dsn, fencedwrite.DSNOptions{LockWaitTimeout: f.lockWait, ReadTimeout: max(fencedwrite.DefaultReadTimeout, f.lockWait+time.Second)})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	caps := provider.Capabilities{SafeResend: f.safeResend, KeyRetention: f.keyRetention, LookupByReference: true, LookupByRefundID: true,
		ListByPayment: true, LookupLag: f.lookupLag}
	log := slog.New(slog.NewJSONHandler(logOut, nil))
	agent, err := f.chaos.open()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer agent.close()
	w, err := worker.New(worker.Config{
		DB:              db,
		Provider:        provider.NewHTTPClient(f.providerURL, &http.Client{}, caps),
		BudgetName:      f.budgetName,
		BudgetRate:      f.budgetRate,
		BudgetBurst:     f.budgetBurst,
		Workers:         f.workers,
		Lease:           f.lease,
		ScanInterval:    f.scan,
		ProviderTimeout: f.timeout,
		SkewMargin:      f.skewMargin,
		PendingDelay:    f.pendingDelay,
		RetryDelay:      f.retryDelay,
		LagPoll:         f.lagPoll,
		WebhookSecret:   []byte(os.Getenv("FENCEKIT_WEBHOOK_SECRET")),
		Logger:          log,
		Metrics:         newPromMetrics(reg),
		Hooks:           agent.hooks(),
	})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks", w.WebhookHandler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) {
		pctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := db.PingContext(pctx); err != nil {
			http.Error(rw, "database: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("run: listen: %w", err)
	}
	if f.listening != nil {
		f.listening(ln.Addr().String())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := w.Start(ctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("run: %w", err)
	}
	log.Info("refundd running", "listen", ln.Addr().String(), "workers", f.workers, "lease", f.lease)
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("http server stopped", "err", err)
	}
	log.Info("stopping: no more claims; calls in flight finish or are cancelled", "grace", f.stopGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), f.stopGrace)
	err = w.Stop(graceCtx)
	cancel()
	if err != nil {
		_ = w.StopAndCancel(context.Background())
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	log.Info("stopped")
	return nil
}
