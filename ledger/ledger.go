// Package ledger is the business side of a refund: the `refunds` table, one
// row per approved refund request. Its writes are callbacks for the fenced
// runner (ent.RefundJobClient.Enqueue and Apply), so that a ledger row moves
// in the same transaction as its job, or not at all.
package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
)

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
// refunded with the provider's refund id: requested → refunded, exactly once.
func Refunded(key, providerRefundID string) func(context.Context, *ent.Tx) error {
	return settle(key, refund.StatusRefunded, providerRefundID)
}

// Failed returns the Apply callback that settles the ledger row of key as
// failed: requested → failed, exactly once.
func Failed(key string) func(context.Context, *ent.Tx) error {
	return settle(key, refund.StatusFailed, "")
}

func settle(key string, status refund.Status, providerRefundID string) func(context.Context, *ent.Tx) error {
	return func(ctx context.Context, tx *ent.Tx) error {
		u := tx.Refund.Update().
			Where(refund.OperationKey(key), refund.StatusEQ(refund.StatusRequested)).
			SetStatus(status).
			SetSettledAt(time.Now().UTC())
		if providerRefundID != "" {
			u.SetProviderRefundID(providerRefundID)
		}
		n, err := u.Save(ctx)
		if err != nil {
			return fmt.Errorf("settle ledger row %s as %s: %w", key, status, err)
		}
		if n != 1 {
			return fmt.Errorf("settle ledger row %s as %s: %d rows were requested", key, status, n)
		}
		return nil
	}
}
