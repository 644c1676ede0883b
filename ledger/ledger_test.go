package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

type env struct {
	t *testing.T
	d *dbtest.DB
	c *ent.Client
}

func (e *env) claimed(key string) *ent.RefundJobLease {
	e.t.Helper()
	p := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 100, Currency: "EUR"}
	job, _, err := e.c.RefundJob.Enqueue(e.t.Context(), p, ledger.Open(p))
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := e.c.RefundJob.Claim(e.t.Context(), job.ID, fencedwrite.ClaimOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) row(key string) *ent.Refund {
	e.t.Helper()
	r, err := e.c.Refund.Query().Where(refund.OperationKey(key)).Only(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// dbNow reads the database's clock as microseconds: fencedrt.ClockUTC is a
// DATETIME on MySQL and MariaDB but text on TiDB, and would not scan into a
// time.Time there.
func (e *env) dbNow() time.Time {
	e.t.Helper()
	var micros int64
	if err := e.d.RawDB().QueryRow("SELECT " + fencedrt.ClockMicros).Scan(&micros); err != nil {
		e.t.Fatal(err)
	}
	return time.UnixMicro(micros).UTC()
}

// A ledger row becomes refunded only in the transaction that settles its
// job as succeeded with the same refund id, stamped with the database's
// clock, and never changes or disappears afterwards.
func TestLedgerFollowsItsJob(t *testing.T) {
	d := dbtest.New(t)
	e := &env{t: t, d: d, c: d.Client()}
	ctx := t.Context()

	t.Run("not with a reschedule", func(t *testing.T) {
		l := e.claimed("resched")
		err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, 0, "re_1", "pending"), ledger.Refunded("resched", "re_1"))
		if !errors.Is(err, fencedwrite.ErrInvalid) || errors.Is(err, fencedwrite.ErrRolledBack) {
			t.Fatalf("refunded with a reschedule: %v, want ErrInvalid", err)
		}
		if r := e.row("resched"); r.Status != refund.StatusRequested {
			t.Fatalf("ledger row is %s, want requested", r.Status)
		}
	})
	t.Run("not with another refund id", func(t *testing.T) {
		l := e.claimed("other-id")
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("other-id", "re_2"))
		if !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Fatalf("refunded as re_2 with a completion as re_1: %v, want ErrInvalid", err)
		}
	})
	t.Run("not for another job's completion", func(t *testing.T) {
		l := e.claimed("mine")
		e.claimed("theirs")
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("theirs", "re_1")); !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Fatalf("another job's ledger row settled by this completion: %v, want ErrInvalid", err)
		}
	})
	t.Run("not outside the runner", func(t *testing.T) {
		e.claimed("plain-tx")
		tx, err := e.c.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := ledger.Refunded("plain-tx", "re_1")(ctx, tx); !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Fatalf("refunded in a plain transaction: %v, want ErrInvalid", err)
		}
	})
	t.Run("with the completion, once, on the database clock", func(t *testing.T) {
		l := e.claimed("done")
		before := e.dbNow()
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("done", "re_1")); err != nil {
			t.Fatal(err)
		}
		after := e.dbNow()
		r := e.row("done")
		if r.Status != refund.StatusRefunded || r.ProviderRefundID == nil || *r.ProviderRefundID != "re_1" || r.SettledAt == nil {
			t.Fatalf("ledger row = %+v, want refunded as re_1", r)
		}
		if r.SettledAt.Before(before) || r.SettledAt.After(after) {
			t.Errorf("settled at %v, outside the database's clock %v..%v", r.SettledAt, before, after)
		}
		if err := e.c.Refund.UpdateOneID(r.ID).SetStatus(refund.StatusRequested).Exec(ctx); !errors.Is(err, fencedwrite.ErrBypass) {
			t.Errorf("reopening the ledger row: %v, want ErrBypass", err)
		}
		if err := e.c.Refund.DeleteOneID(r.ID).Exec(ctx); !errors.Is(err, fencedwrite.ErrBypass) {
			t.Errorf("deleting the ledger row: %v, want ErrBypass", err)
		}
		if r := e.row("done"); r.Status != refund.StatusRefunded {
			t.Fatalf("ledger row is %s after the attacks, want refunded", r.Status)
		}
	})
	t.Run("failed only with the job's failure", func(t *testing.T) {
		l := e.claimed("declined")
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_9"), ledger.Failed("declined")); !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Fatalf("failed with a completion: %v, want ErrInvalid", err)
		}
		if err := e.c.RefundJob.Apply(ctx, l.Fail("payment_not_refundable", ""), ledger.Failed("declined")); err != nil {
			t.Fatal(err)
		}
		if r := e.row("declined"); r.Status != refund.StatusFailed {
			t.Fatalf("ledger row is %s, want failed", r.Status)
		}
	})
}

// The callbacks are ordinary functions of a transaction: a second one for
// the same row in the same transaction finds nothing requested.
func TestLedgerRowSettlesOnce(t *testing.T) {
	d := dbtest.New(t)
	e := &env{t: t, d: d, c: d.Client()}
	l := e.claimed("k")
	err := e.c.RefundJob.Apply(t.Context(), l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
		if err := ledger.Refunded("k", "re_1")(ctx, tx); err != nil {
			return err
		}
		return ledger.Refunded("k", "re_1")(ctx, tx)
	})
	if !errors.Is(err, fencedwrite.ErrRolledBack) {
		t.Fatalf("settling twice: %v, want the transaction rolled back", err)
	}
	if r := e.row("k"); r.Status != refund.StatusRequested {
		t.Fatalf("ledger row is %s, want requested: the failed transaction kept nothing", r.Status)
	}
}
