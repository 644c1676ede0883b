package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Defaults for Config.
const (
	// DefaultTopic is the topic of due refund jobs.
	DefaultTopic = "fencekit.refund_jobs.due"
	// DefaultGroup is the consumer group of the workers.
	DefaultGroup = "fencekit.refundd"
	// DefaultPartitions is the partition count of a topic the dispatcher or
	// the consumer creates because it is missing.
	DefaultPartitions = 12
	// DefaultPublishTimeout bounds one Publish: franz-go retries a produce
	// (leader moves, a broker restarting) until then.
	DefaultPublishTimeout = 10 * time.Second
	// DefaultCommitInterval is how often judged offsets are committed,
	// beside the commits of every rebalance and of leaving the group.
	DefaultCommitInterval = time.Second
	// DefaultSessionTimeout and DefaultHeartbeatInterval are Kafka's
	// (session.timeout.ms, heartbeat.interval.ms): a consumer that vanished
	// without leaving the group keeps its partitions this long.
	DefaultSessionTimeout    = 45 * time.Second
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultRetryDelay is the first wait before a hint whose claim failed
	// is handed to the worker again, and before a poll after one that
	// returned only errors; it doubles up to DefaultRetryMax.
	DefaultRetryDelay = 100 * time.Millisecond
	DefaultRetryMax   = 5 * time.Second
	// DefaultMetadataMaxAge bounds how long a change of the topic's
	// partition count goes unseen by the dispatcher and the consumer.
	DefaultMetadataMaxAge = 30 * time.Second
	// closeWait bounds leaving the group when the consumer stops.
	closeWait = 5 * time.Second
)

// ErrNotPublished means the brokers acknowledged none of some publishes
// within PublishTimeout (a broker unreachable, a topic that does not
// exist): each such message may or may not be in the topic, and franz-go
// may still deliver one later. Either way nothing is lost: a message is a
// hint, and the workers' scan claims the job within one scan interval.
var ErrNotPublished = errors.New("publish not acknowledged by the brokers")

// Config configures a Dispatcher or a Consumer. A zero field takes its
// default; the constructors validate the result once and name every bad
// field.
type Config struct {
	// Brokers are seed brokers, host:port each. Required.
	Brokers []string
	// Topic is the topic of due jobs; DefaultTopic when empty. Every
	// dispatcher and consumer of one fleet uses the same.
	Topic string
	// Group is the consumers' group; DefaultGroup when empty. Every worker
	// process of one fleet uses the same (a second group would hint every
	// job twice: harmless, and useless).
	Group string
	// Partitions is the partition count of the topic when a dispatcher or a
	// consumer finds it missing and creates it (with the brokers' default
	// replication factor). An existing topic is left as it is.
	Partitions int
	// PublishTimeout bounds one Publish.
	PublishTimeout time.Duration
	// CommitInterval is how often judged offsets are committed; at least
	// 100 ms.
	CommitInterval time.Duration
	// SessionTimeout and HeartbeatInterval are the group member's; the
	// session timeout must be within the brokers'
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	SessionTimeout, HeartbeatInterval time.Duration
	// RetryDelay and RetryMax bound the waits before a failed claim's hint
	// is tried again (doubling from the first to the second).
	RetryDelay, RetryMax time.Duration
	// MetadataMaxAge is how often the clients refresh the topic's
	// metadata: partitions added to it are used within this long.
	MetadataMaxAge time.Duration
	// Name names the clients in the brokers' logs (client.id).
	Name string
	// Logger receives the logs; slog.Default() when nil.
	Logger *slog.Logger
	// Dial, when set, opens the connections to the brokers (tests put a
	// gate in between to cut them); franz-go's dialer when nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ClientOpts are further franz-go options for both clients: TLS
	// (kgo.DialTLSConfig) and SASL (kgo.SASL), say. They come after
	// fencekit's own, so they can override them: do not switch off the
	// idempotent producer or turn on autocommitting, which the guarantees
	// above rest on.
	ClientOpts []kgo.Opt
}

