// Package jobs is a legacy codebase's job code: unfenced writes accepted
// as debt in ../fencelint.baseline.
package jobs

import (
	"context"
	"database/sql"
)

// Requeue has the seed's bug.
func Requeue(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id)
	return err
}

// Settle has the same bug twice.
func Settle(ctx context.Context, db *sql.DB, id int64) error {
	if _, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'succeeded' WHERE id = ?", id); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET lease_until = NULL WHERE id = ?", id)
	return err
}
