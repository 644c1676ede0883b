package fencedwrite_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("a new job is born ready at attempt 0, due now, with its ledger row", func(t *testing.T) {
		job := e.enqueue("r-1")
		if job.State != refundjob.StateReady || job.Attempt != 0 || job.NextAction != refundjob.NextActionRefund || job.LeaseUntil != nil {
			t.Fatalf("new job = %+v", job)
		}
		if l := e.ledger("r-1"); l.Status != refund.StatusRequested {
			t.Fatalf("ledger row is %s, want requested", l.Status)
		}
		if _, err := e.c.RefundJob.Claim(ctx, job.ID, opts); err != nil {
			t.Fatalf("a new job is due now, but: %v", err)
		}
	})

	t.Run("the same key with the same parameters is a no-op", func(t *testing.T) {
		first := e.enqueue("r-2")
		ran := false
		job, created, err := e.c.RefundJob.Enqueue(ctx, request("r-2"), func(context.Context, *ent.Tx) error {
			ran = true
			return nil
		})
		if err != nil || created || job.ID != first.ID || ran {
			t.Fatalf("second enqueue: job=%v created=%v err=%v callback ran=%v; want the first job, nothing new", job, created, err, ran)
		}
	})

	t.Run("the same key with different parameters is an error naming each field", func(t *testing.T) {
		e.enqueue("r-3")
		p := request("r-3")
		p.AmountMinor, p.Currency, p.PaymentRef = 999, "USD", "pay-other"
		_, created, err := e.c.RefundJob.Enqueue(ctx, p, nil)
		wantOutcome(t, err, fencedwrite.ErrKeyConflict)
		for _, want := range []string{"amount_minor: enqueued as 1250, requested as 999", "currency: enqueued as EUR, requested as USD",
			"payment_ref: enqueued as pay-r-3, requested as pay-other"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if created {
			t.Error("created a second job for one key")
		}
	})

	t.Run("bad input is refused before the database, naming field and problem", func(t *testing.T) {
		before, err := e.c.RefundJob.Query().Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			edit func(*ent.RefundJobEnqueue)
			want []string
		}{
			{"zero amount", func(p *ent.RefundJobEnqueue) { p.AmountMinor = 0 }, []string{"amount_minor: must be a positive number of minor units, got 0"}},
			{"negative amount", func(p *ent.RefundJobEnqueue) { p.AmountMinor = -5 }, []string{"amount_minor: must be a positive number of minor units, got -5"}},
			{"absurd amount", func(p *ent.RefundJobEnqueue) { p.AmountMinor = 1 << 62 }, []string{"amount_minor: must be at most"}},
			{"lower-case currency", func(p *ent.RefundJobEnqueue) { p.Currency = "eur" }, []string{`currency: must be a three-letter upper-case ISO 4217 code, got "eur"`}},
			{"unknown currency", func(p *ent.RefundJobEnqueue) { p.Currency = "ABC" }, []string{`currency: "ABC" is not an ISO 4217 code`}},
			{"empty key", func(p *ent.RefundJobEnqueue) { p.OperationKey = "" }, []string{"operation_key: must not be empty"}},
			{"key with a space", func(p *ent.RefundJobEnqueue) { p.OperationKey = "refund 1" }, []string{"operation_key: must be printable ASCII without spaces"}},
			{"long key", func(p *ent.RefundJobEnqueue) { p.OperationKey = strings.Repeat("k", 129) }, []string{"operation_key: must be at most 128 characters, got 129"}},
			{"several at once", func(p *ent.RefundJobEnqueue) { p.AmountMinor, p.Currency, p.PaymentRef = -1, "", "" },
				[]string{"amount_minor:", "currency:", "payment_ref: must not be empty"}},
		}
		for _, tc := range cases {
			p := request("r-bad")
			tc.edit(&p)
			_, _, err := e.c.RefundJob.Enqueue(ctx, p, nil)
			if !errors.Is(err, fencedwrite.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
				continue
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q lacks %q", tc.name, err, want)
				}
			}
		}
		after, err := e.c.RefundJob.Query().Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("bad input wrote %d jobs", after-before)
		}
	})

	t.Run("a failing callback leaves no job behind", func(t *testing.T) {
		boom := errors.New("ledger unavailable")
		_, _, err := e.c.RefundJob.Enqueue(ctx, request("r-4"), func(context.Context, *ent.Tx) error { return boom })
		if !errors.Is(err, boom) || !errors.Is(err, fencedwrite.ErrRolledBack) {
			t.Fatalf("got %v, want the callback's error, rolled back", err)
		}
		if n, _ := e.c.RefundJob.Query().Where(refundjob.OperationKey("r-4")).Count(ctx); n != 0 {
			t.Fatal("the job was kept without its ledger row")
		}
	})
}

func TestClaimAndTakeoverRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("a claim needs a due ready job", func(t *testing.T) {
		job := e.enqueue("c-1")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.c.RefundJob.Claim(ctx, job.ID, opts)
		wantOutcome(t, err, fencedwrite.ErrNotClaimable) // running
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, time.Hour, "", ""), nil); err != nil {
			t.Fatal(err)
		}
		_, err = e.c.RefundJob.Claim(ctx, job.ID, opts)
		wantOutcome(t, err, fencedwrite.ErrNotClaimable) // not due for an hour
		_, err = e.c.RefundJob.Claim(ctx, 999999, opts)
		wantOutcome(t, err, fencedwrite.ErrNotFound)
	})

	t.Run("a claim sets the lease from the database clock and records the send", func(t *testing.T) {
		job := e.enqueue("c-2")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		j := e.wantJob(job.ID, refundjob.StateRunning, 1)
		if j.LeaseUntil == nil || !j.LeaseUntil.Equal(l.LeaseUntil()) || l.LeaseUntil().Sub(l.ClaimedAt()) != 45*time.Second {
			t.Fatalf("lease_until %v, lease %v claimed at %v", j.LeaseUntil, l.LeaseUntil(), l.ClaimedAt())
		}
		if j.KeyFirstUsedAt == nil || !j.KeyFirstUsedAt.Equal(l.ClaimedAt()) || j.LastSendAt == nil || !j.LastSendAt.Equal(l.ClaimedAt()) {
			t.Fatalf("key_first_used_at %v, last_send_at %v, want the claim time %v", j.KeyFirstUsedAt, j.LastSendAt, l.ClaimedAt())
		}
		var dbNow time.Time
		if err := e.raw.QueryRow("SELECT UTC_TIMESTAMP(6)").Scan(&dbNow); err != nil {
			t.Fatal(err)
		}
		if d := dbNow.Sub(l.ClaimedAt()); d < 0 || d > time.Minute {
			t.Fatalf("claimed at %v, database time %v", l.ClaimedAt(), dbNow)
		}
		// A second claim that sends keeps the key's first use.
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionRefund, 0, "", "rate limited"), nil); err != nil {
			t.Fatal(err)
		}
		l2, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		j = e.job(job.ID)
		if !j.KeyFirstUsedAt.Equal(l.ClaimedAt()) || !j.LastSendAt.Equal(l2.ClaimedAt()) {
			t.Fatalf("after a second send: first use %v (want %v), last send %v (want %v)", j.KeyFirstUsedAt, l.ClaimedAt(), j.LastSendAt, l2.ClaimedAt())
		}
	})

	t.Run("a claim outside the key's window reconciles instead of sending", func(t *testing.T) {
		job := e.enqueue("c-3")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionRefund, 0, "", "rate limited"), nil); err != nil {
			t.Fatal(err)
		}
		// A provider that keeps keys only a microsecond past the timeout and
		// the skew margin: the key's window closed right after its first use.
		shortMemory := fencedwrite.ClaimOptions{KeyRetention: fencedwrite.DefaultProviderTimeout + fencedwrite.DefaultSkewMargin + time.Microsecond}
		sendBefore := e.job(job.ID).LastSendAt
		l2, err := e.c.RefundJob.Claim(ctx, job.ID, shortMemory)
		if err != nil {
			t.Fatal(err)
		}
		if l2.NextAction() != refundjob.NextActionReconcile {
			t.Fatalf("claim of a job whose key is 24h old: next action %s, want reconcile", l2.NextAction())
		}
		j := e.job(job.ID)
		if j.NextAction != refundjob.NextActionReconcile || !j.LastSendAt.Equal(*sendBefore) {
			t.Fatalf("job = %s, last send %v; want reconcile and no new send recorded (%v)", j.NextAction, j.LastSendAt, sendBefore)
		}
	})

	t.Run("a takeover needs a running job whose lease expired, and always reconciles", func(t *testing.T) {
		live := e.enqueue("c-3b")
		if _, err := e.c.RefundJob.Claim(ctx, live.ID, opts); err != nil {
			t.Fatal(err)
		}
		_, err := e.c.RefundJob.Takeover(ctx, live.ID, opts)
		wantOutcome(t, err, fencedwrite.ErrNotClaimable) // lease still valid
		job := e.enqueue("c-4")
		if _, err := e.c.RefundJob.Claim(ctx, job.ID, instant); err != nil {
			t.Fatal(err)
		}
		e.wantLeaseExpired(job.ID)
		l2, err := e.c.RefundJob.Takeover(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if l2.Attempt() != 2 || l2.NextAction() != refundjob.NextActionReconcile {
			t.Fatalf("takeover lease %v (%s), want attempt 2 to reconcile", l2, l2.NextAction())
		}
		ready := e.enqueue("c-5")
		_, err = e.c.RefundJob.Takeover(ctx, ready.ID, opts)
		wantOutcome(t, err, fencedwrite.ErrNotClaimable)
	})

	t.Run("claims refuse bad options and transactions they do not own", func(t *testing.T) {
		job := e.enqueue("c-6")
		_, err := e.c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{KeyRetention: time.Minute})
		if !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(err.Error(), "ClaimOptions.KeyRetention") {
			t.Fatalf("claim with a key window below zero: %v", err)
		}
		tx, err := e.c.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		_, err = tx.RefundJob.Claim(ctx, job.ID, opts)
		wantOutcome(t, err, ent.ErrTxStarted)
	})
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	claimed := func(key string) (*ent.RefundJob, *ent.RefundJobLease) {
		t.Helper()
		job := e.enqueue(key)
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		return job, l
	}

	t.Run("complete settles the job and the ledger in one transaction", func(t *testing.T) {
		job, l := claimed("t-1")
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("t-1", "re_1")); err != nil {
			t.Fatal(err)
		}
		j := e.wantJob(job.ID, refundjob.StateSucceeded, 1)
		if j.LeaseUntil != nil || *j.ProviderRefundID != "re_1" {
			t.Fatalf("job = %+v", j)
		}
		if e.ledger("t-1").Status != refund.StatusRefunded {
			t.Fatal("ledger not settled")
		}
	})

	t.Run("a failing business write keeps the job as it was", func(t *testing.T) {
		job, l := claimed("t-2")
		boom := errors.New("ledger write failed")
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_2"), func(context.Context, *ent.Tx) error { return boom })
		if !errors.Is(err, fencedwrite.ErrRolledBack) || !errors.Is(err, boom) {
			t.Fatalf("got %v, want rolled back with the callback's error", err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
		// The lease still holds: the same transition can be retried.
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_2"), ledger.Refunded("t-2", "re_2")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("reschedule saves the provider's id and waits on the database clock", func(t *testing.T) {
		job, l := claimed("t-3")
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, time.Minute, "re_pending", "provider answered pending"), nil); err != nil {
			t.Fatal(err)
		}
		j := e.wantJob(job.ID, refundjob.StateReady, 1)
		if j.NextAction != refundjob.NextActionReconcile || j.ProviderRefundID == nil || *j.ProviderRefundID != "re_pending" ||
			j.LeaseUntil != nil || *j.LastError != "provider answered pending" {
			t.Fatalf("job = %+v", j)
		}
		if d := j.NextRunAt.Sub(l.ClaimedAt()); d < time.Minute || d > 2*time.Minute {
			t.Fatalf("next run %v is %v after the claim, want about a minute", j.NextRunAt, d)
		}
	})

	t.Run("manual review records reason and evidence", func(t *testing.T) {
		job, l := claimed("t-4")
		if err := e.c.RefundJob.Apply(ctx, l.ManualReview("idempotency conflict: same key, different parameters", `{"code":"idempotency_params_mismatch"}`, ""), nil); err != nil {
			t.Fatal(err)
		}
		j := e.wantJob(job.ID, refundjob.StateManualReview, 1)
		if *j.ReviewReason != "idempotency conflict: same key, different parameters" || *j.ReviewEvidence == "" {
			t.Fatalf("job = %+v", j)
		}
	})

	t.Run("fail records the rejection", func(t *testing.T) {
		job, l := claimed("t-5")
		if err := e.c.RefundJob.Apply(ctx, l.Fail("payment not refundable", ""), nil); err != nil {
			t.Fatal(err)
		}
		if j := e.wantJob(job.ID, refundjob.StateFailed, 1); *j.LastError != "payment not refundable" {
			t.Fatalf("job = %+v", j)
		}
	})

	t.Run("bad transitions are refused before the database", func(t *testing.T) {
		job, l := claimed("t-6")
		cases := []struct {
			tr   *ent.RefundJobTransition
			want string
		}{
			{l.Complete(""), "provider_refund_id: must not be empty"},
			{l.Reschedule(refundjob.NextActionRefund, -time.Second, "", ""), "after: must be between"},
			{l.Reschedule("resend", 0, "", ""), "next_action:"},
			{l.ManualReview("", "", ""), "reason: must not be empty"},
			{l.Fail("", ""), "reason: must not be empty"},
		}
		for _, tc := range cases {
			err := e.c.RefundJob.Apply(ctx, tc.tr, nil)
			if !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want ErrInvalid naming %q", tc.tr.Op(), err, tc.want)
			}
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	})

	t.Run("a lease not from Claim or Takeover writes nothing", func(t *testing.T) {
		job, _ := claimed("t-7")
		var forged ent.RefundJobLease
		for _, tr := range []*ent.RefundJobTransition{forged.Complete("re_x"), (*ent.RefundJobLease)(nil).Fail("x", "")} {
			wantOutcome(t, e.c.RefundJob.Apply(ctx, tr, nil), fencedwrite.ErrInvalidLease)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	})

	t.Run("only the runner commits", func(t *testing.T) {
		job, l := claimed("t-9")
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_9"), func(ctx context.Context, tx *ent.Tx) error {
			return tx.Commit()
		})
		if !errors.Is(err, fencedwrite.ErrInvalid) || !errors.Is(err, fencedwrite.ErrRunnerOwnsCommit) || errors.Is(err, fencedwrite.ErrRolledBack) {
			t.Fatalf("a callback that commits: %v, want ErrInvalid because the runner owns COMMIT", err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	})

	t.Run("fenced writes run only inside the runner, and the runner needs one", func(t *testing.T) {
		_, l := claimed("t-8")
		tx, err := e.c.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, tx.RefundJob.Fence(ctx, l.Complete("re_8")), fencedwrite.ErrOutsideRun)
		_ = tx.Rollback()
		wantOutcome(t, e.c.RefundJob.Run(ctx, func(context.Context, *ent.Tx) error { return nil }), fencedwrite.ErrNoFencedWrite)
	})
}

func TestWakeUpAndOperatorResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("wake-up makes a waiting job due, fenced on the attempt read", func(t *testing.T) {
		job := e.enqueue("w-1")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, time.Hour, "", "pending"), nil); err != nil {
			t.Fatal(err)
		}
		seen := e.job(job.ID)
		if err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.WakeUp(seen), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.RefundJob.Claim(ctx, job.ID, opts); err != nil {
			t.Fatalf("a woken job is due now, but: %v", err)
		}
		// The job moved on since it was read: the wake-up is stale.
		wantOutcome(t, e.c.RefundJob.Apply(ctx, e.c.RefundJob.WakeUp(seen), nil), fencedwrite.ErrSuperseded)
	})

	t.Run("operator resolution bumps the attempt and is fenced on the one read", func(t *testing.T) {
		job := e.enqueue("w-2")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, l.ManualReview("not found after the lag window", "", ""), nil); err != nil {
			t.Fatal(err)
		}
		seen := e.job(job.ID)
		if err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveReconcile(seen, "provider support confirms a delayed batch"), nil); err != nil {
			t.Fatal(err)
		}
		j := e.wantJob(job.ID, refundjob.StateReady, 2)
		if j.NextAction != refundjob.NextActionReconcile {
			t.Fatalf("resolved job next action %s, want reconcile", j.NextAction)
		}
		// A second operator acting on the same read loses: the attempt moved.
		wantOutcome(t, e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveSucceeded(seen, "re_1", "provider dashboard"), ledger.Refunded("w-2", "re_1")),
			fencedwrite.ErrSuperseded)
		wantOutcome(t, e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveRefund(seen, ""), nil), fencedwrite.ErrInvalid)
	})

	t.Run("resolution as succeeded settles the ledger too", func(t *testing.T) {
		job := e.enqueue("w-3")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, l.ManualReview("needs a person", "", ""), nil); err != nil {
			t.Fatal(err)
		}
		seen := e.job(job.ID)
		if err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveSucceeded(seen, "re_7", "provider statement line 42"), ledger.Refunded("w-3", "re_7")); err != nil {
			t.Fatal(err)
		}
		e.wantJob(job.ID, refundjob.StateSucceeded, 2)
		if e.ledger("w-3").Status != refund.StatusRefunded {
			t.Fatal("ledger not settled")
		}
	})
}

