package worker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/provider/stripe"
	"github.com/fencekit/fencekit/worker"
)

// patience bounds every wait for a worker's signal. It is a safety net that
// fails a stuck test, never what orders the actors: the hooks do that.
const patience = 60 * time.Second

var webhookSecret = []byte("whsec_test")

// fleet is one test's database, fake provider and webhook endpoint, with a
// client for the service side (enqueue, reads).
type fleet struct {
	t       *testing.T
	db      *dbtest.DB
	srv     *fakeprovider.Server
	c       *ent.Client
	hookURL string

	mu      sync.Mutex
	handler http.Handler // the webhook handler of the first worker
}

// newFleet starts a fake provider with cfg (its webhooks go to the fleet's
// endpoint, signed with webhookSecret) on a fresh database.
func newFleet(t *testing.T, cfg fakeprovider.Config) *fleet {
	t.Helper()
	d := dbtest.New(t)
	f := &fleet{t: t, db: d, c: d.Client()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		h := f.handler
		f.mu.Unlock()
		if h == nil {
			http.Error(w, "no worker yet", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	f.hookURL = "http://" + ln.Addr().String() + "/webhooks"
	if cfg.WebhookURL == "" {
		cfg.WebhookURL, cfg.WebhookSecret = f.hookURL, webhookSecret
	}
	f.srv = fakeprovider.StartWith(cfg)
	t.Cleanup(f.srv.Close)
	return f
}

// events collects a worker's signals.
type events struct {
	wrote  chan wrote
	passes chan worker.PassResult
	calls  chan worker.Job
}

type wrote struct {
	job worker.Job
	err error
}

// worker starts a worker with test settings (short delays, a scan interval
// so long that only the worker's own wake-ups and the test run passes), and
// mod applied; it is stopped, cancelling its calls, when the test ends.
func (f *fleet) worker(name string, mod func(*worker.Config)) (*worker.Client, *events) {
	f.t.Helper()
	w, ev := f.newWorker(name, mod)
	f.start(w)
	return w, ev
}

// newWorker is worker without Start: see start.
func (f *fleet) newWorker(name string, mod func(*worker.Config)) (*worker.Client, *events) {
	f.t.Helper()
	ev := &events{wrote: make(chan wrote, 1000), passes: make(chan worker.PassResult, 1000), calls: make(chan worker.Job, 1000)}
	cfg := worker.Config{
		DB:                f.db.FencedDB(fencedwrite.DSNOptions{}),
		Provider:          f.provider(),
		Workers:           4,
		ScanInterval:      time.Hour,
		ReconcileInterval: time.Hour,
		ProviderTimeout:   5 * time.Second,
		PendingDelay:      time.Microsecond,
		RetryDelay:        time.Microsecond,
		LagPoll:           time.Microsecond,
		BudgetRate:        10_000,
		BudgetBurst:       10_000,
		WebhookSecret:     webhookSecret,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)).With("worker", name),
		Hooks: worker.Hooks{
			WroteBack:          func(j worker.Job, err error) { ev.wrote <- wrote{j, err} },
			Pass:               func(p worker.PassResult) { ev.passes <- p },
			BeforeProviderCall: func(j worker.Job) { ev.calls <- j },
		},
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{f.t}, nil)).With("worker", name)
	}
	if f.srv.API() == fakeprovider.APIStripe {
		cfg.Webhooks = stripe.Webhooks{Secrets: []string{string(webhookSecret)}}
	}
	if mod != nil {
		mod(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	if f.handler == nil {
		f.handler = w.WebhookHandler()
	}
	f.mu.Unlock()
	return w, ev
}

// start starts w; it is stopped, cancelling its calls, when the test ends.
func (f *fleet) start(w *worker.Client) {
	f.t.Helper()
	if err := w.Start(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// provider is the client of the fleet's fake provider: fencekit's HTTP
// client, or provider/stripe's when the fake speaks Stripe's API.
func (f *fleet) provider() provider.Client {
	f.t.Helper()
	if f.srv.API() != fakeprovider.APIStripe {
		return f.srv.Client()
	}
	c, err := stripe.New(stripe.Config{Key: "sk_test_fleet", URL: f.srv.URL()})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// paymentOf is key's payment: a PaymentIntent when the fake speaks Stripe's
// API.
func (f *fleet) paymentOf(key string) string {
	if f.srv.API() == fakeprovider.APIStripe {
		return "pi_" + key
	}
	return "pay-" + key
}

// enqueue records a payment at the provider and enqueues a refund of it.
func (f *fleet) enqueue(key string) *ent.RefundJob {
	f.t.Helper()
	p := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: f.paymentOf(key), AmountMinor: 1250, Currency: "EUR"}
	f.srv.AddPayment(p.PaymentRef, 10_000, "EUR")
	job, _, err := f.c.RefundJob.Enqueue(f.t.Context(), p, ledger.Open(p))
	if err != nil {
		f.t.Fatal(err)
	}
	return job
}

func request(key string) provider.RefundRequest {
	return provider.RefundRequest{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
}

// await waits for the worker's write-back of key that matches want.
func (ev *events) await(t *testing.T, key string, want func(wrote) bool) wrote {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case w := <-ev.wrote:
			if w.job.OperationKey == key && (want == nil || want(w)) {
				return w
			}
		case <-timeout:
			t.Fatalf("no write-back of %s came", key)
		}
	}
}

// settled waits until key's job is settled by this worker.
func (ev *events) settled(t *testing.T, f *fleet, key string) *ent.RefundJob {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case w := <-ev.wrote:
			if w.job.OperationKey != key {
				continue
			}
			j := f.job(key)
			if j.State != refundjob.StateReady && j.State != refundjob.StateRunning {
				return j
			}
		case <-timeout:
			t.Fatalf("%s was never settled: %+v", key, f.job(key))
		}
	}
}

