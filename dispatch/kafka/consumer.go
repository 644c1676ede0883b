package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencekit/fencekit/dispatch/internal/inbox"
	"github.com/fencekit/fencekit/dispatch/internal/jobid"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/worker"
)

// A Consumer is one member of the fleet's consumer group: it hands the ids
// of the records it is assigned to a worker as hints (worker.Client.Hint),
// and commits a record's offset once the worker's claim of it committed or
// found nothing to do. Run it beside the worker's Start.
type Consumer struct {
	cfg   Config
	w     *worker.Client
	hooks Hooks

	verdicts *inbox.Inbox[tried] // the worker's outcomes, not acted on yet
	again    *inbox.Inbox[*hint] // failed claims whose wait is over

	mu      sync.Mutex
	running bool
	cl      *kgo.Client     // the client of the running Run
	tracks  map[part]*track // the partitions assigned now
}

// part names a partition.
type part struct {
	topic     string
	partition int32
}

// A Message is a record the consumer polled: the job's id (its value),
// operation key (its key) and where it is.
type Message struct {
	ID        int64
	Key       string
	Partition int32
	Offset    int64
}

// Hooks are test signals (see worker.Hooks). Delivered, BeforeMark and
// Marked run on the consumer's goroutine, and one that blocks holds the
// consumer there; Assigned and Revoked run on franz-go's group goroutine,
// Committed on its commit goroutine.
type Hooks struct {
	// Assigned runs once partitions were assigned to this consumer, before
	// it fetches from them.
	Assigned func(partitions []int32)
	// Revoked runs once partitions were taken from this consumer, after
	// the judged offsets were committed (lost: taken without a chance to
	// commit, the session having expired).
	Revoked func(partitions []int32, lost bool)
	// Delivered runs for each record, before its id goes to the worker.
	Delivered func(Message)
	// BeforeMark runs once the worker tried the claim of a record's id,
	// with the worker's outcome (worker.Hint.Done), before the consumer acts
	// on it: mark the offset for commit, or hand the hint again later.
	BeforeMark func(m Message, claimed bool, err error)
	// Marked runs once a judged record was marked for commit; owned is
	// false when its partition had been taken from this consumer
	// meanwhile, and nothing was marked.
	Marked func(m Message, owned bool)
	// Committed runs after each commit of the marked offsets, by partition,
	// with its error.
	Committed func(offsets map[int32]int64, err error)
	// Healed runs after the consumer found the topic gone or recreated and
	// subscribed to it again.
	Healed func()
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
	return &Consumer{cfg: cfg, w: w, hooks: hooks, verdicts: inbox.New[tried](), again: inbox.New[*hint]()}, nil
}

// Capacity is how many records this consumer holds unjudged at most: the
// worker's hint capacity (its slots, bounded by the fleet budget's burst),
// so that no more hints wait in memory than one pass can claim.
func (c *Consumer) Capacity() int { return c.w.HintCapacity() }

// tried is a worker's outcome for one hint.
type tried struct {
	h       *hint
	claimed bool
	err     error
}

// A hint is a polled record on its way through the worker.
type hint struct {
	e     *entry
	m     Message
	tries int // failed claims so far
}

// Run joins the group and consumes until ctx ends, then commits what was
// judged, leaves the group and returns nil; a Consumer runs once. franz-go
// reconnects by itself to brokers that went away (a broker restarted, a
// network cut) and rejoins the group after its session expired; the
// records this member had not judged go to the partitions' next owners.
// Meanwhile the worker's scan goes on claiming due jobs. An error means
// Run could not start (a second Run, or options franz-go refused).
func (c *Consumer) Run(ctx context.Context) error {
	opts := c.cfg.clientOpts("consumer",
		kgo.ConsumeTopics(c.cfg.Topic),
		kgo.ConsumerGroup(c.cfg.Group),
		// Commit only what was marked: a record is marked once judged.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(c.cfg.CommitInterval),
		kgo.AutoCommitCallback(c.autoCommitted),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
		// A new group, or a partition whose records were deleted, starts
		// at the oldest record kept: a hint published before the first
		// consumer joined is not skipped (and one long stale finds nothing).
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(c.cfg.SessionTimeout),
		kgo.HeartbeatInterval(c.cfg.HeartbeatInterval),
		// A member rejoins once its revoke's commit is done, which takes
		// at most the session timeout (closeWait): a rebalance does not
		// wait a minute (franz-go's default) for a member that was frozen
		// or killed mid-rebalance.
		kgo.RebalanceTimeout(2*c.cfg.SessionTimeout),
	)
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("run consumer: it ran already; make a new Consumer")
	}
	c.running = true
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("run consumer: %w", err)
	}
	c.cl, c.tracks = cl, map[part]*track{}
	c.mu.Unlock()

	pollCtx, stopPolling := context.WithCancel(ctx)
	polled, want, polling := make(chan []*kgo.Record), make(chan int, 1), make(chan struct{})
	go func() {
		defer close(polling)
		ensure, cancel := context.WithTimeout(pollCtx, c.cfg.PublishTimeout)
		c.cfg.ensureTopic(ensure, cl)
		cancel()
		c.poll(pollCtx, cl, want, polled)
	}()
	defer func() {
		stopPolling()
		<-polling
		// Leaving the group revokes every partition: the judged offsets are
		// committed first (c.revoked), the rest go to the next owners.
		leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.closeWait())
		defer cancel()
		if err := cl.LeaveGroupContext(leave); err != nil {
			c.cfg.Logger.Warn("kafka consumer: leave the group", "err", err)
		}
		cl.Close()
	}()

	inflight, asked, capacity := 0, false, c.Capacity()
	for {
		if !asked && inflight < capacity {
			want <- capacity - inflight
			asked = true
		}
		select {
		case <-ctx.Done():
			return nil
		case recs := <-polled:
			asked = false
			for _, r := range recs {
				if c.deliver(r) {
					inflight++
				}
			}
		case <-c.verdicts.Ready():
			for _, v := range c.verdicts.Take() {
				if c.settle(v) {
					inflight--
				}
			}
		case <-c.again.Ready():
			for _, h := range c.again.Take() {
				if !c.hint(h) {
					inflight--
				}
			}
		}
	}
}

