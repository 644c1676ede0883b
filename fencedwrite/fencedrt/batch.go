package fencedrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"reflect"

	"entgo.io/ent/dialect"

	"github.com/fencekit/fencekit/fencedwrite"
)

// BatchItem is one job's write in RunBatch: its fenced write and the
// business write that goes with it (nil for none).
type BatchItem[T Tx] struct {
	W  *Write
	Fn func(context.Context, T) error
}

// maxBatchTries bounds how often RunBatch starts over without the items
// whose business write failed.
const maxBatchTries = 4

// RunBatch applies several jobs' writes in one transaction on one
// connection, each fenced on its own attempt and paired with its own
// business write, and runs the COMMIT itself. It returns one error per
// item, with Run's meaning for that item alone:
//
//   - a write whose fence does not hold is skipped (its business write
//     does not run) and never rolls back another item: the re-read after
//     the transaction classifies it (ErrSuperseded, ErrAlreadySettled, ...);
//   - a business write that fails takes its item out, and the batch starts
//     over without it (the transaction is rolled back first, so nothing of
//     the failed item stays); that item gets ErrRolledBack (or ErrInvalid);
//   - a statement error that ends the transaction (a deadlock, a broken
//     connection) or a COMMIT the server refused is ErrRolledBack for every
//     item still in the batch; a COMMIT whose reply was lost is re-read item
//     by item under a row lock, as Run does.
//
// A job takes one transition per transaction: when several items name
// one job at different attempts (a process that holds a paused
// goroutine's lease and its own takeover's), the newest runs and each
// older one is re-read after the batch (ErrSuperseded, as its fence would
// say); two items at the same attempt are ErrInvalid for the second.
func RunBatch[T Tx](ctx context.Context, pool dialect.Driver, begin func(context.Context) (Begun[T], error), items []BatchItem[T]) []error {
	errs := make([]error, len(items))
	// A process may hold two leases of one job (a paused goroutine's and
	// its own takeover's): the newest runs, and the older ones, which a
	// committed takeover has superseded, are re-read and classified once
	// the batch is done.
	newest := map[*Table]map[int64]int64{}
	for _, it := range items {
		if it.W != nil && it.W.table != nil && it.W.err == nil {
			if newest[it.W.table] == nil {
				newest[it.W.table] = map[int64]int64{}
			}
			newest[it.W.table][it.W.id] = max(newest[it.W.table][it.W.id], it.W.attempt)
		}
	}
	var pending, older []int
	seen := map[*Table]map[int64]bool{}
	for i, it := range items {
		switch {
		case it.W == nil || it.W.table == nil:
			errs[i] = fmt.Errorf("fence: %w: the transition is nil or was not built by the generated API", fencedwrite.ErrInvalid)
		case it.W.err != nil:
			errs[i] = it.W.err
		case it.W.attempt < newest[it.W.table][it.W.id]:
			older = append(older, i)
		case seen[it.W.table][it.W.id]:
			errs[i] = it.W.fail(fencedwrite.ErrInvalid, row{}, fmt.Errorf("%s#%d appears twice in one batch at attempt %d: one transition per job per transaction", it.W.table.Name(), it.W.id, it.W.attempt))
		default:
			if seen[it.W.table] == nil {
				seen[it.W.table] = map[int64]bool{}
			}
			seen[it.W.table][it.W.id] = true
			pending = append(pending, i)
		}
	}
	runBatch(ctx, pool, begin, items, pending, errs)
	for _, i := range older {
		w := items[i].W
		found, err := reRead(ctx, pool, w.table, OpRead, w.id)
		if err != nil {
			errs[i] = w.fail(fencedwrite.ErrUnexpectedState, row{}, fmt.Errorf("a newer lease of the job was in the batch, and the re-read failed: %w", err))
			continue
		}
		errs[i] = w.classify(found, false, nil)
	}
	return errs
}

// runBatch runs the items of pending, starting over without an item whose
// business write failed, and sets their outcomes in errs.
func runBatch[T Tx](ctx context.Context, pool dialect.Driver, begin func(context.Context) (Begun[T], error), items []BatchItem[T], pending []int, errs []error) {
	grouped := true
	for try := 0; len(pending) > 0; try++ {
		if try == maxBatchTries {
			for _, i := range pending {
				errs[i] = items[i].W.fail(fencedwrite.ErrRolledBack, row{}, errors.New("the batch was started over too often; try again"))
			}
			return
		}
		failed := runBatchOnce(ctx, pool, begin, items, pending, errs, grouped)
		if failed == regroup {
			// A many-row write matched fewer rows than it named, or a row
			// refused it: the per-item statements tell which.
			grouped = false
			try--
			continue
		}
		if failed < 0 {
			return
		}
		pending = removeIndex(pending, failed)
	}
}

