package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dispatchtest"
	"github.com/fencekit/fencekit/worker"
)

// A message is a hint, never a right: whatever Kafka does with it, the
// worker's fenced claim by id decides, every job is executed by the
// provider once, and an offset is committed only once its record was
// judged. Each case has its own database, Kafka (kafkatest: a fake of its
// own, or $FENCEKIT_TEST_KAFKA's), topic and group.
func TestKafkaDispatch(t *testing.T) {
	t.Run("a published job is claimed through its hint, keyed by its operation key", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 3)
		w := e.Idle("A", nil)
		verdicts, delivered := make(chan verdict, 10), make(chan kafka.Message, 10)
		stop := e.consume("A", w, kafka.Hooks{
			Delivered:  func(m kafka.Message) { delivered <- m },
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} },
		}, nil)
		due := e.enqueue("op-1")
		e.publish(e.dispatcher(nil), due)
		if m := await(t, delivered, "delivery"); m.ID != due.ID || m.Key != due.OperationKey {
			t.Fatalf("delivered %+v, want job %d keyed by its operation key %q", m, due.ID, due.OperationKey)
		}
		if v := await(t, verdicts, "verdict"); v.m.ID != due.ID || !v.claimed || v.err != nil {
			t.Fatalf("verdict %+v (%v), want job %d claimed", v, v.err, due.ID)
		}
		e.Settled("op-1")
		e.ClaimedOnce("op-1")
		stop()
		e.everyOffsetCommitted()
	})

	t.Run("a stale hint for a settled job or an unknown id is dropped and its offset committed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 1)
		done := e.enqueue("done")
		w := e.Worker("A", nil, nil) // its first pass claims the job by the scan
		e.Settled("done")
		verdicts := make(chan verdict, 10)
		stop := e.consume("A", w, kafka.Hooks{BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} }}, nil)
		// Reordered: the settled job's hint comes after one for an id that
		// does not exist (yet, or any more), on the one partition.
		e.publish(e.dispatcher(nil), kafka.Due{ID: done.ID + 1_000_000, OperationKey: "nobody"}, done)
		if v := await(t, verdicts, "verdict"); v.claimed || !errors.Is(v.err, fencedwrite.ErrNotFound) {
			t.Fatalf("verdict for an unknown id %+v, want nothing to do (ErrNotFound)", v)
		}
		if v := await(t, verdicts, "verdict"); v.m.ID != done.ID || v.claimed || !errors.Is(v.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("verdict for a settled job %+v, want nothing to do (ErrNotClaimable)", v)
		}
		e.ClaimedOnce("done")
		stop()
		e.everyOffsetCommitted()
	})

	t.Run("a rebalance in the middle of a batch: the revoked partition's unjudged records go to the new member, and no late verdict commits for it", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 2)
		// A's worker claims one hinted job, then its scheduler is held before
		// its next claim: A's other hints wait in flight, unjudged.
		var claimedOne atomic.Bool
		var first atomic.Int64 // the one job A claims before it is held
		held, release := make(chan struct{}, 1), make(chan struct{})
		var releaseOnce sync.Once
		releaseA := func() { releaseOnce.Do(func() { close(release) }) }
		wB := e.Idle("B", nil) // its first pass over an empty table: from then on it claims only hints
		wA := e.Idle("A", func(c *worker.Config) {
			c.Workers = 32 // room for every hint: A polls them all
			c.Hooks.ClaimContext = func(ctx context.Context, _ string) context.Context {
				if claimedOne.Load() {
					select {
					case held <- struct{}{}:
					default:
					}
					<-release
				}
				return ctx
			}
			c.Hooks.Claimed = func(_ context.Context, _ string, jobs []worker.Job, _ error) {
				if len(jobs) > 0 && !claimedOne.Load() {
					first.Store(jobs[0].ID)
					claimedOne.Store(true)
				}
			}
		})
		t.Cleanup(releaseA) // before the workers stop
		assignedA, revokedA := make(chan []int32, 10), make(chan []int32, 10)
		deliveredA, markedA := make(chan kafka.Message, 100), make(chan marked, 100)
		var lostA atomic.Int32 // the partition A lost, plus one
		lateCommits := make(chan map[int32]int64, 100)
		stopA := e.consume("A", wA, kafka.Hooks{
			Assigned: func(ps []int32) { assignedA <- ps },
			Revoked: func(ps []int32, _ bool) {
				if len(ps) == 1 {
					lostA.Store(ps[0] + 1)
				}
				revokedA <- ps
			},
			Committed: func(offsets map[int32]int64, _ error) {
				// Runs after the revoke's own commit (and any commit begun
				// before it): from then on nothing of the lost partition.
				if p := lostA.Load(); p > 0 {
					if _, ok := offsets[p-1]; ok {
						lateCommits <- offsets
					}
				}
			},
			Delivered: func(m kafka.Message) { deliveredA <- m },
			Marked:    func(m kafka.Message, owned bool) { markedA <- marked{m, owned} },
		}, nil)
		if ps := await(t, assignedA, "A's assignment"); len(ps) != 2 {
			t.Fatalf("A was assigned %v, want both partitions", ps)
		}
		var dues []kafka.Due
		var keys []string
		for i := range 16 {
			d := e.enqueue(fmt.Sprintf("batch-%02d", i))
			dues, keys = append(dues, d), append(keys, d.OperationKey)
		}
		e.publish(e.dispatcher(nil), dues...)
		partitionOf := map[int64]int32{}
		for range dues {
			m := await(t, deliveredA, "delivery to A")
			partitionOf[m.ID] = m.Partition
		}
		await(t, held, "A's scheduler held after its first claim")

		// B joins: the cooperative rebalance moves one partition to B while
		// A's claims are in flight. A judged none of its records but one, so
		// B starts that partition at (about) its beginning.
		assignedB, verdictsB := make(chan []int32, 10), make(chan verdict, 100)
		stopB := e.consume("B", wB, kafka.Hooks{
			Assigned:   func(ps []int32) { assignedB <- ps },
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdictsB <- verdict{m, claimed, err} },
		}, nil)
		moved := await(t, revokedA, "A's revoke")
		if got := await(t, assignedB, "B's assignment"); len(moved) != 1 || !slices.Equal(got, moved) {
			t.Fatalf("A lost %v and B was assigned %v: want the same one partition", moved, got)
		}
		var onMoved []string
		for _, d := range dues {
			if partitionOf[d.ID] == moved[0] {
				onMoved = append(onMoved, d.OperationKey)
			}
		}
		if len(onMoved) < 3 {
			t.Fatalf("only %d jobs on the moved partition: the scenario needs A's held hints there", len(onMoved))
		}
		// B is given every record of the partition A had not judged: all
		// but perhaps A's first claim (judged, and committed on the revoke
		// when it began the partition).
		waiting := map[int64]bool{}
		for _, d := range dues {
			if partitionOf[d.ID] == moved[0] && d.ID != first.Load() {
				waiting[d.ID] = true
			}
		}
		claimedByB := 0
		for len(waiting) > 0 {
			v := await(t, verdictsB, "B's verdict")
			if v.claimed && v.err == nil {
				claimedByB++
			} else if !v.nothingToDo() {
				t.Fatalf("B's verdict %+v, want claimed or nothing to do", v)
			}
			delete(waiting, v.m.ID)
		}
		if claimedByB == 0 {
			t.Fatal("B claimed none of the moved partition's jobs: A's held hints were not in flight")
		}
		var byB []string // A's first claim settles once A's scheduler goes on
		for _, d := range dues {
			if waitedFor := partitionOf[d.ID] == moved[0] && d.ID != first.Load(); waitedFor {
				byB = append(byB, d.OperationKey)
			}
		}
		e.Settled(byB...)

		// A's scheduler goes on: its hints on the moved partition find
		// nothing to do, and A marks none of them (its partition is B's).
		releaseA()
		e.Settled(keys...)
		late := 0
		for range dues {
			m := await(t, markedA, "A's mark")
			if m.m.ID == first.Load() {
				continue // judged before its partition moved, or after
			}
			if m.owned != (m.m.Partition != moved[0]) {
				t.Fatalf("A marked %+v as owned=%v after losing partition %d", m.m, m.owned, moved[0])
			}
			if !m.owned {
				late++
			}
		}
		if late == 0 {
			t.Fatal("no verdict of A came after its partition was revoked")
		}
		stopA()
		stopB()
		select {
		case c := <-lateCommits:
			t.Fatalf("A committed %v after it lost partition %d", c, moved[0])
		default:
		}
		e.ClaimedOnce(keys...)
		e.everyOffsetCommitted() // a late mark of A would have rewound B's commit
	})

	t.Run("a hint whose claim failed is handed to the worker again, and its partition's offset waits for it", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 2)
		// Claims wait at most 1 s for a row lock, then roll back.
		w := e.Idle("A", func(c *worker.Config) { c.DB = e.DB.FencedDB(fencedwrite.DSNOptions{LockWaitTimeout: time.Second}) })
		verdicts, commits := make(chan verdict, 100), make(chan map[int32]int64, 100)
		stop := e.consume("A", w, kafka.Hooks{
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} },
			Committed:  func(offsets map[int32]int64, _ error) { commits <- offsets },
		}, nil)
		locked := e.enqueue("locked")
		// Another session holds the job's row: the claim waits, then rolls back.
		tx, err := e.DB.RawDB().BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var id int64
		if err := tx.QueryRow("SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE", locked.ID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		d := e.dispatcher(nil)
		e.publish(d, locked)
		failed := await(t, verdicts, "the locked job's verdict")
		if failed.m.ID != locked.ID || failed.claimed || failed.nothingToDo() {
			t.Fatalf("verdict %+v, want job %d's claim failed", failed, locked.ID)
		}
		// Jobs on the other partition are judged and committed meanwhile;
		// the locked job's partition is not committed past it.
		others := map[int64]int64{} // job → offset on the other partition
		var keys []string
		for i := 0; len(others) < 2; i++ {
			if i > 100 {
				t.Fatal("no job went to the other partition")
			}
			due := e.enqueue(fmt.Sprintf("free-%02d", i))
			keys = append(keys, due.OperationKey)
			e.publish(d, due)
			for {
				v := await(t, verdicts, "verdict")
				if v.m.ID == locked.ID {
					continue // tried again, and failed again
				}
				if v.m.ID != due.ID || !v.claimed && !v.nothingToDo() {
					t.Fatalf("verdict %+v (%v), want job %d claimed, or found claimed by the scan", v, v.err, due.ID)
				}
				if v.m.Partition != failed.m.Partition {
					others[v.m.ID] = v.m.Offset
				}
				break
			}
		}
		var end int64
		for _, o := range others {
			end = max(end, o+1)
		}
		other := 1 - failed.m.Partition
		for c := await(t, commits, "commit"); c[other] < end; c = await(t, commits, "commit") {
			if at, ok := c[failed.m.Partition]; ok && at > failed.m.Offset {
				t.Fatalf("committed %v while job %d (partition %d, offset %d) was not judged", c, locked.ID, failed.m.Partition, failed.m.Offset)
			}
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		for {
			// Claimed by its hint tried again, or by the scan first.
			if v := await(t, verdicts, "the locked job's claim"); v.m.ID == locked.ID && (v.claimed || v.nothingToDo()) {
				break
			}
		}
		keys = append(keys, "locked")
		e.Settled(keys...)
		e.ClaimedOnce(keys...)
		stop()
		e.everyOffsetCommitted()
	})

	t.Run("a consumer killed before it commits its offset: the record is delivered again and the job claimed once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 1)
		wA := e.Idle("A", nil)
		g := newGate(t)
		assignedA, killed := make(chan []int32, 10), make(chan struct{})
		e.consume("A", wA, kafka.Hooks{
			Assigned: func(ps []int32) { assignedA <- ps },
			BeforeMark: func(m kafka.Message, claimed bool, err error) {
				if !claimed {
					t.Errorf("A's verdict for job %d: claimed %v, %v; want claimed", m.ID, claimed, err)
				}
				// A dies between its worker's claim and the mark: its
				// connections are cut, it neither commits nor leaves.
				g.Down()
				close(killed)
			},
		}, func(c *kafka.Config) { c.Dial = g.Dial })
		await(t, assignedA, "A's assignment")
		wB := e.Idle("B", nil)
		deliveredB, verdictsB := make(chan kafka.Message, 10), make(chan verdict, 10)
		stopB := e.consume("B", wB, kafka.Hooks{
			Delivered:  func(m kafka.Message) { deliveredB <- m },
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdictsB <- verdict{m, claimed, err} },
		}, nil)
		due := e.enqueue("k")
		e.publish(e.dispatcher(nil), due)
		<-killed
		// A's session expires; B is given the partition and the record again.
		if m := await(t, deliveredB, "delivery to B"); m.ID != due.ID {
			t.Fatalf("B was delivered %+v, want job %d again", m, due.ID)
		}
		if v := await(t, verdictsB, "B's verdict"); !v.nothingToDo() || !errors.Is(v.err, fencedwrite.ErrNotClaimable) {
			t.Fatalf("B's verdict %+v, want nothing to do (A's worker holds or settled the job)", v)
		}
		e.Settled("k")
		e.ClaimedOnce("k")
		stopB()
		e.everyOffsetCommitted()
	})

	t.Run("duplicates from a producer's retries: the idempotent producer writes one, and two that land are claimed once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 1)
		passes := make(chan worker.PassResult, 100)
		w := e.Worker("A", passes, nil)
		await(t, passes, "first pass")
		verdicts := make(chan verdict, 10)
		stop := e.consume("A", w, kafka.Hooks{BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} }}, nil)
		d := e.dispatcher(nil)
		// The broker appends the first produce, then answers it
		// REQUEST_TIMED_OUT: the producer sends the same batch again.
		retried := func() *kfake.FaultHandle {
			if e.k.Fake == nil {
				return nil
			}
			return e.k.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: e.topic, Err: kerr.RequestTimedOut})
		}
		one := e.enqueue("dup-1")
		f := retried()
		e.publish(d, one)
		if f != nil {
			if f.Hits() != 1 {
				t.Fatalf("the produce fault answered %d requests, want 1", f.Hits())
			}
			if _, ends := e.offsets(); ends[0] != 1 {
				t.Fatalf("the topic holds %d records after one retried publish, want 1 (idempotent producer)", ends[0])
			}
		}
		if v := await(t, verdicts, "verdict"); v.m.ID != one.ID || !v.claimed {
			t.Fatalf("verdict %+v, want job %d claimed", v, one.ID)
		}
		// The pass that dup-1's end wakes scans the table: the next job is
		// enqueued after it, so that only its hints can claim it.
		e.Settled("dup-1")
		for p := await(t, passes, "pass"); p.Claimed > 0 || p.Free < 8; p = await(t, passes, "pass") {
		}
		// A producer without idempotence (another service's), or a publish
		// sent again after one that was not answered, writes it twice.
		two := e.enqueue("dup-2")
		if f := retried(); f != nil {
			cl, err := kgo.NewClient(kgo.SeedBrokers(e.k.Brokers...), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(e.topic))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(two.OperationKey), Value: []byte(fmt.Sprint(two.ID))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if f.Hits() != 1 {
				t.Fatalf("the produce fault answered %d requests, want 1", f.Hits())
			}
		} else {
			e.publish(d, two)
			e.publish(d, two)
		}
		claims, nothing := 0, 0
		for range 2 {
			switch v := await(t, verdicts, "verdict"); {
			case v.m.ID != two.ID:
				t.Fatalf("verdict %+v, want one for job %d", v, two.ID)
			case v.claimed && v.err == nil:
				claims++
			case v.nothingToDo():
				nothing++
			default:
				t.Fatalf("verdict %+v, want claimed or nothing to do", v)
			}
		}
		if claims != 1 || nothing != 1 {
			t.Fatalf("%d claims and %d with nothing to do, want one each", claims, nothing)
		}
		e.Settled("dup-1", "dup-2")
		e.ClaimedOnce("dup-1", "dup-2")
		stop()
		e.everyOffsetCommitted()
	})

	t.Run("a topic deleted and created again: the consumer and the dispatcher move to the new one", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 2)
		w := e.Idle("A", nil)
		healed, verdicts := make(chan struct{}, 10), make(chan verdict, 10)
		e.consume("A", w, kafka.Hooks{
			Healed:     func() { healed <- struct{}{} },
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} },
		}, nil)
		d := e.dispatcher(nil)
		one := e.enqueue("before")
		e.publish(d, one)
		if v := await(t, verdicts, "verdict"); v.m.ID != one.ID || !v.claimed {
			t.Fatalf("verdict %+v, want job %d claimed", v, one.ID)
		}
		adm := e.k.Admin(t)
		if _, err := adm.DeleteTopic(t.Context(), e.topic); err != nil {
			t.Fatal(err)
		}
		for {
			_, err := adm.CreateTopic(t.Context(), 2, -1, nil, e.topic)
			if err == nil {
				break
			}
			if !errors.Is(err, kerr.TopicAlreadyExists) { // a real broker deletes in the background
				t.Fatal(err)
			}
		}
		await(t, healed, "the consumer's move to the new topic")
		two := e.enqueue("after")
		e.publish(d, two)
		if v := await(t, verdicts, "verdict"); v.m.ID != two.ID || !v.claimed {
			t.Fatalf("verdict %+v, want job %d claimed through the new topic", v, two.ID)
		}
		e.Settled("before", "after")
		e.ClaimedOnce("before", "after")
	})

	t.Run("the brokers unreachable under load: the scan finishes every job, and the clients come back", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 3)
		g := newGate(t)
		// The scan is the safety net: every 200 ms here.
		w := e.Worker("A", nil, func(c *worker.Config) { c.ScanInterval = 200 * time.Millisecond })
		assigned, verdicts := make(chan []int32, 10), make(chan verdict, 1000)
		var allSettled atomic.Bool // from then on, no hint may claim but the new job's
		e.consume("A", w, kafka.Hooks{
			Assigned: func(ps []int32) { assigned <- ps },
			BeforeMark: func(m kafka.Message, claimed bool, err error) {
				if allSettled.Load() {
					verdicts <- verdict{m, claimed, err}
				}
			},
		}, func(c *kafka.Config) { c.Dial = g.Dial })
		await(t, assigned, "assignment")
		d := e.dispatcher(func(c *kafka.Config) { c.Dial, c.PublishTimeout = g.Dial, time.Second })
		var keys []string
		batch := func(prefix string, n int) []kafka.Due {
			var dues []kafka.Due
			for i := range n {
				due := e.enqueue(fmt.Sprintf("%s-%02d", prefix, i))
				keys = append(keys, due.OperationKey)
				dues = append(dues, due)
			}
			return dues
		}
		e.publish(d, batch("before", 30)...)
		g.Down() // mid-load: connections cut, dials refused
		if err := d.Publish(t.Context(), batch("during", 30)...); !errors.Is(err, kafka.ErrNotPublished) {
			t.Fatalf("publish while the brokers are unreachable: %v, want ErrNotPublished", err)
		}
		e.Settled(keys...) // by the scan, while the brokers are unreachable
		// Each job's attempt once settled: a hint delivered again that
		// claimed a settled job would raise it.
		settledAt := map[string]int64{}
		for _, k := range keys {
			settledAt[k] = e.Job(k).Attempt
		}
		allSettled.Store(true)
		g.Up()
		after := e.enqueue("after")
		keys = append(keys, "after")
		e.publish(d, after)
		// Records delivered before the cut come again, until the new job's
		// verdict: nothing to do for them (checked below, by the attempts).
		for v := await(t, verdicts, "verdict"); v.m.ID != after.ID; v = await(t, verdicts, "verdict") {
		}
		e.Settled(keys...)
		for k, attempt := range settledAt {
			if j := e.Job(k); j.Attempt != attempt {
				t.Fatalf("a hint delivered again claimed job %d (%s) after it settled: attempt %d, then %d", j.ID, k, attempt, j.Attempt)
			}
		}
		e.ClaimedOnce(keys...)
	})

	t.Run("partitions added to the topic: the dispatcher and the consumer use them", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 2)
		w := e.Idle("A", nil)
		assigned, verdicts := make(chan []int32, 10), make(chan verdict, 1000)
		e.consume("A", w, kafka.Hooks{
			Assigned:   func(ps []int32) { assigned <- ps },
			BeforeMark: func(m kafka.Message, claimed bool, err error) { verdicts <- verdict{m, claimed, err} },
		}, nil)
		await(t, assigned, "assignment")
		d := e.dispatcher(nil)
		var keys []string
		hinted := func(i int) kafka.Message {
			due := e.enqueue(fmt.Sprintf("grow-%03d", i))
			keys = append(keys, due.OperationKey)
			e.publish(d, due)
			// A job that finishes wakes the worker, whose pass may claim
			// the next by its scan first: the hint then finds it running.
			v := await(t, verdicts, "verdict")
			if v.m.ID != due.ID || !v.claimed && !v.nothingToDo() {
				t.Fatalf("verdict %+v, want job %d claimed, or found claimed", v, due.ID)
			}
			return v.m
		}
		for i := range 4 {
			hinted(i)
		}
		e.Settled(keys...)
		if _, err := e.k.Admin(t).UpdatePartitions(t.Context(), 4, e.topic); err != nil {
			t.Fatal(err)
		}
		for got := map[int32]bool{}; !got[2] || !got[3]; {
			for _, p := range await(t, assigned, "the new partitions' assignment") {
				got[p] = true
			}
		}
		// The dispatcher learns of them within its metadata's age: a key's
		// hints may then go to another partition than before (harmless).
		for i := 4; ; i++ {
			if m := hinted(i); m.Partition >= 2 {
				break
			}
			if i > 500 {
				t.Fatal("no hint went to an added partition")
			}
		}
		e.Settled(keys...)
		e.ClaimedOnce(keys...)
	})
}