func (f *fleet) job(key string) *ent.RefundJob {
	f.t.Helper()
	j, err := f.c.RefundJob.Query().Where(refundjob.OperationKey(key)).Only(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fleet) ledgerStatus(key string) refund.Status {
	f.t.Helper()
	r, err := f.c.Refund.Query().Where(refund.OperationKey(key)).Only(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Status
}

// wantSettled checks the job's final state, its ledger, and how many times
// the provider moved money for the key.
func (f *fleet) wantSettled(key string, state refundjob.State, executions int) *ent.RefundJob {
	f.t.Helper()
	j := f.job(key)
	if j.State != state {
		f.t.Fatalf("%s is %s at attempt %d (%v), want %s", key, j.State, j.Attempt, deref(j.ReviewReason), state)
	}
	wantLedger := map[refundjob.State]refund.Status{refundjob.StateSucceeded: refund.StatusRefunded, refundjob.StateFailed: refund.StatusFailed}[state]
	if wantLedger == "" {
		wantLedger = refund.StatusRequested
	}
	if got := f.ledgerStatus(key); got != wantLedger {
		f.t.Fatalf("%s's ledger is %s, want %s", key, got, wantLedger)
	}
	if n := f.srv.Executions(key); n != executions {
		f.t.Fatalf("the provider executed %s %d times, want %d", key, n, executions)
	}
	return j
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// evidenceOf returns the observation log of key.
func (f *fleet) evidenceOf(key string) []evidence.Entry {
	f.t.Helper()
	es, err := evidence.ForKey(context.Background(), f.c, key)
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

// callKinds records the worker's metrics: provider calls by kind, stale
// writes by transition, alerts, and the counts a test asserts on.
type callKinds struct {
	mu sync.Mutex
	n  map[worker.CallKind]int
	worker.NopMetrics
	stale                                   map[string]int
	alerts                                  []string
	takeovers, manual, unknown, budgetWaits int
	oldest                                  time.Duration
	oldestReported                          bool
}

func (c *callKinds) Takeovers(n int) { c.mu.Lock(); c.takeovers += n; c.mu.Unlock() }
func (c *callKinds) ManualReview()   { c.mu.Lock(); c.manual++; c.mu.Unlock() }
func (c *callKinds) ClaimUnknown()   { c.mu.Lock(); c.unknown++; c.mu.Unlock() }
func (c *callKinds) BudgetWait()     { c.mu.Lock(); c.budgetWaits++; c.mu.Unlock() }
func (c *callKinds) OldestUnfinished(age time.Duration) {
	c.mu.Lock()
	c.oldest, c.oldestReported = age, true
	c.mu.Unlock()
}

// count reads one of the counts under the lock.
func (c *callKinds) count(f func(*callKinds) int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(c)
}

func newCallKinds() *callKinds {
	return &callKinds{n: map[worker.CallKind]int{}, stale: map[string]int{}}
}

func (c *callKinds) ProviderCall(k worker.CallKind) { c.mu.Lock(); c.n[k]++; c.mu.Unlock() }
func (c *callKinds) StaleWrite(tr string)           { c.mu.Lock(); c.stale[tr]++; c.mu.Unlock() }
func (c *callKinds) Alert(kind string)              { c.mu.Lock(); c.alerts = append(c.alerts, kind); c.mu.Unlock() }

func (c *callKinds) get(k worker.CallKind) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[k] }

func (c *callKinds) alerted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.alerts...)
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}
