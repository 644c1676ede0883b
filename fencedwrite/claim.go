package fencedwrite

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
)

// Claimed is a committed claim or takeover. Generated code turns it into the
// entity's lease type; only a Claimed whose COMMIT was acknowledged exists.
type Claimed struct {
	ID         int64
	Attempt    int64     // the new attempt: the fencing token of the lease
	Action     string    // ActionRefund or ActionReconcile
	LeaseUntil time.Time // database time (UTC) when others may take over
	ClaimedAt  time.Time // database time (UTC) of the claim
}

// lockedJob is what the claim's locking read saw.
type lockedJob struct {
	state    string
	attempt  int64
	action   string
	due      bool
	expired  bool
	keyFresh bool
	now      time.Time
}

// Claim claims a due ready job: in one short transaction it locks the row by
// primary key, checks it is ready and due, and moves it to running with
// attempt+1 and a lease measured on the database clock. A claim whose next
// action is refund first checks that the idempotency key is still safely
// inside its window (otherwise the claim reconciles instead), records the
// key's first use and records this claim as the latest possible send.
//
// Only a nil error means the caller holds the lease. ErrNotFound and
// ErrNotClaimable mean nothing was written. An error matching
// ErrCommitUnknown means the COMMIT reply was lost: the claim may or may not
// be in place, and even a row showing the expected attempt proves nothing
// (another worker may have reached the same number). Do not call the
// provider and do not retry; the next scheduler pass reads the truth.
func Claim(ctx context.Context, drv dialect.Driver, t *Table, id int64, o ClaimOptions) (Claimed, error) {
	return claim(ctx, drv, t, "claim", id, o)
}

// Takeover takes over a running job whose lease has expired, in one short
// transaction under the row lock: attempt+1, a new lease, and next action
// reconcile, whatever it was. Its errors mean what Claim's mean; a job whose
// lease has not expired, or that is no longer running (its holder settled
// it), is ErrNotClaimable.
func Takeover(ctx context.Context, drv dialect.Driver, t *Table, id int64, o ClaimOptions) (Claimed, error) {
	return claim(ctx, drv, t, "takeover", id, o)
}

func claim(ctx context.Context, drv dialect.Driver, t *Table, op string, id int64, o ClaimOptions) (Claimed, error) {
	if err := o.Validate(); err != nil {
		return Claimed{}, fmt.Errorf("%s %s#%d: %w", op, t.Name, id, err)
	}
	o = o.WithDefaults()
	tx, err := drv.Tx(ctx)
	if err != nil {
		return Claimed{}, fmt.Errorf("%s %s#%d: begin: %w", op, t.Name, id, err)
	}
	c, err := claimTx(ctx, tx, t, op, id, o)
	if err != nil {
		_ = tx.Rollback()
		return Claimed{}, fmt.Errorf("%s %s#%d: %w", op, t.Name, id, err)
	}
	if beforeClaimCommit != nil {
		beforeClaimCommit()
	}
	if err := tx.Commit(); err != nil {
		if CommitMayHaveLanded(err) {
			return Claimed{}, fmt.Errorf("%s %s#%d at attempt %d: %w: do not call the provider; the next scheduler pass reads the truth: %w",
				op, t.Name, id, c.Attempt, ErrCommitUnknown, err)
		}
		return Claimed{}, fmt.Errorf("%s %s#%d: commit: %w: %w", op, t.Name, id, ErrRolledBack, err)
	}
	return c, nil
}

func claimTx(ctx context.Context, tx dialect.Tx, t *Table, op string, id int64, o ClaimOptions) (Claimed, error) {
	j, err := lockJob(ctx, tx, t, id, o.KeyWindow())
	if err != nil {
		return Claimed{}, err
	}
	c := Claimed{ID: id, Attempt: j.attempt + 1, ClaimedAt: j.now, LeaseUntil: j.now.Add(o.Lease)}
	var query string
	var args []any
	switch op {
	case "claim":
		if j.state != StateReady {
			return Claimed{}, fmt.Errorf("%w: job is %s, a claim needs %s", ErrNotClaimable, j.state, StateReady)
		}
		if !j.due {
			return Claimed{}, fmt.Errorf("%w: job is not due yet", ErrNotClaimable)
		}
		c.Action = j.action
		if c.Action == ActionRefund && !j.keyFresh {
			// The provider may have forgotten the key: sending again could
			// pay twice. Ask instead.
			c.Action = ActionReconcile
		}
		if c.Action == ActionRefund {
			query = t.ClaimSend
			args = []any{c.Attempt, c.LeaseUntil, j.now, j.now, j.attempt, j.now, id, j.attempt}
		} else {
			query = t.ClaimReconcile
			args = []any{c.Attempt, c.LeaseUntil, j.attempt, j.now, id, j.attempt}
		}
	case "takeover":
		if j.state != StateRunning {
			return Claimed{}, fmt.Errorf("%w: job is %s, a takeover needs %s", ErrNotClaimable, j.state, StateRunning)
		}
		if !j.expired {
			return Claimed{}, fmt.Errorf("%w: the lease of attempt %d has not expired", ErrNotClaimable, j.attempt)
		}
		c.Action = ActionReconcile
		query = t.Takeover
		args = []any{c.Attempt, c.LeaseUntil, j.attempt, j.now, id, j.attempt}
	default:
		return Claimed{}, fmt.Errorf("unknown claim operation %q", op)
	}
	var res stdsql.Result
	if err := tx.Exec(ctx, query, args, &res); err != nil {
		return Claimed{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// The row is locked by this transaction, so this cannot happen
		// unless the connection counts changed rows; refuse to guess.
		return Claimed{}, fmt.Errorf("fenced claim update affected %d rows (%v): %w", n, err, ErrUnexpectedState)
	}
	return c, nil
}

func lockJob(ctx context.Context, tx dialect.Tx, t *Table, id int64, keyWindow time.Duration) (lockedJob, error) {
	var rows sql.Rows
	if err := tx.Query(ctx, t.ClaimLock, []any{keyWindow.Microseconds(), id}, &rows); err != nil {
		return lockedJob{}, fmt.Errorf("lock: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return lockedJob{}, fmt.Errorf("lock: %w", err)
		}
		return lockedJob{}, ErrNotFound
	}
	var (
		j                      lockedJob
		due, expired, keyFresh stdsql.NullBool
	)
	if err := rows.Scan(&j.state, &j.attempt, &j.action, &due, &expired, &keyFresh, &j.now); err != nil {
		return lockedJob{}, fmt.Errorf("lock: %w", err)
	}
	j.due, j.expired, j.keyFresh = due.Bool, expired.Bool, keyFresh.Bool
	if err := rows.Close(); err != nil {
		return lockedJob{}, fmt.Errorf("lock: %w", err)
	}
	return j, nil
}

// beforeClaimCommit, when set by a test, runs right before a claim's or a
// takeover's COMMIT is sent.
var beforeClaimCommit func()
