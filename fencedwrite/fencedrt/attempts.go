package fencedrt

import (
	"context"
	stdsql "database/sql"
	"fmt"

	"entgo.io/ent/dialect"

	"github.com/fencekit/fencekit/fencedwrite"
)

// recordClaims writes the attempts log's rows of the claims cs (all made by
// op with the same lease, as one transaction's claims are): one INSERT for
// them all, on the claim's transaction before its COMMIT. A table without
// an attempts log writes nothing.
func recordClaims(ctx context.Context, tx dialect.ExecQuerier, t *Table, op Op, holder string, cs []Claimed) error {
	if t.spec.Attempts == "" || len(cs) == 0 {
		return nil
	}
	what := fencedwrite.AttemptClaim
	if op == OpTakeover {
		what = fencedwrite.AttemptTakeover
	}
	ids := make([]int64, len(cs))
	for i, c := range cs {
		if !c.LeaseUntil.Equal(cs[0].LeaseUntil) || !c.ClaimedAt.Equal(cs[0].ClaimedAt) {
			return fmt.Errorf("%w: the claims of one transaction must share the lease", fencedwrite.ErrInvalid)
		}
		ids[i] = c.ID
	}
	query, args, err := t.Bind(OpRecordClaims, Values{ParamAttemptOp: what, ParamHolder: holder,
		ParamNow: SQLTime(cs[0].ClaimedAt), ParamLeaseUntil: SQLTime(cs[0].LeaseUntil), ParamIDs: ids})
	if err != nil {
		return fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var res stdsql.Result
	if err := tx.Exec(ctx, query, args, &res); err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	// The claim holds every row locked and has just moved it to running.
	if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
		return fmt.Errorf("%w: record attempts of %d jobs wrote %d rows (%v)", fencedwrite.ErrUnexpectedState, len(ids), n, err)
	}
	return nil
}

// RecordResolution writes the attempts log's row of an operator's
// resolution that took attempt of job id; see the generated
// RecordResolution. It runs on the resolution's transaction (exec), after
// its fenced write.
func RecordResolution(ctx context.Context, exec dialect.ExecQuerier, t *Table, id, attempt int64, operator string) error {
	if err := fencedwrite.ValidHolder(operator); err != nil {
		return fmt.Errorf("record resolution %s#%d: %w", t.Name(), id, &fencedwrite.FieldError{Field: "operator", Problem: err.Error()})
	}
	query, args, err := t.Bind(OpRecordResolution, Values{ParamHolder: operator, ParamID: id, ParamNewAttempt: attempt})
	if err != nil {
		return fmt.Errorf("record resolution %s#%d: %w: %w", t.Name(), id, fencedwrite.ErrInvalid, err)
	}
	var res stdsql.Result
	if err := exec.Exec(ctx, query, args, &res); err != nil {
		return fmt.Errorf("record resolution %s#%d: %w", t.Name(), id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("record resolution %s#%d: %w: the job is not at attempt %d (%d rows, %v)", t.Name(), id, fencedwrite.ErrUnexpectedState, attempt, n, err)
	}
	return nil
}
