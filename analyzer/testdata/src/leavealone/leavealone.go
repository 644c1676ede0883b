// Package leavealone holds fenced writes built with run-time parts that
// fencelint must leave alone: a partial update whose SET list is built at
// run time before a constant fenced WHERE, a WHERE joined by strings.Join
// from literal fenced clauses, and the row-constructor fence. Nothing here
// is reported.
package leavealone

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// patch is a partial update of a job the worker holds.
type patch struct {
	LastError *string
	RunAfter  *time.Time
	Progress  *int
}

// applyPatch writes only the fields set, fenced by the claim.
func applyPatch(ctx context.Context, db *sql.DB, id int64, state string, attempt int, p patch) error {
	var sets []string
	var args []any
	if p.LastError != nil {
		sets = append(sets, "last_error = ?")
		args = append(args, *p.LastError)
	}
	if p.RunAfter != nil {
		sets = append(sets, "run_after = ?")
		args = append(args, *p.RunAfter)
	}
	if p.Progress != nil {
		sets = append(sets, "progress = ?")
		args = append(args, *p.Progress)
	}
	if len(sets) == 0 {
		return nil
	}
	args = append(args, id, state, attempt)
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET "+strings.Join(sets, ", ")+" WHERE id = ? AND state = ? AND attempt = ?", args...)
	return err
}

// applyPatchSprintf builds the same statement with fmt.Sprintf.
func applyPatchSprintf(ctx context.Context, tx *sql.Tx, id int64, attempt int, sets []string, args []any) error {
	q := fmt.Sprintf("UPDATE refund_jobs SET %s WHERE id = ? AND state = 'running' AND attempt = ?", strings.Join(sets, ", "))
	_, err := tx.ExecContext(ctx, q, append(args, id, attempt)...)
	return err
}

// finish joins its WHERE from literal fenced clauses.
func finish(ctx context.Context, db *sql.DB, id int64, state string, attempt int) error {
	where := strings.Join([]string{"id = ?", "state = ?", "attempt = ?"}, " AND ")
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'succeeded' WHERE "+where, id, state, attempt)
	return err
}

// heartbeat uses the row constructor.
func heartbeat(ctx context.Context, db *sql.DB, id int64, state string, attempt int, progress int) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET progress = ? WHERE (id, state, attempt) = (?, ?, ?)", progress, id, state, attempt)
	return err
}

// heartbeatSet combines both: a run-time SET list, the row constructor.
func heartbeatSet(ctx context.Context, db *sql.DB, sets []string, args []any) error {
	q := "UPDATE refund_jobs SET " + strings.Join(sets, ", ") + " WHERE (id, state, attempt) = (?, ?, ?) LIMIT 1"
	_, err := db.ExecContext(ctx, q, args...)
	return err
}
