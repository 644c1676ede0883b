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
// It carries what the holder needs to act, read under the row lock, so that
// no second read is needed.
type Claimed struct {
	// Lease is the write right the claim minted: build the holder's
	// transitions from it (LeaseWrite).
	Lease      Lease
	ID         int64
	Attempt    int64     // the new attempt: the fencing token of the lease
	Action     string    // the table's send action (fencedwrite.ActionRefund for refund_jobs) or fencedwrite.ActionReconcile
	LeaseUntil time.Time // database time (UTC) when others may take over
	ClaimedAt  time.Time // database time (UTC) of the claim
	// Request holds the request's key and parameters, as text, in the
	// order the table declares them (the key first).
	Request []string
	// ProviderRef is the provider's refund id, when one was revealed.
	ProviderRef string
	// KeyFirstUsedAt and LastSendAt are the key's window and the latest
	// possible send, as the row holds them after the claim; nil when unset.
	KeyFirstUsedAt, LastSendAt *time.Time
	// Resend is true when this claim sends a key that an earlier claim may
	// already have sent.
	Resend bool
}

// lockedJob is what a claim's locking read saw, every time read on the
// database clock that no session can move (see fencedwrite.ClockMicros).
type lockedJob struct {
	id          int64
	state       string
	attempt     int64
	action      string
	nextRun     stdsql.NullInt64 // microseconds since the epoch
	lease       stdsql.NullInt64
	keyFirst    stdsql.NullInt64
	lastSend    stdsql.NullInt64
	providerRef stdsql.NullString
	request     []string
	now         int64
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
	ctx = withoutSessionVars(ctx)
	tx, err := beginVerified(ctx, drv)
	if err != nil {
		return Claimed{}, fmt.Errorf("%s %s#%d: begin: %w", op, t.Name(), id, sessionOutcome(err))
	}
	c, err := claimTx(ctx, tx, t, op, id, o)
	if err != nil {
		_ = tx.Rollback()
		return Claimed{}, fmt.Errorf("%s %s#%d: %w", op, t.Name(), id, claimOutcome(err))
	}
	hooksOf(ctx).claimsCommitting([]Claimed{c})
	hooksOf(ctx).call(hookBeforeClaimCommit)
	if err := tx.Commit(); err != nil {
		return Claimed{}, commitOutcome(op, t, id, c.Attempt, err)
	}
	return mint(t, c), nil
}

// mint gives a claim whose COMMIT was acknowledged its write right.
func mint(t *Table, c Claimed) Claimed {
	c.Lease = Lease{&leased{table: t, id: c.ID, attempt: c.Attempt}}
	return c
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
	if fencedwrite.CommitMayHaveLanded(err) {
		return fmt.Errorf("%s %s#%d at attempt %d: %w: do not call the provider; the next scheduler pass reads the truth: %w",
			op, t.Name(), id, attempt, fencedwrite.ErrCommitUnknown, err)
	}
	return fmt.Errorf("%s %s#%d: commit: %w: %w", op, t.Name(), id, fencedwrite.ErrRolledBack, err)
}

func claimTx(ctx context.Context, tx dialect.Tx, t *Table, op Op, id int64, o fencedwrite.ClaimOptions) (Claimed, error) {
	jobs, err := lockJobs(ctx, tx, t, OpClaimLock, Values{ParamID: id})
	if err != nil {
		return Claimed{}, err
	}
	if len(jobs) == 0 {
		return Claimed{}, fencedwrite.ErrNotFound
	}
	c, next, err := decide(jobs[0], op, o, t.send())
	if err != nil {
		return Claimed{}, err
	}
	if err := moveClaims(ctx, tx, t, next, []Claimed{c}, jobs[0].attempt); err != nil {
		return Claimed{}, err
	}
	return c, recordClaims(ctx, tx, t, op, o.Holder, []Claimed{c})
}

// ClaimDue claims up to limit due ready jobs, oldest first, in one short
// transaction; see the generated ClaimDue. Each job moves with the fenced
// UPDATE and the rules of a single claim. Its errors are Claim's, for the
// whole batch: on ErrCommitUnknown no lease is returned and nothing may be
// sent. A limit of 0 claims nothing.
func ClaimDue(ctx context.Context, drv dialect.Driver, t *Table, limit int, o fencedwrite.ClaimOptions) ([]Claimed, error) {
	return claimBatch(ctx, drv, t, OpDue, OpClaimSend, limit, o)
}

// ClaimDueReconciles is ClaimDue for the due ready jobs whose next action is
// reconcile only, oldest first: the outcomes that are unknown, which a
// scheduler claims before fresh sends. Its errors are ClaimDue's.
func ClaimDueReconciles(ctx context.Context, drv dialect.Driver, t *Table, limit int, o fencedwrite.ClaimOptions) ([]Claimed, error) {
	return claimBatch(ctx, drv, t, OpDueReconcile, OpClaimSend, limit, o)
}