func (c Config) withDefaults() Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(DefaultHeartbeatInterval, c.SessionTimeout/3)
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultRetryMax, c.RetryDelay)
	}
	if c.MetadataMaxAge == 0 {
		c.MetadataMaxAge = DefaultMetadataMaxAge
	}
	if c.Name == "" {
		c.Name = "fencekit"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// legalTopic is Kafka's rule for topic names.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &fencedwrite.FieldError{Field: "kafka.Config." + field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(c.Brokers) == 0 {
		bad("Brokers", "is required (host:port of one broker or more)")
	}
	for i, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			bad("Brokers", "%q (number %d) is not host:port: %v", b, i+1, err)
			continue
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			bad("Brokers", "%q (number %d) has no port between 1 and 65535", b, i+1)
		}
		if host == "" {
			bad("Brokers", "%q (number %d) has no host", b, i+1)
		}
	}
	if !legalTopic.MatchString(c.Topic) || c.Topic == "." || c.Topic == ".." {
		bad("Topic", "%q is not a Kafka topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_', '-'; not . or ..)", c.Topic)
	}
	if len(c.Group) > 255 {
		bad("Group", "must be at most 255 bytes, got %d", len(c.Group))
	}
	if c.Partitions < 1 || c.Partitions > 10_000 {
		bad("Partitions", "must be between 1 and 10000, got %d", c.Partitions)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PublishTimeout", c.PublishTimeout}, {"CommitInterval", c.CommitInterval}, {"SessionTimeout", c.SessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"RetryDelay", c.RetryDelay}, {"RetryMax", c.RetryMax}, {"MetadataMaxAge", c.MetadataMaxAge}} {
		if d.v <= 0 {
			bad(d.name, "must be positive, got %v", d.v)
		}
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		bad("HeartbeatInterval", "must be below SessionTimeout (%v), got %v", c.SessionTimeout, c.HeartbeatInterval)
	}
	if c.CommitInterval > 0 && c.CommitInterval < 100*time.Millisecond {
		bad("CommitInterval", "must be at least 100ms (franz-go's least), got %v", c.CommitInterval)
	}
	if c.RetryMax < c.RetryDelay {
		bad("RetryMax", "must not be below RetryDelay (%v), got %v", c.RetryDelay, c.RetryMax)
	}
	return errors.Join(errs...)
}

// clientOpts are a client's options: both clients' own, then role's
// (which side it is, and its own options), then ClientOpts, once.
func (c Config) clientOpts(role string, roleOpts ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.Name + "/" + role),
		kgo.MetadataMaxAge(c.MetadataMaxAge),
		kgo.MetadataMinAge(min(c.MetadataMaxAge, time.Second)),
		kgo.RetryBackoffFn(func(n int) time.Duration { return backoff(c.RetryDelay, c.RetryMax, n) }),
		kgo.WithLogger(kgoLogger{c.Logger.With("kafka", role)}),
	}
	if c.Dial != nil {
		opts = append(opts, kgo.Dialer(c.Dial))
	}
	return slices.Concat(opts, roleOpts, c.ClientOpts)
}

// backoff is the wait before try n (1 the first retry): from first,
// doubling, at most most.
func backoff(first, most time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// topicGone reports whether err says the topic is gone: deleted, and
// perhaps created again under a new topic id.
func topicGone(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
}

// ensureTopic creates the topic when it is missing, with Partitions
// partitions and the brokers' default replication factor. A topic that
// exists is left alone; an error (no right to create topics, say) is only
// logged: the topic may exist all the same, and if it does not, publishing
// fails and the scan claims every job.
func (c Config) ensureTopic(ctx context.Context, cl *kgo.Client) {
	_, err := kadm.NewClient(cl).CreateTopic(ctx, int32(c.Partitions), -1, nil, c.Topic)
	switch {
	case err == nil:
		c.Logger.Info("kafka: created the topic of due jobs", "topic", c.Topic, "partitions", c.Partitions)
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		c.Logger.Warn("kafka: could not create the topic of due jobs (it may exist all the same)", "topic", c.Topic, "err", err)
	}
}

// kgoLogger passes franz-go's warnings and errors to slog.
type kgoLogger struct{ l *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, keyvals...)
	default:
		k.l.Debug(msg, keyvals...)
	}
}
