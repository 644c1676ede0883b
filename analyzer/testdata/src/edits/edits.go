// Package edits checks run-time edits of fenced queries.
package edits

import (
	"context"
	"database/sql"
	"strings"

	"github.com/jmoiron/sqlx"
)

const fencedComplete = "UPDATE refund_jobs SET state = 'succeeded' WHERE id = ? AND state = 'running' AND attempt = ?"

func edits(ctx context.Context, db *sql.DB, x *sqlx.DB, n int) {
	db.ExecContext(ctx, strings.Replace(fencedComplete, " AND attempt = ?", "", 1)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strings\.Replace\(…\)`
	db.ExecContext(ctx, strings.ReplaceAll(fencedComplete, "attempt", "id"))        // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strings\.ReplaceAll\(…\)`
	db.ExecContext(ctx, fencedComplete[:n])                                         // want `query built at run time writes refund_jobs`
	q := strings.TrimSuffix(fencedComplete, " AND attempt = ?")
	db.ExecContext(ctx, q)                     // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strings\.TrimSuffix\(…\)`
	db.ExecContext(ctx, strip(fencedComplete)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strip\(fencedComplete\)`
	r := strings.NewReplacer(" AND attempt = ?", "")
	db.ExecContext(ctx, r.Replace(fencedComplete)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from r\.Replace\(fencedComplete\)`

	// Harmless: whitespace, sqlx's Rebind (placeholders become $1), reads.
	db.ExecContext(ctx, strings.TrimSpace(fencedComplete))
	db.ExecContext(ctx, x.Rebind(fencedComplete))
	db.ExecContext(ctx, sqlx.Rebind(sqlx.DOLLAR, fencedComplete))
	db.QueryContext(ctx, strings.Replace("SELECT * FROM refund_jobs WHERE id = ?", "?", "1", 1))
}

// strip edits its argument in a way fencelint does not model.
func strip(q string) string {
	if i := strings.Index(q, " AND attempt"); i >= 0 {
		return q[:i]
	}
	return q
}
