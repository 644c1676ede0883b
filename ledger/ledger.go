// Package ledger is the business side of a refund: the `refunds` table, one
// row per approved refund request. Its writes are callbacks for the fenced
// runner (ent.RefundJobClient.Enqueue and Apply), so that a ledger row moves
// in the same transaction as its job, or not at all.
//
// A ledger row follows its job: it becomes refunded only in the transaction
// that settles its job as succeeded (Complete, or ResolveSucceeded) with the
// same provider refund id, failed only in the one that fails it, and never
// changes or disappears afterwards. The callbacks check this against the
// runner's own record of the transaction, and the database's triggers check
// it again; Ent's generic builders may open ledger rows but never change
// them.
package ledger

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"strings"

	"entgo.io/ent/dialect"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
)

// ErrSettledOtherwise means the ledger row is settled already, and not as
// the caller asks (failed, or refunded with another refund id): nothing was
// written, and the same call gets the same answer. The job's settlement is
// for an operator to decide. It matches fencedwrite.ErrInvalid.
var ErrSettledOtherwise = fmt.Errorf("%w: the ledger row is settled otherwise", fencedwrite.ErrInvalid)

// Open returns the Enqueue callback that creates the request's ledger row,
// requested.
func Open(p ent.RefundJobEnqueue) func(context.Context, *ent.Tx) error {
	return func(ctx context.Context, tx *ent.Tx) error {
		err := tx.Refund.Create().
			SetOperationKey(p.OperationKey).
			SetPaymentRef(p.PaymentRef).
			SetAmountMinor(p.AmountMinor).
			SetCurrency(p.Currency).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("open ledger row %s: %w", p.OperationKey, err)
		}
		return nil
	}
}

// Refunded returns the Apply callback that settles the ledger row of key as
// refunded with the provider's refund id: requested → refunded, exactly
// once. It refuses (fencedwrite.ErrInvalid) unless the same transaction has
// settled key's job as succeeded with that refund id.
func Refunded(key, providerRefundID string) func(context.Context, *ent.Tx) error {
	return settle(key, "refunded", fencedwrite.StateSucceeded, providerRefundID)
}

// Failed returns the Apply callback that settles the ledger row of key as
// failed: requested → failed, exactly once. It refuses
// (fencedwrite.ErrInvalid) unless the same transaction has failed key's job.
func Failed(key string) func(context.Context, *ent.Tx) error {
	return settle(key, "failed", fencedwrite.StateFailed, "")
}

// settleRow moves a requested ledger row, stamping settled_at and updated_at
// on the database clock. Where the database's fence exists, the trigger
// stamps them again and checks the job once more; on TiDB, which has no
// triggers, the statement's own stamps are the ones kept.
const settleRow = "UPDATE `refunds` SET `status` = ?, `provider_refund_id` = ?, " +
	"`settled_at` = " + fencedwrite.ClockUTC + ", `updated_at` = " + fencedwrite.ClockUTC +
	" WHERE `operation_key` = ? AND `status` = 'requested'"

// settleRows settles the ledger rows of several jobs with one statement: a
// batch's runner makes the rows that settle callbacks deferred to it
// (the generated DeferRow), each row's provider refund id picked by its key.
type settleRows struct{ status string }

func (k settleRows) ExecRows(ctx context.Context, exec dialect.ExecQuerier, rows []fencedwrite.BatchRow) (int64, error) {
	keys := make([]any, len(rows))
	refs := make([]any, len(rows))
	for i, r := range rows {
		keys[i], refs[i] = r.Key, r.Values[0]
	}
	list := strings.Repeat("?, ", len(rows)-1) + "?"
	query := "UPDATE `refunds` SET `status` = ?, `provider_refund_id` = ELT(FIELD(`operation_key`, " + list + "), " + list + "), " +
		"`settled_at` = " + fencedwrite.ClockUTC + ", `updated_at` = " + fencedwrite.ClockUTC +
		" WHERE `operation_key` IN (" + list + ") AND `status` = 'requested'"
	args := append(append(append([]any{k.status}, keys...), refs...), keys...)
	var res stdsql.Result
	if err := exec.Exec(ctx, query, args, &res); err != nil {
		return 0, fmt.Errorf("settle %d ledger rows as %s: %w", len(rows), k.status, err)
	}
	return res.RowsAffected()
}

