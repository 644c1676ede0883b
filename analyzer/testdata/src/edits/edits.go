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
	db.ExecContext(ctx, strings.Replace(fencedComplete, " AND attempt = ?", "", 1)) // want `query built at run time writes refund_jobs`
	db.ExecContext(ctx, strings.ReplaceAll(fencedComplete, "attempt", "id"))        // want `query built at run time writes refund_jobs`
	db.ExecContext(ctx, fencedComplete[:n])                                         // want `query built at run time writes refund_jobs`
	q := strings.TrimSuffix(fencedComplete, " AND attempt = ?")
	db.ExecContext(ctx, q)                     // want `query built at run time writes refund_jobs`
	db.ExecContext(ctx, strip(fencedComplete)) // want `query built at run time writes refund_jobs`
	r := strings.NewReplacer(" AND attempt = ?", "")
	db.ExecContext(ctx, r.Replace(fencedComplete)) // want `query built at run time writes refund_jobs`

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
