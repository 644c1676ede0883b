//go:build tidb

package fencedwrite_test

// What the TiDB run states in place of dbfence_test.go. TiDB has no
// triggers (dbtest.Engine.DatabaseFence is false), so the database refuses
// nothing that bypasses the fenced layer: the WHERE clause of the fenced
// writes (state + attempt) is the only fence, and it holds for every writer
// that goes through the fenced layer.

import (
	"errors"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

func TestWithoutTriggersTheWhereClauseIsTheOnlyFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if e.db.Engine().DatabaseFence {
		t.Fatalf("%s runs the database's fence; this file is for engines without one", e.db.Engine().Name)
	}
	ctx := t.Context()
	const key = "k"
	job := e.enqueue(key)
	a, b := e.worker(), e.worker()
	la, err := a.RefundJob.Claim(ctx, job.ID, instant)
	if err != nil {
		t.Fatal(err)
	}
	e.wantLeaseExpired(job.ID)
	lb, err := b.RefundJob.Takeover(ctx, job.ID, opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the zombie's write through the fenced layer is superseded", func(t *testing.T) {
		wantOutcome(t, a.RefundJob.Apply(ctx, la.Reschedule(refundjob.NextActionRefund, 0, "", "socket timeout"), nil), fencedwrite.ErrSuperseded)
		e.wantJob(job.ID, refundjob.StateRunning, 2)
	})
	t.Run("the zombie's raw write lands: the database does not refuse it", func(t *testing.T) {
		//fencelint:allow the article's zombie catch block, written raw on purpose: on TiDB nothing refuses it
		res, err := a.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID)
		if err != nil {
			t.Fatalf("undeclared zombie write: %v, want it to land (no trigger)", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("undeclared zombie write changed %d rows, want 1", n)
		}
		// The article's bug is back: the job is queued to be sent again.
		e.wantJob(job.ID, refundjob.StateReady, 2)
	})
	t.Run("the new holder's fence then refuses its own write, and says the row is not what it expects", func(t *testing.T) {
		err := b.RefundJob.Apply(ctx, lb.Complete("re_1"), ledger.Refunded(key, "re_1"))
		if !errors.Is(err, fencedwrite.ErrUnexpectedState) || errors.Is(err, fencedwrite.ErrSuperseded) {
			t.Fatalf("B's completion after the raw write: %v, want ErrUnexpectedState", err)
		}
		e.wantJob(job.ID, refundjob.StateReady, 2)
	})
}

// On TiDB a session can move the clock that claims read (SYSDATE()), which
// MySQL and MariaDB allow only as a server option (dbtest.Engine's
// SessionMovesSysdate): a client that bypasses fencedwrite.DSN, sets
// tidb_sysdate_is_now and runs an hour ahead takes over a live lease. On
// MySQL and MariaDB the same client cannot (TestLeasesUseTheClockNoSessionCanMove).
func TestOnTiDBASessionCanMoveTheLeaseClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if !e.db.Engine().SessionMovesSysdate {
		t.Fatalf("%s does not let a session move SYSDATE(); this file is for TiDB", e.db.Engine().Name)
	}
	ctx := t.Context()
	job, _ := e.claim("ahead")
	if _, err := fencedwrite.DSN("app@tcp(db:4000)/p?tidb_sysdate_is_now=1", fencedwrite.DSNOptions{}); !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Fatalf("fencedwrite.DSN with tidb_sysdate_is_now: %v, want it refused", err)
	}
	params := sessionSkew(time.Hour)
	params["tidb_sysdate_is_now"] = "1"
	ahead := e.clientWith(time.UTC, params)
	l, err := ahead.RefundJob.Takeover(ctx, job.ID, opts)
	if err != nil {
		t.Fatalf("takeover by a session whose SYSDATE() runs an hour ahead: %v, want it to succeed on TiDB", err)
	}
	// The first lease, 30 s long, was live by the server's real clock.
	e.wantJob(job.ID, refundjob.StateRunning, 2)
	if l.Attempt() != 2 {
		t.Fatalf("the takeover's lease is at attempt %d, want 2", l.Attempt())
	}
}
