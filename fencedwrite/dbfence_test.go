//go:build !tidb

package fencedwrite_test

// The tests of the database's fence at the data layer: triggers refuse what
// bypasses the fenced layer. TiDB has no triggers, so the TiDB run (built
// with -tags tidb) leaves this file out and states the loss instead
// (nofence_test.go).

import (
	"testing"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/internal/dbtest"
)

// A zombie that bypasses the fenced layer altogether, with raw SQL while the
// new holder is still running, is refused by the database.
func TestZombieRawUpdateIsRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job := e.enqueue("k")
	a, b := e.worker(), e.worker()
	la, err := a.RefundJob.Claim(ctx, job.ID, instant)
	if err != nil {
		t.Fatal(err)
	}
	e.wantLeaseExpired(job.ID)
	if _, err := b.RefundJob.Takeover(ctx, job.ID, opts); err != nil {
		t.Fatal(err)
	}
	//fencelint:allow the article's zombie catch block, written raw on purpose: the trigger must refuse it
	_, err = a.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID)
	if !dbtest.IsTriggerRefusal(err, "must declare the attempt it holds") {
		t.Fatalf("undeclared zombie write: %v, want the database's refusal", err)
	}
	//fencelint:allow a zombie that declares its stale attempt but drops the WHERE fence
	_, err = a.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready', writer_attempt = ? WHERE id = ?", la.Attempt(), job.ID)
	if !dbtest.IsTriggerRefusal(err, "stale writer declares attempt 1, row is at 2") {
		t.Fatalf("stale zombie write: %v, want the database's refusal", err)
	}
	e.wantJob(job.ID, refundjob.StateRunning, 2)
}
