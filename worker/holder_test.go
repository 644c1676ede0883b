package worker_test

import (
	"testing"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/ent/refundjobattempt"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// The worker claims under its Config.Holder: the attempts log names it as
// the process that held the attempt.
func TestWorkerRecordsItsHolder(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const key = "held-by-a"
	job := f.enqueue(key)
	_, ev := f.worker("A", func(c *worker.Config) { c.Holder = "refundd-a.example/4242" })
	ev.settled(t, f, key)
	f.wantSettled(key, refundjob.StateSucceeded, 1)
	rows, err := f.c.RefundJobAttempt.Query().Where(refundjobattempt.JobID(job.ID)).All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Attempt != 1 || string(rows[0].Op) != fencedwrite.AttemptClaim || rows[0].Holder != "refundd-a.example/4242" {
		t.Fatalf("attempts log of %s: %+v, want attempt 1 claimed by refundd-a.example/4242", key, rows)
	}
}
