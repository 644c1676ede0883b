package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/dispatch/rabbitmq"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/brokertest"
	"github.com/fencekit/fencekit/internal/dispatchtest"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// A message is a hint, never a right: whatever the broker does with it, the
// worker's fenced claim by id decides, and every job is executed by the
// provider exactly once.
func TestBrokerDispatch(t *testing.T) {
	// Each case has its own database and queue.
	t.Run("a published id is claimed through the hint", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w := e.Idle("A", nil) // over an empty table: the scan claims nothing later
		verdicts := make(chan verdict, 10)
		e.consume("A", w, rabbitmq.Hooks{BeforeAck: func(id int64, claimed bool, err error) { verdicts <- verdict{id, claimed, err} }}, nil)
		job := e.Enqueue("k")
		e.publish(e.dispatcher(nil), job.ID)
		if v := await(t, verdicts, "verdict"); v.id != job.ID || !v.claimed || v.err != nil {
			t.Fatalf("verdict %+v, want job %d claimed", v, job.ID)
		}
		e.Settled("k")
		e.DoneOnce("k")
	})

	t.Run("a duplicated message claims once and the second finds nothing", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w := e.Idle("A", nil)
		verdicts := make(chan verdict, 10)
		e.consume("A", w, rabbitmq.Hooks{BeforeAck: func(id int64, claimed bool, err error) { verdicts <- verdict{id, claimed, err} }}, nil)
		job := e.Enqueue("dup")
		d := e.dispatcher(nil)
		e.publish(d, job.ID)
		e.publish(d, job.ID)
		claims, nothing := 0, 0
		for range 2 {
			switch v := await(t, verdicts, "verdict"); {
			case v.claimed && v.err == nil:
				claims++
			case !v.claimed && errors.Is(v.err, fencedwrite.ErrNotClaimable):
				nothing++
			default:
				t.Fatalf("verdict %+v, want claimed or nothing to do", v)
			}
		}
		if claims != 1 || nothing != 1 {
			t.Fatalf("%d claims and %d with nothing to do, want one each", claims, nothing)
		}
		e.Settled("dup")
		e.DoneOnce("dup")
	})

	t.Run("a stale message for a settled job or an unknown id finds nothing", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		job := e.Enqueue("done")
		w := e.Worker("A", nil, nil) // its first pass claims the job by the scan
		e.Settled("done")
		verdicts := make(chan verdict, 10)
		e.consume("A", w, rabbitmq.Hooks{BeforeAck: func(id int64, claimed bool, err error) { verdicts <- verdict{id, claimed, err} }}, nil)
		d := e.dispatcher(nil)
		// Reordered: the settled job's message comes after a message for an
		// id that does not exist (yet, or any more).
		e.publish(d, job.ID+1_000_000, job.ID)
		if v := await(t, verdicts, "verdict"); v.claimed || !errors.Is(v.err, fencedwrite.ErrNotFound) {
			t.Fatalf("verdict for an unknown id %+v, want nothing to do (ErrNotFound)", v)
		}
		if v := await(t, verdicts, "verdict"); v.id != job.ID || v.claimed || !errors.Is(v.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("verdict for a settled job %+v, want nothing to do (ErrNotClaimable)", v)
		}
		e.DoneOnce("done")
	})

	t.Run("a message its consumer died holding goes to another consumer", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w := e.Idle("B", nil)
		job := e.Enqueue("k")
		e.publish(e.dispatcher(nil), job.ID)

		// A consumer takes the message and dies without acknowledging it.
		conn, err := amqp.Dial(brokerURL())
		if err != nil {
			t.Fatal(err)
		}
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Qos(1, 0, false); err != nil {
			t.Fatal(err)
		}
		deliveries, err := ch.Consume(e.queue, "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m := await(t, deliveries, "delivery to the consumer that dies"); string(m.Body) != strconv.FormatInt(job.ID, 10) {
			t.Fatalf("delivered %q, want the job id %d", m.Body, job.ID)
		}
		_ = conn.Close()

		delivered, verdicts := make(chan bool, 10), make(chan verdict, 10)
		e.consume("B", w, rabbitmq.Hooks{
			Delivered: func(_ int64, redelivered bool) { delivered <- redelivered },
			BeforeAck: func(id int64, claimed bool, err error) { verdicts <- verdict{id, claimed, err} },
		}, nil)
		if !await(t, delivered, "redelivery") {
			t.Fatal("the message came to the second consumer not marked redelivered")
		}
		if v := await(t, verdicts, "verdict"); !v.claimed {
			t.Fatalf("verdict %+v, want the job claimed on the redelivery", v)
		}
		e.Settled("k")
		e.DoneOnce("k")
	})

	t.Run("a consumer killed after its worker claimed leaves the job to the lease and takeover path", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		// A's leases expire at once: a takeover may begin as soon as A is
		// gone.
		wA := e.Idle("A", func(c *worker.Config) { c.Lease = time.Microsecond })
		job := e.Enqueue("k")
		frozen := make(chan struct{}) // A's provider call executes and its answer never comes back
		t.Cleanup(func() { close(frozen) })
		e.Srv.Script("k", fakeprovider.Fault{Hold: frozen})

		var consumerA *rabbitmq.Consumer
		ackedA := make(chan error, 10)
		ctxA, cancelA := context.WithCancel(context.Background())
		consumerA, err := rabbitmq.NewConsumer(e.config("A"), wA, rabbitmq.Hooks{
			BeforeAck: func(id int64, claimed bool, err error) {
				if !claimed {
					t.Errorf("A's verdict: claimed %v, %v; want claimed", claimed, err)
				}
				// A dies between its worker's claim and the acknowledgement.
				cancelA()
				consumerA.Close()
			},
			Acked: func(_ int64, err error) { ackedA <- err },
		})
		if err != nil {
			t.Fatal(err)
		}
		runA := make(chan struct{})
		go func() { defer close(runA); _ = consumerA.Run(ctxA) }()
		t.Cleanup(func() { cancelA(); <-runA })
		e.publish(e.dispatcher(nil), job.ID)
		if err := await(t, ackedA, "A's acknowledgement"); err == nil {
			t.Fatal("A acknowledged the message on a connection it had closed")
		}
		<-runA
		<-e.Srv.Executed("k", 1) // A's call reached the provider

		// B's first pass takes the job over (A's lease expired), and the
		// message, delivered again, finds nothing to do.
		passesB := make(chan worker.PassResult, 100)
		wB := e.Worker("B", passesB, nil)
		if p := await(t, passesB, "first pass of B"); p.TakenOver != 1 {
			t.Fatalf("B's first pass %+v, want A's job taken over", p)
		}
		delivered, verdicts := make(chan bool, 10), make(chan verdict, 10)
		e.consume("B", wB, rabbitmq.Hooks{
			Delivered: func(_ int64, redelivered bool) { delivered <- redelivered },
			BeforeAck: func(id int64, claimed bool, err error) { verdicts <- verdict{id, claimed, err} },
		}, nil)
		if !await(t, delivered, "redelivery to B") {
			t.Fatal("the message came to B not marked redelivered")
		}
		if v := await(t, verdicts, "B's verdict"); v.claimed || !errors.Is(v.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("B's verdict %+v, want nothing to do (ErrNotClaimable)", v)
		}
		e.Settled("k")
		e.DoneOnce("k")
		if j := e.Job("k"); j.Attempt != 2 {
			t.Fatalf("k settled at attempt %d, want 2 (A's claim, B's takeover)", j.Attempt)
		}
	})

	t.Run("the broker gone under load: the scan finishes every job and the consumer reconnects", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		g := newGate(t, brokerAddr(t))
		e.outage(g.Dial, g.Down, g.Up)
	})

	t.Run("a queue deleted by an operator is declared again and consumed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w := e.Idle("A", nil)
		connected, verdicts := make(chan int, 10), make(chan verdict, 10)
		e.consume("A", w, rabbitmq.Hooks{
			Connected: func(n int) { connected <- n },
			BeforeAck: func(id int64, claimed bool, err error) { verdicts <- verdict{id, claimed, err} },
		}, nil)
		if n := await(t, connected, "connection"); n != 1 {
			t.Fatalf("connection %d, want the first", n)
		}
		conn, err := amqp.Dial(brokerURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDelete(e.queue, false, false, false); err != nil {
			t.Fatal(err)
		}
		if n := await(t, connected, "reconnection after the queue was deleted"); n != 2 {
			t.Fatalf("connection %d, want the second", n)
		}
		job := e.Enqueue("k")
		e.publish(e.dispatcher(nil), job.ID)
		if v := await(t, verdicts, "verdict"); v.id != job.ID || !v.claimed {
			t.Fatalf("verdict %+v, want job %d claimed by its hint", v, job.ID)
		}
		e.Settled("k")
		e.DoneOnce("k")
	})

	t.Run("a queue purged by an operator loses no job: the scan finishes them", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w := e.Idle("A", func(c *worker.Config) { c.ScanInterval = 200 * time.Millisecond })
		d := e.dispatcher(nil)
		var keys []string
		var ids []int64
		for i := range 20 {
			k := fmt.Sprintf("purged-%02d", i)
			keys = append(keys, k)
			ids = append(ids, e.Enqueue(k).ID)
		}
		e.publish(d, ids...)
		conn, err := amqp.Dial(brokerURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if n, err := ch.QueuePurge(e.queue, false); err != nil || n != len(ids) {
			t.Fatalf("purge: %d messages, %v; want the %d published", n, err, len(ids))
		}
		delivered := make(chan int64, 100)
		e.consume("A", w, rabbitmq.Hooks{Delivered: func(id int64, _ bool) { delivered <- id }}, nil)
		e.Settled(keys...)
		e.DoneOnce(keys...)
		select {
		case id := <-delivered:
			t.Fatalf("job %d was delivered after the purge", id)
		default:
		}
	})
}

