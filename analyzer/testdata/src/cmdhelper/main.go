// Command cmdhelper: an exported helper whose parameter completes a
// write's WHERE. No package can import a command, so every caller is in
// sight: the helper is judged at its calls, as an unexported one is.
package main

import (
	"context"
	"database/sql"
)

// MarkWhere sets a job's state under the given WHERE.
func MarkWhere(ctx context.Context, db *sql.DB, where string, args ...any) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+where, args...)
	return err
}

func main() {
	ctx := context.Background()
	var db *sql.DB
	MarkWhere(ctx, db, "id = ? AND state = ? AND attempt = ?", 1, "running", 2)
	MarkWhere(ctx, db, "id = ?", 1) // want `unfenced UPDATE of refund_jobs`
}
