// Package kafkatest gives tests the Kafka they run against: a real cluster
// named by $FENCEKIT_TEST_KAFKA, or else an in-process cluster that speaks
// Kafka's wire protocol (franz-go's kfake, which franz-go's own tests use),
// started for the test alone. No Kafka server package can be installed on
// fencekit's machines, so the default run never needs one.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Env names the variable that points the tests at a real cluster:
// comma-separated host:port of its brokers.
const Env = "FENCEKIT_TEST_KAFKA"

// A Cluster is one test's Kafka.
type Cluster struct {
	// Brokers are the seed brokers.
	Brokers []string
	// Fake is the in-process cluster, nil on a real one: what only a fake
	// can do (inject a broker's answer, move a partition's leader) is done
	// through it.
	Fake *kfake.Cluster
	// SessionTimeout is the shortest group session the cluster takes:
	// 500 ms on the fake, 6 s (Kafka's group.min.session.timeout.ms) on a
	// real one.
	SessionTimeout time.Duration
}

// New returns the test's cluster: $FENCEKIT_TEST_KAFKA's, or a fake of
// three brokers closed when the test ends.
func New(t testing.TB) *Cluster {
	t.Helper()
	if env := os.Getenv(Env); env != "" {
		return &Cluster{Brokers: strings.Split(env, ","), SessionTimeout: 6 * time.Second}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("start an in-process Kafka (kfake): %v", err)
	}
	t.Cleanup(c.Close)
	return &Cluster{Brokers: c.ListenAddrs(), Fake: c, SessionTimeout: 500 * time.Millisecond}
}

// Admin is an admin client of the cluster, closed when the test ends.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// Topic names a topic of the test's own, created with partitions
// partitions and deleted when the test ends (on a real cluster; a fake
// goes with its test).
func (c *Cluster) Topic(t testing.TB, partitions int32) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ToLower(unsafeName.ReplaceAllString(t.Name(), "-"))
	if len(name) > 80 {
		name = name[:80]
	}
	topic := "fencekit-test-" + name + "-" + hex.EncodeToString(b[:])
	adm := c.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if c.Fake == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := adm.DeleteTopic(ctx, topic); err != nil {
				t.Errorf("delete topic %s: %v", topic, err)
			}
		})
	}
	return topic
}
