// Package selfdeclare checks the writer declaration: a write that sets
// writer_attempt from the row's own attempt defeats the database's fence.
package selfdeclare

import (
	"context"
	"database/sql"
)

func writes(ctx context.Context, db *sql.DB) {
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = ?, writer_attempt = attempt WHERE id = ? AND state = ? AND attempt = ?")                                                 // want `UPDATE of refund_jobs sets writer_attempt from the row's own attempt: that declares whatever attempt the row holds and defeats the database's fence; set writer_attempt = \? to the attempt this writer holds`
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = ?, writer_attempt = refund_jobs.attempt WHERE id = ? AND state = ? AND attempt = ?")                                     // want `sets writer_attempt from the row's own attempt`
	db.ExecContext(ctx, "UPDATE refund_jobs j SET j.state = ?, j.writer_attempt = j.attempt WHERE j.id = ? AND j.state = ? AND j.attempt = ?")                                   // want `sets writer_attempt from the row's own attempt`
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = ?, writer_attempt = attempt + 0 WHERE id = ? AND state = ? AND attempt = ?")                                             // want `sets writer_attempt from the row's own attempt`
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = ?, writer_attempt = IFNULL(attempt, ?) WHERE id = ? AND state = ? AND attempt = ?")                                      // want `sets writer_attempt from the row's own attempt`
	db.ExecContext(ctx, "UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = ?, j.writer_attempt = j.attempt WHERE j.id = ? AND j.state = ? AND j.attempt = ?") // want `sets j.writer_attempt from the row's own attempt.*set j.writer_attempt = \?`
	// An unfenced write that also declares itself: both problems in one message.
	db.ExecContext(ctx, "UPDATE refund_jobs SET writer_attempt = attempt WHERE id = ?") // want `unfenced UPDATE of refund_jobs.*; UPDATE of refund_jobs sets writer_attempt`

	// Declaring the attempt the writer holds is the fence working.
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = ?, writer_attempt = ? WHERE id = ? AND state = ? AND attempt = ?")
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 7 WHERE id = ? AND state = 'running' AND attempt = 7")
	db.ExecContext(ctx, "UPDATE refund_jobs SET attempt = attempt + 1, writer_attempt = ? WHERE id = ? AND state = 'running' AND attempt = ?")
	db.ExecContext(ctx, "UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = ?, j.writer_attempt = r.attempt WHERE j.id = ? AND j.state = ? AND j.attempt = ?")
}
