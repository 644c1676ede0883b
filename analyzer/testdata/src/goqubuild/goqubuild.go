// Package goqubuild checks goqu's builders of the fenced table.
package goqubuild

import (
	"github.com/doug-martin/goqu/v9"
)

func datasets(db *goqu.Database, id, attempt int64, cur string) {
	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.Ex{"id": id, "state": cur, "attempt": attempt}).Executor().Exec()
	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.C("id").Eq(id), goqu.C("state").Eq(cur), goqu.C("attempt").Eq(attempt)).ToSQL()
	db.Update(goqu.T("refund_jobs")).Set(goqu.Record{"state": "ready"}).Where(goqu.And(goqu.C("state").Eq(cur), goqu.I("attempt").Eq(attempt))).ToSQL()
	goqu.Dialect("mysql").Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.Ex{"state": cur, "attempt": attempt}).ToSQL()

	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.Ex{"id": id}).Executor().Exec()                                                              // want `goqu.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.C("state").Eq(cur), goqu.C("attempt").Gte(attempt)).ToSQL()                                  // want `lacks attempt = \?`
	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.Or(goqu.C("state").Eq(cur), goqu.C("attempt").Eq(attempt))).ToSQL()                          // want `lacks state = \? and attempt = \?`
	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.Ex{"state": cur, "attempt": attempt}).ClearWhere().ToSQL()                                   // want `lacks state = \? and attempt = \?`
	goqu.Update("refund_jobs").Set(goqu.Record{"state": "ready"}).Where(goqu.Ex{"state": cur, "attempt": attempt, "lease_until": goqu.Op{"gt": goqu.L("NOW()")}}).ToSQL() // want `requires lease_until to be in the future`
	goqu.From("refund_jobs").Update().Set(goqu.Record{"state": "ready"}).ToSQL()                                                                                          // want `goqu.Update: unfenced UPDATE of refund_jobs`
	goqu.Update("refund_jobs").Set(goqu.Record{"writer_attempt": goqu.L("attempt")}).Where(goqu.Ex{"state": cur, "attempt": attempt}).ToSQL()                             // want `sets writer_attempt from the row's own attempt`
	goqu.Insert("refund_jobs").Rows(goqu.Record{"id": id}).OnConflict(goqu.DoUpdate("id", goqu.Record{"state": "ready"})).Executor().Exec()                               // want `goqu.Insert: INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows`

	goqu.Insert("refund_jobs").Rows(goqu.Record{"id": id}).OnConflict(goqu.DoNothing()).Executor().Exec()
	goqu.Insert("refund_jobs").Rows(goqu.Record{"id": id}).Executor().Exec()
	goqu.Update("refunds").Set(goqu.Record{"state": "paid"}).Where(goqu.Ex{"id": id}).ToSQL()
}
