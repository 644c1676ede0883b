package fencedrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Claimed is a committed claim or takeover. Generated code turns it into the
// entity's lease type; only a Claimed whose COMMIT was acknowledged exists.
type Claimed struct {
	ID         int64
	Attempt    int64     // the new attempt: the fencing token of the lease
	Action     string    // fencedwrite.ActionRefund or fencedwrite.ActionReconcile
	LeaseUntil time.Time // database time (UTC) when others may take over
	ClaimedAt  time.Time // database time (UTC) of the claim
}

// lockedJob is what the claim's locking read saw, every time read on the
// database clock that no session can move (see ClockMicros).
type lockedJob struct {
	state    string
	attempt  int64
	action   string
	nextRun  stdsql.NullInt64 // microseconds since the epoch
	lease    stdsql.NullInt64
	keyFirst stdsql.NullInt64
	now      int64
}

// Claim claims a due ready job; see the generated Claim. Its errors match
// exactly one of fencedwrite.ErrNotFound, ErrNotClaimable, ErrInvalid,
// ErrRolledBack (nothing was claimed: the transaction failed before its
// COMMIT was sent, or the server refused the COMMIT), ErrUnexpectedState
// (the database fence refused the claim) and ErrCommitUnknown.
func Claim(ctx context.Context, drv dialect.Driver, t *Table, id int64, o fencedwrite.ClaimOptions) (Claimed, error) {
	return claim(ctx, drv, t, OpClaimSend, id, o)
}

// Takeover takes over a running job whose lease has expired; see the
// generated Takeover. Its errors are Claim's.
func Takeover(ctx context.Context, drv dialect.Driver, t *Table, id int64, o fencedwrite.ClaimOptions) (Claimed, error) {
	return claim(ctx, drv, t, OpTakeover, id, o)
}

func claim(ctx context.Context, drv dialect.Driver, t *Table, op Op, id int64, o fencedwrite.ClaimOptions) (Claimed, error) {
	if err := o.Validate(); err != nil {
		return Claimed{}, fmt.Errorf("%s %s#%d: %w", op, t.Name(), id, err)
	}
	o = o.WithDefaults()
	tx, err := drv.Tx(ctx)
	if err != nil {
		return Claimed{}, fmt.Errorf("%s %s#%d: begin: %w: %w", op, t.Name(), id, fencedwrite.ErrRolledBack, err)
	}
	c, err := claimTx(ctx, tx, t, op, id, o)
	if err != nil {
		_ = tx.Rollback()
		return Claimed{}, fmt.Errorf("%s %s#%d: %w", op, t.Name(), id, claimOutcome(err))
	}
	hooksOf(ctx).call(hookBeforeClaimCommit)
	if err := tx.Commit(); err != nil {
		return Claimed{}, commitOutcome(op, t, id, c.Attempt, err)
	}
	return c, nil
}

// claimOutcome makes err, which ended a claim's transaction before its
// COMMIT, match exactly one outcome.
func claimOutcome(err error) error {
	switch {
	case errors.Is(err, fencedwrite.ErrNotFound), errors.Is(err, fencedwrite.ErrNotClaimable),
		errors.Is(err, fencedwrite.ErrInvalid), errors.Is(err, fencedwrite.ErrUnexpectedState):
		return err
	case IsFenceRefusal(err):
		return fmt.Errorf("%w: the database fence refused the claim: %w", fencedwrite.ErrUnexpectedState, err)
	default:
		// A statement failed, a deadlock or a lock wait ended it, or the
		// connection broke: COMMIT was never sent, so nothing was claimed.
		return fmt.Errorf("%w: %w", fencedwrite.ErrRolledBack, err)
	}
}

func commitOutcome(op Op, t *Table, id, attempt int64, err error) error {
	if CommitMayHaveLanded(err) {
		return fmt.Errorf("%s %s#%d at attempt %d: %w: do not call the provider; the next scheduler pass reads the truth: %w",
			op, t.Name(), id, attempt, fencedwrite.ErrCommitUnknown, err)
	}
	return fmt.Errorf("%s %s#%d: commit: %w: %w", op, t.Name(), id, fencedwrite.ErrRolledBack, err)
}

