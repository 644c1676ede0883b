package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/dispatch/rabbitmq"
	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/brokertest"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// patience bounds every wait for a signal: a safety net that fails a stuck
// test, never what orders the actors.
const patience = 60 * time.Second

func brokerURL() string { return brokertest.URL() }

// env is one test's database, fake provider and queue of its own.
type env struct {
	t     *testing.T
	db    *dbtest.DB
	srv   *fakeprovider.Server
	c     *ent.Client
	queue string

	wrote chan worker.Job // every worker's write-backs
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// newEnv is a test's environment; the test shares the broker (see
// brokertest), unless it took it for itself first.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, brokertest.Shared)
}

func newEnvWith(t *testing.T, use func(testing.TB)) *env {
	t.Helper()
	use(t)
	d := dbtest.New(t)
	srv := fakeprovider.StartWith(fakeprovider.Config{})
	t.Cleanup(srv.Close)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ToLower(unsafeName.ReplaceAllString(t.Name(), "-"))
	if len(name) > 80 {
		name = name[:80]
	}
	e := &env{t: t, db: d, srv: srv, c: d.Client(), queue: "fencekit-test-" + name + "-" + hex.EncodeToString(b[:]),
		wrote: make(chan worker.Job, 10_000)}
	t.Cleanup(func() {
		// The queue is the test's own: delete it, messages and all.
		conn, err := amqp.Dial(brokerURL())
		if err != nil {
			t.Errorf("delete queue %s: %v", e.queue, err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDelete(e.queue, false, false, false)
		}
		if err != nil {
			t.Errorf("delete queue %s: %v", e.queue, err)
		}
	})
	return e
}

func (e *env) config(name string) rabbitmq.Config {
	return rabbitmq.Config{URL: brokerURL(), Queue: e.queue, Name: "test-" + name, ReconnectDelay: 10 * time.Millisecond,
		ReconnectMax: 200 * time.Millisecond, ConfirmTimeout: 2 * time.Second, Logger: e.logger(name)}
}

func (e *env) logger(name string) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{e.t}, nil)).With("who", name)
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// enqueue records a payment at the provider and enqueues a refund of it.
func (e *env) enqueue(key string) *ent.RefundJob {
	e.t.Helper()
	p := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	e.srv.AddPayment(p.PaymentRef, 10_000, "EUR")
	job, _, err := e.c.RefundJob.Enqueue(e.t.Context(), p, ledger.Open(p))
	if err != nil {
		e.t.Fatal(err)
	}
	return job
}

// worker is a started worker with test settings: a scan interval so long
// that only hints, finishing jobs and its first pass run passes, unless mod
// says otherwise. passes receives each pass's result.
func (e *env) worker(name string, passes chan<- worker.PassResult, mod func(*worker.Config)) *worker.Client {
	e.t.Helper()
	cfg := worker.Config{
		DB:                e.db.FencedDB(fencedwrite.DSNOptions{}),
		Provider:          e.srv.Client(),
		Workers:           8,
		ScanInterval:      time.Hour,
		ReconcileInterval: time.Hour,
		ProviderTimeout:   5 * time.Second,
		PendingDelay:      time.Microsecond,
		RetryDelay:        time.Microsecond,
		LagPoll:           time.Microsecond,
		BudgetRate:        10_000,
		BudgetBurst:       10_000,
		Logger:            e.logger(name),
		Hooks: worker.Hooks{
			WroteBack: func(j worker.Job, _ error) { e.wrote <- j },
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
		e.t.Fatal(err)
	}
	if err := w.Start(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
	return w
}

// consume runs a Consumer for w until the test ends or stop is called.
func (e *env) consume(name string, w *worker.Client, hooks rabbitmq.Hooks, mod func(*rabbitmq.Config)) (c *rabbitmq.Consumer, stop func()) {
	e.t.Helper()
	cfg := e.config(name)
	if mod != nil {
		mod(&cfg)
	}
	c, err := rabbitmq.NewConsumer(cfg, w, hooks)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			e.t.Errorf("consumer %s: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return c, stop
}

func (e *env) dispatcher(mod func(*rabbitmq.Config)) *rabbitmq.Dispatcher {
	e.t.Helper()
	cfg := e.config("dispatcher")
	if mod != nil {
		mod(&cfg)
	}
	d, err := rabbitmq.NewDispatcher(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *env) publish(d *rabbitmq.Dispatcher, ids ...int64) {
	e.t.Helper()
	if err := d.Publish(e.t.Context(), ids...); err != nil {
		e.t.Fatal(err)
	}
}

// settled waits until every key's job is settled, as seen after a
// write-back of it.
func (e *env) settled(keys ...string) {
	e.t.Helper()
	left := map[string]bool{}
	for _, k := range keys {
		if !e.isSettled(k) {
			left[k] = true
		}
	}
	timeout := time.After(patience)
	for len(left) > 0 {
		select {
		case j := <-e.wrote:
			if left[j.OperationKey] && e.isSettled(j.OperationKey) {
				delete(left, j.OperationKey)
			}
		case <-timeout:
			e.t.Fatalf("%d jobs never settled, such as %v", len(left), first(left))
		}
	}
}

func first(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

func (e *env) job(key string) *ent.RefundJob {
	e.t.Helper()
	j, err := e.c.RefundJob.Query().Where(refundjob.OperationKey(key)).Only(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *env) isSettled(key string) bool {
	s := e.job(key).State
	return s != refundjob.StateReady && s != refundjob.StateRunning
}

// doneOnce checks every key's job succeeded with exactly one execution at
// the provider.
func (e *env) doneOnce(keys ...string) {
	e.t.Helper()
	for _, k := range keys {
		if j := e.job(k); j.State != refundjob.StateSucceeded {
			e.t.Errorf("%s is %s, want succeeded", k, j.State)
		}
		if n := e.srv.Executions(k); n != 1 {
			e.t.Errorf("%s was executed %d times by the provider, want once", k, n)
		}
	}
}

// verdict is a consumer's BeforeAck.
type verdict struct {
	id      int64
	claimed bool
	err     error
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("no %s came", what)
		var zero T
		return zero
	}
}

// gate is a TCP proxy to the broker that the test can take down: Down cuts
// every connection through it and refuses new ones (their dials fail at
// once) until Up. What a client sees of a broker restarted or a network
// cut, for this client alone.
type gate struct {
	t  *testing.T
	ln net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newGate(t *testing.T, upstream string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{t: t, ln: ln, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close(); g.Down() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.pipe(c, upstream)
		}
	}()
	return g
}

func (g *gate) pipe(c net.Conn, upstream string) {
	g.mu.Lock()
	if g.down {
		g.mu.Unlock()
		_ = c.Close()
		return
	}
	g.conns[c] = true
	g.mu.Unlock()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	g.mu.Lock()
	if g.down {
		g.mu.Unlock()
		_ = c.Close()
		_ = u.Close()
		return
	}
	g.conns[u] = true
	g.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

// Dial dials the broker through the gate (rabbitmq.Config.Dial).
func (g *gate) Dial(network, _ string) (net.Conn, error) {
	return net.DialTimeout(network, g.ln.Addr().String(), 5*time.Second)
}

func (g *gate) Down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = true
	for c := range g.conns {
		_ = c.Close()
		delete(g.conns, c)
	}
}

func (g *gate) Up() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = false
}

// brokerAddr is the host:port of brokerURL.
func brokerAddr(t *testing.T) string {
	t.Helper()
	u, err := amqp.ParseURI(brokerURL())
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
}
