// Package clean writes refund_jobs only through the fence.
package clean

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrSuperseded: another worker took the job over.
var ErrSuperseded = errors.New("UPDATE refund_jobs matched no row: superseded")

const complete = "UPDATE refund_jobs SET state = 'succeeded', lease_until = NULL WHERE id = ? AND state = 'running' AND attempt = ?"

// Enqueue inserts a new job.
func Enqueue(ctx context.Context, db *sql.DB, key string) error {
	_, err := db.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key, state, attempt) VALUES (?, 'ready', 0)", key)
	return err
}

// Complete is fenced.
func Complete(ctx context.Context, tx *sql.Tx, id, attempt int64) error {
	res, err := tx.ExecContext(ctx, complete, id, attempt)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrSuperseded
	}
	return nil
}

// Takeover checks that the lease expired, and is fenced.
func Takeover(ctx context.Context, tx *sql.Tx, id, attempt int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE refund_jobs
		SET attempt = attempt + 1, lease_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, next_action = 'reconcile'
		WHERE id = :id AND state = 'running' AND attempt = :attempt AND lease_until < UTC_TIMESTAMP(6)`, id, attempt)
	return err
}

// Due reads.
func Due(ctx context.Context, db *sql.DB, limit int) (*sql.Rows, error) {
	return db.QueryContext(ctx, fmt.Sprintf("SELECT id FROM refund_jobs WHERE state = 'ready' AND next_run_at <= UTC_TIMESTAMP(6) LIMIT %d", limit))
}
