// Package bad writes refund_jobs the way the seed's zombie worker did.
package bad

import (
	"context"
	"database/sql"
	"strconv"

	"example.com/bad/store"
)

// Requeue is the seed's bug: no fence at all.
func Requeue(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id)
	return err
}

// Complete fences on state only.
func Complete(ctx context.Context, tx *sql.Tx, id int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE refund_jobs SET state = 'succeeded', lease_until = NULL
		WHERE id = :id AND state = 'running'`, id)
	return err
}

// Reschedule is fenced but adds the lease regression.
func Reschedule(ctx context.Context, tx *sql.Tx, id, attempt int64) error {
	_, err := tx.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = 'running' AND attempt = ? AND lease_until > UTC_TIMESTAMP(6)", id, attempt)
	return err
}

// Fail builds its query at run time.
func Fail(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE id = "+strconv.FormatInt(id, 10))
	return err
}

// Payout is fine by default; it is fenced by flag in one test.
func Payout(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE payouts SET status = 'paid' WHERE id = ?", id)
	return err
}

// Archive carries a justified exception.
func Archive(ctx context.Context, db *sql.DB, id int64) error {
	//fencelint:allow archival of terminal rows, guarded by the trigger
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET archived = 1 WHERE id = ?", id)
	return err
}

// Reset carries a directive without a reason.
func Reset(ctx context.Context, db *sql.DB, id int64) error {
	//fencelint:allow
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET attempt = 0 WHERE id = ?", id)
	return err
}

// Retry goes through a wrapper in another package.
func Retry(ctx context.Context, db *sql.DB, id int64) error {
	return store.Exec(ctx, db, "UPDATE refund_jobs SET state = 'ready' WHERE id = "+strconv.FormatInt(id, 10))
}

// Send goes through an in-house sink that analysis cannot see through; it
// is named with -sinks in one test.
func Send(ctx context.Context, id int64) error {
	return rpcExec(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = "+strconv.FormatInt(id, 10))
}

func rpcExec(ctx context.Context, query string) error { return nil }
