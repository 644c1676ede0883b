package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

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
	for _, key := range []string{"batch-a", "batch-b", "batch-c"} {
		if w := ev.await(t, key, nil); w.err != nil {
			t.Errorf("%s wrote back with %v", key, w.err)
		}
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
