package kafka_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/kafkatest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// patience bounds every wait for a signal: a safety net that fails a stuck
// test, never what orders the actors.
const patience = 60 * time.Second

// env is one test's database, fake provider, Kafka (see kafkatest) and
// topic and group of its own.
type env struct {
	t     *testing.T
	k     *kafkatest.Cluster
	db    *dbtest.DB
	srv   *fakeprovider.Server
	c     *ent.Client
	topic string
	group string

	wrote chan worker.Job // every worker's write-backs
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	k := kafkatest.New(t)
	d := dbtest.New(t)
	srv := fakeprovider.StartWith(fakeprovider.Config{})
	t.Cleanup(srv.Close)
	topic := k.Topic(t, partitions)
	return &env{t: t, k: k, db: d, srv: srv, c: d.Client(), topic: topic, group: topic + "-group", wrote: make(chan worker.Job, 10_000)}
}

func (e *env) config(name string) kafka.Config {
	return kafka.Config{Brokers: e.k.Brokers, Topic: e.topic, Group: e.group, Name: "test-" + name,
		SessionTimeout: e.k.SessionTimeout, HeartbeatInterval: e.k.SessionTimeout / 5, CommitInterval: 100 * time.Millisecond,
		RetryDelay: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, MetadataMaxAge: 200 * time.Millisecond,
		PublishTimeout: 10 * time.Second, Logger: e.logger(name)}
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
func (e *env) enqueue(key string) kafka.Due {
	e.t.Helper()
	p := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	e.srv.AddPayment(p.PaymentRef, 10_000, "EUR")
	job, _, err := e.c.RefundJob.Enqueue(e.t.Context(), p, ledger.Open(p))
	if err != nil {
		e.t.Fatal(err)
	}
	return kafka.Due{ID: job.ID, OperationKey: job.OperationKey}
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

// idle starts a worker and waits for its first pass, over an empty table:
// from then on only hints (and finishing jobs) make it claim.
func (e *env) idle(name string, mod func(*worker.Config)) *worker.Client {
	e.t.Helper()
	passes := make(chan worker.PassResult, 1000)
	w := e.worker(name, passes, mod)
	await(e.t, passes, "first pass of "+name)
	return w
}

// consume runs a Consumer for w until the test ends or stop is called
// (which waits for Run to return: the judged offsets committed and the
// group left).
func (e *env) consume(name string, w *worker.Client, hooks kafka.Hooks, mod func(*kafka.Config)) (stop func()) {
	e.t.Helper()
	cfg := e.config(name)
	if mod != nil {
		mod(&cfg)
	}
	c, err := kafka.NewConsumer(cfg, w, hooks)
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
	return stop
}

func (e *env) dispatcher(mod func(*kafka.Config)) *kafka.Dispatcher {
	e.t.Helper()
	cfg := e.config("dispatcher")
	if mod != nil {
		mod(&cfg)
	}
	d, err := kafka.NewDispatcher(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *env) publish(d *kafka.Dispatcher, jobs ...kafka.Due) {
	e.t.Helper()
	if err := d.Publish(e.t.Context(), jobs...); err != nil {
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
			for k := range left {
				e.t.Fatalf("%d jobs never settled, such as %s", len(left), k)
			}
		}
	}
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

// claimedOnce checks every key's job succeeded at attempt 1 (one claim,
// no takeover) with exactly one execution at the provider.
func (e *env) claimedOnce(keys ...string) {
	e.t.Helper()
	for _, k := range keys {
		j := e.job(k)
		if j.State != refundjob.StateSucceeded || j.Attempt != 1 {
			e.t.Errorf("%s is %s at attempt %d, want succeeded at attempt 1 (claimed once)", k, j.State, j.Attempt)
		}
		if n := e.srv.Executions(k); n != 1 {
			e.t.Errorf("%s was executed %d times by the provider, want once", k, n)
		}
	}
}

// committed is the group's committed offset of each partition of the
// topic (absent: none), and ends each partition's end offset.
func (e *env) offsets() (committed, ends map[int32]int64) {
	e.t.Helper()
	adm := e.k.Admin(e.t)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	fetched, err := adm.FetchOffsets(ctx, e.group)
	if err != nil {
		e.t.Fatal(err)
	}
	committed = map[int32]int64{}
	for p, o := range fetched[e.topic] {
		if o.Err == nil && o.At >= 0 {
			committed[p] = o.At
		}
	}
	lo, err := adm.ListEndOffsets(ctx, e.topic)
	if err != nil {
		e.t.Fatal(err)
	}
	ends = map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return committed, ends
}

// everyOffsetCommitted checks the group committed every partition up to its
// end: every record was judged, and no late verdict rewound a commit.
func (e *env) everyOffsetCommitted() {
	e.t.Helper()
	committed, ends := e.offsets()
	for p, end := range ends {
		if end > 0 && committed[p] != end {
			e.t.Errorf("partition %d: committed %d, want its end %d (committed %v, ends %v)", p, committed[p], end, committed, ends)
		}
	}
}

// verdict is a consumer's BeforeMark.
type verdict struct {
	m       kafka.Message
	claimed bool
	err     error
}

func (v verdict) nothingToDo() bool {
	return !v.claimed && (errors.Is(v.err, fencedwrite.ErrNotClaimable) || errors.Is(v.err, fencedwrite.ErrNotFound))
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

// gate is a dialer to the brokers that the test can take down: Down cuts
// every connection it opened and refuses new ones (their dials fail at
// once) until Up. What a client sees of brokers gone or a network cut, for
// this client alone.
type gate struct {
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newGate(t *testing.T) *gate {
	g := &gate{conns: map[net.Conn]bool{}}
	t.Cleanup(g.Down)
	return g
}

// Dial is kafka.Config.Dial.
func (g *gate) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	down := g.down
	g.mu.Unlock()
	if down {
		return nil, errors.New("gate: the brokers are unreachable")
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		_ = c.Close()
		return nil, errors.New("gate: the brokers are unreachable")
	}
	g.conns[c] = true
	return c, nil
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