// poll polls at most n records each time the main loop asks (on want) and
// hands them over, until ctx ends. A topic found gone is healed at most
// once per RetryMax.
func (c *Consumer) poll(ctx context.Context, cl *kgo.Client, want <-chan int, out chan<- []*kgo.Record) {
	var healed time.Time // when the topic was last healed
	for {
		var n int
		select {
		case <-ctx.Done():
			return
		case n = <-want:
		}
	polling:
		for fails := 0; ; {
			fs := cl.PollRecords(ctx, n)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			gone := false
			fs.EachError(func(topic string, p int32, err error) {
				if topicGone(err) {
					gone = true
					return
				}
				c.cfg.Logger.Warn("kafka consumer: fetch", "topic", topic, "partition", p, "err", err)
			})
			if gone && time.Since(healed) >= c.cfg.RetryMax {
				healed = time.Now()
				c.heal(ctx, cl)
			}
			if recs := fs.Records(); len(recs) > 0 {
				select {
				case out <- recs:
				case <-ctx.Done():
					return
				}
				break polling
			}
			// Only errors: a broker or the topic is away; wait a little.
			fails++
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff(c.cfg.RetryDelay, c.cfg.RetryMax, fails)):
			}
		}
	}
}

// heal subscribes to the topic again after it was deleted (and perhaps
// created again, under a new topic id that franz-go does not adopt by
// itself): it creates the topic if it is still missing, forgets the old
// one (its partitions are revoked, their judged offsets committed if the
// brokers still take them) and consumes the topic anew from its start.
func (c *Consumer) heal(ctx context.Context, cl *kgo.Client) {
	c.cfg.Logger.Warn("kafka consumer: the topic is gone or was recreated; subscribing to it again", "topic", c.cfg.Topic)
	ensure, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	c.cfg.ensureTopic(ensure, cl)
	cancel()
	cl.PurgeTopicsFromClient(c.cfg.Topic)
	cl.AddConsumeTopics(c.cfg.Topic)
	if c.hooks.Healed != nil {
		c.hooks.Healed()
	}
}

// deliver hands r's job id to the worker; it reports whether r is now in
// flight (waiting for its verdict).
func (c *Consumer) deliver(r *kgo.Record) bool {
	c.mu.Lock()
	t := c.tracks[part{r.Topic, r.Partition}]
	var e *entry
	if t != nil {
		e = t.add(r.Offset, r.LeaderEpoch)
	}
	c.mu.Unlock()
	if e == nil {
		// Polled just before its partition was revoked: its next owner
		// delivers it again.
		return false
	}
	h := &hint{e: e, m: Message{Key: string(r.Key), Partition: r.Partition, Offset: r.Offset}}
	id, err := jobid.Decode(r.Value)
	if err != nil {
		// A message is a job id in decimal: anything else is not ours to
		// guess at, and judged at once.
		c.cfg.Logger.Error("kafka consumer: dropping a message that is not a job id", "partition", r.Partition, "offset", r.Offset,
			"value", jobid.Quote(r.Value), "err", err)
		c.mark(h)
		return false
	}
	h.m.ID = id
	if c.hooks.Delivered != nil {
		c.hooks.Delivered(h.m)
	}
	return c.hint(h)
}

// hint hands h to the worker, unless its partition was taken from this
// consumer meanwhile; it reports whether h is in flight.
func (c *Consumer) hint(h *hint) bool {
	c.mu.Lock()
	owned := h.e.t.owned
	c.mu.Unlock()
	if !owned {
		return false
	}
	// Done runs on the worker's scheduler, which it must not block: the
	// verdict is acted on by the consumer's goroutine.
	return c.w.Hint(worker.Hint{ID: h.m.ID, Done: func(claimed bool, err error) {
		c.verdicts.Put(tried{h, claimed, err})
	}})
}

