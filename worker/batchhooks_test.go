package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// A harness (refundd chaos) decides which write-backs share a batch through
// the hooks alone: BatchContext names each batch's jobs and may hold the
// batch, and its batcher, before the transaction begins; WriteBackQueued
// says a write-back is waiting for a batcher. With the only batcher held,
// write-backs queued meanwhile go together in the next batch.
func TestWorkerBatchHooks(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	a, b, c := f.enqueue("batch-a"), f.enqueue("batch-b"), f.enqueue("batch-c")
	var (
		aHeld    = make(chan struct{})
		releaseA = make(chan struct{})
		batches  = make(chan []int64, 10)
		queued   = make(chan int64, 10)
	)
	_, ev := f.worker("w1", func(cfg *worker.Config) {
		cfg.WriteBackConns = 1
		cfg.Hooks.AfterProviderCall = func(j worker.Job) {
			if j.ID != a.ID {
				awaitClosed(t, aHeld, "a's batch to be held") // b and c answer once a's batch holds the batcher
			}
		}
		cfg.Hooks.WriteBackQueued = func(j worker.Job) { queued <- j.ID }
		cfg.Hooks.BatchContext = func(ctx context.Context, jobs []worker.Job) context.Context {
			ids := make([]int64, len(jobs))
			for i, j := range jobs {
				ids[i] = j.ID
			}
			slices.Sort(ids)
			batches <- ids
			if slices.Contains(ids, a.ID) {
				close(aHeld)
				awaitClosed(t, releaseA, "the test to release a's batch")
			}
			return ctx
		}
	})
	t.Run("the batch of a write-back queued alone holds only it", func(t *testing.T) {
		if got := receiveOne(t, batches); !slices.Equal(got, []int64{a.ID}) {
			t.Fatalf("the first batch holds jobs %v, want only a's (%d)", got, a.ID)
		}
	})
	t.Run("write-backs queued while the only batcher is held share the next batch", func(t *testing.T) {
		want := []int64{b.ID, c.ID}
		var got []int64
		for len(got) < 2 {
			if id := receiveOne(t, queued); id != a.ID {
				got = append(got, id)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("queued %v, want b and c %v", got, want)
		}
		close(releaseA)
		if got := receiveOne(t, batches); !slices.Equal(got, want) {
			t.Fatalf("the next batch holds jobs %v, want b's and c's together %v", got, want)
		}
	})
	for left := map[string]bool{"batch-a": true, "batch-b": true, "batch-c": true}; len(left) > 0; {
		w := receiveOne(t, ev.wrote)
		if w.err != nil {
			t.Errorf("%s wrote back with %v", w.job.OperationKey, w.err)
		}
		delete(left, w.job.OperationKey)
	}
}

func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-time.After(patience):
		t.Errorf("waited %v for %s", patience, what)
	}
}

func receiveOne[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("nothing came in %v", patience)
	}
	var zero T
	return zero
}

// The reconciler's resolution of a job in manual review (new evidence sends
// it back to reconcile, attempt+1) is reported around its fenced write, so
// that a harness's history knows how the job left manual review.
func TestWorkerResolutionHooks(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(sink.Close)
	f := newFleet(t, fakeprovider.Config{WebhookURL: sink.URL, WebhookSecret: webhookSecret})
	const key = "resolved"
	job := f.enqueue(key)
	other := request(key)
	other.AmountMinor = 99
	if _, err := f.srv.Client().Refund(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	type resolution struct {
		job worker.Job
		err error
		at  string
	}
	resolutions := make(chan resolution, 10)
	w, ev := f.worker("w1", func(cfg *worker.Config) {
		cfg.Hooks.Resolving = func(j worker.Job) { resolutions <- resolution{job: j, at: "resolving"} }
		cfg.Hooks.Resolved = func(j worker.Job, err error) { resolutions <- resolution{job: j, err: err, at: "resolved"} }
	})
	ev.settled(t, f, key)
	inReview := f.wantSettled(key, refundjob.StateManualReview, 1)
	if _, _, err := evidence.Record(context.Background(), f.c, evidence.Observation{OperationKey: key, Source: evidence.Operator,
		Status: evidence.Rejected, Payload: []byte("the other request was declined")}); err != nil {
		t.Fatal(err)
	}
	w.ReconcileNow(context.Background())
	want := worker.Job{ID: job.ID, Attempt: inReview.Attempt + 1, OperationKey: key, Action: "reconcile", Transition: "resolve reconcile", To: "ready"}
	for _, at := range []string{"resolving", "resolved"} {
		got := receiveOne(t, resolutions)
		if got.at != at || got.job != want || got.err != nil {
			t.Errorf("got %s %+v (%v), want %s %+v without error", got.at, got.job, got.err, at, want)
		}
	}
	if j := f.job(key); j.Attempt < want.Attempt {
		t.Errorf("the job is at attempt %d after its resolution, want at least %d", j.Attempt, want.Attempt)
	}

	// The wake-up keeps the review's evidence, says so in the job's
	// timeline, and the queue's departures say why the job left.
	ops, err := operator.New(operator.Config{Client: f.c})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ops.Job(context.Background(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if earlier := deref(inReview.ReviewEvidence); earlier == "" || !strings.HasPrefix(v.ReviewEvidence, earlier) {
		t.Errorf("the wake-up overwrote the review's evidence %q: %q", earlier, v.ReviewEvidence)
	}
	woken := false
	for _, e := range v.Timeline {
		woken = woken || e.Kind == operator.EventWoken && e.Attempt == want.Attempt && strings.Contains(e.Text, "new evidence, observation")
	}
	if !woken {
		t.Errorf("the timeline does not say the job was woken: %+v", v.Timeline)
	}
	left, err := ops.Departures(context.Background(), operator.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Departures) != 1 || left.Departures[0].JobID != job.ID || left.Departures[0].Action != "wake" ||
		left.Departures[0].Operator != "system:reconciler" || !strings.Contains(left.Departures[0].Why, "operator rejected") {
		t.Errorf("departures from the queue: %+v", left.Departures)
	}
}