// Bad settings are refused, each named.
func TestConfigIsValidated(t *testing.T) {
	_, err := rabbitmq.NewDispatcher(rabbitmq.Config{URL: "http://nope", PublishAttempts: -1, ReconnectDelay: time.Second, ReconnectMax: time.Millisecond})
	if !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	for _, field := range []string{"rabbitmq.Config.URL", "rabbitmq.Config.PublishAttempts", "rabbitmq.Config.ReconnectMax"} {
		if !dispatchtest.ContainsField(err, field) {
			t.Errorf("err %v does not name %s", err, field)
		}
	}
	if _, err := rabbitmq.NewConsumer(rabbitmq.Config{URL: brokerURL()}, nil, rabbitmq.Hooks{}); !dispatchtest.ContainsField(err, "worker") {
		t.Errorf("a consumer without a worker: %v, want the field named", err)
	}
}

// The broker itself restarted (rabbitmqctl stop_app, start_app) while jobs
// are under way: it closes every connection and refuses new ones, the scan
// finishes every job meanwhile, and the consumer and the dispatcher
// reconnect. It restarts the whole local broker, so it runs alone: the
// broker tests of other packages wait (brokertest.Exclusive).
func TestBrokerRestartedUnderLoad(t *testing.T) {
	e := newEnvWith(t, brokertest.Exclusive)
	ctl := func(cmd string) {
		t.Helper()
		out, err := exec.Command("rabbitmqctl", "-q", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("rabbitmqctl %s (the test restarts the broker at %s; it needs rabbitmqctl on this machine): %v: %s", cmd, brokerURL(), err, out)
		}
	}
	started := true
	t.Cleanup(func() {
		if !started {
			ctl("start_app")
		}
	})
	e.outage(nil, func() { started = false; ctl("stop_app") }, func() { ctl("start_app"); started = true })
}