// Matched vs changed rows: a wake-up of a job that is already due sets an
// unchanged value. With clientFoundRows=true (fencedwrite.DSN) it matches
// its row; a connection that counts changed rows reports 0, and the runner
// says exactly that instead of calling it stale.
func TestMatchedVersusChangedRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job := e.enqueue("m-1") // due now: a wake-up changes nothing

	changedRows := e.db.Config()
	changedRows.ParseTime = true
	changedRows.ClientFoundRows = false
	careless := dbtest.ClientOn(t, dbtest.OpenDSN(t, changedRows.FormatDSN()))
	seen := e.job(job.ID)
	// The fenced client wakes the job first: where no trigger clears
	// writer_attempt (dbtest.Engine.DatabaseFence), the first declaration of
	// attempt 0 changes the row, and only later wake-ups change nothing.
	if err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.WakeUp(seen), nil); err != nil {
		t.Fatalf("wake-up on a clientFoundRows connection: %v", err)
	}
	wantOutcome(t, careless.RefundJob.Apply(ctx, careless.RefundJob.WakeUp(seen), nil), fencedwrite.ErrFoundRowsOff)

	// The same statement, raw, on both kinds of connection.
	const wake = "UPDATE refund_jobs SET next_run_at = LEAST(next_run_at, UTC_TIMESTAMP(6)), writer_attempt = ? WHERE id = ? AND state = 'ready' AND attempt = ?"
	for _, tc := range []struct {
		name string
		db   *sql.DB
		want int64
	}{
		{"changed rows", dbtest.OpenDSN(t, changedRows.FormatDSN()), 0},
		{"matched rows", e.db.FencedDB(fencedwrite.DSNOptions{}), 1},
	} {
		res, err := tc.db.ExecContext(ctx, wake, seen.Attempt, job.ID, seen.Attempt)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != tc.want {
			t.Errorf("%s: %d rows affected, want %d", tc.name, n, tc.want)
		}
	}
}

