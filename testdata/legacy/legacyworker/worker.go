// Package legacyworker is the article's refund worker, as a team runs it
// before fencekit: it claims and takes over jobs correctly, under a row lock
// with attempt + 1, and then writes back without its attempt. Its catch
// block sets the job back to ready whatever happened since it claimed it:
// a worker that comes back from a hung provider call after another worker
// settled the refund turns that refund into "waiting to retry".
//
// It is test data: the cutover test runs it against a live table while the
// table is adopted, observed and fenced. Do not copy it.
package legacyworker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/provider"
)

// Worker is one process of the legacy fleet.
type Worker struct {
	DB       *sql.DB
	Provider provider.Client
	// Lease is how long a claim keeps other workers from taking over.
	Lease time.Duration
}

type job struct {
	id, attempt            int64
	key, payment, currency string
	amount                 int64
	action                 string
}

// Requeue is the catch block's write-back: the job goes back to the queue,
// by its id alone.
const Requeue = "UPDATE refund_jobs SET state = 'ready', next_action = 'refund', lease_until = NULL WHERE id = ?"

// ErrNothingToDo is Step's answer when no job is due and no lease expired.
var ErrNothingToDo = errors.New("legacy worker: nothing to do")

// Step claims one job, a ready one or a running one whose lease expired,
// calls the provider with the operation key, and writes the answer back.
//
// Like most applications, it runs a statement again when InnoDB chose it
// as a deadlock's victim (error 1213, "try restarting transaction"): the
// claim as a whole (rolled back), and each write-back on its own. Without
// it a write-back lost to a deadlock with an online schema change (the
// copy's triggers write the shadow table) left the job running, its
// refund executed, until its lease expired.
func (w *Worker) Step(ctx context.Context) (int64, error) {
	var j job
	if err := retried(func() (err error) { j, err = w.claim(ctx); return err }); err != nil {
		return 0, err
	}
	refundID, err := w.call(ctx, j)
	if err != nil {
		// The catch block of the article's story: whatever the job became
		// while we waited, it goes back to the queue.
		werr := retried(func() error {
			_, err := w.DB.ExecContext(context.WithoutCancel(ctx), Requeue, j.id)
			return err
		})
		return j.id, errors.Join(fmt.Errorf("legacy worker: job %d: %w", j.id, err), werr)
	}
	return j.id, retried(func() error {
		_, err := w.DB.ExecContext(ctx,
			"UPDATE refund_jobs SET state = 'succeeded', provider_refund_id = ?, lease_until = NULL WHERE id = ?", refundID, j.id)
		return err
	})
}

// retried runs do again while InnoDB makes it a deadlock's victim, at most
// maxTries times in all, and returns its last error.
func retried(do func() error) error {
	for try := 1; ; try++ {
		if err := do(); !deadlocked(err) || try == maxTries {
			return err
		}
	}
}

// maxTries bounds the runs of a statement that keeps losing deadlocks.
const maxTries = 5

// deadlocked reports whether err is InnoDB's deadlock victim error.
func deadlocked(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// Run steps until ctx ends, waiting poll between steps that found nothing.
func (w *Worker) Run(ctx context.Context, poll time.Duration) {
	for ctx.Err() == nil {
		if _, err := w.Step(ctx); errors.Is(err, ErrNothingToDo) {
			select {
			case <-ctx.Done():
			case <-time.After(poll):
			}
		}
	}
}

// claim is the article's claim and takeover: one short transaction that
// locks the row, checks it is still claimable, and bumps the attempt.
func (w *Worker) claim(ctx context.Context) (job, error) {
	tx, err := w.DB.BeginTx(ctx, nil)
	if err != nil {
		return job{}, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	var j job
	err = tx.QueryRowContext(ctx, `SELECT id, attempt, operation_key, payment_id, amount_cents, currency, next_action
		FROM refund_jobs
		WHERE state = 'ready' OR (state = 'running' AND lease_until < UTC_TIMESTAMP())
		ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`).
		Scan(&j.id, &j.attempt, &j.key, &j.payment, &j.amount, &j.currency, &j.action)
	if errors.Is(err, sql.ErrNoRows) {
		return job{}, ErrNothingToDo
	}
	if err != nil {
		return job{}, err
	}
	var state string
	if err := tx.QueryRowContext(ctx, "SELECT state FROM refund_jobs WHERE id = ?", j.id).Scan(&state); err != nil {
		return job{}, err
	}
	if state == "running" {
		j.action = "reconcile" // a takeover asks the provider first
	}
	if _, err := tx.ExecContext(ctx,
		"UPDATE refund_jobs SET attempt = attempt + 1, state = 'running', next_action = ?, lease_until = UTC_TIMESTAMP() + INTERVAL ? MICROSECOND WHERE id = ?",
		j.action, w.Lease.Microseconds(), j.id); err != nil {
		return job{}, err
	}
	j.attempt++
	return j, tx.Commit()
}

// call sends the refund, or, on a takeover, looks it up by the operation
// key and sends it only when the provider has none.
func (w *Worker) call(ctx context.Context, j job) (string, error) {
	if j.action == "reconcile" {
		found, err := w.Provider.Lookup(ctx, provider.Query{OperationKey: j.key, PaymentRef: j.payment})
		if err != nil {
			return "", err
		}
		for _, r := range found {
			if r.Status == provider.StatusSucceeded {
				return r.ProviderRefundID, nil
			}
		}
	}
	r, err := w.Provider.Refund(ctx, provider.RefundRequest{
		OperationKey: j.key, PaymentRef: j.payment, AmountMinor: j.amount, Currency: j.currency,
	})
	if err != nil {
		return "", err
	}
	if r.Status != provider.StatusSucceeded {
		return "", fmt.Errorf("refund %s is %s", r.ProviderRefundID, r.Status)
	}
	return r.ProviderRefundID, nil
}
