package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/dispatch/rabbitmq"
	"github.com/fencekit/fencekit/worker"
)

// Dispatch modes of refundd run (-dispatch).
const (
	dispatchScan     = "scan"     // the workers' scan of the table alone
	dispatchRabbitMQ = "rabbitmq" // the broker's hints, with the scan as the safety net
	dispatchKafka    = "kafka"    // Kafka's hints, with the scan as the safety net
)

// dispatchFlags choose how due jobs reach the workers: the scan of the
// table alone, or RabbitMQ's or Kafka's messages (packages
// dispatch/rabbitmq, dispatch/kafka) with the scan kept as the safety net.
type dispatchFlags struct {
	mode, amqpURL, queue string
	// kafkaBrokers is comma-separated host:port.
	kafkaBrokers, kafkaTopic, kafkaGroup string
	kafkaSession                         time.Duration
}

func (d *dispatchFlags) register(fs *flag.FlagSet, withMode bool) {
	if withMode {
		fs.StringVar(&d.mode, "dispatch", dispatchScan, "how due jobs reach the workers: scan (the table, every -scan), rabbitmq or kafka (the broker's messages name due jobs; the scan stays the safety net)")
		fs.StringVar(&d.kafkaGroup, "kafka-group", kafka.DefaultGroup, "with -dispatch kafka, the workers' consumer group, the same for the whole fleet")
		fs.DurationVar(&d.kafkaSession, "kafka-session-timeout", kafka.DefaultSessionTimeout, "with -dispatch kafka, the group session: a process that vanished keeps its partitions this long (within the brokers' group.min/max.session.timeout.ms)")
	}
	fs.StringVar(&d.amqpURL, "amqp-url", os.Getenv("FENCEKIT_AMQP_URL"), "RabbitMQ's URL, amqp://user:password@host:port/vhost (default $FENCEKIT_AMQP_URL, which keeps the password off the command line)")
	fs.StringVar(&d.queue, "amqp-queue", rabbitmq.DefaultQueue, "the quorum queue of due job ids, the same for the whole fleet")
	fs.StringVar(&d.kafkaBrokers, "kafka-brokers", os.Getenv("FENCEKIT_KAFKA_BROKERS"), "Kafka's seed brokers, host:port[,host:port...] (default $FENCEKIT_KAFKA_BROKERS)")
	fs.StringVar(&d.kafkaTopic, "kafka-topic", kafka.DefaultTopic, "the topic of due jobs (key: the operation key; value: the job id), the same for the whole fleet")
}

// check names the flag of every bad setting; no broker flag may be set
// that the dispatch does not use (it would do nothing).
func (d dispatchFlags) check() error {
	amqpSet := d.amqpURL != "" && os.Getenv("FENCEKIT_AMQP_URL") != d.amqpURL
	kafkaSet := d.kafkaBrokers != "" && os.Getenv("FENCEKIT_KAFKA_BROKERS") != d.kafkaBrokers
	switch {
	case amqpSet && d.mode != dispatchRabbitMQ:
		return fmt.Errorf("-amqp-url is set but -dispatch is %s: pass -dispatch %s to dispatch through RabbitMQ", d.mode, dispatchRabbitMQ)
	case kafkaSet && d.mode != dispatchKafka:
		return fmt.Errorf("-kafka-brokers is set but -dispatch is %s: pass -dispatch %s to dispatch through Kafka", d.mode, dispatchKafka)
	}
	switch d.mode {
	case dispatchScan:
		return nil
	case dispatchRabbitMQ:
		if d.amqpURL == "" {
			return fmt.Errorf("-dispatch %s needs -amqp-url (or $FENCEKIT_AMQP_URL)", dispatchRabbitMQ)
		}
		if _, err := rabbitmq.NewDispatcher(d.config(nil)); err != nil {
			return fmt.Errorf("-amqp-url %s or -amqp-queue %q: %w", redactURL(d.amqpURL), d.queue, err)
		}
		return nil
	case dispatchKafka:
		if d.kafkaBrokers == "" {
			return fmt.Errorf("-dispatch %s needs -kafka-brokers (or $FENCEKIT_KAFKA_BROKERS)", dispatchKafka)
		}
		pub, err := kafka.NewDispatcher(d.kafkaConfig(nil))
		if err != nil {
			return fmt.Errorf("-kafka-brokers %q, -kafka-topic %q, -kafka-group %q or -kafka-session-timeout %v: %w", d.kafkaBrokers, d.kafkaTopic, d.kafkaGroup, d.kafkaSession, err)
		}
		return pub.Close()
	default:
		return fmt.Errorf("-dispatch %q: must be %s, %s or %s", d.mode, dispatchScan, dispatchRabbitMQ, dispatchKafka)
	}
}