// outage runs a worker with a 200 ms scan, a consumer and a dispatcher
// (dialling through dial, when set), publishes 30 jobs, takes the broker
// away with down, enqueues 30 more whose publish fails, waits until the
// scan settled all 60, brings the broker back with up, and checks that the
// consumer reconnected and a new message reaches the worker. Every job is
// executed once.
func (e *env) outage(dial func(network, addr string) (net.Conn, error), down, up func()) {
	t := e.T
	t.Helper()
	// The scan is the safety net: every 200 ms here.
	w := e.Worker("A", nil, func(c *worker.Config) { c.ScanInterval = 200 * time.Millisecond })
	connected, verdicts := make(chan int, 10), make(chan verdict, 1000)
	var allSettled atomic.Bool // from then on, no message may claim but the next one's
	e.consume("A", w, rabbitmq.Hooks{
		Connected: func(n int) { connected <- n },
		BeforeAck: func(id int64, claimed bool, err error) {
			if allSettled.Load() {
				verdicts <- verdict{id, claimed, err}
			}
		},
	}, func(c *rabbitmq.Config) { c.Dial = dial })
	if n := await(t, connected, "connection"); n != 1 {
		t.Fatalf("connection %d, want the first", n)
	}
	d := e.dispatcher(func(c *rabbitmq.Config) { c.Dial, c.PublishAttempts, c.ConfirmTimeout = dial, 2, 500*time.Millisecond })
	var keys []string
	batch := func(prefix string, n int) []int64 {
		var ids []int64
		for i := range n {
			k := fmt.Sprintf("%s-%02d", prefix, i)
			keys = append(keys, k)
			ids = append(ids, e.Enqueue(k).ID)
		}
		return ids
	}
	e.publish(d, batch("before", 30)...)
	down() // mid-load: connections cut, dials refused
	if err := d.Publish(t.Context(), batch("during", 30)...); !errors.Is(err, rabbitmq.ErrNotConfirmed) {
		t.Fatalf("publish while the broker is gone: %v, want ErrNotConfirmed", err)
	}
	e.Settled(keys...) // by the scan, while the broker is gone
	// Each job's attempt once settled: a message delivered again that
	// claimed a settled job would raise it. (A verdict reached before the
	// cut may be acknowledged, and seen by BeforeAck, only after the
	// reconnection: claimed, but claimed while its job was still due.)
	settledAt := map[string]int64{}
	for _, k := range keys {
		settledAt[k] = e.Job(k).Attempt
	}
	allSettled.Store(true)
	up()
	if n := await(t, connected, "reconnection"); n < 2 {
		t.Fatalf("connection %d, want a later one", n)
	}
	after := e.Enqueue("after")
	keys = append(keys, "after")
	e.publish(d, after.ID)
	// Messages delivered before the cut come again, and those the cut kept
	// in the queue come now, until the new job's verdict: nothing to do
	// for them (checked below, by the attempts).
	for v := await(t, verdicts, "verdict"); v.id != after.ID; v = await(t, verdicts, "verdict") {
	}
	e.Settled(keys...)
	for k, attempt := range settledAt {
		if j := e.Job(k); j.Attempt != attempt {
			t.Fatalf("a message delivered again claimed job %d (%s) after it settled: attempt %d, then %d", j.ID, k, attempt, j.Attempt)
		}
	}
	e.DoneOnce(keys...)
}