// settle acts on a worker's verdict; it reports whether the hint left the
// flight (judged, or never tried because the worker is stopping).
func (c *Consumer) settle(v tried) bool {
	h := v.h
	if c.hooks.BeforeMark != nil {
		c.hooks.BeforeMark(h.m, v.claimed, v.err)
	}
	switch {
	case v.claimed && v.err == nil, errors.Is(v.err, fencedwrite.ErrNotFound), errors.Is(v.err, fencedwrite.ErrNotClaimable):
		// The claim committed, or the job is settled, held elsewhere, not
		// due or unknown: a stale hint, dropped. Either way judged.
		c.mark(h)
		return true
	case errors.Is(v.err, worker.ErrHintNotTried):
		// The worker is stopping: the record stays unjudged, for the
		// partition's next owner.
		return true
	default:
		// The claim rolled back or its COMMIT's reply was lost: whether the
		// job is still due only a fresh claim can tell. Its offset waits.
		h.tries++
		wait := backoff(c.cfg.RetryDelay, c.cfg.RetryMax, h.tries)
		c.cfg.Logger.Debug("kafka consumer: the hint's claim failed; trying it again", "job", h.m.ID, "in", wait, "err", v.err)
		time.AfterFunc(wait, func() { c.again.Put(h) })
		return false
	}
}

// mark marks h's record judged, and the partition's new commit point for
// the next commit, if the partition is still this consumer's.
func (c *Consumer) mark(h *hint) {
	c.mu.Lock()
	owned := h.e.t.owned
	if owned {
		// Under c.mu: a revoke (which takes c.mu first) either sees this
		// mark and commits it, or this mark sees the revoke and makes none.
		if at, moved := h.e.t.judge(h.e); moved {
			c.cl.MarkCommitOffsets(map[string]map[int32]kgo.EpochOffset{h.e.t.topic: {h.e.t.partition: at}})
		}
	}
	c.mu.Unlock()
	if c.hooks.Marked != nil {
		c.hooks.Marked(h.m, owned)
	}
}

// assigned starts a track for each partition assigned.
func (c *Consumer) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	var ps []int32
	c.mu.Lock()
	for topic, partitions := range m {
		for _, p := range partitions {
			c.tracks[part{topic, p}] = &track{topic: topic, partition: p, owned: true}
			ps = append(ps, p)
		}
	}
	c.mu.Unlock()
	slices.Sort(ps)
	if c.hooks.Assigned != nil && len(ps) > 0 {
		c.hooks.Assigned(ps)
	}
}

// revoked ends the tracks of the partitions revoked, then commits every
// judged offset before franz-go lets them go: their next owners start
// after it.
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	ps := c.drop(m)
	commit, cancel := context.WithTimeout(ctx, c.closeWait())
	defer cancel()
	marked := cl.MarkedOffsets()
	err := cl.CommitMarkedOffsets(commit)
	if err != nil {
		c.cfg.Logger.Warn("kafka consumer: commit judged offsets before a revoke", "err", err)
	}
	if c.hooks.Committed != nil && len(marked) > 0 {
		c.hooks.Committed(offsetsOf(marked[c.cfg.Topic]), err)
	}
	if c.hooks.Revoked != nil && len(ps) > 0 {
		c.hooks.Revoked(ps, false)
	}
}

// lost ends the tracks of partitions lost without a chance to commit.
func (c *Consumer) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	if ps := c.drop(m); c.hooks.Revoked != nil && len(ps) > 0 {
		c.hooks.Revoked(ps, true)
	}
}

func (c *Consumer) drop(m map[string][]int32) []int32 {
	var ps []int32
	c.mu.Lock()
	for topic, partitions := range m {
		for _, p := range partitions {
			if t := c.tracks[part{topic, p}]; t != nil {
				t.owned = false
				delete(c.tracks, part{topic, p})
			}
			ps = append(ps, p)
		}
	}
	c.mu.Unlock()
	slices.Sort(ps)
	return ps
}

// closeWait bounds leaving the group and the commit before it: a leave
// that takes longer than the session timeout gains nothing over the
// session expiring.
func (c *Consumer) closeWait() time.Duration { return min(closeWait, c.cfg.SessionTimeout) }

// autoCommitted reports franz-go's periodic commits of the marked offsets.
func (c *Consumer) autoCommitted(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err == nil && resp != nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && err == nil {
					err = e
				}
			}
		}
	}
	if err != nil {
		c.cfg.Logger.Warn("kafka consumer: commit judged offsets", "err", err)
	}
	if c.hooks.Committed == nil || req == nil {
		return
	}
	offsets := map[int32]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			offsets[p.Partition] = p.Offset
		}
	}
	if len(offsets) > 0 {
		c.hooks.Committed(offsets, err)
	}
}

func offsetsOf(m map[int32]kgo.EpochOffset) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for p, eo := range m {
		out[p] = eo.Offset
	}
	return out
}