// TakeoverExpired takes over up to limit running jobs whose leases have
// expired, oldest lease first, in one short transaction; each takeover
// reconciles. Its errors are ClaimDue's.
func TakeoverExpired(ctx context.Context, drv dialect.Driver, t *Table, limit int, o fencedwrite.ClaimOptions) ([]Claimed, error) {
	return claimBatch(ctx, drv, t, OpExpired, OpTakeover, limit, o)
}

func claimBatch(ctx context.Context, drv dialect.Driver, t *Table, scan, op Op, limit int, o fencedwrite.ClaimOptions) ([]Claimed, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", scan, t.Name(), err)
	}
	if limit < 0 || limit > fencedwrite.MaxBatch {
		return nil, fmt.Errorf("%s %s: %w", scan, t.Name(), &fencedwrite.FieldError{Field: "limit", Problem: fmt.Sprintf("must be between 0 and %d, got %d", fencedwrite.MaxBatch, limit)})
	}
	if limit == 0 {
		return nil, nil
	}
	o = o.WithDefaults()
	ctx = withoutSessionVars(ctx)
	tx, err := beginVerified(ctx, drv)
	if err != nil {
		return nil, fmt.Errorf("%s %s: begin: %w", scan, t.Name(), sessionOutcome(err))
	}
	claimed, err := batchTx(ctx, tx, t, scan, op, limit, o, true)
	if errors.Is(err, errMovedSinceRead) {
		// A many-row UPDATE matched fewer rows than the scan returned: the
		// scan did not lock them all (an engine that ignores SKIP LOCKED)
		// and another claimer moved some. Which ones is not worth guessing:
		// nothing is committed, so start over, one row per statement.
		if err = tx.Rollback(); err == nil {
			if tx, err = beginVerified(ctx, drv); err == nil {
				claimed, err = batchTx(ctx, tx, t, scan, op, limit, o, false)
			}
		}
	}
	if err != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		return nil, fmt.Errorf("%s %s: %w", scan, t.Name(), claimOutcome(err))
	}
	if len(claimed) == 0 {
		return nil, tx.Rollback()
	}
	hooksOf(ctx).claimsCommitting(claimed)
	hooksOf(ctx).call(hookBeforeClaimCommit)
	if err := tx.Commit(); err != nil {
		return nil, commitOutcome(scan, t, 0, 0, err)
	}
	for i := range claimed {
		claimed[i] = mint(t, claimed[i])
	}
	return claimed, nil
}

// batchTx locks the jobs of a batch claim and moves each with its fenced
// UPDATE. With many, the jobs read at the same attempt that make the same
// move share one statement (fenced on `id IN (…)`, the state and that
// attempt), and a statement that matches fewer rows than it names fails
// the batch with errMovedSinceRead; without, every job has its own
// statement, and a job moved since the scan is left out.
func batchTx(ctx context.Context, tx dialect.Tx, t *Table, scan, op Op, limit int, o fencedwrite.ClaimOptions, many bool) ([]Claimed, error) {
	jobs, err := lockJobs(ctx, tx, t, scan, Values{ParamLimit: limit})
	if err != nil {
		return nil, err
	}
	// One reading of the database clock for the batch, the latest the scan
	// took, so that its claims share one lease and one statement. A later
	// reading is the safe side of every rule: a job is due or its lease
	// expired no sooner than its own reading said (the trigger checks both
	// again on the UPDATE's clock), and a key is fresh enough to send no
	// longer.
	var now int64
	for _, j := range jobs {
		now = max(now, j.now)
	}
	type group struct {
		op      Op
		attempt int64
		id      int64 // without many, every job is a group of its own
	}
	var (
		all     []Claimed // in the scan's order: oldest first
		order   []group
		members = map[group][]Claimed{}
	)
	for _, j := range jobs {
		j.now = now
		c, next, err := decide(j, op, o, t.send())
		if errors.Is(err, fencedwrite.ErrNotClaimable) {
			continue // found by the scan, but no longer claimable under the lock
		}
		if err != nil {
			return nil, err
		}
		g := group{op: next, attempt: j.attempt}
		if !many {
			g.id = j.id
		}
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], c)
		all = append(all, c)
	}
	moved := make(map[int64]bool, len(all))
	for _, g := range order {
		cs := members[g]
		err := moveClaims(ctx, tx, t, g.op, cs, g.attempt)
		if errors.Is(err, errMovedSinceRead) && len(cs) == 1 {
			// The scan did not lock the row: an engine that ignores SKIP
			// LOCKED (TiDB) returns rows other claimers hold and locks
			// none. One of them has moved it since; the fenced UPDATE
			// matched nothing and wrote nothing.
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			moved[c.ID] = true
		}
	}
	claimed := make([]Claimed, 0, len(moved))
	for _, c := range all {
		if moved[c.ID] {
			claimed = append(claimed, c)
		}
	}
	// One statement records the whole batch's attempts, whatever the
	// number of groups.
	if err := recordClaims(ctx, tx, t, op, o.Holder, claimed); err != nil {
		return nil, err
	}
	return claimed, nil
}

