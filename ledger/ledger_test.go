package ledger_test

import (
	"context"
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// A ledger row settles exactly once: a second settlement of the same row,
// as or differently, fails (and so rolls back its fenced transaction).
func TestLedgerRowSettlesOnce(t *testing.T) {
	c := dbtest.New(t).Client()
	ctx := t.Context()
	p := ent.RefundJobEnqueue{OperationKey: "k", PaymentRef: "pay", AmountMinor: 100, Currency: "EUR"}
	inTx := func(fn func(context.Context, *ent.Tx) error) error {
		tx, err := c.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	if err := inTx(ledger.Open(p)); err != nil {
		t.Fatal(err)
	}
	if err := inTx(ledger.Refunded("k", "re_1")); err != nil {
		t.Fatal(err)
	}
	if err := inTx(ledger.Refunded("k", "re_2")); err == nil {
		t.Fatal("a refunded row was settled again")
	}
	if err := inTx(ledger.Failed("k")); err == nil {
		t.Fatal("a refunded row was settled as failed")
	}
	r, err := c.Refund.Query().Where(refund.OperationKey("k")).Only(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != refund.StatusRefunded || *r.ProviderRefundID != "re_1" || r.SettledAt == nil {
		t.Fatalf("ledger row = %+v, want refunded once as re_1", r)
	}
}
