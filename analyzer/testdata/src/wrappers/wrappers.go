// Package wrappers checks that functions passing a query to a sink, and
// helpers returning one, are followed within and across packages.
package wrappers

import (
	"context"
	"database/sql"
	"log"
	"os"
	"strconv"

	"sqlhelp"
)

const (
	fenced   = "UPDATE refund_jobs SET state = 'succeeded' WHERE id = ? AND state = 'running' AND attempt = ?"
	unfenced = "UPDATE refund_jobs SET state = 'ready' WHERE id = ?"
)

var dynamic = os.Getenv("WHERE")

type repo struct{ db *sql.DB }

// exec is the wrapper most teams write: logging around ExecContext.
func (r *repo) exec(ctx context.Context, q string, args ...any) error {
	_, err := r.db.ExecContext(ctx, q, args...)
	if err != nil {
		log.Printf("exec: %v", err)
	}
	return err
}

// execLimited adds text: the completed query is judged at each call.
func (r *repo) execLimited(ctx context.Context, q string) error {
	return r.exec(ctx, q+" LIMIT 1")
}

// retry runs f until it succeeds.
func retry(f func() error) error { return f() }

// execRetry reaches the sink inside a closure.
func (r *repo) execRetry(ctx context.Context, q string) error {
	return retry(func() error {
		_, err := r.db.ExecContext(ctx, q)
		return err
	})
}

func wrapped(ctx context.Context, r *repo, id int) {
	r.exec(ctx, fenced, id)
	r.exec(ctx, unfenced, id)                                                          // want `unfenced UPDATE of refund_jobs`
	r.exec(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = "+strconv.Itoa(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.Itoa\(id\)`
	r.exec(ctx, "SELECT state FROM refund_jobs WHERE id = "+strconv.Itoa(id))          // a read
	r.execLimited(ctx, fenced)
	r.execLimited(ctx, "UPDATE refund_jobs SET state = 'x' WHERE id = ?")                 // want `unfenced UPDATE of refund_jobs`
	r.execLimited(ctx, "UPDATE refund_jobs SET state = 'x' WHERE id = "+strconv.Itoa(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.Itoa\(id\)`
	r.execRetry(ctx, "UPDATE refund_jobs SET state = 'x' WHERE "+dynamic)                 // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`
	r.execRetry(ctx, fenced)
}

// updateSQL is a helper that returns a query: its callers complete it.
func updateSQL(where string) string {
	return "UPDATE refund_jobs SET state = ? WHERE " + where
}

func helpers(ctx context.Context, db *sql.DB, r *repo) {
	db.Exec(updateSQL("id = ? AND state = ? AND attempt = ?"))
	db.Exec(updateSQL("id = ?"))     // want `unfenced UPDATE of refund_jobs`
	db.Exec(updateSQL(dynamic))      // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`
	r.exec(ctx, updateSQL("id = ?")) // want `unfenced UPDATE of refund_jobs`
	q := updateSQL("id = ? AND state = ? AND attempt = ?")
	db.Exec(q + " LIMIT 1")
}

// Across packages, through facts.
func across(ctx context.Context, db *sql.DB, s *sqlhelp.Store) {
	sqlhelp.Exec(ctx, db, fenced)
	sqlhelp.Exec(ctx, db, "UPDATE refund_jobs SET state = 'x' WHERE id = "+dynamic) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`
	s.Run(ctx, "job", fenced)
	s.Run(ctx, "job", "UPDATE refund_jobs SET state = 'x' WHERE id = ?") // want `unfenced UPDATE of refund_jobs`
	s.Run(ctx, dynamic, fenced)                                          // want `query built at run time writes refund_jobs`
	db.Exec(sqlhelp.UpdateWhere("id = ? AND state = ? AND attempt = ?"))
	db.Exec(sqlhelp.UpdateWhere("id = ?")) // want `unfenced UPDATE of refund_jobs`
	db.Exec(sqlhelp.UpdateWhere(dynamic))  // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`
	db.Exec(sqlhelp.Reset())               // judged at its return, in sqlhelp
	db.Exec(sqlhelp.Complete())
	q, args := sqlhelp.Build("id = ?") // want `unfenced UPDATE of refund_jobs`
	db.Exec(q, args...)
	q, args = sqlhelp.Build("id = ? AND state = ? AND attempt = ?")
	db.Exec(q, args...)
	sqlhelp.UpdateSet(ctx, db, "id = ? AND state = 'running' AND attempt = ?")
	sqlhelp.UpdateSet(ctx, db, "id = ?") // want `unfenced UPDATE of refund_jobs`
	db.Exec(sqlhelp.Quote("refund_jobs"))
}

// An unexported function whose only holes are its parameters is judged at
// its calls.
func reschedule(ctx context.Context, db *sql.DB, where string) {
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)
}

func deferred(ctx context.Context, db *sql.DB) {
	reschedule(ctx, db, "id = ? AND state = 'running' AND attempt = ?")
	reschedule(ctx, db, "id = ?") // want `unfenced UPDATE of refund_jobs`
	reschedule(ctx, db, dynamic)  // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`
}

// Used as a value, a function's calls are not all visible: judged inside.
func escaping(ctx context.Context, db *sql.DB, where string) {
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
}

var hooks = []func(context.Context, *sql.DB, string){escaping}

var runners []func(string)

// A function literal bound to a variable and only called: its parameters
// are followed like a function's, and its calls judged.
func closures(ctx context.Context, db *sql.DB) {
	settle := func(state, age string) {
		db.ExecContext(ctx, "UPDATE refund_jobs SET state = ?, writer_attempt = 1, updated_at = UTC_TIMESTAMP(6) - INTERVAL "+age+" WHERE id = ? AND state = 'running' AND attempt = 1", state)
	}
	settle("succeeded", "40 DAY")
	settle("failed", "1 DAY")

	reset := func(where string) {
		db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)
	}
	reset("id = ? AND state = 'running' AND attempt = ?")
	reset("id = ?") // want `unfenced UPDATE of refund_jobs`
	reset(dynamic)  // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`

	// Used as a value: its calls are not all visible, so judged inside.
	run := func(where string) {
		db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	}
	runners = append(runners, run)

	build := func(where string) string { return "UPDATE refund_jobs SET state = ? WHERE " + where }
	db.Exec(build("id = ? AND state = ? AND attempt = ?"))
	db.Exec(build("id = ?")) // want `unfenced UPDATE of refund_jobs`
}

// A method expression passes the receiver first.
func methodExpr(ctx context.Context, r *repo) {
	(*repo).exec(r, ctx, "UPDATE refund_jobs SET state = 'x' WHERE id = "+dynamic) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from dynamic`
	(*repo).exec(r, ctx, fenced)
}