// marked is a consumer's Marked.
type marked struct {
	m     kafka.Message
	owned bool
}

// Bad settings are refused, each named.
func TestConfigIsValidated(t *testing.T) {
	_, err := kafka.NewDispatcher(kafka.Config{Brokers: []string{"nope", "h:0"}, Topic: "bad topic", Partitions: -1,
		RetryDelay: time.Second, RetryMax: time.Millisecond, SessionTimeout: time.Second, HeartbeatInterval: 2 * time.Second})
	if !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	for _, field := range []string{"Brokers", "Topic", "Partitions", "RetryMax", "HeartbeatInterval"} {
		if !dispatchtest.ContainsField(err, "kafka.Config."+field) {
			t.Errorf("err %v does not name kafka.Config.%s", err, field)
		}
	}
	if _, err := kafka.NewConsumer(kafka.Config{Brokers: []string{"127.0.0.1:9092"}}, nil, kafka.Hooks{}); !dispatchtest.ContainsField(err, "worker") {
		t.Errorf("a consumer without a worker: %v, want the field named", err)
	}
	d, err := kafka.NewDispatcher(kafka.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Publish(context.Background(), kafka.Due{ID: 0, OperationKey: ""})
	for _, field := range []string{"kafka.Due[0].ID", "kafka.Due[0].OperationKey"} {
		if !dispatchtest.ContainsField(err, field) {
			t.Errorf("a publish of nobody: %v, want %s named", err, field)
		}
	}
}
