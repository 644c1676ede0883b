package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/worker"
)

// A message is a hint, never a right: whatever Kafka does with it, the
// worker's fenced claim by id decides, every job is executed by the
// provider once, and an offset is committed only once its record was
// judged. Each case has its own database, Kafka (kafkatest: a fake of its
// own, or $FENCEKIT_TEST_KAFKA's), topic and group.
func TestKafkaDispatch(t *testing.T) {
	t.Run("a published job is claimed through its hint, keyed by its operation key", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 3)
		w := e.idle("A", nil)
		verdicts, delivered := make(chan verdict, 10), make(chan kafka.Message, 10)
		stop := e.consume("A", w, kafka.Hooks{
			Delivered:  func(m kafka.Message) { delivered <- m },
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} },
		}, nil)
		due := e.enqueue("op-1")
		e.publish(e.dispatcher(nil), due)
		if m := await(t, delivered, "delivery"); m.ID != due.ID || m.Key != due.OperationKey {
			t.Fatalf("delivered %+v, want job %d keyed by its operation key %q", m, due.ID, due.OperationKey)
		}
		if v := await(t, verdicts, "verdict"); v.m.ID != due.ID || !v.claimed || v.err != nil {
			t.Fatalf("verdict %+v, want job %d claimed", v, due.ID)
		}
		e.settled("op-1")
		e.claimedOnce("op-1")
		stop()
		e.everyOffsetCommitted()
	})

	t.Run("a stale hint for a settled job or an unknown id is dropped and its offset committed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 1)
		done := e.enqueue("done")
		w := e.worker("A", nil, nil) // its first pass claims the job by the scan
		e.settled("done")
		verdicts := make(chan verdict, 10)
		stop := e.consume("A", w, kafka.Hooks{BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} }}, nil)
		// Reordered: the settled job's hint comes after one for an id that
		// does not exist (yet, or any more), on the one partition.
		e.publish(e.dispatcher(nil), kafka.Due{ID: done.ID + 1_000_000, OperationKey: "nobody"}, done)
		if v := await(t, verdicts, "verdict"); v.claimed || !errors.Is(v.err, fencedwrite.ErrNotFound) {
			t.Fatalf("verdict for an unknown id %+v, want nothing to do (ErrNotFound)", v)
		}
		if v := await(t, verdicts, "verdict"); v.m.ID != done.ID || v.claimed || !errors.Is(v.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("verdict for a settled job %+v, want nothing to do (ErrNotClaimable)", v)
		}
		e.claimedOnce("done")
		stop()
		e.everyOffsetCommitted()
	})
}

// Bad settings are refused, each named.
func TestConfigIsValidated(t *testing.T) {
	_, err := kafka.NewDispatcher(kafka.Config{Brokers: []string{"nope", "h:0"}, Topic: "bad topic", Partitions: -1,
		RetryDelay: time.Second, RetryMax: time.Millisecond, SessionTimeout: time.Second, HeartbeatInterval: 2 * time.Second})
	if !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	for _, field := range []string{"Brokers", "Topic", "Partitions", "RetryMax", "HeartbeatInterval"} {
		if !containsField(err, "kafka.Config."+field) {
			t.Errorf("err %v does not name kafka.Config.%s", err, field)
		}
	}
	if _, err := kafka.NewConsumer(kafka.Config{Brokers: []string{"127.0.0.1:9092"}}, nil, kafka.Hooks{}); !containsField(err, "worker") {
		t.Errorf("a consumer without a worker: %v, want the field named", err)
	}
	d, err := kafka.NewDispatcher(kafka.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Publish(context.Background(), kafka.Due{ID: 0, OperationKey: ""})
	for _, field := range []string{"kafka.Due[0].ID", "kafka.Due[0].OperationKey"} {
		if !containsField(err, field) {
			t.Errorf("a publish of nobody: %v, want %s named", err, field)
		}
	}
}

func containsField(err error, field string) bool {
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

var (
	_ = fmt.Sprint
	_ = slices.Sort[[]int]
	_ sync.Mutex
	_ atomic.Bool
	_ = kerr.UnknownTopicID
	_ = kfake.NumBrokers
	_ = kgo.SeedBrokers
	_ kmsg.Key
	_ worker.Hint
)
