package fencedrt

import (
	"context"
	"fmt"
	"reflect"

	"entgo.io/ent/dialect"
)

// RowBatch is a kind of business write that a batch's runner may make for
// several items in one statement: one row each, named by its key. Values
// of the same kind share a statement, so a kind must be comparable.
type RowBatch interface {
	// ExecRows writes rows, one row each, in one statement on exec, and
	// returns how many rows it changed.
	ExecRows(ctx context.Context, exec dialect.ExecQuerier, rows []BatchRow) (int64, error)
}

// BatchRow is one item's row of a RowBatch: its key and its values.
type BatchRow struct {
	Key    string
	Values []any
}

type deferredRow struct {
	kind RowBatch
	row  BatchRow
}

type deferKey struct{}

// WithDeferredRows lets the business writes of a RunBatch run with ctx
// hand their rows to the runner (DeferRow), which makes the rows of one
// kind in one statement after every item's callback and before the
// COMMIT. A callback that reads what another callback of the batch wrote
// must not be run with it.
func WithDeferredRows(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferKey{}, true)
}

// DeferRow hands the write of one row to the runner of the transaction
// whose callback passed ctx, when that is a RunBatch that defers rows (see
// WithDeferredRows), and reports whether it did; when it did not, the
// caller makes the write itself. The runner makes the deferred rows of one
// kind in one statement before the COMMIT; when that statement fails or
// changes fewer rows than it names, the batch rolls back and runs again
// without deferring, so each callback's own write tells which item failed.
func DeferRow(ctx context.Context, kind RowBatch, key string, values ...any) bool {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil || kind == nil || !reflect.TypeOf(kind).Comparable() {
		return false // a kind that cannot key a map makes its own writes
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.deferRows || r.done {
		return false
	}
	r.deferred = append(r.deferred, deferredRow{kind, BatchRow{Key: key, Values: values}})
	return true
}

// flushDeferred makes the rows deferred in r, one statement per kind. Any
// failure is errRegroup: the caller rolls back and runs the batch again
// without deferring.
func flushDeferred(ctx context.Context, exec dialect.ExecQuerier, r *run) error {
	r.mu.Lock()
	deferred := r.deferred
	r.mu.Unlock()
	var (
		order []RowBatch
		rows  = map[RowBatch][]BatchRow{}
	)
	for _, d := range deferred {
		if _, ok := rows[d.kind]; !ok {
			order = append(order, d.kind)
		}
		rows[d.kind] = append(rows[d.kind], d.row)
	}
	for _, kind := range order {
		n, err := kind.ExecRows(ctx, exec, rows[kind])
		if err != nil {
			return fmt.Errorf("%w: the deferred rows of %d items: %w", errRegroup, len(rows[kind]), err)
		}
		if n != int64(len(rows[kind])) {
			return fmt.Errorf("%w: the deferred rows of %d items changed %d", errRegroup, len(rows[kind]), n)
		}
	}
	return nil
}
