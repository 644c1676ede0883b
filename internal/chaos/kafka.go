package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencekit/fencekit/dispatch/kafka"
)

// DispatchKafka is the dispatch (--dispatch) through Kafka: the fleet
// consumes the hints the chaos process publishes to an in-process Kafka
// cluster (franz-go's kfake: no Kafka server can be installed on fencekit's
// machines), and Kafka's faults join the others.
const DispatchKafka = "kafka"

// Kafka's fault kinds, as faults_by_kind names them (--dispatch kafka);
// duplicate and stale publishes are counted as the broker's
// (faultBrokerDuplicate, faultBrokerStale).
const (
	faultKafkaLeaderMoved = "kafka_partition_leader_moved"
	faultKafkaRebalance   = "kafka_group_rebalanced"
)

// The Kafka cluster of a run: three brokers, a topic of six partitions, and
// sessions short enough that a killed process's partitions move within the
// run.
const (
	chaosKafkaBrokers    = 3
	chaosKafkaPartitions = 6
	chaosKafkaSession    = 2 * time.Second
)

// kafkaRun is the Kafka side of a run with --dispatch kafka: the cluster,
// the chaos process's dispatcher, and the jobs to publish.
type kafkaRun struct {
	cluster      *kfake.Cluster
	brokers      []string
	topic, group string
	pub          *kafka.Dispatcher

	mu        sync.Mutex
	jobs      []kafka.Due // every job, as enqueued
	published int

	members sync.WaitGroup // the transient members not gone yet
}

