// Package variants checks strings.Builder and bytes.Buffer contents and
// fmt.Sprintf with integer verbs.
package variants

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Every write is a constant: each possible content is judged.
func builders(ctx context.Context, db *sql.DB, setNext, lease bool) {
	var b strings.Builder
	b.WriteString("UPDATE refund_jobs SET state = ?")
	if setNext {
		b.WriteString(", next_run_at = UTC_TIMESTAMP(6)")
	}
	b.WriteString(" WHERE id = ? AND state = ? AND attempt = ?")
	db.ExecContext(ctx, b.String())

	var u strings.Builder
	u.WriteString("UPDATE refund_jobs SET state = ? WHERE id = ?")
	if lease {
		u.WriteString(" AND state = ? AND attempt = ?")
	}
	db.ExecContext(ctx, u.String()) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`

	buf := new(bytes.Buffer)
	fmt.Fprintf(buf, "UPDATE %s SET state = ?", "refund_jobs")
	buf.WriteString(" WHERE id = ?")
	switch {
	case lease:
		buf.WriteString(" AND state = ? AND attempt = ?")
	default:
		buf.WriteString(" AND attempt = ? AND state = ?")
	}
	db.ExecContext(ctx, buf.String())

	var r bytes.Buffer
	r.WriteString("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?")
	if lease {
		r.Reset()
		r.WriteString("UPDATE refund_jobs SET state = ? WHERE id = ?")
	}
	db.ExecContext(ctx, r.String()) // want `unfenced UPDATE of refund_jobs`
}

// Written in a loop: the number of writes is unknown.
func loops(ctx context.Context, db *sql.DB, conds []string) {
	var b strings.Builder
	b.WriteString("UPDATE refund_jobs SET state = ? WHERE id = ?")
	for range conds {
		b.WriteString(" AND state = ? AND attempt = ?")
	}
	db.ExecContext(ctx, b.String()) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from b\.String\(\)`
}

// fmt.Sprintf with integer verbs: the integer is a literal.
func sprintfInts(ctx context.Context, db *sql.DB, delay time.Duration, n int64) {
	db.ExecContext(ctx, fmt.Sprintf("UPDATE refund_jobs SET next_run_at = UTC_TIMESTAMP(6) + INTERVAL %d SECOND WHERE id = ? AND state = 'running' AND attempt = ?", int64(delay.Seconds())))
	db.ExecContext(ctx, fmt.Sprintf("UPDATE refund_jobs SET state = 'ready' WHERE id = %d AND state = 'running' AND attempt = %d", n, n))
	db.ExecContext(ctx, fmt.Sprintf("UPDATE refund_jobs SET state = 'ready' WHERE id = %d", n)) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	db.ExecContext(ctx, fmt.Sprintf("UPDATE refund_jobs SET state = 'ready' WHERE id = %v AND state = 'running' AND attempt = %5d", n, n))
	// A duration has a String method: %v prints text, not digits.
	db.ExecContext(ctx, fmt.Sprintf("UPDATE refund_jobs SET state = 'ready' WHERE id = 1 AND state = 'running' AND attempt = %v", delay)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from fmt\.Sprintf\(…\)`
}

// A range over a literal of constants: each element is an alternative.
func tableDriven(ctx context.Context, db *sql.DB) {
	for _, set := range []string{"state = 'ready'", "next_run_at = UTC_TIMESTAMP(6)"} {
		db.ExecContext(ctx, "UPDATE refund_jobs SET "+set+", writer_attempt = ? WHERE id = ? AND state = 'running' AND attempt = ?")
	}
	for _, where := range [...]string{"id = ?", "id = ? AND state = ? AND attempt = ?"} {
		db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where) // want `unfenced UPDATE of refund_jobs`
	}
}
