package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/dispatch/internal/jobid"
)

// closeWait bounds the wait for the broker's answer to a connection's close.
const closeWait = 2 * time.Second

// A Dispatcher publishes the ids of due jobs to the queue, with publisher
// confirms. It holds one connection, opened on first use and again after it
// failed. It is safe for concurrent use (publishes take turns).
type Dispatcher struct {
	cfg Config

	mu     sync.Mutex
	conn   *amqp.Connection
	ch     *amqp.Channel
	closed chan *amqp.Error // ch's close, with the broker's reason
}

// NewDispatcher validates cfg (an error names every bad field and matches
// fencedwrite.ErrInvalid) and returns a Dispatcher. It does no I/O.
func NewDispatcher(cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new dispatcher: %w", err)
	}
	return &Dispatcher{cfg: cfg}, nil
}

// Publish publishes each id, a job that is due now (call it after the
// enqueue's transaction committed, never inside it), as one message whose
// body is the id in decimal and nothing else. It waits for the broker's
// confirm of each and sends again an id that was nacked, not confirmed
// within ConfirmTimeout, or whose connection failed, up to PublishAttempts
// sends, reconnecting as needed, with waits between sends that double from
// ReconnectDelay up to ReconnectMax.
//
// A nil error means the broker confirmed every id: each is in the queue at
// least once (a send that timed out and was sent again may be there twice,
// which is harmless). An error matching ErrNotConfirmed names the ids that
// never were: they may or may not be queued. An error with ctx's means
// Publish stopped early. In every case the caller may go on: a message is
// a hint, and the workers' scan claims a due job within one scan interval
// whether or not it was published.
func (d *Dispatcher) Publish(ctx context.Context, ids ...int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	pending := ids
	var last error
	wait := d.cfg.ReconnectDelay
	for attempt := 0; attempt < d.cfg.PublishAttempts && len(pending) > 0; attempt++ {
		if attempt > 0 {
			// A nack is often brief (a quorum queue just declared has no
			// leader yet, a broker starting): do not spend every attempt at
			// once.
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, d.cfg.ReconnectMax)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("publish %d job ids: %w", len(pending), err)
		}
		var err error
		pending, err = d.send(ctx, pending)
		if err != nil {
			last = err
			if attempt+1 < d.cfg.PublishAttempts {
				d.cfg.Logger.Warn("publish due job ids: sending again", "ids", len(pending), "attempt", attempt+1, "err", err)
			}
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %d job ids: %w", len(pending), err)
	}
	return fmt.Errorf("publish job ids %s after %d attempts: %w: %w", jobid.List(pending), d.cfg.PublishAttempts, ErrNotConfirmed, last)
}

// send publishes ids once and waits for their confirms; it returns the ids
// that were not confirmed and why.
func (d *Dispatcher) send(ctx context.Context, ids []int64) ([]int64, error) {
	ch, err := d.channel()
	if err != nil {
		return ids, err
	}
	confirms := make([]*amqp.DeferredConfirmation, 0, len(ids))
	for _, id := range ids {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", d.cfg.Queue, false, false, amqp.Publishing{
			ContentType:  "text/plain",
			DeliveryMode: amqp.Persistent,
			Body:         jobid.Encode(id),
		})
		if err != nil {
			d.drop()
			return ids, fmt.Errorf("publish job id %d: %w", id, err)
		}
		confirms = append(confirms, dc)
	}
	wait, cancel := context.WithTimeout(ctx, d.cfg.ConfirmTimeout)
	defer cancel()
	var unconfirmed []int64
	var why error
	for i, dc := range confirms {
		acked, err := dc.WaitContext(wait)
		switch {
		case err != nil:
			why = fmt.Errorf("wait for the broker's confirm: %w", err)
		case !acked:
			why = errors.New("the broker nacked the publish")
			select {
			case e, ok := <-d.closed:
				if ok && e != nil {
					why = fmt.Errorf("the channel closed before the broker's confirm: %w", e)
				} else {
					why = errors.New("the channel closed before the broker's confirm")
				}
			default:
			}
		}
		if err != nil || !acked {
			unconfirmed = append(unconfirmed, ids[i])
		}
	}
	if len(unconfirmed) > 0 && (ch.IsClosed() || errors.Is(why, context.DeadlineExceeded)) {
		// A channel that stopped confirming is not used again.
		d.drop()
	}
	return unconfirmed, why
}

// channel is the open confirm-mode channel, opened on first use.
func (d *Dispatcher) channel() (*amqp.Channel, error) {
	if d.ch != nil && !d.ch.IsClosed() {
		return d.ch, nil
	}
	d.drop()
	conn, err := d.cfg.dial("dispatcher")
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := d.cfg.declare(ch); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("put channel in confirm mode: %w", err)
	}
	d.conn, d.ch, d.closed = conn, ch, ch.NotifyClose(make(chan *amqp.Error, 1))
	return ch, nil
}

func (d *Dispatcher) drop() {
	if d.conn != nil {
		// A connection that was cut may never answer the close.
		_ = d.conn.CloseDeadline(time.Now().Add(closeWait))
	}
	d.conn, d.ch, d.closed = nil, nil, nil
}

// Close closes the connection. A Publish after Close opens a new one.
func (d *Dispatcher) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drop()
	return nil
}
