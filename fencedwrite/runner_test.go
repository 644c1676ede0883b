package fencedwrite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

// wantUnlocked checks that another session can lock the job's row at once
// (NOWAIT): no transaction of the runner still holds it.
func (e *env) wantUnlocked(id int64) {
	e.t.Helper()
	tx, err := e.raw.BeginTx(e.t.Context(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE NOWAIT", id); err != nil {
		e.t.Fatalf("job %d's row is still locked: %v", id, err)
	}
}

// claim enqueues a job and claims it with the default lease.
func (e *env) claim(key string) (*ent.RefundJob, *ent.RefundJobLease) {
	e.t.Helper()
	job := e.enqueue(key)
	l, err := e.c.RefundJob.Claim(e.t.Context(), job.ID, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return job, l
}

// completions claims a job for each key and returns their ids and the
// batch items that complete them with their ledger rows (refund id
// "re_<key>").
func (e *env) completions(keys ...string) ([]int64, []ent.RefundJobBatchItem) {
	e.t.Helper()
	ids := make([]int64, len(keys))
	items := make([]ent.RefundJobBatchItem, len(keys))
	for i, key := range keys {
		job, l := e.claim(key)
		ids[i] = job.ID
		items[i] = ent.RefundJobBatchItem{Transition: l.Complete("re_" + key), Then: ledger.Refunded(key, "re_"+key)}
	}
	return ids, items
}

// keys returns n keys prefix-0, prefix-1, ...
func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// A callback cannot end the runner's transaction behind its back, so the
// runner's outcome always matches the row.
func TestRunnerOwnsTheTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	for i, stmt := range []string{
		"COMMIT", "ROLLBACK", "ROLLBACK TO SAVEPOINT s", "START TRANSACTION", "BEGIN", "SET autocommit = 1", "SET timestamp = 1",
		"CREATE TABLE fk_probe (id int)", "DROP TABLE refunds", "TRUNCATE refunds", "LOCK TABLES refunds WRITE", "UNLOCK TABLES",
		"CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 40 DAY)", "/*!COMMIT*/", "  /* a comment */ commit", "XA START 'x'",
	} {
		t.Run("refuses "+stmt, func(t *testing.T) {
			job, l := e.claim("stmt-" + string(rune('a'+i)))
			var seen error
			err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
				_, seen = tx.ExecContext(ctx, stmt)
				return seen
			})
			if !errors.Is(seen, fencedwrite.ErrInvalid) {
				t.Fatalf("the callback's %q got %v, want a refusal matching ErrInvalid", stmt, seen)
			}
			if !errors.Is(err, fencedwrite.ErrInvalid) || errors.Is(err, fencedwrite.ErrRolledBack) {
				t.Fatalf("Apply = %v, want ErrInvalid only", err)
			}
			e.wantJob(job.ID, refundjob.StateRunning, 1)
			e.wantUnlocked(job.ID)
		})
	}
	t.Run("a refused statement was never sent, even when the callback swallows the refusal", func(t *testing.T) {
		job, l := e.claim("swallow")
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
			_, _ = tx.ExecContext(ctx, "CREATE TABLE fk_probe (id int)")
			_, _ = tx.ExecContext(ctx, "ROLLBACK")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		e.wantJob(job.ID, refundjob.StateSucceeded, 1)
		var tables int
		if err := e.raw.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'fk_probe'").Scan(&tables); err != nil || tables != 0 {
			t.Fatalf("fk_probe exists (%d, %v): the refused statement ran", tables, err)
		}
	})
	t.Run("a callback that rolls back is told the runner owns it", func(t *testing.T) {
		job, l := e.claim("rollback")
		var seen error
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
			seen = tx.Rollback()
			return seen
		})
		if !errors.Is(seen, fencedwrite.ErrRunnerOwnsCommit) || !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Fatalf("rollback in the callback: %v, Apply: %v; want ErrRunnerOwnsCommit and ErrInvalid", seen, err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
		e.wantUnlocked(job.ID)
	})
	t.Run("a commit hook that never calls the next one commits nothing and says so", func(t *testing.T) {
		job, l := e.claim("swallowing-hook")
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
			tx.OnCommit(func(ent.Committer) ent.Committer {
				return ent.CommitFunc(func(context.Context, *ent.Tx) error { return nil })
			})
			return nil
		})
		wantOutcome(t, err, fencedwrite.ErrRolledBack)
		e.wantJob(job.ID, refundjob.StateRunning, 1)
		e.wantUnlocked(job.ID)
	})
	t.Run("a commit hook that fails before COMMIT leaves no lock behind", func(t *testing.T) {
		job, l := e.claim("failing-hook")
		err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
			tx.OnCommit(func(ent.Committer) ent.Committer {
				return ent.CommitFunc(func(context.Context, *ent.Tx) error { return errors.New("audit sink down") })
			})
			return nil
		})
		wantOutcome(t, err, fencedwrite.ErrRolledBack)
		e.wantUnlocked(job.ID)
		// The lease still holds, and its retry is not blocked.
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), nil); err != nil {
			t.Fatalf("retry after the failed hook: %v", err)
		}
		e.wantJob(job.ID, refundjob.StateSucceeded, 1)
	})
	t.Run("a callback that panics rolls back and releases the row", func(t *testing.T) {
		job, l := e.claim("panic")
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			_ = e.c.RefundJob.Apply(ctx, l.Complete("re_1"), func(context.Context, *ent.Tx) error { panic("bug in the business write") })
		}()
		e.wantJob(job.ID, refundjob.StateRunning, 1)
		e.wantUnlocked(job.ID)
		if err := e.worker().RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, 0, "", "after a panic"), nil); err != nil {
			t.Fatalf("a second writer after the panic: %v", err)
		}
	})
}