func newKafkaRun(seed uint64) (*kafkaRun, error) {
	k := &kafkaRun{topic: fmt.Sprintf("fencekit-chaos-%d", seed), group: fmt.Sprintf("fencekit-chaos-%d", seed)}
	var err error
	k.cluster, err = kfake.NewCluster(kfake.NumBrokers(chaosKafkaBrokers), kfake.GroupMinSessionTimeout(time.Second),
		kfake.SeedTopics(chaosKafkaPartitions, k.topic))
	if err != nil {
		return nil, fmt.Errorf("chaos: start an in-process Kafka: %w", err)
	}
	k.brokers = k.cluster.ListenAddrs()
	k.pub, err = kafka.NewDispatcher(kafka.Config{Brokers: k.brokers, Topic: k.topic, Name: "chaos", PublishTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		k.cluster.Close()
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return k, nil
}

// fleetArgs are a fleet process's refundd run flags.
func (k *kafkaRun) fleetArgs() []string {
	return []string{"-dispatch", DispatchKafka, "-kafka-brokers", strings.Join(k.brokers, ","), "-kafka-topic", k.topic,
		"-kafka-group", k.group, "-kafka-session-timeout", chaosKafkaSession.String()}
}

func (k *kafkaRun) add(id int64, key string) {
	k.mu.Lock()
	k.jobs = append(k.jobs, kafka.Due{ID: id, OperationKey: key})
	k.mu.Unlock()
}

// publish publishes jobs; what the brokers did not acknowledge the scan
// finds.
func (k *kafkaRun) publish(ctx context.Context, jobs []kafka.Due) error {
	err := k.pub.Publish(ctx, jobs...)
	if err == nil {
		k.mu.Lock()
		k.published += len(jobs)
		k.mu.Unlock()
	}
	return err
}

// publishAll publishes every job once, before the fleet starts: the
// consumers and the scans race for them.
func (k *kafkaRun) publishAll(ctx context.Context) error {
	k.mu.Lock()
	jobs := append([]kafka.Due(nil), k.jobs...)
	k.mu.Unlock()
	if err := k.publish(ctx, jobs); err != nil {
		return fmt.Errorf("chaos: publish the jobs to the in-process Kafka: %w", err)
	}
	return nil
}

// kafkaFault injects one Kafka fault: 0 moves a partition's leader to
// another broker (the clients' produce and fetch requests meet
// NOT_LEADER_OR_FOLLOWER and find the new one), 1 has a member join the
// fleet's group and leave it again (two rebalances: partitions are
// revoked from the fleet's consumers while their claims are in flight, and
// the member commits nothing), 2 publishes 1 to 8 jobs again, settled ones
// (stale) and others (duplicates) alike.
func (r *chaosRun) kafkaFault(ctx context.Context, kind int) {
	k := r.kafka
	switch kind {
	case 0:
		p := int32(r.intn(chaosKafkaPartitions))
		leader := k.cluster.LeaderFor(k.topic, p)
		to := (leader + 1 + int32(r.intn(chaosKafkaBrokers-1))) % chaosKafkaBrokers
		if k.cluster.MoveTopicPartition(k.topic, p, to) == nil {
			r.count(faultKafkaLeaderMoved, 1)
		}
	case 1:
		hold := time.Duration(200+r.intn(800)) * time.Millisecond
		k.members.Add(1)
		go func() {
			defer k.members.Done()
			r.transientMember(ctx, hold)
		}()
	case 2:
		var jobs []kafka.Due
		k.mu.Lock()
		if n := len(k.jobs); n > 0 {
			for range 1 + r.intn(8) {
				jobs = append(jobs, k.jobs[r.intn(n)])
			}
		}
		k.mu.Unlock()
		if len(jobs) == 0 {
			return
		}
		settled := r.settledAmong(ctx, idsOf(jobs))
		_ = k.publish(ctx, jobs) // a publish lost is one more fault
		r.count(faultBrokerStale, settled)
		r.count(faultBrokerDuplicate, len(jobs)-settled)
	}
}

// kafkaStaleAtTheEnd makes sure a run publishes at least one stale hint:
// when the random republishes of the fault phase hit no settled job (a
// short run whose jobs all settled early), every job, settled by now, is
// published once more. The fleet, still running, drops each as not
// claimable; the invariants checked after (no settled job claimed again)
// cover them.
func (r *chaosRun) kafkaStaleAtTheEnd(ctx context.Context) {
	r.faultMu.Lock()
	stale := r.faults[faultBrokerStale]
	r.faultMu.Unlock()
	if stale > 0 {
		return
	}
	k := r.kafka
	k.mu.Lock()
	all := append([]kafka.Due(nil), k.jobs...)
	k.mu.Unlock()
	if len(all) == 0 {
		return
	}
	settled := r.settledAmong(ctx, idsOf(all))
	if k.publish(ctx, all) == nil {
		r.count(faultBrokerStale, settled)
	}
}

func idsOf(jobs []kafka.Due) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// transientMember joins the fleet's group, holds what it is assigned for
// hold (or until ctx, the fault phase, ends) without judging or committing
// anything, and leaves: what a process that starts and stops again does to
// the group. It waits for its assignment up to 10 s even past the fault
// phase: a rebalance it began is one the fleet went through.
func (r *chaosRun) transientMember(ctx context.Context, hold time.Duration) {
	k := r.kafka
	assigned := make(chan struct{}, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ClientID("chaos/transient-member"), kgo.ConsumerGroup(k.group),
		kgo.ConsumeTopics(k.topic), kgo.DisableAutoCommit(), kgo.SessionTimeout(chaosKafkaSession), kgo.HeartbeatInterval(chaosKafkaSession/4), kgo.RebalanceTimeout(2*chaosKafkaSession),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[k.topic]) > 0 {
				select {
				case assigned <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		r.logf("kafka: transient member: %v", err)
		return
	}
	defer cl.Close()
	pollCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx) // fetched and dropped: never judged, never committed
		}
	}()
	select {
	case <-assigned:
		r.count(faultKafkaRebalance, 1)
	case <-time.After(10 * time.Second):
		g := k.cluster.GroupInfo(k.group)
		if g == nil {
			r.logf("kafka: the transient member was assigned nothing within 10s; no group")
			return
		}
		var members []string
		for _, m := range g.Members {
			members = append(members, fmt.Sprintf("%s:%v", m.ClientID, m.Assignment[k.topic]))
		}
		r.logf("kafka: the transient member was assigned nothing within 10s; the group is %s at epoch %d: %v", g.State, g.Epoch, members)
		return
	}
	select {
	case <-time.After(hold):
	case <-ctx.Done():
	}
}

func (k *kafkaRun) close() {
	_ = k.pub.Close()
	k.cluster.Close()
}
