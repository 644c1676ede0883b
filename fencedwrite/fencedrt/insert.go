package fencedrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/fencekit/fencekit/fencedwrite"
)

// ErrKeyExists is returned by Insert to generated code when the key was
// registered before (its job exists or was archived, or the registration is
// for another request). The generated Enqueue turns it into a no-op,
// fencedwrite.ErrKeyArchived or fencedwrite.ErrKeyConflict. Services never
// see it.
var ErrKeyExists = errors.New("idempotency key already enqueued")

// Insert creates the request's job (born ready at attempt 0), registers its
// key and runs fn, in one guarded transaction it owns, and returns the new
// job's id. vals holds the request parameters (RequestParam). A key is
// registered once and for ever: archiving a job keeps its key registered, so
// a re-delivered request is never a new job. A registration of the same
// request that no job holds (written alone) is taken by the new job.
//
// On ErrCommitUnknown the job may or may not exist. Enqueueing is idempotent
// by key, so calling the generated Enqueue again with the same parameters is
// the way to find out.
func Insert[T Tx](ctx context.Context, pool dialect.Driver, t *Table, begin func(context.Context) (Begun[T], error), vals Values, fn func(context.Context, T) error) (int64, error) {
	r := &run{}
	ctx = context.WithValue(withoutSessionVars(ctx), runKey{}, r)
	b, err := begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w: %w", fencedwrite.ErrRolledBack, err)
	}
	if err := verifySession(ctx, pool, b.Exec); err != nil {
		_ = b.Raw.rollback()
		return 0, fmt.Errorf("begin: %w", sessionOutcome(err))
	}
	id, err := insertTx(ctx, b, t, vals, fn)
	if err != nil {
		_ = b.Raw.rollback()
		return 0, err
	}
	done, cerr := commit(ctx, b, r)
	switch done {
	case committed:
		return id, nil
	case notCommitted:
		return 0, fmt.Errorf("commit: %w: %w", fencedwrite.ErrRolledBack, cerr)
	default:
		return 0, fmt.Errorf("commit: %w: enqueue again with the same parameters to learn whether the job exists: %w", fencedwrite.ErrCommitUnknown, cerr)
	}
}

func insertTx[T Tx](ctx context.Context, b Begun[T], t *Table, vals Values, fn func(context.Context, T) error) (int64, error) {
	// The job first, then its key: a key is registered only together with
	// its job (the database's fence registers it as the job is inserted,
	// and OpRegisterKey then inserts nothing). Either statement meets a key
	// registered before as a duplicate key.
	query, args, err := t.Bind(OpInsert, vals)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var res stdsql.Result
	if err := b.Exec.Exec(ctx, query, args, &res); err != nil {
		if sqlgraph.IsUniqueConstraintError(err) {
			return 0, ErrKeyExists
		}
		return 0, fmt.Errorf("insert %s: %w: %w", t.Name(), fencedwrite.ErrRolledBack, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert %s: %w: %w", t.Name(), fencedwrite.ErrRolledBack, err)
	}
	if query, args, err = t.Bind(OpRegisterKey, vals); err != nil {
		return 0, fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	if err := b.Exec.Exec(ctx, query, args, &res); err != nil {
		if sqlgraph.IsUniqueConstraintError(err) {
			return 0, ErrKeyExists
		}
		return 0, fmt.Errorf("register key in %s: %w: %w", t.Name(), fencedwrite.ErrRolledBack, err)
	}
	if fn != nil {
		if err := call(ctx, b, fn); err != nil {
			if errors.Is(err, fencedwrite.ErrInvalid) {
				return 0, err
			}
			return 0, fmt.Errorf("%w: %w", fencedwrite.ErrRolledBack, err)
		}
	}
	return id, nil
}

// ReadKey returns the columns of the table's OpReadKey statement for key, as
// text (the request parameters key was registered with, then whether the
// archive holds its job); found is false when the key was never registered.
func ReadKey(ctx context.Context, q dialect.ExecQuerier, t *Table, key string) (params []string, found bool, err error) {
	query, args, err := t.Bind(OpReadKey, Values{ParamKey: key})
	if err != nil {
		return nil, false, err
	}
	var rows sql.Rows
	if err := q.Query(ctx, query, args, &rows); err != nil {
		return nil, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, rows.Err()
	}
	cols, err := rows.Columns()
	if err != nil {
		return nil, false, err
	}
	vals := make([]stdsql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := rows.Scan(dest...); err != nil {
		return nil, false, err
	}
	params = make([]string, len(vals))
	for i, v := range vals {
		params[i] = v.String
	}
	return params, true, rows.Err()
}
