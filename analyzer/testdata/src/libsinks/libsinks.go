// Package libsinks checks the sinks of database libraries: sqlx, gorm's
// Exec and Raw.
package libsinks

import (
	"context"
	"os"

	"github.com/jmoiron/sqlx"
	"gorm.io/gorm"
)

var where = os.Getenv("WHERE")

const (
	fenced   = "UPDATE refund_jobs SET state = :state WHERE id = :id AND state = :old AND attempt = :attempt"
	unfenced = "UPDATE refund_jobs SET state = :state WHERE id = :id"
)

type job struct{ ID, Attempt int64 }

func sqlxSinks(ctx context.Context, db *sqlx.DB, tx *sqlx.Tx, j job) {
	db.NamedExec(fenced, j)
	db.NamedExec(unfenced, j)                                                         // want `unfenced UPDATE of refund_jobs`
	db.NamedExec("UPDATE refund_jobs SET state = :state WHERE "+where, j)             // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.NamedExecContext(ctx, "UPDATE refund_jobs SET state = :state WHERE "+where, j) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.MustExec("UPDATE refund_jobs SET state = ? WHERE " + where)                    // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	tx.MustExec("UPDATE refund_jobs SET state = ? WHERE " + where)                    // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	sqlx.NamedExec(db, "UPDATE refund_jobs SET state = :state WHERE "+where, j)       // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	sqlx.MustExecContext(ctx, db, "UPDATE refund_jobs SET state = ? WHERE "+where)    // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	// Rebind turns ? into $1: the query is still judged.
	db.MustExec(db.Rebind("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?"))
	db.MustExec(db.Rebind("UPDATE refund_jobs SET state = ? WHERE id = " + where)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.MustExec(db.Rebind("UPDATE refund_jobs SET state = ? WHERE id = ?"))        // want `unfenced UPDATE of refund_jobs`
	db.Select(&j, "SELECT * FROM refund_jobs WHERE "+where)
}

func gormSinks(db *gorm.DB) {
	db.Exec("UPDATE refund_jobs SET state = @state WHERE id = @id AND state = @old AND attempt = @attempt")
	db.Exec("UPDATE refund_jobs SET state = ? WHERE " + where)                                       // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.Raw("UPDATE refund_jobs SET state = ? WHERE " + where).Scan(&job{})                           // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.WithContext(context.Background()).Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `unfenced UPDATE of refund_jobs`
	db.Raw("SELECT * FROM refund_jobs WHERE " + where).Scan(&job{})
}
