package fencedrt

import (
	"context"
	"fmt"
	"reflect"

	"entgo.io/ent/dialect"

	"github.com/fencekit/fencekit/fencedwrite"
)

type deferredRow struct {
	kind fencedwrite.RowBatch
	row  fencedwrite.BatchRow
}

// DeferRow hands the write of one row to the runner of the transaction
// whose callback passed ctx, when that is a RunBatch that defers rows (see
// WithDeferredRows), and reports whether it did; when it did not, the
// caller makes the write itself. The runner makes the deferred rows of one
// kind in one statement before the COMMIT; when that statement fails or
// changes fewer rows than it names, the batch rolls back and runs again
// without deferring, so each callback's own write tells which item failed.
func DeferRow(ctx context.Context, kind fencedwrite.RowBatch, key string, values ...any) bool {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil || kind == nil || !reflect.TypeOf(kind).Comparable() {
		return false // a kind that cannot key a map makes its own writes
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.deferRows || r.done {
		return false
	}
	r.deferred = append(r.deferred, deferredRow{kind, fencedwrite.BatchRow{Key: key, Values: values}})
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
		order []fencedwrite.RowBatch
		rows  = map[fencedwrite.RowBatch][]fencedwrite.BatchRow{}
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
