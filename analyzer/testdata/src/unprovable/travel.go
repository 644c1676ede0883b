package unprovable

import (
	"context"
	"database/sql"
	"strconv"

	"example.com/app/ent"
	"example.com/backoff"
)

// 5. A query sent over a channel to the goroutine that runs it.

// runQueries runs what it receives: the channel is its parameter.
func runQueries(ctx context.Context, db *sql.DB, queries <-chan string) {
	for q := range queries {
		db.ExecContext(ctx, q) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	}
}

func failLater(ctx context.Context, db *sql.DB, cond string) {
	queries := make(chan string, 1)
	go runQueries(ctx, db, queries)
	queries <- "UPDATE refund_jobs SET state = 'failed' WHERE " + cond
	queries <- "UPDATE refund_jobs SET state = 'failed' WHERE " + fenced
	close(queries)
}

// A statement and its arguments, sent by value.
type stmt struct {
	query string
	args  []any
}

func runStmts(ctx context.Context, db *sql.DB, stmts <-chan stmt) {
	for s := range stmts {
		db.ExecContext(ctx, s.query, s.args...) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.FormatInt\(id, 10\)`
	}
}

func requeueLater(ctx context.Context, db *sql.DB, id int64, attempt int) {
	stmts := make(chan stmt, 2)
	go runStmts(ctx, db, stmts)
	stmts <- stmt{query: "UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.FormatInt(id, 10)}
	stmts <- stmt{query: "UPDATE refund_jobs SET state = 'ready' WHERE " + fenced, args: []any{id, "failed", attempt}}
}

// A pointer to a job of the write queue; every query it carries is
// fenced.
type write struct {
	query string
	args  []any
	done  chan error
}

func writer(ctx context.Context, db *sql.DB, writes chan *write) {
	for w := range writes {
		_, err := db.ExecContext(ctx, w.query, w.args...)
		w.done <- err
	}
}

func settleQueued(ctx context.Context, db *sql.DB, writes chan *write, id int64, attempt int) error {
	w := &write{query: "UPDATE refund_jobs SET state = 'succeeded' WHERE " + fenced, args: []any{id, "running", attempt}, done: make(chan error, 1)}
	writes <- w
	return <-w.done
}

// 6. A closure that captures the query, handed to a retry helper or a
// transaction wrapper.

func retry(attempts int, op func() error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if err = op(); err == nil {
			return nil
		}
	}
	return err
}

func requeueRetried(ctx context.Context, db *sql.DB, id int64) error {
	q := "UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.FormatInt(id, 10)
	return retry(3, func() error {
		_, err := db.ExecContext(ctx, q) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.FormatInt\(id, 10\)`
		return err
	})
}

// Nothing calls failRetried: its parameter is the WHERE.
func failRetried(ctx context.Context, db *sql.DB, cond string) error {
	q := "UPDATE refund_jobs SET state = 'failed' WHERE " + cond
	return backoff.Retry(func() error {
		_, err := db.ExecContext(ctx, q) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
		return err
	}, 3)
}

// settleRetried is called with a fenced WHERE only: proven at its calls,
// whichever helper runs the closure.
func settleRetried(ctx context.Context, db *sql.DB, cond string, args ...any) error {
	q := "UPDATE refund_jobs SET state = 'succeeded' WHERE " + cond
	if err := retry(3, func() error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}); err != nil {
		return err
	}
	return backoff.Retry(func() error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}, 3)
}

func settleJob(ctx context.Context, db *sql.DB, id int64, attempt int) error {
	return settleRetried(ctx, db, fenced, id, "running", attempt)
}

func resetJob(ctx context.Context, db *sql.DB, id int64) error {
	return settleRetried(ctx, db, "id = ?", id) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
}

// A transaction wrapper of the package.
func withTx(ctx context.Context, client *ent.Client, fn func(tx *ent.Tx) error) error {
	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return nil
}

func (s *store) markInTx(ctx context.Context, client *ent.Client, id int64, attempt int, note string) error {
	fencedQ := "UPDATE refund_jobs SET note = ? WHERE " + fenced
	loose := "UPDATE refund_jobs SET note = '" + note + "' WHERE id = ?"
	return withTx(ctx, client, func(tx *ent.Tx) error {
		if _, err := tx.ExecContext(ctx, fencedQ, note, id, "running", attempt); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, loose, id) // want `the fence of this UPDATE cannot be proven: its SET list is built at run time from note`
		return err
	})
}
