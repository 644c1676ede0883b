// Package unreadable checks SQL that the MySQL grammar does not read:
// reported as unprovable when it is shaped like a write of a fenced table,
// never passed silently; log and error text is not SQL.
package unreadable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
)

// MySQL 8.0.19's row alias in an upsert: the grammar fencelint uses does
// not read it, but an upsert of a fenced table is unfenceable whatever it
// holds, and is reported as such (MySQL reads it: never "cannot read").
const upsertAlias = "INSERT INTO refund_jobs (operation_key, state) VALUES (?, 'ready') AS new ON DUPLICATE KEY UPDATE state = new.state"

func writes(ctx context.Context, db *sql.DB) {
	db.ExecContext(ctx, upsertAlias) // want `^INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows and cannot be fenced: enqueue with a plain INSERT`
	// PostgreSQL: out of scope, and a write of a fenced table in it is unprovable.
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3 AND attempt = $4 RETURNING id")                  // want `UPDATE of refund_jobs that fencelint cannot read \(RETURNING, PostgreSQL or MariaDB syntax, at offset 80\): it cannot prove it holds AND state = \? AND attempt = \?; write it in a form fencelint reads`
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ANY($1::bigint[]) AND state = $2 AND attempt = $3")           // want `UPDATE of refund_jobs that fencelint cannot read \(a PostgreSQL :: cast at offset 56\)`
	db.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key) VALUES ($1) ON CONFLICT (operation_key) DO UPDATE SET state = 'ready'") // want `INSERT … ON CONFLICT DO UPDATE of refund_jobs that fencelint cannot read \(ON CONFLICT, PostgreSQL syntax, at offset 52\)`
	// The statements of a string are judged one by one.
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?; SELECT 1 RETURNING x")

	// $1 placeholders and gorm's @name arguments are bound values.
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3 AND attempt = $4")
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = @next WHERE id = @id AND state = @state AND attempt = @attempt")
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3") // want `unfenced UPDATE of refund_jobs: WHERE lacks attempt = \?`
	// Reads and inserts in PostgreSQL syntax are not writes of existing rows.
	db.QueryContext(ctx, "SELECT id FROM refund_jobs WHERE id = ANY($1::bigint[])")
	db.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key) VALUES ($1) ON CONFLICT DO NOTHING")
}

func messages(id int, err error) error {
	log.Printf("UPDATE refund_jobs SET state = 'ready' failed for job %d: %v", id, err)
	if err != nil {
		return errors.New("UPDATE refund_jobs SET state = 'ready' affected no rows")
	}
	return fmt.Errorf("UPDATE refund_jobs SET state = %q: %w", "ready", err)
}
