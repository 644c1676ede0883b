package fencedwrite

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"
)

// Job states and next actions of DESIGN.md's state machine.
const (
	StateReady        = "ready"
	StateRunning      = "running"
	StateSucceeded    = "succeeded"
	StateManualReview = "manual_review"
	StateFailed       = "failed"

	ActionRefund    = "refund"
	ActionReconcile = "reconcile"
)

// Table holds the statements of one fenced table. Generated code declares one
// per fenced entity; services do not build it.
type Table struct {
	Name   string // table name, e.g. refund_jobs
	Entity string // Ent type name, e.g. RefundJob

	// Read selects (state, attempt) by id; ReadLocked does so FOR UPDATE.
	Read       string
	ReadLocked string

	// ClaimLock selects, FOR UPDATE by id: state, attempt, next_action,
	// due (next_run_at <= now), expired (lease_until < now), key_fresh (the
	// key is still inside its window; one INTERVAL ? MICROSECOND argument
	// before the id) and the database's UTC_TIMESTAMP(6).
	ClaimLock string
	// ClaimSend, ClaimReconcile and Takeover are the fenced UPDATEs of a
	// claim that will send, a claim that will reconcile, and a takeover.
	ClaimSend      string
	ClaimReconcile string
	Takeover       string

	// Insert creates a job born ready at attempt 0.
	Insert string
}

// Write is one fenced UPDATE, `WHERE id = ? AND state = ? AND attempt = ?`,
// that also declares the attempt it holds in the writer column. Generated
// code builds it from a lease or from an attempt the caller read.
type Write struct {
	Table     *Table
	Op        string // transition name, e.g. "complete"
	ID        int64
	From      string // state the fence requires
	Attempt   int64  // attempt the fence requires
	To        string // state the write leaves
	ToAttempt int64  // attempt the write leaves
	Query     string
	Args      []any
	// Err, when set, is returned instead of running the write: the write
	// could not be built (bad input, a lease not from Claim or Takeover).
	Err error
}

func (w *Write) fail(outcome error, found Row, cause error) *WriteError {
	return &WriteError{Table: w.Table.Name, ID: w.ID, Op: w.Op, Attempt: w.Attempt, Found: found, Outcome: outcome, Cause: cause}
}

// errNoRow is what Fence returns to the runner's callback when the write
// matched no row. Run classifies it after rolling back.
var errNoRow = errors.New("fenced write matched no row")

type runKey struct{}

// run is the state of one Run, reachable from the callback's context.
type run struct {
	mu         sync.Mutex
	exec       dialect.ExecQuerier
	done       bool
	committing bool
	applied    []*Write
	missed     *Write
}

// ErrRunnerOwnsCommit is what a callback gets when it calls Commit on the
// runner's transaction: only the runner commits, so that it can report the
// outcome. Return from the callback instead.
var ErrRunnerOwnsCommit = errors.New("the fenced runner owns COMMIT: return from the callback instead")

// CheckCommit is called by the generated transaction's commit hook with the
// transaction's context: it refuses every COMMIT but the runner's own.
func CheckCommit(ctx context.Context) error {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.committing {
		return ErrRunnerOwnsCommit
	}
	return nil
}

// Tx is the transaction a runner owns: Ent's generated *Tx.
type Tx interface {
	Commit() error
	Rollback() error
}

// Run runs fn in a transaction it owns, on one connection, and runs the
// COMMIT itself so it can report the outcome. fn does its fenced writes with
// Fence (through the generated API) and its business writes on the same
// transaction. Run returns:
//
//   - nil: committed and acknowledged;
//   - ErrRolledBack: nothing is in place (fn failed, a statement failed, or
//     the server refused the COMMIT, or the COMMIT reply was lost and a
//     locking re-read proved it did not land); the lease still holds;
//   - ErrSuperseded, ErrAlreadySettled, ErrUnexpectedState, ErrFoundRowsOff:
//     a fenced write matched no row; the transaction was rolled back and the
//     row re-read afresh (outside the transaction, so never from its
//     snapshot);
//   - ErrCommitUnknown: COMMIT was sent, no reply came, and the re-read could
//     not settle the question. Nothing may be concluded; do not act again
//     until a later read shows the truth.
//
// When the COMMIT reply is lost, Run re-reads the job under a row lock on a
// fresh connection: the lock cannot be granted while the old transaction
// still holds it, so the row it shows is final. A write found in place is
// reported as ErrAlreadySettled.
func Run[T Tx](ctx context.Context, pool dialect.Driver, begin func(context.Context) (T, dialect.ExecQuerier, error), fn func(context.Context, T) error) error {
	r := &run{}
	ctx = context.WithValue(ctx, runKey{}, r)
	tx, exec, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("begin fenced transaction: %w: %w", ErrRolledBack, err)
	}
	r.mu.Lock()
	r.exec = exec
	r.mu.Unlock()
	ferr := call(ctx, tx, fn)
	r.mu.Lock()
	r.done = true
	missed, applied := r.missed, r.applied
	r.mu.Unlock()

	if missed != nil {
		_ = tx.Rollback()
		row, rerr := readRow(ctx, pool, missed.Table.Read, missed.ID)
		if rerr != nil {
			return missed.fail(ErrUnexpectedState, Row{}, fmt.Errorf("matched no row, and the re-read failed: %w", rerr))
		}
		return missed.classify(row, false, nil)
	}
	if ferr != nil {
		_ = tx.Rollback()
		if len(applied) > 0 {
			return applied[0].fail(ErrRolledBack, Row{}, ferr)
		}
		return fmt.Errorf("%w: %w", ErrRolledBack, ferr)
	}
	if len(applied) == 0 {
		_ = tx.Rollback()
		return ErrNoFencedWrite
	}
	w := applied[0]
	r.mu.Lock()
	r.committing = true
	r.mu.Unlock()
	cerr := tx.Commit()
	if cerr == nil {
		return nil
	}
	if !CommitMayHaveLanded(cerr) {
		return w.fail(ErrRolledBack, Row{}, cerr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reReadTimeout)
	defer cancel()
	row, rerr := readRowLocked(rctx, pool, w.Table.ReadLocked, w.ID)
	if rerr != nil {
		return w.fail(ErrCommitUnknown, Row{}, errors.Join(cerr, fmt.Errorf("re-read: %w", rerr)))
	}
	return w.classify(row, true, cerr)
}

