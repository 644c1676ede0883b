// Package seen writes transcode_jobs with the example's generated package in
// sight: fencelint learns the table and its fence from its generated
// constants (ent.TranscodeJobFencedTable and its columns), with no -tables.
package seen

import (
	"context"
	"database/sql"

	"github.com/fencekit/fencekit/examples/transcode/ent"
)

// Zombie is the article's catch block on a transcode job.
func Zombie(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE transcode_jobs SET state = 'ready' WHERE id = ?", id)
	return err
}

// Fenced carries the fence.
func Fenced(ctx context.Context, db *sql.DB, id, attempt int64) error {
	_, err := db.ExecContext(ctx, "UPDATE transcode_jobs SET state = 'ready', writer_attempt = ? WHERE id = ? AND state = ? AND attempt = ?", attempt, id, "running", attempt)
	return err
}

// Table names the table through the generated constant.
func Table(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE "+ent.TranscodeJobFencedTable+" SET last_error = NULL WHERE id = ?", id)
	return err
}
