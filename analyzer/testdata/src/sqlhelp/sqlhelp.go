// Package sqlhelp holds query helpers and wrappers that other packages
// call: fencelint follows them with facts.
package sqlhelp

import (
	"context"
	"database/sql"
	"log"
	"time"
)

// Exec logs and times a statement: its query parameter reaches a sink.
func Exec(ctx context.Context, db *sql.DB, query string, args ...any) (sql.Result, error) { // want Exec:`sink\("\{2\}"\)`
	start := time.Now()
	res, err := db.ExecContext(ctx, query, args...)
	log.Printf("exec took %v", time.Since(start))
	return res, err
}

// Store wraps a database with tracing comments.
type Store struct{ DB *sql.DB }

// Run prefixes the query with a comment: its callers' queries are judged
// with the comment.
func (s *Store) Run(ctx context.Context, tag, query string) error { // want Run:`sink\("/\* \{1\} \*/ \{2\}"\)`
	_, err := s.DB.ExecContext(ctx, "/* "+tag+" */ "+query)
	return err
}

// UpdateWhere builds an UPDATE of refund_jobs from a WHERE clause given by
// the caller: the query is judged where it is used.
func UpdateWhere(where string) string { // want UpdateWhere:`returns\("UPDATE refund_jobs SET state = \? WHERE \{0\}"\)`
	return "UPDATE refund_jobs SET state = ? WHERE " + where
}

// Reset returns a constant query: judged here, at its return.
func Reset() string { // want Reset:`returns\("UPDATE refund_jobs SET state = 'ready' WHERE id = \?"\)`
	return "UPDATE refund_jobs SET state = 'ready' WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
}

// Complete is fenced.
func Complete() string { // want Complete:`returns\(.*\)`
	return "UPDATE refund_jobs SET state = 'succeeded' WHERE id = ? AND state = 'running' AND attempt = ?"
}

// Build returns a query and its arguments, as query builders do.
func Build(where string, args ...any) (string, []any) { // want Build:`returns\("UPDATE refund_jobs SET state = 'ready' WHERE \{0\}"\)`
	return "UPDATE refund_jobs SET state = 'ready' WHERE " + where, args
}

// UpdateSet writes refund_jobs with the caller's WHERE clause: it is
// exported, so the unproven write is reported here as well as at each call.
func UpdateSet(ctx context.Context, db *sql.DB, where string) error { // want UpdateSet:`sink\(.*\)`
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	return err
}

// Quote is a plain string helper that passes its parameter through.
func Quote(s string) string { return "`" + s + "`" } // want Quote:"returns"
