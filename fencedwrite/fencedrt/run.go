package fencedrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Tx is the transaction a runner hands to its callback: Ent's generated *Tx.
type Tx interface {
	Commit() error
	Rollback() error
}

// Begun is a transaction a runner started: Ent's transaction for the
// callback, the transaction's driver (where Fence runs), and the guarded
// driver transaction underneath, which only the runner ends.
type Begun[T Tx] struct {
	Tx   T
	Exec dialect.ExecQuerier
	Raw  *GuardedTx
}

type runKey struct{}

// run is the state of one Run, reachable from the callback's context.
type run struct {
	mu         sync.Mutex
	exec       dialect.ExecQuerier
	done       bool
	committing bool
	applied    []*Write
	byKey      map[string][]*Write // applied, by the job's operation key
	missed     *Write              // matched no row
	refused    *Write              // the database fence refused it
	refusal    error
	batch      bool // RunBatch: callbacks do not call Fence
	deferRows  bool // RunBatch with fencedwrite.WithDeferredRows: DeferRow takes rows
	deferred   []deferredRow
}

// CheckCommit is called by the generated transaction's outermost commit
// hook: it refuses every COMMIT but the runner's own, before any other hook
// runs.
func CheckCommit(ctx context.Context) error {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.committing {
		return fencedwrite.ErrRunnerOwnsCommit
	}
	return nil
}

// AppliedInRunFor returns the fenced writes applied so far, to the job with
// operation key key, in the run whose callback passed ctx: for business
// writes that must pair with one (the ledger settles only with the job's
// completion). The run indexes them by key, so that each callback of a
// batch of n finds its own job's without reading the others'.
func AppliedInRunFor(ctx context.Context, key string) []fencedwrite.Applied {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []fencedwrite.Applied
	for _, w := range r.byKey[key] {
		out = append(out, w.applied())
	}
	return out
}

// add records w as applied in the run; r.mu is held.
func (r *run) add(w *Write) {
	r.applied = append(r.applied, w)
	if r.byKey == nil {
		r.byKey = map[string][]*Write{}
	}
	key, _ := w.vals[ParamKey].(string)
	r.byKey[key] = append(r.byKey[key], w)
}

func (w *Write) applied() fencedwrite.Applied {
	key, _ := w.vals[ParamKey].(string)
	vals := make(map[string]any, len(w.vals))
	for p, v := range w.vals {
		vals[string(p)] = v
	}
	return fencedwrite.Applied{Table: w.table.Name(), ID: w.id, Key: key, Op: string(w.op), To: w.transition().To, Attempt: w.toAttempt(), Values: vals}
}

// Run runs fn in a transaction it owns, on one connection, and runs the
// COMMIT itself so that it can report the outcome; see the outcomes in
// package fencedwrite and the generated Apply. fn makes its fenced writes
// with Fence and its business writes on the same transaction.
//
// The transaction is guarded (see Guard): fn cannot end it, and a statement
// that would is refused before it is sent. A commit hook that fails or never
// calls the next one leaves nothing committed: the runner rolls back at
// once, so no row stays locked. When the COMMIT reply is lost, Run re-reads
// the job under a row lock on a fresh connection: the lock cannot be granted
// while the old transaction still holds it, so the row it shows is final.
func Run[T Tx](ctx context.Context, pool dialect.Driver, begin func(context.Context) (Begun[T], error), fn func(context.Context, T) error) error {
	r := &run{}
	ctx = context.WithValue(withoutSessionVars(ctx), runKey{}, r)
	b, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("begin fenced transaction: %w: %w", fencedwrite.ErrRolledBack, err)
	}
	if err := verifySession(ctx, pool, b.Exec); err != nil {
		_ = b.Raw.rollback()
		return fmt.Errorf("begin fenced transaction: %w", sessionOutcome(err))
	}
	r.mu.Lock()
	r.exec = b.Exec
	r.mu.Unlock()
	ferr := call(ctx, b, fn)
	r.mu.Lock()
	r.done = true
	missed, refused, refusal, applied := r.missed, r.refused, r.refusal, r.applied
	r.mu.Unlock()

	switch {
	case missed != nil:
		_ = b.Raw.rollback()
		found, rerr := reRead(ctx, pool, missed.table, OpRead, missed.id)
		if rerr != nil {
			return missed.fail(fencedwrite.ErrUnexpectedState, row{}, fmt.Errorf("matched no row, and the re-read failed: %w", rerr))
		}
		return missed.classify(found, false, nil)
	case refused != nil:
		_ = b.Raw.rollback()
		return refused.fail(fencedwrite.ErrUnexpectedState, row{}, fmt.Errorf("the database fence refused the write: %w", refusal))
	case ferr != nil:
		_ = b.Raw.rollback()
		outcome := fencedwrite.ErrRolledBack
		if errors.Is(ferr, fencedwrite.ErrInvalid) {
			outcome = fencedwrite.ErrInvalid
		}
		if len(applied) > 0 {
			return applied[0].fail(outcome, row{}, ferr)
		}
		if outcome == fencedwrite.ErrInvalid {
			return ferr
		}
		return fmt.Errorf("%w: %w", outcome, ferr)
	case len(applied) == 0:
		_ = b.Raw.rollback()
		return fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, fencedwrite.ErrNoFencedWrite)
	}
	w := applied[0]
	done, cerr := commit(ctx, b, r)
	switch done {
	case committed:
		return nil
	case notCommitted:
		return w.fail(fencedwrite.ErrRolledBack, row{}, cerr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reReadTimeout)
	defer cancel()
	found, rerr := readRowLocked(rctx, pool, w.table, w.id)
	if rerr != nil {
		return w.fail(fencedwrite.ErrCommitUnknown, row{}, errors.Join(cerr, fmt.Errorf("re-read: %w", rerr)))
	}
	return w.classify(found, true, cerr)
}

