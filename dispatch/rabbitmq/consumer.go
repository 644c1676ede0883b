package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/dispatch/internal/inbox"
	"github.com/fencekit/fencekit/dispatch/internal/jobid"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/worker"
)

// A Consumer hands the ids the queue delivers to a worker as hints
// (worker.Client.Hint) and acknowledges each message once the worker tried
// its claim. Run it beside the worker's Start; it reconnects until its
// context ends.
type Consumer struct {
	cfg   Config
	w     *worker.Client
	hooks Hooks

	verdicts *inbox.Inbox[tried] // the worker's outcomes, not acknowledged yet

	mu   sync.Mutex
	conn *amqp.Connection // the current connection, for Close
}

// Hooks are test signals (see worker.Hooks); each runs on the consumer's
// goroutine, and one that blocks holds the consumer there.
type Hooks struct {
	// Connected runs once each connection's consume started, with its
	// ordinal (1 for the first, 2 after the first reconnect, ...).
	Connected func(n int)
	// Delivered runs for each message, before its id goes to the worker.
	Delivered func(id int64, redelivered bool)
	// BeforeAck runs once the worker tried the claim of a message's id,
	// before the message is acknowledged (or, when the worker stopped
	// before trying it, returned to the queue): claimed and err are the
	// worker's (worker.Hint.Done).
	BeforeAck func(id int64, claimed bool, err error)
	// Acked runs after the acknowledgement was sent, with its error (a
	// connection that died first: the broker delivers the message again).
	Acked func(id int64, err error)
}

// NewConsumer validates cfg (an error names every bad field and matches
// fencedwrite.ErrInvalid) and returns a Consumer that feeds w. It does no
// I/O.
func NewConsumer(cfg Config, w *worker.Client, hooks Hooks) (*Consumer, error) {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if w == nil {
		err = errors.Join(err, &fencedwrite.FieldError{Field: "worker", Problem: "is required"})
	}
	if err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	return &Consumer{cfg: cfg, w: w, hooks: hooks, verdicts: inbox.New[tried]()}, nil
}

// Prefetch is how many messages the broker lets this consumer hold
// unacknowledged: the worker's hint capacity (its slots, bounded by the
// fleet budget's burst), so that no more wait in memory than one pass can
// claim.
func (c *Consumer) Prefetch() int { return c.w.HintCapacity() }

// Run consumes until ctx ends, then returns nil. A connection that fails
// (a broker restarted, a network cut) is dialled again, with waits that
// double from ReconnectDelay up to ReconnectMax; the messages it held
// unacknowledged go back to the queue, and their claims, tried or not,
// make a second delivery find nothing to do or claim what is still due.
// Meanwhile the worker's scan goes on claiming due jobs.
func (c *Consumer) Run(ctx context.Context) error {
	wait, n := c.cfg.ReconnectDelay, 1 // n: the next connection's ordinal
	for {
		err := c.session(ctx, n, func() { wait = c.cfg.ReconnectDelay; n++ })
		if ctx.Err() != nil {
			return nil
		}
		c.cfg.Logger.Warn("broker consumer: the connection or its consume ended; dialling again", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, c.cfg.ReconnectMax)
	}
}

// tried is a worker's outcome for one delivery.
type tried struct {
	d       amqp.Delivery
	id      int64
	claimed bool
	err     error
}

// session consumes on one connection until it fails or ctx ends; up runs
// once the consume started.
func (c *Consumer) session(ctx context.Context, n int, up func()) error {
	conn, err := c.cfg.dial("consumer")
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
		_ = conn.CloseDeadline(time.Now().Add(closeWait))
	}()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := c.cfg.declare(ch); err != nil {
		return err
	}
	if err := ch.Qos(c.Prefetch(), 0, false); err != nil {
		return fmt.Errorf("set prefetch: %w", err)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, c.cfg.Queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", c.cfg.Queue, err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	up()
	if c.hooks.Connected != nil {
		c.hooks.Connected(n)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-closed:
			if e == nil {
				return errors.New("connection closed")
			}
			return e
		case d, ok := <-deliveries:
			if !ok {
				// The broker cancelled the consumer (its queue was deleted,
				// say) or closed the channel, perhaps with the connection
				// still up: start over, declaring the queue again.
				select {
				case e := <-closed:
					if e != nil {
						return e
					}
				default:
				}
				return errors.New("the broker ended the consume (queue deleted, or channel closed)")
			}
			c.deliver(d)
		case <-c.verdicts.Ready():
			for _, r := range c.verdicts.Take() {
				c.settle(r)
			}
		}
	}
}

// deliver hands d's job id to the worker.
func (c *Consumer) deliver(d amqp.Delivery) {
	id, err := jobid.Decode(d.Body)
	if err != nil {
		// A message is a job id in decimal: anything else is not ours to
		// guess at.
		c.cfg.Logger.Error("broker consumer: dropping a message that is not a job id", "body", jobid.Quote(d.Body), "err", err)
		_ = d.Reject(false)
		return
	}
	if c.hooks.Delivered != nil {
		c.hooks.Delivered(id, d.Redelivered)
	}
	ok := c.w.Hint(worker.Hint{ID: id, Done: func(claimed bool, err error) {
		// The worker's scheduler calls this: it must not block, so the
		// acknowledgement (and its hooks) run on the consumer's goroutine.
		c.verdicts.Put(tried{d, id, claimed, err})
	}})
	if !ok {
		_ = d.Nack(false, true) // the worker is stopping: another takes it
	}
}

// settle acknowledges r's message: its claim was tried, whatever it found
// (claimed, nothing to do, or an outcome the scan reads again). A hint the
// worker never tried goes back to the queue.
func (c *Consumer) settle(r tried) {
	if c.hooks.BeforeAck != nil {
		c.hooks.BeforeAck(r.id, r.claimed, r.err)
	}
	var err error
	if errors.Is(r.err, worker.ErrHintNotTried) {
		err = r.d.Nack(false, true)
	} else {
		err = r.d.Ack(false)
	}
	if err != nil {
		// The channel died first: the broker delivers the message again,
		// and that claim finds nothing to do.
		c.cfg.Logger.Debug("broker consumer: acknowledge", "job", r.id, "err", err)
	}
	if c.hooks.Acked != nil {
		c.hooks.Acked(r.id, err)
	}
}

// Close cuts the current connection without acknowledging what it holds:
// what a consumer that dies does. Run dials again unless its context ended.
func (c *Consumer) Close() {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		_ = conn.CloseDeadline(time.Now().Add(closeWait))
	}
}
