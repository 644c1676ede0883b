package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"

	"github.com/fencekit/fencekit/dispatch/rabbitmq"
	"github.com/fencekit/fencekit/worker"
)

// Dispatch modes of refundd run (-dispatch).
const (
	dispatchScan     = "scan"     // the workers' scan of the table alone
	dispatchRabbitMQ = "rabbitmq" // the broker's hints, with the scan as the safety net
)

// dispatchFlags choose how due jobs reach the workers: the scan of the
// table alone, or RabbitMQ's messages (package dispatch/rabbitmq) with the
// scan kept as the safety net.
type dispatchFlags struct {
	mode, amqpURL, queue string
}

func (d *dispatchFlags) register(fs *flag.FlagSet, withMode bool) {
	if withMode {
		fs.StringVar(&d.mode, "dispatch", dispatchScan, "how due jobs reach the workers: scan (the table, every -scan) or rabbitmq (the broker's messages name due jobs; the scan stays the safety net)")
	}
	fs.StringVar(&d.amqpURL, "amqp-url", os.Getenv("FENCEKIT_AMQP_URL"), "RabbitMQ's URL, amqp://user:password@host:port/vhost (default $FENCEKIT_AMQP_URL, which keeps the password off the command line)")
	fs.StringVar(&d.queue, "amqp-queue", rabbitmq.DefaultQueue, "the quorum queue of due job ids, the same for the whole fleet")
}

// check names the flag of every bad setting; with the scan, no broker flag
// may be set (it would do nothing).
func (d dispatchFlags) check() error {
	switch d.mode {
	case dispatchScan:
		if d.amqpURL != "" && os.Getenv("FENCEKIT_AMQP_URL") != d.amqpURL {
			return fmt.Errorf("-amqp-url is set but -dispatch is %s: pass -dispatch %s to dispatch through the broker", dispatchScan, dispatchRabbitMQ)
		}
		return nil
	case dispatchRabbitMQ:
		if d.amqpURL == "" {
			return fmt.Errorf("-dispatch %s needs -amqp-url (or $FENCEKIT_AMQP_URL)", dispatchRabbitMQ)
		}
		if _, err := rabbitmq.NewDispatcher(d.config(nil)); err != nil {
			return fmt.Errorf("-amqp-url %s or -amqp-queue %q: %w", redactURL(d.amqpURL), d.queue, err)
		}
		return nil
	default:
		return fmt.Errorf("-dispatch %q: must be %s or %s", d.mode, dispatchScan, dispatchRabbitMQ)
	}
}

func (d dispatchFlags) config(log *slog.Logger) rabbitmq.Config {
	return rabbitmq.Config{URL: d.amqpURL, Queue: d.queue, Name: "refundd", Logger: log}
}

// consume runs the broker consumer that feeds w until ctx ends.
func (d dispatchFlags) consume(ctx context.Context, w *worker.Client, log *slog.Logger) (done <-chan struct{}, err error) {
	c, err := rabbitmq.NewConsumer(d.config(log), w, rabbitmq.Hooks{})
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		_ = c.Run(ctx)
	}()
	log.Info("dispatch through RabbitMQ: consuming due job ids; the scan stays the safety net", "amqp_url", redactURL(d.amqpURL),
		"queue", d.queue, "prefetch", c.Prefetch())
	return ch, nil
}

// redactURL hides the password of an AMQP URL in logs and errors.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// publishEnqueued publishes a new job's id to the broker, after its enqueue
// committed. A publish that fails loses nothing: the job is in the table,
// and the workers' scan claims it within one scan interval.
func publishEnqueued(ctx context.Context, d dispatchFlags, id int64, out io.Writer) {
	pub, err := rabbitmq.NewDispatcher(d.config(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err == nil {
		defer pub.Close()
		err = pub.Publish(ctx, id)
	}
	if err != nil {
		fmt.Fprintf(out, "enqueue: job %d not published to %s (%v): the workers' scan claims it within one scan interval\n", id, redactURL(d.amqpURL), err)
		return
	}
	fmt.Fprintf(out, "enqueue: job %d published to %s, queue %s\n", id, redactURL(d.amqpURL), d.queue)
}