func settle(key, status, jobState, providerRefundID string) func(context.Context, *ent.Tx) error {
	return func(ctx context.Context, tx *ent.Tx) error {
		if err := settledHere(ctx, tx, key, jobState, providerRefundID); err != nil {
			return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
		}
		var ref any
		if providerRefundID != "" {
			ref = providerRefundID
		}
		if tx.RefundJob.DeferRow(ctx, settleRows{status}, key, ref) {
			return nil // the batch's runner settles it with the others
		}
		res, err := tx.ExecContext(ctx, settleRow, status, ref, key)
		if err != nil {
			return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
		}
		if n == 1 {
			return nil
		}
		// Nothing was requested. A row that this settlement already made
		// (the same status, the same provider refund id) stays as it is: a
		// job a writer outside the fence set back after it was settled (a
		// legacy zombie while the fence only observes, docs/adopting.md)
		// settles again with the refund the provider already executed, and
		// the ledger, which recorded that refund once, has nothing to add.
		// Any other row refuses.
		var got, gotRef stdsql.NullString
		rows, err := tx.QueryContext(ctx, "SELECT `status`, `provider_refund_id` FROM `refunds` WHERE `operation_key` = ? FOR UPDATE", key)
		if err != nil {
			return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
		}
		if rows.Next() {
			err = rows.Scan(&got, &gotRef)
		}
		if cerr := errors.Join(err, rows.Err(), rows.Close()); cerr != nil {
			return fmt.Errorf("settle ledger row %s as %s: %w", key, status, cerr)
		}
		if !got.Valid {
			// No ledger row at all: a job inserted outside fencekit's
			// Enqueue (a legacy writer of an adopted table, after the
			// adoption's catch-up). It is opened now from its job, in this
			// transaction, and settled like any other: the provider has
			// paid, and the ledger must say so.
			if err := openFromJob(ctx, tx, key); err != nil {
				return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
			}
			if _, err := tx.ExecContext(ctx, settleRow, status, ref, key); err != nil {
				return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
			}
			return nil
		}
		if got.String == status && gotRef.String == providerRefundID {
			return nil
		}
		return fmt.Errorf("settle ledger row %s as %s: %w: the row is %q (refund id %q), not requested", key, status, ErrSettledOtherwise, got.String, gotRef.String)
	}
}

// openRow opens the ledger row of a job that has none, from the job's own
// request (the database's fence checks that the two agree).
const openRow = "INSERT INTO `refunds` (`operation_key`, `payment_ref`, `amount_minor`, `currency`, `status`, `created_at`, `updated_at`) " +
	"SELECT `operation_key`, `payment_ref`, `amount_minor`, `currency`, 'requested', " + fencedwrite.ClockUTC + ", " + fencedwrite.ClockUTC +
	" FROM `refund_jobs` WHERE `operation_key` = ?"

func openFromJob(ctx context.Context, tx *ent.Tx, key string) error {
	res, err := tx.ExecContext(ctx, openRow, key)
	if err != nil {
		return fmt.Errorf("open the missing ledger row: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("open the missing ledger row: %d rows opened (%v)", n, err)
	}
	return nil
}

// settledHere checks that this transaction's runner applied a transition
// that left key's job in jobState (with providerRefundID, when given).
func settledHere(ctx context.Context, tx *ent.Tx, key, jobState, providerRefundID string) error {
	for _, a := range tx.RefundJob.AppliedInRun(ctx, key) {
		if a.Table != ent.RefundJobFencedTable || a.To != jobState {
			continue
		}
		if providerRefundID != "" && a.Values[fencedwrite.ValueProviderRefundID] != providerRefundID {
			continue
		}
		return nil
	}
	return fmt.Errorf("%w: a ledger row settles only in the transaction that leaves its job %s (with the same provider refund id)",
		fencedwrite.ErrInvalid, jobState)
}
