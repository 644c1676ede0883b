// Package callforms checks that a write is judged however Go calls the
// sink: under go and defer, through a method value or a bound method
// passed as a value, a closure passed to a helper (retry loops,
// transaction callbacks), a function-typed field or package variable, and
// an interface method whose implementations are in the package. The
// shapes are those of a refund worker.
package callforms

import (
	"context"
	"database/sql"
	"log"
	"reflect"
	"strconv"
	"time"

	"sqlhelp"
)

const fencedWhere = " WHERE id = ? AND state = 'running' AND attempt = ?"

// requeueSQL is completed at run time: the id is formatted into it, so
// fencelint cannot read the WHERE whole, and judges it where it is sent.
func requeueSQL(id int64) string {
	return "UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.FormatInt(id, 10)
}

// backoffSQL is a fenced requeue's head: the delay is formatted into the
// SET list, the WHERE stays constant.
func backoffSQL(secs int) string {
	return "UPDATE refund_jobs SET state = 'ready', run_after = NOW() + INTERVAL " + strconv.Itoa(secs) + " SECOND"
}

// execFunc is the signature of (*sql.DB).ExecContext and (*sql.Tx).ExecContext.
type execFunc func(ctx context.Context, query string, args ...any) (sql.Result, error)

// withTx runs fn in a transaction: the usual callback helper.
func withTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// retry runs op until it succeeds or attempts run out.
func retry(ctx context.Context, attempts int, op func(ctx context.Context) error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if err = op(ctx); err == nil {
			return nil
		}
		time.Sleep(time.Duration(i) * 10 * time.Millisecond)
	}
	return err
}

// 1. go and defer.