func removeIndex(s []int, v int) []int {
	out := s[:0:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// regroup is what runBatchOnce returns when a many-row write (a fenced
// one, or deferred rows) did not hold for every row it named: nothing is
// committed, and the batch runs again with one statement per item.
const regroup = -2

// runBatchOnce runs one attempt at the batch. It returns the item whose
// business write failed (the caller starts over without it), regroup, or
// -1 when every item of pending has its outcome in errs. With grouped, the
// items that a many-row statement can move together are fenced in one
// statement first (fenceGroups), and, when ctx carries fencedwrite.WithDeferredRows,
// their business writes may hand rows to the runner (DeferRow).
func runBatchOnce[T Tx](ctx context.Context, pool dialect.Driver, begin func(context.Context) (Begun[T], error), items []BatchItem[T], pending []int, errs []error, grouped bool) int {
	r := &run{batch: true, deferRows: grouped && fencedwrite.DefersRows(ctx)}
	ctx = context.WithValue(withoutSessionVars(ctx), runKey{}, r)
	b, err := begin(ctx)
	if err == nil {
		if err = verifySession(ctx, pool, b.Exec); err != nil {
			_ = b.Raw.rollback()
			err = sessionOutcome(err)
		}
	}
	if err != nil {
		for _, i := range pending {
			outcome := fencedwrite.ErrRolledBack
			if errors.Is(err, fencedwrite.ErrInvalid) {
				outcome = fencedwrite.ErrInvalid
			}
			errs[i] = items[i].W.fail(outcome, row{}, fmt.Errorf("begin: %w", err))
		}
		return -1
	}
	r.mu.Lock()
	r.exec = b.Exec
	r.mu.Unlock()
	var inGroup map[int]bool
	if grouped {
		var gerr error
		inGroup, gerr = fenceGroups(ctx, b.Exec, r, items, pending)
		switch {
		case errors.Is(gerr, errRegroup):
			_ = b.Raw.rollback()
			return regroup
		case gerr != nil: // the transaction is gone
			_ = b.Raw.rollback()
			for _, i := range pending {
				errs[i] = items[i].W.fail(fencedwrite.ErrRolledBack, row{}, gerr)
			}
			return -1
		}
	}
	var applied, missed []int
	for _, i := range pending {
		w := items[i].W
		outcome, err := fenceApplied, error(nil)
		if !inGroup[i] {
			outcome, err = fenceOne(ctx, b.Exec, r, w)
		}
		switch outcome {
		case fenceApplied:
			if items[i].Fn == nil {
				applied = append(applied, i)
				continue
			}
			if ferr := callFn(ctx, b, items[i].Fn); ferr != nil {
				_ = b.Raw.rollback()
				oc := fencedwrite.ErrRolledBack
				if errors.Is(ferr, fencedwrite.ErrInvalid) {
					oc = fencedwrite.ErrInvalid
				}
				errs[i] = w.fail(oc, row{}, ferr)
				return i
			}
			applied = append(applied, i)
		case fenceMissed:
			missed = append(missed, i)
		case fenceRefused:
			errs[i] = w.fail(fencedwrite.ErrUnexpectedState, row{}, fmt.Errorf("the database fence refused the write: %w", err))
		default: // the transaction is gone
			_ = b.Raw.rollback()
			for _, j := range pending {
				if errs[j] == nil {
					errs[j] = items[j].W.fail(fencedwrite.ErrRolledBack, row{}, err)
				}
			}
			return -1
		}
	}
	if err := flushDeferred(ctx, b.Exec, r); err != nil {
		_ = b.Raw.rollback()
		return regroup
	}
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	if len(applied) == 0 {
		_ = b.Raw.rollback()
	} else {
		commitBatch(ctx, pool, b, r, items, applied, errs)
	}
	for _, i := range missed {
		w := items[i].W
		found, rerr := reRead(ctx, pool, w.table, OpRead, w.id)
		if rerr != nil {
			errs[i] = w.fail(fencedwrite.ErrUnexpectedState, row{}, fmt.Errorf("matched no row, and the re-read failed: %w", rerr))
			continue
		}
		errs[i] = w.classify(found, false, nil)
	}
	return -1
}

func callFn[T Tx](ctx context.Context, b Begun[T], fn func(context.Context, T) error) error {
	return call(ctx, b, fn)
}

// commitBatch commits the batch and sets the outcome of every applied item.
func commitBatch[T Tx](ctx context.Context, pool dialect.Driver, b Begun[T], r *run, items []BatchItem[T], applied []int, errs []error) {
	done, cerr := commit(ctx, b, r)
	switch done {
	case committed:
		for _, i := range applied {
			errs[i] = nil
		}
		return
	case notCommitted:
		for _, i := range applied {
			errs[i] = items[i].W.fail(fencedwrite.ErrRolledBack, row{}, cerr)
		}
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reReadTimeout)
	defer cancel()
	for _, i := range applied {
		w := items[i].W
		found, rerr := readRowLocked(rctx, pool, w.table, w.id)
		if rerr != nil {
			errs[i] = w.fail(fencedwrite.ErrCommitUnknown, row{}, errors.Join(cerr, fmt.Errorf("re-read: %w", rerr)))
			continue
		}
		errs[i] = w.classify(found, true, cerr)
	}
}

// errRegroup: a many-row write matched fewer rows than it named, or the
// database fence refused one of its rows.
var errRegroup = errors.New("a many-row write did not hold for every row")

// fenceGroups runs, in the batch's transaction, one many-row statement for
// each group of two or more pending items that make the same move at the
// same attempt with the same values (but those the statement picks per
// row), and returns the items it applied. Every row must match: otherwise
// the error is errRegroup and the caller rolls the batch back.
func fenceGroups[T Tx](ctx context.Context, exec dialect.ExecQuerier, r *run, items []BatchItem[T], pending []int) (map[int]bool, error) {
	type key struct {
		table   *Table
		op      Op
		attempt int64
	}
	var (
		order  []key
		groups = map[key][]int{}
	)
	for _, i := range pending {
		w := items[i].W
		many, ok := Many[w.op]
		if !ok {
			continue
		}
		if _, ok := w.table.Stmt(many); !ok {
			continue
		}
		k := key{w.table, many, w.attempt}
		if len(groups[k]) > 0 && !sameShared(w.table, many, items[groups[k][0]].W, w) {
			continue // this item runs on its own
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	applied := map[int]bool{}
	for _, k := range order {
		members := groups[k]
		if len(members) < 2 {
			continue
		}
		first := items[members[0]].W
		stmt, _ := k.table.Stmt(k.op)
		vals := Values{}
		for _, p := range stmt.Params {
			switch one, each := eachOf(p); {
			case p == ParamIDs:
				ids := make([]int64, len(members))
				for j, i := range members {
					ids[j] = items[i].W.id
				}
				vals[p] = ids
			case each:
				list := make([]any, len(members))
				for j, i := range members {
					list[j] = items[i].W.vals[one]
				}
				vals[p] = list
			default:
				vals[p] = first.vals[p]
			}
		}
		query, args, err := k.table.Bind(k.op, vals)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
		}
		var res stdsql.Result
		if err := exec.Exec(ctx, query, args, &res); err != nil {
			if IsFenceRefusal(err) {
				return nil, fmt.Errorf("%w: %w", errRegroup, err)
			}
			return nil, fmt.Errorf("%s %s of %d jobs at attempt %d: %w", k.op, k.table.Name(), len(members), k.attempt, err)
		}
		n, err := res.RowsAffected()
		switch {
		case err != nil:
			return nil, err
		case n < int64(len(members)):
			return nil, fmt.Errorf("%w: %d of %d rows matched", errRegroup, n, len(members))
		case n > int64(len(members)):
			return nil, fmt.Errorf("%s %s: a write of %d jobs matched %d rows", k.op, k.table.Name(), len(members), n)
		}
		r.mu.Lock()
		for _, i := range members {
			r.add(items[i].W)
			applied[i] = true
		}
		r.mu.Unlock()
	}
	return applied, nil
}

// sameShared reports whether a and b agree on every value of statement op
// that is not picked per row: they can share it.
func sameShared(t *Table, op Op, a, b *Write) bool {
	stmt, _ := t.Stmt(op)
	for _, p := range stmt.Params {
		if _, each := eachOf(p); each || p == ParamIDs {
			continue
		}
		if !reflect.DeepEqual(a.vals[p], b.vals[p]) {
			return false
		}
	}
	return true
}

type fenceResult int

const (
	fenceApplied fenceResult = iota
	fenceMissed
	fenceRefused
	fenceBroken
)

// fenceOne runs w in a batch's transaction.
func fenceOne(ctx context.Context, exec dialect.ExecQuerier, r *run, w *Write) (fenceResult, error) {
	query, args, err := w.table.Bind(w.op, w.vals)
	if err != nil {
		return fenceBroken, fmt.Errorf("%w: %w", fencedwrite.ErrInvalid, err)
	}
	var res stdsql.Result
	if err := exec.Exec(ctx, query, args, &res); err != nil {
		if IsFenceRefusal(err) {
			return fenceRefused, err
		}
		return fenceBroken, fmt.Errorf("%s %s#%d at attempt %d: %w", w.op, w.table.Name(), w.id, w.attempt, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fenceBroken, err
	}
	switch n {
	case 1:
		r.mu.Lock()
		r.add(w)
		r.mu.Unlock()
		return fenceApplied, nil
	case 0:
		return fenceMissed, nil
	default:
		return fenceBroken, fmt.Errorf("%s %s#%d: fenced write matched %d rows", w.op, w.table.Name(), w.id, n)
	}
}