// The runtime backstop is installed by the generated client itself: Ent's
// generic builders cannot write a job, whatever client or transaction.
func TestBackstopRejectsGenericWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job := e.enqueue("b-1")
	opened, err := ent.Open("mysql", e.db.DSN(fencedwrite.DSNOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	tx, err := e.c.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	writes := map[string]func() error{
		//fencelint:allow the backstop must refuse Ent's generic update builder
		"UpdateOneID": func() error { return e.c.RefundJob.UpdateOneID(job.ID).SetState(refundjob.StateReady).Exec(ctx) },
		"Update": func() error {
			//fencelint:allow the backstop must refuse Ent's generic bulk update, even with a fenced WHERE
			return e.c.RefundJob.Update().Where(refundjob.ID(job.ID), refundjob.StateEQ(refundjob.StateReady), refundjob.Attempt(0)).SetLastError("x").Exec(ctx)
		},
		//fencelint:allow the backstop covers clients from ent.Open too
		"Open/UpdateOne": func() error { return opened.RefundJob.UpdateOne(job).SetAttempt(5).Exec(ctx) },
		//fencelint:allow the backstop covers transactional clients too
		"Tx/UpdateOneID": func() error { return tx.RefundJob.UpdateOneID(job.ID).SetState(refundjob.StateSucceeded).Exec(ctx) },
		"DeleteOneID":    func() error { return e.c.RefundJob.DeleteOneID(job.ID).Exec(ctx) },
		"Create": func() error {
			return e.c.RefundJob.Create().SetOperationKey("b-2").SetPaymentRef("p").SetAmountMinor(1).SetCurrency("EUR").
				SetNextRunAt(time.Now()).SetCreatedAt(time.Now()).SetUpdatedAt(time.Now()).Exec(ctx)
		},
	}
	for name, write := range writes {
		err := write()
		var be *fencedwrite.BypassError
		if !errors.Is(err, fencedwrite.ErrBypass) || !errors.As(err, &be) || be.Table != "refund_jobs" {
			t.Errorf("%s: %v, want the backstop's refusal", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "RefundJobClient.Apply") {
			t.Errorf("%s: %q does not name the fenced API", name, err)
		}
	}
	e.wantJob(job.ID, refundjob.StateReady, 0)
	// Reading is never refused.
	if _, err := e.c.RefundJob.Query().Where(refundjob.ID(job.ID)).Only(ctx); err != nil {
		t.Fatal(err)
	}
	// The companions may be created (ledger.Open, evidence.Record) but never
	// changed through the generic builders.
	for name, write := range map[string]func() error{
		"Refund.Update": func() error {
			return e.c.Refund.Update().Where(refund.OperationKey("b-1")).SetStatus(refund.StatusRequested).Exec(ctx)
		},
		"Refund.Delete":      func() error { _, err := e.c.Refund.Delete().Exec(ctx); return err },
		"Observation.Update": func() error { return e.c.Observation.Update().SetProcessedAt(time.Now()).Exec(ctx) },
	} {
		var be *fencedwrite.BypassError
		if err := write(); !errors.Is(err, fencedwrite.ErrBypass) || !errors.As(err, &be) || be.Hint == "" {
			t.Errorf("%s: %v, want the create-only refusal with its hint", name, err)
		}
	}
	if l := e.ledger("b-1"); l.Status != refund.StatusRequested {
		t.Errorf("ledger row is %s, want requested", l.Status)
	}
}

// A settled refund is never paid again, archived or not: the upstream system
// re-delivers an approved request after its job was settled and archived,
// and Enqueue says so instead of creating a job that would send again.
func TestArchivedKeyIsNeverANewJob(t *testing.T) {
	t.Parallel()
	const key = "archived-1"
	// History from before the fences: a job settled 40 days ago, with its
	// ledger row (the fences would never let anyone write such a row now).
	d := dbtest.NewWithHistory(t, 1, func(db *sql.DB) {
		for _, q := range []string{
			"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, provider_refund_id, next_run_at, created_at, updated_at) " +
				"VALUES ('" + key + "', 'pay-" + key + "', 1250, 'EUR', 'succeeded', 1, 're_1', UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY)",
			"INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, status, provider_refund_id, settled_at, created_at, updated_at) " +
				"VALUES ('" + key + "', 'pay-" + key + "', 1250, 'EUR', 'refunded', 're_1', UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY)",
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	})
	ctx := t.Context()
	d.Archive("UTC_TIMESTAMP(6) - INTERVAL 31 DAY")
	c := d.Client()
	if n, err := c.RefundJob.Query().Count(ctx); err != nil || n != 0 {
		t.Fatalf("%d jobs left after archival (%v), want 0", n, err)
	}
	for name, fn := range map[string]func(context.Context, *ent.Tx) error{"without a ledger": nil, "with ledger.Open": ledger.Open(request(key))} {
		t.Run("the same request again "+name, func(t *testing.T) {
			job, created, err := c.RefundJob.Enqueue(ctx, request(key), fn)
			if !errors.Is(err, fencedwrite.ErrKeyArchived) || created || job != nil {
				t.Fatalf("re-enqueue of an archived key: job=%v created=%v err=%v, want ErrKeyArchived", job, created, err)
			}
		})
	}
	t.Run("the archived key with other parameters", func(t *testing.T) {
		p := request(key)
		p.AmountMinor = 1
		_, _, err := c.RefundJob.Enqueue(ctx, p, nil)
		if !errors.Is(err, fencedwrite.ErrKeyConflict) || !strings.Contains(err.Error(), "amount_minor: enqueued as 1250, requested as 1") {
			t.Fatalf("re-enqueue with another amount: %v, want ErrKeyConflict naming amount_minor", err)
		}
	})
	if n, err := c.RefundJob.Query().Count(ctx); err != nil || n != 0 {
		t.Fatalf("%d jobs exist (%v): a re-delivered archived request became a job", n, err)
	}
}

// A provider refund id learnt on an earlier attempt (a pending answer) is
// kept by a later reschedule that learnt none: the "not found, refund id
// known" rule of reconcile looks the refund up by it. It stays in the row
// and reaches the next claim's lease, whether the reschedule is applied on
// its own or in a batch.
func TestRescheduleKeepsALearntProviderRefundID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	apply := map[string]func(t *testing.T, tr *ent.RefundJobTransition){
		"Apply": func(t *testing.T, tr *ent.RefundJobTransition) {
			if err := e.c.RefundJob.Apply(ctx, tr, nil); err != nil {
				t.Fatal(err)
			}
		},
		"ApplyBatch": func(t *testing.T, tr *ent.RefundJobTransition) {
			if errs := e.c.RefundJob.ApplyBatch(ctx, []ent.RefundJobBatchItem{{Transition: tr}}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		},
	}
	for _, how := range []string{"Apply", "ApplyBatch"} {
		t.Run("a reschedule without a refund id keeps the one learnt before, with "+how, func(t *testing.T) {
			key := "keep-" + how
			job := e.enqueue(key)
			claim := func() *ent.RefundJobLease {
				t.Helper()
				l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			// Attempt 1: the provider answers pending and reveals its id.
			apply[how](t, claim().Reschedule(refundjob.NextActionReconcile, 0, "re_pending", "provider answered pending"))
			// Attempt 2: the reconcile times out and learns nothing.
			l := claim()
			if l.ProviderRefundID() != "re_pending" {
				t.Fatalf("attempt 2's lease carries refund id %q, want re_pending", l.ProviderRefundID())
			}
			apply[how](t, l.Reschedule(refundjob.NextActionReconcile, 0, "", "socket timeout"))
			if j := e.wantJob(job.ID, refundjob.StateReady, 2); j.ProviderRefundID == nil || *j.ProviderRefundID != "re_pending" {
				t.Fatalf("after a reschedule without a refund id the row holds %v, want re_pending", j.ProviderRefundID)
			}
			if l := claim(); l.ProviderRefundID() != "re_pending" {
				t.Fatalf("attempt 3's lease carries refund id %q, want re_pending", l.ProviderRefundID())
			}
		})
	}
}
