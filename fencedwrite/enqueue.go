package fencedwrite

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/sqlgraph"
)

// ErrKeyExists is returned by Insert to generated code when the key is
// already enqueued; the generated Enqueue compares the parameters and turns
// it into a no-op or ErrKeyConflict. Services never see it.
var ErrKeyExists = errors.New("idempotency key already enqueued")

// Insert runs t.Insert with args and then fn, in one transaction it owns, and
// returns the new job's id. A job is born ready at attempt 0.
//
// On ErrCommitUnknown the job may or may not exist. Enqueueing is idempotent
// by key, so calling the generated Enqueue again with the same parameters is
// the way to find out.
func Insert[T Tx](ctx context.Context, t *Table, begin func(context.Context) (T, dialect.ExecQuerier, error), args []any, fn func(context.Context, T) error) (int64, error) {
	r := &run{}
	ctx = context.WithValue(ctx, runKey{}, r)
	tx, exec, err := begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w: %w", ErrRolledBack, err)
	}
	id, err := insertTx(ctx, tx, exec, t, args, fn)
	if err != nil {
		_ = tx.Rollback()
		return 0, err
	}
	r.mu.Lock()
	r.committing = true
	r.mu.Unlock()
	if err := tx.Commit(); err != nil {
		if CommitMayHaveLanded(err) {
			return 0, fmt.Errorf("commit: %w: enqueue again with the same parameters to learn whether the job exists: %w", ErrCommitUnknown, err)
		}
		return 0, fmt.Errorf("commit: %w: %w", ErrRolledBack, err)
	}
	return id, nil
}

func insertTx[T Tx](ctx context.Context, tx T, exec dialect.ExecQuerier, t *Table, args []any, fn func(context.Context, T) error) (int64, error) {
	var res stdsql.Result
	if err := exec.Exec(ctx, t.Insert, args, &res); err != nil {
		if sqlgraph.IsUniqueConstraintError(err) {
			return 0, ErrKeyExists
		}
		return 0, fmt.Errorf("insert %s: %w: %w", t.Name, ErrRolledBack, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert %s: %w: %w", t.Name, ErrRolledBack, err)
	}
	if fn != nil {
		if err := call(ctx, tx, fn); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrRolledBack, err)
		}
	}
	return id, nil
}
