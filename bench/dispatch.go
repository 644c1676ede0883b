package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/dispatch/rabbitmq"
)

// dispatchResult is how long a job waited from its enqueue's COMMIT to its
// claim's, with the table scan alone, and with RabbitMQ's or Kafka's hints
// beside it.
type dispatchResult struct {
	Scan   float64 `json:"scan_interval_s"`
	Jobs   int     `json:"jobs_per_mode"`
	Rounds int     `json:"rounds"`
	// ScanP50 and ScanP99 are the scan's latencies, in milliseconds;
	// BrokerP50 and BrokerP99 the broker's (publish after the enqueue
	// committed, confirm included, then delivery, hint and claim by id).
	ScanP50   float64 `json:"scan_p50_ms"`
	ScanP99   float64 `json:"scan_p99_ms"`
	BrokerP50 float64 `json:"broker_p50_ms"`
	BrokerP99 float64 `json:"broker_p99_ms"`
	// Hinted is the share of the broker mode's jobs its hints claimed (the
	// rest the scan did first).
	Hinted float64 `json:"broker_hinted_share"`
	// KafkaP50, KafkaP99 and KafkaHinted are the same through Kafka
	// (publish acknowledged by every in-sync replica, fetch, hint, claim by
	// id); Kafka names the cluster (an in-process kfake unless
	// FENCEKIT_BENCH_KAFKA).
	KafkaP50    float64 `json:"kafka_p50_ms"`
	KafkaP99    float64 `json:"kafka_p99_ms"`
	KafkaHinted float64 `json:"kafka_hinted_share"`
	Kafka       string  `json:"kafka"`
}

// The dispatch modes a round measures.
const (
	modeScan = iota
	modeRabbitMQ
	modeKafka
	modes
)

// benchKafka is the Kafka cluster of the section: FENCEKIT_BENCH_KAFKA's
// brokers (comma-separated host:port), or else an in-process cluster that
// speaks Kafka's wire protocol (franz-go's kfake: no Kafka server can be
// installed on fencekit's machines), which close stops.
func benchKafka() (brokers []string, name string, close func(), err error) {
	if env := os.Getenv("FENCEKIT_BENCH_KAFKA"); env != "" {
		return strings.Split(env, ","), env, func() {}, nil
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		return nil, "", nil, fmt.Errorf("start an in-process Kafka: %w", err)
	}
	return c.ListenAddrs(), "in-process kfake, 3 brokers", c.Close, nil
}

// dispatchScan is both modes' scan interval: scaled down like the
// takeover's, so that the scan's latency is measured in a short run.
const dispatchScan = time.Second

