// Package dispatchtest is what the broker dispatches' tests share
// (dispatch/rabbitmq, dispatch/kafka): a test's database and fake provider,
// workers with test settings, and waits for what they write back.
package dispatchtest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// Patience bounds every wait for a signal: a safety net that fails a stuck
// test, never what orders the actors.
const Patience = 60 * time.Second

// Env is one test's database and fake provider.
type Env struct {
	T   *testing.T
	DB  *dbtest.DB
	Srv *fakeprovider.Server
	C   *ent.Client

	// Wrote receives every worker's write-backs.
	Wrote chan worker.Job
}

// New is t's environment: a database and a fake provider of its own.
func New(t *testing.T) *Env {
	t.Helper()
	d := dbtest.New(t)
	srv := fakeprovider.StartWith(fakeprovider.Config{})
	t.Cleanup(srv.Close)
	return &Env{T: t, DB: d, Srv: srv, C: d.Client(), Wrote: make(chan worker.Job, 10_000)}
}

// Logger logs to the test with -v, else nowhere.
func (e *Env) Logger(name string) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{e.T}, nil)).With("who", name)
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// Enqueue records a payment at the provider and enqueues a refund of it.
func (e *Env) Enqueue(key string) *ent.RefundJob {
	e.T.Helper()
	p := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	e.Srv.AddPayment(p.PaymentRef, 10_000, "EUR")
	job, _, err := e.C.RefundJob.Enqueue(e.T.Context(), p, ledger.Open(p))
	if err != nil {
		e.T.Fatal(err)
	}
	return job
}

// Worker is a started worker with test settings: a scan interval so long
// that only hints, finishing jobs and its first pass run passes, unless mod
// says otherwise. passes receives each pass's result.
func (e *Env) Worker(name string, passes chan<- worker.PassResult, mod func(*worker.Config)) *worker.Client {
	e.T.Helper()
	cfg := worker.Config{
		DB:                e.DB.FencedDB(fencedwrite.DSNOptions{}),
		Provider:          e.Srv.Client(),
		Workers:           8,
		ScanInterval:      time.Hour,
		ReconcileInterval: time.Hour,
		ProviderTimeout:   5 * time.Second,
		PendingDelay:      time.Microsecond,
		RetryDelay:        time.Microsecond,
		LagPoll:           time.Microsecond,
		BudgetRate:        10_000,
		BudgetBurst:       10_000,
		Logger:            e.Logger(name),
		Hooks: worker.Hooks{
			WroteBack: func(j worker.Job, _ error) { e.Wrote <- j },
			Pass: func(p worker.PassResult) {
				if passes != nil {
					passes <- p
				}
			},
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := w.Start(e.T.Context()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Patience)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
	return w
}

// Idle is Worker once its first pass ran: over a table with nothing due,
// that pass claims nothing, and with the long scan interval only hints
// (and finishing jobs) make the worker claim after it.
func (e *Env) Idle(name string, mod func(*worker.Config)) *worker.Client {
	e.T.Helper()
	passes := make(chan worker.PassResult, 1000)
	w := e.Worker(name, passes, mod)
	Await(e.T, passes, "first pass of "+name)
	return w
}

// Settled waits until every key's job is settled, as seen after a
// write-back of it.
func (e *Env) Settled(keys ...string) {
	e.T.Helper()
	left := map[string]bool{}
	for _, k := range keys {
		if !e.IsSettled(k) {
			left[k] = true
		}
	}
	timeout := time.After(Patience)
	for len(left) > 0 {
		select {
		case j := <-e.Wrote:
			if left[j.OperationKey] && e.IsSettled(j.OperationKey) {
				delete(left, j.OperationKey)
			}
		case <-timeout:
			for k := range left {
				e.T.Fatalf("%d jobs never settled, such as %s", len(left), k)
			}
		}
	}
}

// Job is key's job as the database has it now.
func (e *Env) Job(key string) *ent.RefundJob {
	e.T.Helper()
	j, err := e.C.RefundJob.Query().Where(refundjob.OperationKey(key)).Only(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return j
}

// IsSettled reports whether key's job is neither ready nor running.
func (e *Env) IsSettled(key string) bool {
	s := e.Job(key).State
	return s != refundjob.StateReady && s != refundjob.StateRunning
}

// DoneOnce checks every key's job succeeded with exactly one execution at
// the provider.
func (e *Env) DoneOnce(keys ...string) {
	e.T.Helper()
	for _, k := range keys {
		if j := e.Job(k); j.State != refundjob.StateSucceeded {
			e.T.Errorf("%s is %s, want succeeded", k, j.State)
		}
		if n := e.Srv.Executions(k); n != 1 {
			e.T.Errorf("%s was executed %d times by the provider, want once", k, n)
		}
	}
}

// ClaimedOnce is DoneOnce, and each job settled at attempt 1: one claim,
// no takeover.
func (e *Env) ClaimedOnce(keys ...string) {
	e.T.Helper()
	e.DoneOnce(keys...)
	for _, k := range keys {
		if j := e.Job(k); j.Attempt != 1 {
			e.T.Errorf("%s settled at attempt %d, want 1 (claimed once)", k, j.Attempt)
		}
	}
}

// Consume runs a broker consumer's run (its Run) until the test ends or
// stop is called, which waits for run to return.
func Consume(t *testing.T, name string, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil {
			t.Errorf("consumer %s: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// Await is the next value on ch, or a failure after Patience.
func Await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Patience):
		t.Fatalf("no %s came", what)
		var zero T
		return zero
	}
}

// ContainsField reports whether err, or an error it wraps, is a
// fencedwrite.FieldError naming field.
func ContainsField(err error, field string) bool {
	var fe *fencedwrite.FieldError
	for _, e := range unwrapAll(err) {
		if errors.As(e, &fe) && fe.Field == field {
			return true
		}
	}
	return false
}

func unwrapAll(err error) []error {
	out := []error{err}
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			out = append(out, unwrapAll(e)...)
		}
	case interface{ Unwrap() error }:
		if e := x.Unwrap(); e != nil {
			out = append(out, unwrapAll(e)...)
		}
	}
	return out
}

// A Cut is a set of connections a test cuts at once: Down closes every
// connection admitted and refuses new ones until Up. A gate to a broker
// (a proxy, a dialer) is built on it: what a client sees of a broker gone
// or a network cut, for that client alone.
type Cut struct {
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

// Admit adds c to the set and reports true, or, while the cut is down,
// closes c and reports false.
func (g *Cut) Admit(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		_ = c.Close()
		return false
	}
	if g.conns == nil {
		g.conns = map[net.Conn]bool{}
	}
	g.conns[c] = true
	return true
}

// IsDown reports whether the cut is down.
func (g *Cut) IsDown() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.down
}

// Down closes every connection admitted and refuses new ones.
func (g *Cut) Down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = true
	for c := range g.conns {
		_ = c.Close()
		delete(g.conns, c)
	}
}

// Up admits connections again.
func (g *Cut) Up() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = false
}
