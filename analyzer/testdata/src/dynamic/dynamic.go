// Package dynamic checks queries built at run time that reach SQL sinks.
package dynamic

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"

	"entgo.io/ent/dialect"
	"example.com/app/ent"
)

// where is text known only at run time (a parameter would make the
// functions below wrappers, judged at their calls).
var where = os.Getenv("WHERE")

func sinks(ctx context.Context, db *sql.DB, tx *sql.Tx, conn *sql.Conn, id int) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.Itoa(id))                                   // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.Itoa\(id\)`
	db.ExecContext(ctx, fmt.Sprintf("UPDATE refund_jobs SET state = 'ready' WHERE id = %v", strconv.Itoa(id)))         // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.Itoa\(id\)`
	tx.Exec(fmt.Sprintf("UPDATE %s SET state = ? WHERE id = ? AND state = ? AND attempt = ?%s", "refund_jobs", where)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	conn.ExecContext(ctx, "UPDATE refund_jobs SET "+where+" WHERE id = ?")                                             // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	db.Prepare("UPDATE refund_jobs SET state = ? WHERE " + where)                                                      // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.PrepareContext(ctx, "REPLACE INTO refund_jobs VALUES "+where)                                                   // want `query built at run time writes refund_jobs \(REPLACE\)`

	// Dynamic reads and inserts are fine.
	db.QueryContext(ctx, "SELECT * FROM refund_jobs WHERE id IN ("+where+")")
	db.QueryRowContext(ctx, "SELECT state FROM refund_jobs WHERE id = "+strconv.Itoa(id))
	db.Exec("INSERT INTO refund_jobs (operation_key) VALUES " + where)
	// The table comes from a variable: no constant fragment writes a fenced table.
	db.Exec("UPDATE " + where + " SET state = ? WHERE id = ?")
}

func locals(db *sql.DB, id int, conds []string) {
	// Followed through locals, loops and branches. With no conditions the
	// head alone reaches Exec, so it is reported too.
	q := "UPDATE refund_jobs SET state = ? WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
	for _, c := range conds {
		q += " AND " + c
	}
	db.Exec(q) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from q`

	s := "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?"
	if id > 0 {
		s = s + " LIMIT " + strconv.Itoa(id)
	}
	db.Exec(s) // want `query built at run time writes refund_jobs`
}

// Package-level variables and same-package helpers are followed.
var setClause = " SET state = 'ready'"

var target = "refund_jobs"

func helper(where string) string {
	return "UPDATE refund_jobs" + setClause + " WHERE " + where
}

func helpers(db *sql.DB) {
	db.Exec(helper(where))                                                  // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	db.Exec(fmt.Sprintf("UPDATE %s SET state = ? WHERE %s", target, where)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
}

// Other sinks: Ent's raw ExecContext, dialect.Driver and any interface of
// that shape.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type runner interface {
	MustExec(query string, args ...any) sql.Result
}

func others(ctx context.Context, client *ent.Client, tx *ent.Tx, drv dialect.Driver, e execer, r runner) {
	client.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)         // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	tx.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)             // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	drv.Exec(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where, []any{}, nil)     // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	e.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)              // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	r.MustExec("INSERT INTO refund_jobs (id) VALUES (?) ON DUPLICATE KEY UPDATE " + where) // want `query built at run time writes refund_jobs \(INSERT … ON DUPLICATE KEY UPDATE\)`
	// Constants reaching these sinks are judged like any constant.
	drv.Exec(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", []any{1}, nil) // want `unfenced UPDATE of refund_jobs`
	client.QueryContext(ctx, "SELECT * FROM refund_jobs WHERE "+where)
}

// strings.Builder and bytes.Buffer: the pieces are not judged alone; each
// possible content is judged where it is used (see package variants).
func builders(ctx context.Context, db *sql.DB, id int64, extra bool) {
	var b strings.Builder
	b.WriteString("UPDATE refund_jobs SET state = ? WHERE id = ?")
	if extra {
		b.WriteString(" AND state = ? AND attempt = ?")
	}
	db.ExecContext(ctx, b.String(), "ready", id) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`

	buf := new(bytes.Buffer)
	fmt.Fprintf(buf, "UPDATE %s SET state = ? WHERE id = %s", "refund_jobs", strconv.FormatInt(id, 10))
	db.ExecContext(ctx, buf.String()) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`

	var r strings.Builder
	r.WriteString("SELECT * FROM refund_jobs WHERE id = ")
	r.WriteString(strconv.FormatInt(id, 10))
	db.QueryContext(ctx, r.String())
}
