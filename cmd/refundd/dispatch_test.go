package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/internal/brokertest"
	"github.com/fencekit/fencekit/internal/kafkatest"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

func testAMQP() string { return brokertest.URL() }

// testQueue is a queue of the test's own, deleted when it ends.
func testQueue(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	q := "fencekit-test-refundd-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := amqp.Dial(testAMQP())
		if err != nil {
			t.Errorf("delete queue %s: %v", q, err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDelete(q, false, false, false)
		}
		if err != nil {
			t.Errorf("delete queue %s: %v", q, err)
		}
	})
	return q
}

// refundd run -dispatch rabbitmq claims a job that refundd enqueue
// -amqp-url published, with a scan so rare that only the message can have
// brought it.
func TestRunDispatchesThroughRabbitMQ(t *testing.T) {
	brokertest.Shared(t)
	dsn := migratedDSN(t)
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec_run_test")
	srv := fakeprovider.Start()
	defer srv.Close()
	srv.AddPayment("pay-mq-1", 5000, "EUR")
	queue := testQueue(t)
	passes := make(chan worker.PassResult, 100)
	startRunWith(t, dsn, func(f *runFlags) {
		f.hooks.Pass = func(p worker.PassResult) { passes <- p }
	}, "-scan", "1h", "-provider-url", srv.URL(), "-dispatch", "rabbitmq", "-amqp-url", testAMQP(), "-amqp-queue", queue)
	firstPass(t, passes)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"enqueue", "-dsn", dsn, "-key", "mq-1", "-payment", "pay-mq-1", "-amount", "12.50", "-currency", "EUR",
		"-amqp-url", testAMQP(), "-amqp-queue", queue}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "published to amqp://guest:xxxxx@") {
		t.Fatalf("refundd enqueue said %q, want the job published (and the password hidden)", out.String())
	}
	select {
	case <-srv.Executed("mq-1", 1):
	case <-time.After(time.Minute):
		t.Fatal("refundd run never sent the refund")
	}
	claimedByTheMessage(t, passes)
}

// refundd run -dispatch kafka claims a job that refundd enqueue
// -kafka-brokers published, with a scan so rare that only the message can
// have brought it.
func TestRunDispatchesThroughKafka(t *testing.T) {
	k := kafkatest.New(t)
	topic := k.Topic(t, 3)
	brokers := strings.Join(k.Brokers, ",")
	dsn := migratedDSN(t)
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec_run_test")
	srv := fakeprovider.Start()
	defer srv.Close()
	srv.AddPayment("pay-kafka-1", 5000, "EUR")
	passes := make(chan worker.PassResult, 100)
	startRunWith(t, dsn, func(f *runFlags) {
		f.hooks.Pass = func(p worker.PassResult) { passes <- p }
	}, "-scan", "1h", "-provider-url", srv.URL(), "-dispatch", "kafka", "-kafka-brokers", brokers, "-kafka-topic", topic,
		"-kafka-group", topic, "-kafka-session-timeout", k.SessionTimeout.String())
	firstPass(t, passes)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"enqueue", "-dsn", dsn, "-key", "kafka-1", "-payment", "pay-kafka-1", "-amount", "12.50", "-currency", "EUR",
		"-kafka-brokers", brokers, "-kafka-topic", topic}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "published to "+brokers+", topic "+topic) {
		t.Fatalf("refundd enqueue said %q, want the job published to the topic", out.String())
	}
	select {
	case <-srv.Executed("kafka-1", 1):
	case <-time.After(time.Minute):
		t.Fatal("refundd run never sent the refund")
	}
	claimedByTheMessage(t, passes)
}

// firstPass waits for refundd run's first pass, over an empty table.
func firstPass(t *testing.T, passes <-chan worker.PassResult) {
	t.Helper()
	select {
	case <-passes:
	case <-time.After(time.Minute):
		t.Fatal("refundd run never scanned")
	}
}

// claimedByTheMessage waits for the pass that claims the one job through
// its message, and fails if a pass claims it otherwise.
func claimedByTheMessage(t *testing.T, passes <-chan worker.PassResult) {
	t.Helper()
	for {
		select {
		case p := <-passes:
			if p.Hinted == 1 {
				return
			}
			if p.Claimed > 0 {
				t.Fatalf("pass %+v claimed the job without the message", p)
			}
		case <-time.After(time.Minute):
			t.Fatal("no pass claimed the job through the message")
		}
	}
}