// commitResult is how the runner's COMMIT went.
type commitResult int

const (
	committed     commitResult = iota // acknowledged
	notCommitted                      // nothing is in place
	mayHaveLanded                     // COMMIT was sent and its reply lost: re-read
)

// commit ends the transaction b of run r: the one place where a runner
// (Run, RunBatch, Insert) commits. It refuses to commit a transaction the
// server already rolled back, lets the runner's own COMMIT through Ent's
// commit hooks (fn's cannot), calls the BeforeCommit test signal, and rolls
// back at once when a commit hook failed or never sent the COMMIT, so no
// row stays locked. The error says why the transaction did not commit, or
// is the lost reply's (mayHaveLanded, after the BeforeReRead signal).
func commit[T Tx](ctx context.Context, b Begun[T], r *run) (commitResult, error) {
	if berr := b.Raw.Broken(); berr != nil {
		_ = b.Raw.rollback()
		return notCommitted, fmt.Errorf("the server rolled back the transaction: %w", berr)
	}
	r.mu.Lock()
	r.committing = true
	r.mu.Unlock()
	b.Raw.allowEnd()
	hooksOf(ctx).call(hookBeforeCommit)
	cerr := b.Tx.Commit()
	switch {
	case !b.Raw.sentCommit():
		// A commit hook failed, or returned without calling the next one:
		// COMMIT was never sent. Roll back now, or the row stays locked.
		_ = b.Raw.rollback()
		if cerr == nil {
			cerr = errors.New("a commit hook returned without calling the next one")
		}
		return notCommitted, fmt.Errorf("commit hook: nothing was committed: %w", cerr)
	case cerr == nil:
		return committed, nil
	case !fencedwrite.CommitMayHaveLanded(cerr):
		return notCommitted, cerr
	default:
		hooksOf(ctx).call(hookBeforeReRead)
		return mayHaveLanded, cerr
	}
}

// reReadTimeout bounds the locking re-read after a lost COMMIT reply.
const reReadTimeout = 30 * time.Second

func call[T Tx](ctx context.Context, b Begun[T], fn func(context.Context, T) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = b.Raw.rollback()
			panic(p)
		}
	}()
	return fn(ctx, b.Tx)
}

