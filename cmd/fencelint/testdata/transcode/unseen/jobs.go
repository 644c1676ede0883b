// Package unseen writes transcode_jobs without the generated package in
// sight: fencelint's default tables are refund_jobs alone, so it reports
// nothing here (a team would pass -tables, or import its ent package).
package unseen

import (
	"context"
	"database/sql"
)

// Zombie is the article's catch block on a transcode job.
func Zombie(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE transcode_jobs SET state = 'ready' WHERE id = ?", id)
	return err
}