// The runner's outcomes name exactly what happened.
func TestRunnerOutcomesAreExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("a second completion with another refund id is not this very write", func(t *testing.T) {
		job, l := e.claim("re-1-then-re-2")
		if err := e.c.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("re-1-then-re-2", "re_1")); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, e.c.RefundJob.Apply(ctx, l.Complete("re_2"), nil), fencedwrite.ErrUnexpectedState)
		wantOutcome(t, e.c.RefundJob.Apply(ctx, l.Complete("re_1"), nil), fencedwrite.ErrAlreadySettled)
		e.wantJob(job.ID, refundjob.StateSucceeded, 1)
	})
	t.Run("a reschedule with another next action is not this very write", func(t *testing.T) {
		_, l := e.claim("resched-twice")
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionRefund, 0, "", "rate limited"), nil); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, 0, "", "rate limited"), nil), fencedwrite.ErrUnexpectedState)
		wantOutcome(t, e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionRefund, 0, "", "rate limited"), nil), fencedwrite.ErrAlreadySettled)
	})
	t.Run("two transitions of one job in one transaction are refused, not blamed on clientFoundRows", func(t *testing.T) {
		job, l := e.claim("two-moves")
		err := e.c.RefundJob.Run(ctx, func(ctx context.Context, tx *ent.Tx) error {
			if err := tx.RefundJob.Fence(ctx, l.Reschedule(refundjob.NextActionReconcile, 0, "", "pending")); err != nil {
				return err
			}
			return tx.RefundJob.Fence(ctx, l.Complete("re_1"))
		})
		if !errors.Is(err, fencedwrite.ErrInvalid) || errors.Is(err, fencedwrite.ErrFoundRowsOff) {
			t.Fatalf("two transitions: %v, want ErrInvalid", err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	})
	t.Run("a zero or nil transition is an error, not a panic", func(t *testing.T) {
		wantOutcome(t, e.c.RefundJob.Apply(ctx, &ent.RefundJobTransition{}, nil), fencedwrite.ErrInvalid)
		wantOutcome(t, e.c.RefundJob.Apply(ctx, nil, nil), fencedwrite.ErrInvalid)
	})
	t.Run("an invalid lease is ErrInvalid, never a retryable rollback", func(t *testing.T) {
		for name, tr := range map[string]*ent.RefundJobTransition{
			"nil lease":  (*ent.RefundJobLease)(nil).Complete("re_1"),
			"zero lease": (&ent.RefundJobLease{}).Fail("declined", ""),
		} {
			err := e.c.RefundJob.Apply(ctx, tr, nil)
			if !errors.Is(err, fencedwrite.ErrInvalidLease) || !errors.Is(err, fencedwrite.ErrInvalid) || errors.Is(err, fencedwrite.ErrRolledBack) {
				t.Errorf("%s: %v, want ErrInvalidLease (ErrInvalid) and not ErrRolledBack", name, err)
			}
		}
	})
}

// A stale writer whose job sits in the same state at a newer attempt is
// superseded, for every transition: this is what a planted bug that drops
// the attempt predicate would change (the database would then refuse the
// write, and the outcome would not be ErrSuperseded).
func TestStaleTransitionsAreSuperseded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	a, b := e.worker(), e.worker()
	for name, write := range map[string]func(l *ent.RefundJobLease) *ent.RefundJobTransition{
		"complete": func(l *ent.RefundJobLease) *ent.RefundJobTransition { return l.Complete("re_1") },
		"reschedule": func(l *ent.RefundJobLease) *ent.RefundJobTransition {
			return l.Reschedule(refundjob.NextActionRefund, 0, "", "x")
		},
		"manual review": func(l *ent.RefundJobLease) *ent.RefundJobTransition { return l.ManualReview("why", "", "") },
		"fail":          func(l *ent.RefundJobLease) *ent.RefundJobTransition { return l.Fail("declined", "") },
	} {
		t.Run("a stale "+name+" while the new holder is still running", func(t *testing.T) {
			job := e.enqueue("stale-" + strings.ReplaceAll(name, " ", "-"))
			la, err := a.RefundJob.Claim(ctx, job.ID, instant)
			if err != nil {
				t.Fatal(err)
			}
			e.wantLeaseExpired(job.ID)
			if _, err := b.RefundJob.Takeover(ctx, job.ID, opts); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, a.RefundJob.Apply(ctx, write(la), nil), fencedwrite.ErrSuperseded)
			e.wantJob(job.ID, refundjob.StateRunning, 2)
		})
	}
	t.Run("a stale resolution while the job is back in manual review", func(t *testing.T) {
		job, l := e.claim("stale-resolution")
		if err := e.c.RefundJob.Apply(ctx, l.ManualReview("not found after the lag", "", ""), nil); err != nil {
			t.Fatal(err)
		}
		seen := e.job(job.ID) // operator X reads manual_review at 1
		if err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveReconcile(seen, "operator Y: ask again"), nil); err != nil {
			t.Fatal(err)
		}
		l3, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, l3.ManualReview("still not found", "", ""), nil); err != nil {
			t.Fatal(err)
		}
		e.wantJob(job.ID, refundjob.StateManualReview, 3)
		for name, tr := range map[string]*ent.RefundJobTransition{
			"reconcile": e.c.RefundJob.ResolveReconcile(seen, "X: ask again"),
			"refund":    e.c.RefundJob.ResolveRefund(seen, "X: provider says rejected"),
			"succeeded": e.c.RefundJob.ResolveSucceeded(seen, "re_1", "X: found it"),
		} {
			if err := e.c.RefundJob.Apply(ctx, tr, nil); !errors.Is(err, fencedwrite.ErrSuperseded) {
				t.Errorf("X's stale resolve %s: %v, want superseded", name, err)
			}
		}
		e.wantJob(job.ID, refundjob.StateManualReview, 3)
	})
	t.Run("a resolution to refund puts the job back to send, at attempt+1", func(t *testing.T) {
		job, l := e.claim("resolve-refund")
		if err := e.c.RefundJob.Apply(ctx, l.ManualReview("idempotency conflict", "", ""), nil); err != nil {
			t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveRefund(e.job(job.ID), "provider answered rejected for the same key"), nil); err != nil {
			t.Fatal(err)
		}
		j := e.wantJob(job.ID, refundjob.StateReady, 2)
		if j.NextAction != refundjob.NextActionRefund || j.ReviewEvidence == nil {
			t.Fatalf("job = %s with evidence %v, want refund with the proof", j.NextAction, j.ReviewEvidence)
		}
	})
}

