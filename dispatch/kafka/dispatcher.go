package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencekit/fencekit/dispatch/internal/jobid"
	"github.com/fencekit/fencekit/fencedwrite"
)

// Due names a job that is due: its id is the message's value, its
// operation key the message's key (which chooses the partition).
type Due struct {
	ID           int64
	OperationKey string
}

// A Dispatcher publishes due jobs to the topic with franz-go's idempotent
// producer. It is safe for concurrent use.
type Dispatcher struct {
	cfg Config
	cl  *kgo.Client

	ensure sync.Once // looks for the topic (and creates it if missing) on the first Publish
}

// NewDispatcher validates cfg (an error names every bad field and matches
// fencedwrite.ErrInvalid) and returns a Dispatcher. It connects to no
// broker before its first Publish.
func NewDispatcher(cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new dispatcher: %w", err)
	}
	cl, err := kgo.NewClient(cfg.clientOpts("dispatcher", kgo.DefaultProduceTopic(cfg.Topic))...)
	if err != nil {
		return nil, fmt.Errorf("new dispatcher: %w", err)
	}
	return &Dispatcher{cfg: cfg, cl: cl}, nil
}

// Publish publishes each job, one that is due now (call it after the
// enqueue's transaction committed, never inside it), as one message: key
// the operation key, value the id in decimal. It waits until every
// in-sync replica acknowledged each, at most PublishTimeout; franz-go
// retries meanwhile (a leader that moved, a broker restarting), and its
// idempotent producer writes a retried message once. The first Publish
// creates the topic if it is missing; a topic deleted and created again
// since the last Publish is looked up afresh, and its messages sent again
// once.
//
// A nil error means the brokers acknowledged every message: each is in the
// topic at least once (a job published twice by the caller is there twice,
// which is harmless). An error matching ErrNotPublished names the ids that
// were not acknowledged: they may or may not be in the topic. An error
// matching fencedwrite.ErrInvalid names a Due without an id or a key, and
// nothing was published. In every case but the last the caller may go on:
// a message is a hint, and the workers' scan claims a due job within one
// scan interval whether or not it was published.
func (d *Dispatcher) Publish(ctx context.Context, jobs ...Due) error {
	var errs []error
	for i, j := range jobs {
		if j.ID <= 0 {
			errs = append(errs, &fencedwrite.FieldError{Field: fmt.Sprintf("kafka.Due[%d].ID", i), Problem: fmt.Sprintf("must be a job id (positive), got %d", j.ID)})
		}
		if j.OperationKey == "" {
			errs = append(errs, &fencedwrite.FieldError{Field: fmt.Sprintf("kafka.Due[%d].OperationKey", i), Problem: "is required: it is the message's key"})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publish %d jobs: %w", len(jobs), err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.PublishTimeout)
	defer cancel()
	d.ensure.Do(func() { d.cfg.ensureTopic(ctx, d.cl) })
	failed, why := d.produce(ctx, jobs)
	if len(failed) > 0 && ctx.Err() == nil && topicGone(why) {
		// The topic was deleted (and perhaps created again under a new
		// id): forget what the producer knew of it, create it if it is
		// still missing, and send what failed once more.
		d.cfg.Logger.Warn("kafka dispatcher: the topic is gone or was recreated; publishing again", "topic", d.cfg.Topic, "err", why)
		d.cl.PurgeTopicsFromProducing(d.cfg.Topic)
		d.cfg.ensureTopic(ctx, d.cl)
		failed, why = d.produce(ctx, failed)
	}
	if len(failed) == 0 {
		return nil
	}
	unpublished := make([]int64, len(failed))
	for i, j := range failed {
		unpublished[i] = j.ID
	}
	return fmt.Errorf("publish job ids %s to %s: %w: %w", jobid.List(unpublished), d.cfg.Topic, ErrNotPublished, why)
}

// produce sends every job and waits for their acknowledgements until ctx
// ends; it returns the jobs that were not acknowledged and the first
// reason.
func (d *Dispatcher) produce(ctx context.Context, jobs []Due) ([]Due, error) {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(jobs))
	for i, j := range jobs {
		r := &kgo.Record{Key: []byte(j.OperationKey), Value: jobid.Encode(j.ID)}
		d.cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- result{i, err} })
	}
	acked := make([]bool, len(jobs))
	var why error
wait:
	for range jobs {
		select {
		case r := <-results:
			if r.err == nil {
				acked[r.i] = true
			} else if why == nil {
				why = r.err
			}
		case <-ctx.Done():
			// A message sent and not answered cannot be withdrawn: franz-go
			// may still deliver it.
			if why == nil {
				why = ctx.Err()
			}
			break wait
		}
	}
	var failed []Due
	for i, ok := range acked {
		if !ok {
			failed = append(failed, jobs[i])
		}
	}
	return failed, why
}

// Close flushes nothing and closes the client: messages not yet
// acknowledged are abandoned (the scan claims their jobs).
func (d *Dispatcher) Close() error {
	d.cl.Close()
	return nil
}
