// Package sqbuild checks squirrel's builders of the fenced table.
package sqbuild

import (
	"context"
	"database/sql"

	sq "github.com/Masterminds/squirrel"
)

const table = "refund_jobs"

func chains(ctx context.Context, db *sql.DB, id, attempt int64, cur string) {
	// Fenced: Eq on state and attempt, in one chain.
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id, "state": cur, "attempt": attempt}).RunWith(db).ExecContext(ctx)
	sq.Update(table).Set("state", "ready").Where("id = ? AND state = ? AND attempt = ?", id, cur, attempt).RunWith(db).Exec()
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id}).Where(sq.Eq{"state": cur}).Where("attempt = ?", attempt).ToSql()
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.And{sq.Eq{"id": id}, sq.Eq{"state": cur, "attempt": attempt}}).ToSql()
	sq.StatementBuilder.PlaceholderFormat(sq.Dollar).Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id, "state": cur, "attempt": attempt}).ToSql()

	// Unfenced.
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id}).RunWith(db).Exec()                                                                      // want `squirrel.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id, "state": cur}).ToSql()                                                                   // want `squirrel.Update: unfenced UPDATE of refund_jobs: WHERE lacks attempt = \?`
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id, "state": []string{cur}, "attempt": attempt}).ToSql()                                     // want `lacks state = \?`
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Or{sq.Eq{"state": cur}, sq.Eq{"attempt": attempt}}).ToSql()                                           // want `lacks state = \? and attempt = \?`
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"state": cur, "attempt": attempt}).Where("id = ? OR 1 = 1", id).ToSql()                            // want `lacks state = \? and attempt = \?`
	sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id, "state": cur, "attempt": attempt}).Where(sq.Gt{"lease_until": sq.Expr("NOW()")}).ToSql() // want `requires lease_until to be in the future`
	sq.Update("refund_jobs").Set("writer_attempt", sq.Expr("attempt")).Where(sq.Eq{"id": id, "state": cur, "attempt": attempt}).ToSql()                           // want `sets writer_attempt from the row's own attempt`
	sq.Replace("refund_jobs").Columns("id", "state").Values(id, "ready").Exec()                                                                                   // want `squirrel.Replace: REPLACE writes existing refund_jobs rows`
	sq.Insert("refund_jobs").Columns("id").Values(id).Suffix("ON DUPLICATE KEY UPDATE state = 'ready'").Exec()                                                    // want `squirrel.Insert: INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows`
	sq.Update("refund_jobs").Set("state", "ready").Where(pred(cur)).ToSql()                                                                                       // want `squirrel.Update: query built at run time writes refund_jobs \(UPDATE\): fencelint cannot prove`

	// Not the fenced table, not a write, or a table named at run time.
	sq.Update("refunds").Set("state", "paid").Where(sq.Eq{"id": id}).ToSql()
	sq.Insert("refund_jobs").Columns("operation_key").Values("k").Exec()
	sq.Select("state").From("refund_jobs").Where(sq.Eq{"id": id}).ToSql()
	sq.Update(cur).Set("state", "ready").ToSql()
}

func pred(s string) sq.Sqlizer { return sq.Eq{"state": s} }

// A builder held in a variable: extensions in the same block count.
func variables(ctx context.Context, db *sql.DB, id, attempt int64, cur string, limit bool) {
	q := sq.Update("refund_jobs").Set("state", "ready")
	q = q.Where(sq.Eq{"id": id, "state": cur, "attempt": attempt})
	if limit {
		q = q.Limit(1)
	}
	q.RunWith(db).ExecContext(ctx)

	u := sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id}) // want `squirrel.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	if limit {
		u = u.Where(sq.Eq{"state": cur, "attempt": attempt}) // on some paths only
	}
	u.RunWith(db).ExecContext(ctx)

	w := sq.Update("refund_jobs").Set("state", "ready").Where(sq.Eq{"id": id, "state": cur, "attempt": attempt}) // want `squirrel.Update: unfenced UPDATE of refund_jobs`
	if limit {
		w = w.Where("1 = 1 OR id > 0") // breaks the fence on this path
	}
	w.RunWith(db).ExecContext(ctx)
}

// Returned to the caller: proven only by what is visible here.
func base(id, attempt int64, cur string) sq.UpdateBuilder {
	return sq.Update("refund_jobs").Where(sq.Eq{"id": id, "state": cur, "attempt": attempt})
}

func partial(id int64) sq.UpdateBuilder {
	return sq.Update("refund_jobs").Where(sq.Eq{"id": id}) // want `squirrel.Update: query built at run time writes refund_jobs \(UPDATE\): fencelint cannot prove it holds AND state = \? AND attempt = \?`
}