func releaseOnExit(ctx context.Context, db *sql.DB, id int64) {
	defer db.ExecContext(ctx, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	defer db.ExecContext(ctx, backoffSQL(30)+fencedWhere, id, 3)
	go db.ExecContext(ctx, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
}

func (w *worker) markWhere(ctx context.Context, where string, args ...any) error {
	_, err := w.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+where, args...)
	return err
}

type worker struct {
	db   *sql.DB
	exec execFunc // ExecContext of the pool, or of a transaction
	log  *log.Logger
}

func (w *worker) deferredCleanup(ctx context.Context, id int64, attempt int) {
	defer w.markWhere(ctx, "id = ?", id) // want `unfenced UPDATE of refund_jobs`
	defer w.markWhere(ctx, "id = ? AND state = 'running' AND attempt = ?", id, attempt)
	go w.markWhere(ctx, "id = ?", id) // want `unfenced UPDATE of refund_jobs`
	go w.markWhere(ctx, "id = ? AND state = 'running' AND attempt = ?", id, attempt)
}

// 2. Method values and bound methods.

func methodValue(ctx context.Context, db *sql.DB, id int64) {
	exec := db.ExecContext
	exec(ctx, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	exec(ctx, backoffSQL(30)+fencedWhere)
}

func methodValueTx(ctx context.Context, db *sql.DB, id int64) error {
	return withTx(ctx, db, func(tx *sql.Tx) error {
		run := tx.ExecContext
		_, err := run(ctx, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
		return err
	})
}

// A method value of a wrapper of the package: judged at its calls.
func (w *worker) viaMethodValue(ctx context.Context, id int64, attempt int) {
	mark := w.markWhere
	mark(ctx, "id = ?", id) // want `unfenced UPDATE of refund_jobs`
	mark(ctx, "id = ? AND state = 'running' AND attempt = ?", id, attempt)
}

// failWhere escapes to another package as a value: its calls are not all
// in sight, so what its parameter completes is judged here.
func (w *worker) failWhere(ctx context.Context, where string) error {
	_, err := w.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE "+where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	return err
}

// handlers are registered by reflection.
func (w *worker) handlers() []reflect.Value {
	return []reflect.Value{reflect.ValueOf(w.failWhere)}
}

// send is handed the pool's or a transaction's ExecContext.
func send(ctx context.Context, exec execFunc, q string) error {
	_, err := exec(ctx, q)
	return err
}

func boundPassed(ctx context.Context, db *sql.DB, id int64) {
	send(ctx, db.ExecContext, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	send(ctx, db.ExecContext, backoffSQL(30)+fencedWhere)
}

// 3. Closures passed to helpers.

// The query is in the closure: a transaction callback and a retry loop.
func (w *worker) settle(ctx context.Context, id int64, attempt int) error {
	return withTx(ctx, w.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, requeueSQL(id)); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
			return err
		}
		return retry(ctx, 3, func(ctx context.Context) error {
			_, err := tx.ExecContext(ctx, backoffSQL(5)+fencedWhere, id, attempt)
			return err
		})
	})
}

// eachJob calls fn with a query it completes: the closure calls the sink.
func eachJob(ctx context.Context, ids []int64, where string, fn func(ctx context.Context, q string, id int64) error) error {
	for _, id := range ids {
		if err := fn(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where, id); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) requeueAll(ctx context.Context, ids []int64, attempt int) error {
	if err := eachJob(ctx, ids, "id = ?", func(ctx context.Context, q string, id int64) error { // want `unfenced UPDATE of refund_jobs`
		_, err := w.db.ExecContext(ctx, q, id)
		return err
	}); err != nil {
		return err
	}
	return eachJob(ctx, ids, "id = ? AND state = 'running' AND attempt = ?", func(ctx context.Context, q string, id int64) error {
		_, err := w.db.ExecContext(ctx, q, id, attempt)
		return err
	})
}

// A literal captured by the transaction callback: the WHERE it is handed
// is judged where the callback calls it.
func (w *worker) capturedCallback(ctx context.Context, id int64, attempt int) error {
	var setState = func(tx *sql.Tx, state, where string, args ...any) error {
		_, err := tx.ExecContext(ctx, "UPDATE refund_jobs SET state = ? WHERE "+where, append([]any{state}, args...)...)
		return err
	}
	return withTx(ctx, w.db, func(tx *sql.Tx) error {
		if err := setState(tx, "ready", "id = ?", id); err != nil { // want `unfenced UPDATE of refund_jobs`
			return err
		}
		return setState(tx, "failed", "id = ? AND state = 'running' AND attempt = ?", id, attempt)
	})
}

// 4. Function-typed fields and package variables.

func (w *worker) viaField(ctx context.Context, id int64, attempt int) {
	w.exec(ctx, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	w.exec(ctx, backoffSQL(30)+fencedWhere, id, attempt)
}

func newWorker(db *sql.DB) *worker {
	return &worker{db: db, exec: db.ExecContext}
}

// execHook is the package's hook, replaced by tests.
var execHook = func(ctx context.Context, db *sql.DB, q string, args ...any) error {
	_, err := db.ExecContext(ctx, q, args...)
	return err
}

func viaVar(ctx context.Context, db *sql.DB, id int64, attempt int) {
	execHook(ctx, db, requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	execHook(ctx, db, backoffSQL(30)+fencedWhere, id, attempt)
}

// 5. A repository behind an interface.

type jobStore interface {
	setState(ctx context.Context, state, where string, args ...any) error
}

type sqlStore struct{ db *sql.DB }

func (s *sqlStore) setState(ctx context.Context, state, where string, args ...any) error {
	_, err := s.db.ExecContext(ctx, "UPDATE refund_jobs SET state = '"+state+"' WHERE "+where, args...)
	return err
}

type service struct{ store jobStore }

func (s *service) fail(ctx context.Context, id int64, attempt int) {
	s.store.setState(ctx, "failed", "id = ?", id) // want `unfenced UPDATE of refund_jobs`
	s.store.setState(ctx, "failed", "id = ? AND state = 'running' AND attempt = ?", id, attempt)
}

func newService(db *sql.DB) *service { return &service{store: &sqlStore{db: db}} }

// 6. An interface whose implementation is in another package: its sink
// fact is followed.

type runner interface {
	Run(ctx context.Context, tag, query string) error
}

func viaDependency(ctx context.Context, r runner, id int64) {
	r.Run(ctx, "requeue", requeueSQL(id)) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	r.Run(ctx, "requeue", backoffSQL(30)+fencedWhere)
}

func newRunner() runner { return &sqlhelp.Store{} }