// decide applies the claim or takeover rules to the locked row: which
// statement moves it and the lease it gets. send is the table's next action
// that sends the request; any other is a reconcile.
func decide(j lockedJob, op Op, o fencedwrite.ClaimOptions, send string) (Claimed, Op, error) {
	now := time.UnixMicro(j.now).UTC()
	c := Claimed{ID: j.id, Attempt: j.attempt + 1, ClaimedAt: now, LeaseUntil: now.Add(o.Lease),
		Request: j.request, ProviderRef: j.providerRef.String, KeyFirstUsedAt: microsTime(j.keyFirst), LastSendAt: microsTime(j.lastSend)}
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
		if c.Action == send && !keyFresh {
			// The provider may have forgotten the key: sending again could
			// pay twice. Ask instead.
			c.Action = fencedwrite.ActionReconcile
		}
		if c.Action == send {
			c.Resend = j.keyFirst.Valid
			if !j.keyFirst.Valid {
				c.KeyFirstUsedAt = &now
			}
			c.LastSendAt = &now
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

// moveClaims runs the fenced UPDATE that moves the claims cs, read at
// attempt old and making the same move op with the same lease: op's own
// statement for one claim, its many-row statement (Many) for several.
// Every row must match. Under the row locks of the claim's read none can
// have moved; when one did (a scan that locked nothing), the error wraps
// errMovedSinceRead: a single claim's UPDATE then wrote nothing, and a
// many-row one must be rolled back.
func moveClaims(ctx context.Context, tx dialect.ExecQuerier, t *Table, op Op, cs []Claimed, old int64) error {
	ids := make([]int64, len(cs))
	for i, c := range cs {
		if c.Attempt != old+1 || !c.LeaseUntil.Equal(cs[0].LeaseUntil) || !c.ClaimedAt.Equal(cs[0].ClaimedAt) {
			return fmt.Errorf("%w: the claims of one statement must share the attempt and the lease", fencedwrite.ErrInvalid)
		}
		ids[i] = c.ID
	}
	vals := Values{ParamAttempt: old, ParamWriter: old, ParamNewAttempt: old + 1,
		ParamLeaseUntil: SQLTime(cs[0].LeaseUntil), ParamNow: SQLTime(cs[0].ClaimedAt)}
	if len(ids) == 1 {
		vals[ParamID] = ids[0]
	} else {
		op, vals[ParamIDs] = Many[op], ids
	}
	query, args, err := t.Bind(op, vals)
	if err != nil {
		return fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var res stdsql.Result
	if err := tx.Exec(ctx, query, args, &res); err != nil {
		return err
	}
	// A claim always changes its row (attempt+1), so a row that did not
	// match moved since it was read. More rows than named cannot happen
	// unless the connection counts changed rows; refuse to guess.
	n, err := res.RowsAffected()
	if err == nil && n < int64(len(ids)) {
		return fmt.Errorf("%w: fenced claim update of %d jobs affected %d rows: %w", fencedwrite.ErrUnexpectedState, len(ids), n, errMovedSinceRead)
	}
	if err != nil || n != int64(len(ids)) {
		return fmt.Errorf("%w: fenced claim update of %d jobs affected %d rows (%v)", fencedwrite.ErrUnexpectedState, len(ids), n, err)
	}
	return nil
}

// errMovedSinceRead: a claim's fenced UPDATE matched no row, because the row
// left the state and attempt the claim read.
var errMovedSinceRead = errors.New("the job moved since it was read")

// lockJobs runs a claim's locking read (op, with vals) and scans its rows.
func lockJobs(ctx context.Context, tx dialect.ExecQuerier, t *Table, op Op, vals Values) ([]lockedJob, error) {
	query, args, err := t.Bind(op, vals)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var rows sql.Rows
	if err := tx.Query(ctx, query, args, &rows); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	defer rows.Close()
	var jobs []lockedJob
	for rows.Next() {
		var j lockedJob
		request := make([]stdsql.NullString, len(t.spec.Request))
		dest := []any{&j.id, &j.state, &j.attempt, &j.action, &j.nextRun, &j.lease, &j.keyFirst, &j.lastSend, &j.providerRef}
		for i := range request {
			dest = append(dest, &request[i])
		}
		dest = append(dest, &j.now)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
		for _, r := range request {
			j.request = append(j.request, r.String)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return jobs, rows.Close()
}

func microsTime(v stdsql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMicro(v.Int64).UTC()
	return &t
}