// benchAMQP is the broker's URL: FENCEKIT_BENCH_AMQP, FENCEKIT_TEST_AMQP,
// or the local broker (scripts/ensure-rabbitmq.sh).
func benchAMQP() string {
	for _, v := range []string{"FENCEKIT_BENCH_AMQP", "FENCEKIT_TEST_AMQP"} {
		if u := os.Getenv(v); u != "" {
			return u
		}
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// dispatchSection enqueues jobs one at a time at random intervals (so that
// each lands at a random phase of the scan) into a running worker, in
// rounds that rotate the table scan alone, RabbitMQ and Kafka, and
// measures enqueue → claim.
func dispatchSection(ctx context.Context, jobs, rounds int) (dispatchResult, error) {
	res := dispatchResult{Scan: dispatchScan.Seconds(), Jobs: jobs * rounds, Rounds: rounds}
	var b [4]byte
	_, _ = crand.Read(b[:])
	broker := rabbitmq.Config{URL: benchAMQP(), Queue: "fencekit-bench-" + hex.EncodeToString(b[:]), Name: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer deleteQueue(broker)
	brokers, kafkaName, closeKafka, err := benchKafka()
	if err != nil {
		return res, err
	}
	defer closeKafka()
	res.Kafka = kafkaName
	topic := "fencekit-bench-" + hex.EncodeToString(b[:])
	kcfg := kafka.Config{Brokers: brokers, Topic: topic, Group: topic, Partitions: 6, Name: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m, err := newMariaDB(ctx, "dispatch", nil)
	if err != nil {
		return res, err
	}
	defer m.close()
	raw, err := m.raw()
	if err != nil {
		return res, err
	}
	defer raw.Close()
	db, err := m.fenced(nil)
	if err != nil {
		return res, err
	}
	defer db.Close()
	lats := make([][]float64, modes)
	hinted, n := make([]int, modes), make([]int, modes)
	for round := range rounds {
		for i := range modes {
			mode := (round + i) % modes // rotate which mode goes first
			lat, h, err := dispatchRound(ctx, raw, db, jobs, jobs*(round*modes+i), mode, broker, kcfg)
			if err != nil {
				return res, err
			}
			lats[mode] = append(lats[mode], lat...)
			hinted[mode] += h
			n[mode] += len(lat)
		}
	}
	res.ScanP50, res.ScanP99 = quantile(lats[modeScan], 0.5), quantile(lats[modeScan], 0.99)
	res.BrokerP50, res.BrokerP99 = quantile(lats[modeRabbitMQ], 0.5), quantile(lats[modeRabbitMQ], 0.99)
	res.Hinted = float64(hinted[modeRabbitMQ]) / float64(max(n[modeRabbitMQ], 1))
	res.KafkaP50, res.KafkaP99 = quantile(lats[modeKafka], 0.5), quantile(lats[modeKafka], 0.99)
	res.KafkaHinted = float64(hinted[modeKafka]) / float64(max(n[modeKafka], 1))
	return res, nil
}

// dispatchRound runs one worker and enqueues jobs into it; it returns each
// job's enqueue → claim latency in milliseconds, and how many of them a
// hint claimed.
func dispatchRound(ctx context.Context, raw, db *sql.DB, jobs, first, mode int, broker rabbitmq.Config, kcfg kafka.Config) ([]float64, int, error) {
	var err error
	var (
		mu        sync.Mutex
		claimedAt = map[int64]time.Time{}
		done      = make(chan struct{})
		hints     int
	)
	s := workerSettings{Workers: 16, Scan: dispatchScan, Provider: instantProvider{},
		Claimed: func(id int64, _ bool) {
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if _, ok := claimedAt[id]; !ok {
				claimedAt[id] = at
				if len(claimedAt) == jobs {
					close(done)
				}
			}
		},
		Passed: func(hinted int) { mu.Lock(); hints += hinted; mu.Unlock() },
	}
	var publish func(id int64, key string) error
	switch mode {
	case modeRabbitMQ:
		s.Broker = &broker
		pub, err := rabbitmq.NewDispatcher(broker)
		if err != nil {
			return nil, 0, err
		}
		defer pub.Close()
		publish = func(id int64, _ string) error { return pub.Publish(ctx, id) }
	case modeKafka:
		s.Kafka = &kcfg
		pub, err := kafka.NewDispatcher(kcfg)
		if err != nil {
			return nil, 0, err
		}
		defer pub.Close()
		publish = func(id int64, key string) error { return pub.Publish(ctx, kafka.Due{ID: id, OperationKey: key}) }
	}
	stop, err := startWorker(ctx, db, s)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = stop(context.WithoutCancel(ctx)) }()
	if publish != nil {
		// Connect the publisher (a message for no job: its claim finds
		// nothing) and let the consumer connect before the clock runs (a
		// Kafka consumer is assigned its partitions before startWorker
		// returns).
		if err := publish(1<<62, "bench-warm-up"); err != nil {
			return nil, 0, err
		}
	}
	time.Sleep(300 * time.Millisecond)
	rng := rand.New(rand.NewPCG(uint64(first), 7))
	enqueuedAt := map[int64]time.Time{}
	for i := first; i < first+jobs; i++ {
		time.Sleep(time.Duration(rng.Int64N(int64(60 * time.Millisecond)))) // arrivals at random phases of the scan
		if err := enqueue(ctx, raw, i, 1); err != nil {
			return nil, 0, err
		}
		at := time.Now() // the enqueue committed
		var id int64
		if err := raw.QueryRowContext(ctx, "SELECT id FROM refund_jobs WHERE operation_key = ?", request(i).OperationKey).Scan(&id); err != nil {
			return nil, 0, err
		}
		enqueuedAt[id] = at
		if publish != nil {
			_ = publish(id, request(i).OperationKey) // a publish that fails leaves the job to the scan, measured as such
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		mu.Lock()
		n := len(claimedAt)
		mu.Unlock()
		return nil, 0, fmt.Errorf("only %d of %d jobs claimed within a minute", n, jobs)
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]float64, 0, jobs)
	for id, at := range enqueuedAt {
		c, ok := claimedAt[id]
		if !ok {
			return nil, 0, fmt.Errorf("job %d was never claimed, yet %d jobs were", id, len(claimedAt))
		}
		out = append(out, float64(c.Sub(at))/float64(time.Millisecond))
	}
	return out, hints, nil
}

func deleteQueue(c rabbitmq.Config) {
	conn, err := amqp.Dial(c.URL)
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueueDelete(c.Queue, false, false, false)
	}
}

// redactedURL hides a URL's password.
func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