func claimTx(ctx context.Context, tx dialect.Tx, t *Table, op Op, id int64, o fencedwrite.ClaimOptions) (Claimed, error) {
	j, err := lockJob(ctx, tx, t, id)
	if err != nil {
		return Claimed{}, err
	}
	c, next, err := decide(j, op, id, o)
	if err != nil {
		return Claimed{}, err
	}
	return c, moveClaimed(ctx, tx, t, next, c, j.attempt)
}

// decide applies the claim or takeover rules to the locked row: which
// statement moves it and the lease it gets.
func decide(j lockedJob, op Op, id int64, o fencedwrite.ClaimOptions) (Claimed, Op, error) {
	now := time.UnixMicro(j.now).UTC()
	c := Claimed{ID: id, Attempt: j.attempt + 1, ClaimedAt: now, LeaseUntil: now.Add(o.Lease)}
	switch op {
	case OpClaimSend:
		if j.state != fencedwrite.StateReady {
			return Claimed{}, "", fmt.Errorf("%w: job is %s, a claim needs %s", fencedwrite.ErrNotClaimable, j.state, fencedwrite.StateReady)
		}
		if !j.nextRun.Valid || j.nextRun.Int64 > j.now {
			return Claimed{}, "", fmt.Errorf("%w: job is not due yet", fencedwrite.ErrNotClaimable)
		}
		c.Action = j.action
		keyFresh := !j.keyFirst.Valid || j.keyFirst.Int64 > j.now-o.KeyWindow().Microseconds()
		if c.Action == fencedwrite.ActionRefund && !keyFresh {
			// The provider may have forgotten the key: sending again could
			// pay twice. Ask instead.
			c.Action = fencedwrite.ActionReconcile
		}
		if c.Action == fencedwrite.ActionRefund {
			return c, OpClaimSend, nil
		}
		return c, OpClaimReconcile, nil
	case OpTakeover:
		if j.state != fencedwrite.StateRunning {
			return Claimed{}, "", fmt.Errorf("%w: job is %s, a takeover needs %s", fencedwrite.ErrNotClaimable, j.state, fencedwrite.StateRunning)
		}
		if !j.lease.Valid || j.lease.Int64 >= j.now {
			return Claimed{}, "", fmt.Errorf("%w: the lease of attempt %d has not expired", fencedwrite.ErrNotClaimable, j.attempt)
		}
		c.Action = fencedwrite.ActionReconcile
		return c, OpTakeover, nil
	default:
		return Claimed{}, "", fmt.Errorf("%w: unknown claim operation %q", fencedwrite.ErrInvalid, op)
	}
}

// moveClaimed runs the fenced UPDATE of a claim or takeover on the locked
// row.
func moveClaimed(ctx context.Context, tx dialect.ExecQuerier, t *Table, op Op, c Claimed, old int64) error {
	now := SQLTime(c.ClaimedAt)
	query, args, err := t.Bind(op, Values{
		ParamID: c.ID, ParamAttempt: old, ParamWriter: old, ParamNewAttempt: c.Attempt,
		ParamLeaseUntil: SQLTime(c.LeaseUntil), ParamNow: now,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var res stdsql.Result
	if err := tx.Exec(ctx, query, args, &res); err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// The row is locked by this transaction, so this cannot happen
		// unless the connection counts changed rows; refuse to guess.
		return fmt.Errorf("%w: fenced claim update affected %d rows (%v)", fencedwrite.ErrUnexpectedState, n, err)
	}
	return nil
}

func lockJob(ctx context.Context, tx dialect.ExecQuerier, t *Table, id int64) (lockedJob, error) {
	query, args, err := t.Bind(OpClaimLock, Values{ParamID: id})
	if err != nil {
		return lockedJob{}, fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var rows sql.Rows
	if err := tx.Query(ctx, query, args, &rows); err != nil {
		return lockedJob{}, fmt.Errorf("lock: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return lockedJob{}, fmt.Errorf("lock: %w", err)
		}
		return lockedJob{}, fencedwrite.ErrNotFound
	}
	var j lockedJob
	if err := rows.Scan(&j.state, &j.attempt, &j.action, &j.nextRun, &j.lease, &j.keyFirst, &j.now); err != nil {
		return lockedJob{}, fmt.Errorf("lock: %w", err)
	}
	if err := rows.Close(); err != nil {
		return lockedJob{}, fmt.Errorf("lock: %w", err)
	}
	return j, nil
}