// Fence runs the fenced write w on exec, which must be the transaction of
// the Run whose callback passed ctx. It returns nil when the write matched
// its row. Otherwise it returns an error; the callback should return it, and
// Run rolls back, re-reads and reports the outcome (whatever the callback
// returns). A job takes one transition per transaction.
func Fence(ctx context.Context, exec dialect.ExecQuerier, w *Write) error {
	if w == nil || w.table == nil {
		return fmt.Errorf("fence: %w: the transition is nil or was not built by the generated API", fencedwrite.ErrInvalid)
	}
	if w.err != nil {
		return w.err
	}
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil || r.exec != exec || r.batch {
		return w.fail(fencedwrite.ErrInvalid, row{}, fencedwrite.ErrOutsideRun)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.done:
		return w.fail(fencedwrite.ErrInvalid, row{}, fmt.Errorf("%w: the runner has already finished", fencedwrite.ErrOutsideRun))
	case r.missed != nil || r.refused != nil:
		return w.fail(fencedwrite.ErrRolledBack, row{}, errors.New("an earlier fenced write in this transaction did not apply"))
	}
	for _, a := range r.applied {
		if a.table == w.table && a.id == w.id {
			return w.fail(fencedwrite.ErrInvalid, row{}, fmt.Errorf("%s#%d already took a transition (%s) in this transaction: one transition per job per transaction",
				w.table.Name(), w.id, a.op))
		}
	}
	query, args, err := w.table.Bind(w.op, w.vals)
	if err != nil {
		return w.fail(fencedwrite.ErrInvalid, row{}, err)
	}
	var res stdsql.Result
	if err := exec.Exec(ctx, query, args, &res); err != nil {
		if IsFenceRefusal(err) {
			r.refused, r.refusal = w, err
		}
		return fmt.Errorf("%s %s#%d at attempt %d: %w", w.op, w.table.Name(), w.id, w.attempt, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %s#%d: rows affected: %w", w.op, w.table.Name(), w.id, err)
	}
	switch n {
	case 1:
		r.add(w)
		return nil
	case 0:
		r.missed = w
		return w.fail(errNoRow, row{}, nil)
	default:
		return fmt.Errorf("%s %s#%d: fenced write matched %d rows", w.op, w.table.Name(), w.id, n)
	}
}

// errNoRow is what Fence returns to the callback when the write matched no
// row. Run classifies it after rolling back.
var errNoRow = errors.New("fenced write matched no row")

// IsFenceRefusal reports whether err is the database fence's refusal: a
// trigger's SIGNAL SQLSTATE '45000' (error 1644 on MySQL and MariaDB).
func IsFenceRefusal(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1644
}

// classify decides what a fresh row means for a write that matched no row
// (afterCommit false), or whose COMMIT reply was lost (afterCommit true, row
// read under lock). cause is attached to the result.
func (w *Write) classify(r row, afterCommit bool, cause error) error {
	tr := w.transition()
	noop := tr.From == tr.To && !tr.Bump
	switch {
	case !r.found:
		return w.fail(fencedwrite.ErrUnexpectedState, r, cause)
	case r.state == tr.To && r.attempt == w.toAttempt() && !noop && tr.Bump && !afterCommit:
		// A move that takes attempt+1 (an operator's or the reconciler's
		// resolution) whose statement matched no row wrote nothing: the
		// row is another writer's, who held the same attempt and made the
		// same move (two reconcilers acting on one observation). An
		// attempt number proves no identity; only this run's own COMMIT,
		// re-read under lock, could be this write's.
		return w.fail(fencedwrite.ErrSuperseded, r, errors.Join(cause, errors.New("another writer made this move at this attempt")))
	case r.state == tr.To && r.attempt == w.toAttempt() && !noop:
		if !w.sameWrite(r) {
			return w.fail(fencedwrite.ErrUnexpectedState, r,
				errors.Join(cause, errors.New("the row was settled differently at this attempt")))
		}
		return w.fail(fencedwrite.ErrAlreadySettled, r, cause)
	case r.state == tr.From && r.attempt == w.attempt:
		if !afterCommit {
			// Attempts never decrease and a row never returns to the state
			// a fence names once it left it, so this row matched the write.
			return w.fail(fencedwrite.ErrFoundRowsOff, r, cause)
		}
		if noop {
			return w.fail(fencedwrite.ErrCommitUnknown, r, cause)
		}
		return w.fail(fencedwrite.ErrRolledBack, r, fmt.Errorf("commit reply lost; the row is unchanged under lock, so it did not land: %w", cause))
	case r.attempt > w.attempt && r.attempt >= w.toAttempt():
		if afterCommit {
			return w.fail(fencedwrite.ErrSuperseded, r, fmt.Errorf("%w: %w", fencedwrite.ErrCommitUnknown, cause))
		}
		return w.fail(fencedwrite.ErrSuperseded, r, cause)
	default:
		return w.fail(fencedwrite.ErrUnexpectedState, r, cause)
	}
}

func readRow(ctx context.Context, q dialect.ExecQuerier, t *Table, op Op, id int64) (row, error) {
	query, args, err := t.Bind(op, Values{ParamID: id})
	if err != nil {
		return row{}, err
	}
	var rows sql.Rows
	if err := q.Query(ctx, query, args, &rows); err != nil {
		return row{}, err
	}
	defer rows.Close()
	var r row
	if rows.Next() {
		cols := make([]stdsql.NullString, len(t.spec.Compared))
		dest := []any{&r.state, &r.attempt}
		for i := range cols {
			dest = append(dest, &cols[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return row{}, err
		}
		r.found = true
		r.cols = make(map[string]*string, len(cols))
		for i, c := range cols {
			if c.Valid {
				r.cols[t.spec.Compared[i]] = &c.String
			}
		}
	}
	return r, rows.Err()
}

// readRowLocked re-reads a job under its row lock, in a transaction of its
// own on a fresh connection of pool: the lock is granted only once every
// other transaction that holds it has ended, so the row it shows is final.
func readRowLocked(ctx context.Context, pool dialect.Driver, t *Table, id int64) (row, error) {
	return reRead(ctx, pool, t, OpReadLocked, id)
}

// reRead reads job id afresh with statement op (OpRead after a write that
// matched no row, once its transaction is rolled back; OpReadLocked after a
// lost COMMIT reply), in a verified transaction of its own unless pool is a
// fenced pool and the read takes no lock.
func reRead(ctx context.Context, pool dialect.Driver, t *Table, op Op, id int64) (row, error) {
	if op == OpRead && infoOf(pool).trusted {
		return readRow(ctx, pool, t, op, id)
	}
	tx, err := beginVerified(ctx, pool)
	if err != nil {
		return row{}, err
	}
	r, err := readRow(ctx, tx, t, op, id)
	if err != nil {
		_ = tx.Rollback()
		return row{}, err
	}
	return r, tx.Commit()
}