func (d dispatchFlags) config(log *slog.Logger) rabbitmq.Config {
	return rabbitmq.Config{URL: d.amqpURL, Queue: d.queue, Name: "refundd", Logger: log}
}

func (d dispatchFlags) kafkaConfig(log *slog.Logger) kafka.Config {
	var brokers []string
	for b := range strings.SplitSeq(d.kafkaBrokers, ",") {
		brokers = append(brokers, strings.TrimSpace(b))
	}
	return kafka.Config{Brokers: brokers, Topic: d.kafkaTopic, Group: d.kafkaGroup, SessionTimeout: d.kafkaSession, Name: "refundd", Logger: log}
}

// consume runs the broker consumer that feeds w until ctx ends.
func (d dispatchFlags) consume(ctx context.Context, w *worker.Client, log *slog.Logger) (done <-chan struct{}, err error) {
	if d.mode == dispatchKafka {
		c, err := kafka.NewConsumer(d.kafkaConfig(log), w, kafka.Hooks{})
		if err != nil {
			return nil, err
		}
		log.Info("dispatch through Kafka: consuming due jobs; the scan stays the safety net", "kafka_brokers", d.kafkaBrokers,
			"topic", d.kafkaTopic, "group", d.kafkaGroup, "capacity", c.Capacity())
		return inBackground(func() {
			if err := c.Run(ctx); err != nil {
				log.Error("kafka consumer", "err", err)
			}
		}), nil
	}
	c, err := rabbitmq.NewConsumer(d.config(log), w, rabbitmq.Hooks{})
	if err != nil {
		return nil, err
	}
	log.Info("dispatch through RabbitMQ: consuming due job ids; the scan stays the safety net", "amqp_url", redactURL(d.amqpURL),
		"queue", d.queue, "prefetch", c.Prefetch())
	return inBackground(func() { _ = c.Run(ctx) }), nil
}

// inBackground runs run in a goroutine and returns a channel closed when
// it returns.
func inBackground(run func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	return done
}

// redactURL hides the password of an AMQP URL in logs and errors.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// publishes reports whether refundd enqueue publishes the new job.
func (d dispatchFlags) publishes() bool { return d.amqpURL != "" || d.kafkaBrokers != "" }

// publishEnqueued publishes a new job to the broker named (RabbitMQ's, or
// Kafka's when -kafka-brokers is set), after its enqueue committed. A
// publish that fails loses nothing: the job is in the table, and the
// workers' scan claims it within one scan interval.
func publishEnqueued(ctx context.Context, d dispatchFlags, id int64, key string, out io.Writer) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	where := redactURL(d.amqpURL) + ", queue " + d.queue
	if d.kafkaBrokers != "" {
		where = d.kafkaBrokers + ", topic " + d.kafkaTopic
		var pub *kafka.Dispatcher
		if pub, err = kafka.NewDispatcher(d.kafkaConfig(quiet)); err == nil {
			defer pub.Close()
			err = pub.Publish(ctx, kafka.Due{ID: id, OperationKey: key})
		}
	} else {
		var pub *rabbitmq.Dispatcher
		if pub, err = rabbitmq.NewDispatcher(d.config(quiet)); err == nil {
			defer pub.Close()
			err = pub.Publish(ctx, id)
		}
	}
	if err != nil {
		fmt.Fprintf(out, "enqueue: job %d not published to %s (%v): the workers' scan claims it within one scan interval\n", id, where, err)
		return
	}
	fmt.Fprintf(out, "enqueue: job %d published to %s\n", id, where)
}
