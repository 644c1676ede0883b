package kafka_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dispatchtest"
	"github.com/fencekit/fencekit/internal/kafkatest"
	"github.com/fencekit/fencekit/worker"
)

// env is one test's database and fake provider (dispatchtest), Kafka (see
// kafkatest) and topic and group of its own.
type env struct {
	*dispatchtest.Env
	k     *kafkatest.Cluster
	topic string
	group string
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	k := kafkatest.New(t)
	topic := k.Topic(t, partitions)
	return &env{Env: dispatchtest.New(t), k: k, topic: topic, group: topic + "-group"}
}

func (e *env) config(name string) kafka.Config {
	return kafka.Config{Brokers: e.k.Brokers, Topic: e.topic, Group: e.group, Name: "test-" + name,
		SessionTimeout: e.k.SessionTimeout, HeartbeatInterval: e.k.SessionTimeout / 5, CommitInterval: 100 * time.Millisecond,
		RetryDelay: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, MetadataMaxAge: 200 * time.Millisecond,
		PublishTimeout: 10 * time.Second, Logger: e.Logger(name)}
}

// enqueue enqueues a refund (dispatchtest.Env.Enqueue) and names its job
// for a publish.
func (e *env) enqueue(key string) kafka.Due {
	e.T.Helper()
	job := e.Enqueue(key)
	return kafka.Due{ID: job.ID, OperationKey: job.OperationKey}
}

// consume runs a Consumer for w until the test ends or stop is called
// (which waits for Run to return: the judged offsets committed and the
// group left).
func (e *env) consume(name string, w *worker.Client, hooks kafka.Hooks, mod func(*kafka.Config)) (stop func()) {
	e.T.Helper()
	cfg := e.config(name)
	if mod != nil {
		mod(&cfg)
	}
	c, err := kafka.NewConsumer(cfg, w, hooks)
	if err != nil {
		e.T.Fatal(err)
	}
	return dispatchtest.Consume(e.T, name, c.Run)
}

func (e *env) dispatcher(mod func(*kafka.Config)) *kafka.Dispatcher {
	e.T.Helper()
	cfg := e.config("dispatcher")
	if mod != nil {
		mod(&cfg)
	}
	d, err := kafka.NewDispatcher(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *env) publish(d *kafka.Dispatcher, jobs ...kafka.Due) {
	e.T.Helper()
	if err := d.Publish(e.T.Context(), jobs...); err != nil {
		e.T.Fatal(err)
	}
}

// committed is the group's committed offset of each partition of the
// topic (absent: none), and ends each partition's end offset.
func (e *env) offsets() (committed, ends map[int32]int64) {
	e.T.Helper()
	adm := e.k.Admin(e.T)
	ctx, cancel := context.WithTimeout(context.Background(), dispatchtest.Patience)
	defer cancel()
	fetched, err := adm.FetchOffsets(ctx, e.group)
	if err != nil {
		e.T.Fatal(err)
	}
	committed = map[int32]int64{}
	for p, o := range fetched[e.topic] {
		if o.Err == nil && o.At >= 0 {
			committed[p] = o.At
		}
	}
	lo, err := adm.ListEndOffsets(ctx, e.topic)
	if err != nil {
		e.T.Fatal(err)
	}
	ends = map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return committed, ends
}

// everyOffsetCommitted checks the group committed every partition up to its
// end: every record was judged, and no late verdict rewound a commit.
func (e *env) everyOffsetCommitted() {
	e.T.Helper()
	committed, ends := e.offsets()
	for p, end := range ends {
		if end > 0 && committed[p] != end {
			e.T.Errorf("partition %d: committed %d, want its end %d (committed %v, ends %v)", p, committed[p], end, committed, ends)
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
	return dispatchtest.Await(t, ch, what)
}

// gate is a dialer to the brokers that the test can take down: Down cuts
// every connection it opened and refuses new ones (their dials fail at
// once) until Up. What a client sees of brokers gone or a network cut, for
// this client alone.
type gate struct{ dispatchtest.Cut }

func newGate(t *testing.T) *gate {
	g := &gate{}
	t.Cleanup(g.Down)
	return g
}

var errUnreachable = errors.New("gate: the brokers are unreachable")

// Dial is kafka.Config.Dial.
func (g *gate) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.IsDown() {
		return nil, errUnreachable
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if !g.Admit(c) {
		return nil, errUnreachable
	}
	return c, nil
}