// reReadTimeout bounds the locking re-read after a lost COMMIT reply.
const reReadTimeout = 30 * time.Second

func call[T Tx](ctx context.Context, tx T, fn func(context.Context, T) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	return fn(ctx, tx)
}

// Fence runs the fenced write w on exec, which must be the transaction of
// the Run whose callback passed ctx. It returns nil when the write matched
// its row. When it matched no row it returns an error; the callback should
// return it, and Run rolls back, re-reads and reports the outcome (whatever
// the callback returns).
func Fence(ctx context.Context, exec dialect.ExecQuerier, w *Write) error {
	if w.Err != nil {
		return w.Err
	}
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil || r.exec != exec {
		return w.fail(ErrOutsideRun, Row{}, nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return w.fail(ErrOutsideRun, Row{}, errors.New("the runner has already finished"))
	}
	if r.missed != nil {
		return w.fail(ErrRolledBack, Row{}, errors.New("an earlier fenced write in this transaction matched no row"))
	}
	var res stdsql.Result
	if err := exec.Exec(ctx, w.Query, w.Args, &res); err != nil {
		return fmt.Errorf("%s %s#%d at attempt %d: %w", w.Op, w.Table.Name, w.ID, w.Attempt, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %s#%d: rows affected: %w", w.Op, w.Table.Name, w.ID, err)
	}
	switch n {
	case 1:
		r.applied = append(r.applied, w)
		return nil
	case 0:
		r.missed = w
		return w.fail(errNoRow, Row{}, nil)
	default:
		return fmt.Errorf("%s %s#%d: fenced write matched %d rows", w.Op, w.Table.Name, w.ID, n)
	}
}

// classify decides what a fresh row means for a write that matched no row
// (afterCommit false), or whose COMMIT reply was lost (afterCommit true, row
// read under lock). cause is attached to the result.
func (w *Write) classify(row Row, afterCommit bool, cause error) error {
	noop := w.From == w.To && w.Attempt == w.ToAttempt
	switch {
	case !row.Found:
		return w.fail(ErrUnexpectedState, row, cause)
	case row.State == w.To && row.Attempt == w.ToAttempt && !noop:
		return w.fail(ErrAlreadySettled, row, cause)
	case row.State == w.From && row.Attempt == w.Attempt:
		if !afterCommit {
			// Attempts never decrease and a row never returns to the state
			// a fence names once it left it, so this row matched the write.
			return w.fail(ErrFoundRowsOff, row, cause)
		}
		if noop {
			return w.fail(ErrCommitUnknown, row, cause)
		}
		return w.fail(ErrRolledBack, row, fmt.Errorf("commit reply lost; the row is unchanged under lock, so it did not land: %w", cause))
	case row.Attempt > w.Attempt && row.Attempt >= w.ToAttempt:
		if afterCommit {
			return w.fail(ErrSuperseded, row, fmt.Errorf("%w: %w", ErrCommitUnknown, cause))
		}
		return w.fail(ErrSuperseded, row, cause)
	default:
		return w.fail(ErrUnexpectedState, row, cause)
	}
}

// CommitMayHaveLanded reports whether err, returned by COMMIT, leaves the
// outcome open. A server error reply, or an error raised before anything was
// sent, means the transaction did not commit; a broken connection after the
// COMMIT was sent (mysql.ErrInvalidConn, an I/O error) means it may have.
// When in doubt it says true: the caller then re-reads, or reports the
// outcome unknown.
func CommitMayHaveLanded(err error) bool {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return false
	case errors.As(err, &me):
		return false
	case errors.Is(err, stdsql.ErrTxDone), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// database/sql checks the context before sending COMMIT and rolls
		// back instead.
		return false
	case errors.Is(err, driver.ErrBadConn):
		// The MySQL driver returns ErrBadConn only when nothing was sent.
		return false
	default:
		return true
	}
}

func readRow(ctx context.Context, q dialect.ExecQuerier, query string, id int64) (Row, error) {
	var rows sql.Rows
	if err := q.Query(ctx, query, []any{id}, &rows); err != nil {
		return Row{}, err
	}
	defer rows.Close()
	var row Row
	if rows.Next() {
		if err := rows.Scan(&row.State, &row.Attempt); err != nil {
			return Row{}, err
		}
		row.Found = true
	}
	return row, rows.Err()
}

func readRowLocked(ctx context.Context, pool dialect.Driver, query string, id int64) (Row, error) {
	tx, err := pool.Tx(ctx)
	if err != nil {
		return Row{}, err
	}
	row, err := readRow(ctx, tx, query, id)
	if err != nil {
		_ = tx.Rollback()
		return Row{}, err
	}
	return row, tx.Commit()
}
