// Package unprovable checks issue 32's rule: a write of a fenced table
// whose WHERE (or SET list) is finished at run time is reported where the
// text is finished, with what finishes it, unless every caller of the
// function completes it with a fenced constant. The shapes are those of
// a refund service's store.
package unprovable

import (
	"context"
	"database/sql"
	"os"

	"example.com/app/ent"
)

const fenced = "id = ? AND state = ? AND attempt = ?"

// 1. A parameter completes the WHERE and nothing calls the function: no
// caller proves it, so it is reported where the text is finished.

func markWhere(ctx context.Context, db *sql.DB, cond string) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+cond) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

// execer is the usual seam: *sql.DB, *sql.Tx or a logging decorator.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func ifaceWhere(ctx context.Context, db execer, cond string, args ...any) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+cond, args...) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

type store struct{ db *sql.DB }

// exec is an unexported wrapper: its callers finish the query.
func (s *store) exec(ctx context.Context, q string, args ...any) error {
	_, err := s.db.ExecContext(ctx, q, args...)
	return err
}

func (s *store) failWhere(ctx context.Context, cond string) error {
	return s.exec(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+cond) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
}

func entWhere(ctx context.Context, tx *ent.Tx, cond string) error {
	_, err := tx.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+cond) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

// An exported function of a library: its callers are outside the build.
func MarkWhere(ctx context.Context, db *sql.DB, cond string) error { // want MarkWhere:`sink\("UPDATE refund_jobs SET state = 'failed' WHERE \{2\}"\)`
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+cond) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

// A function literal nobody calls.
func unusedLiteral(ctx context.Context, db *sql.DB) {
	requeue := func(cond string) {
		db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+cond) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	}
	_ = requeue
}

// 2. The SET list chosen at run time, with no fence at all: unfenced
// whatever the column, so reported here and never at the callers.

func setColumn(ctx context.Context, db *sql.DB, column string, v any, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET "+column+" = ? WHERE id = ?", v, id) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	return err
}

func (s *store) setNote(ctx context.Context, id int64) error {
	return setColumn(ctx, s.db, "note", "x", id)
}

// A SET list and its WHERE, both in the hole.
func patch(ctx context.Context, db *sql.DB, sets string) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET "+sets) // want `the fence of this UPDATE cannot be proven: its SET list and WHERE are built at run time from sets`
	return err
}

// 3. Callers fencelint cannot resolve: the caller's argument is where the
// text is finished.

func (s *store) failOne(ctx context.Context, cond string) error {
	_, err := s.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+cond)
	return err
}

func (s *store) failFromEnv(ctx context.Context) error {
	return s.failOne(ctx, os.Getenv("FAIL_WHERE")) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from os.Getenv\("FAIL_WHERE"\)`
}

func (s *store) failFenced(ctx context.Context, id int64, state string, attempt int) error {
	return s.failOne(ctx, fenced)
}

// A chain: relay passes its own parameter on, and nothing calls relay.
func (s *store) relay(ctx context.Context, where string) error {
	return s.failOne(ctx, where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
}

// 4. Proven at the callers: every caller passes a fenced constant.

func (s *store) settleWhere(ctx context.Context, cond string, args ...any) error {
	_, err := s.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'succeeded' WHERE "+cond, args...)
	return err
}

func (s *store) settle(ctx context.Context, id int64, attempt int) error {
	return s.settleWhere(ctx, fenced, id, "running", attempt)
}

func (s *store) settleLegacy(ctx context.Context, id int64) error {
	return s.settleWhere(ctx, "id = ?", id) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
}

// A chain whose every end is fenced.
func (s *store) settleVia(ctx context.Context, where string, args ...any) error {
	return s.settleWhere(ctx, where, args...)
}

func (s *store) settleTwice(ctx context.Context, id int64, attempt int) error {
	return s.settleVia(ctx, fenced, id, "running", attempt)
}

// A run-time SET list before a fenced WHERE.
func (s *store) setFenced(ctx context.Context, column string, v any, id int64, attempt int) error {
	_, err := s.db.ExecContext(ctx, "UPDATE refund_jobs SET "+column+" = ? WHERE "+fenced, v, id, "running", attempt)
	return err
}

// An unexported method called through the package's interface.
type jobWriter interface {
	writeWhere(ctx context.Context, cond string, args ...any) error
}

func (s *store) writeWhere(ctx context.Context, cond string, args ...any) error {
	_, err := s.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+cond, args...)
	return err
}

func requeue(ctx context.Context, w jobWriter, id int64, attempt int) error {
	return w.writeWhere(ctx, fenced, id, "failed", attempt)
}

func newWriter(db *sql.DB) jobWriter { return &store{db: db} }

// A bound literal called with a fenced constant only.
func boundLiteral(ctx context.Context, db *sql.DB, id int64, attempt int) {
	run := func(cond string, args ...any) {
		db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+cond, args...)
	}
	run(fenced, id, "failed", attempt)
}

// Reads and plain inserts finished at run time are never writes.
func reads(ctx context.Context, db *sql.DB, cond string) {
	db.QueryContext(ctx, "SELECT id FROM refund_jobs WHERE "+cond)
	db.ExecContext(ctx, "INSERT INTO refund_jobs (id, state) VALUES ("+cond+", 'ready')")
}

// A generic helper is proven at its instances' calls.
func updateWhere[T any](ctx context.Context, db *sql.DB, cond string, v T, args ...any) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET note = ? WHERE "+cond, append([]any{v}, args...)...)
	return err
}

func noteJob(ctx context.Context, db *sql.DB, id int64, attempt int) error {
	return updateWhere(ctx, db, fenced, "x", id, "running", attempt)
}
