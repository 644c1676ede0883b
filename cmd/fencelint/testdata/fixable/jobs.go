// Package fixable has one unfenced write that fencelint -fix fences, and
// one it cannot (the job is not at hand).
package fixable

import (
	"context"
	"database/sql"
)

// Job is a row of refund_jobs as read.
type Job struct {
	ID      int64
	State   string
	Attempt int64
}

// Requeue is fixed: the job read with the row is at hand.
func Requeue(ctx context.Context, db *sql.DB, job Job) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID)
	return err
}

// Reset is not: only an id.
func Reset(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET attempt = 0 WHERE id = ?", id)
	return err
}