// A deadlock rolls the whole transaction back on the server. The runner says
// so, and sends nothing more in it, even when the callback swallows the
// error (statements after a server-side rollback would autocommit).
func TestDeadlockIsARollback(t *testing.T) {
	t.Parallel()
	for _, swallow := range []bool{false, true} {
		name := "the callback returns the deadlock"
		if swallow {
			name = "the callback swallows the deadlock"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx := t.Context()
			j1, l1 := e.claim("d-1")
			j2, l2 := e.claim("d-2")
			a, b := e.worker(), e.worker()
			var both sync.WaitGroup
			both.Add(2)
			results := make([]error, 2)
			lockOther := make([]error, 2)
			var done sync.WaitGroup
			for i, w := range []struct {
				c     *ent.Client
				l     *ent.RefundJobLease
				other int64
			}{{a, l1, j2.ID}, {b, l2, j1.ID}} {
				done.Add(1)
				go func() {
					defer done.Done()
					results[i] = w.c.RefundJob.Apply(ctx, w.l.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
						both.Done()
						both.Wait() // both hold their own row
						rows, err := tx.QueryContext(ctx, "SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE", w.other)
						if err == nil {
							rows.Close()
						}
						lockOther[i] = err
						if swallow {
							// Keep writing as if nothing happened.
							_, _ = tx.ExecContext(ctx, "INSERT INTO refund_observations (dedup_key, operation_key, source, provider_status, payload, received_at) "+
								"VALUES (?, 'k', 'operator', 'pending', 'x', UTC_TIMESTAMP(6))", "after-deadlock-"+string(rune('a'+i)))
							return nil
						}
						return err
					})
				}()
			}
			done.Wait()
			var victims, survivors int
			for i, err := range results {
				var me *mysql.MySQLError
				switch {
				case err == nil:
					survivors++
				case errors.Is(err, fencedwrite.ErrRolledBack) && errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205):
					victims++
					if !errors.As(lockOther[i], &me) {
						t.Errorf("the victim's lock got %v", lockOther[i])
					}
				default:
					t.Errorf("worker %d: %v, want nil or a rolled-back deadlock", i, err)
				}
			}
			if victims != 1 || survivors != 1 {
				t.Fatalf("%d victims and %d survivors, want one of each: %v", victims, survivors, results)
			}
			states := map[refundjob.State]int{e.job(j1.ID).State: 1}
			states[e.job(j2.ID).State]++
			if states[refundjob.StateSucceeded] != 1 || states[refundjob.StateRunning] != 1 {
				t.Fatalf("jobs end %v, want one succeeded and one still running", states)
			}
			var kept int
			if err := e.raw.QueryRow("SELECT COUNT(*) FROM refund_observations WHERE dedup_key LIKE 'after-deadlock-%'").Scan(&kept); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 0, true: 1}[swallow]; kept != want {
				t.Fatalf("%d writes after the deadlock survived, want %d (the survivor's only)", kept, want)
			}
		})
	}
}
