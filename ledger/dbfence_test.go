//go:build !tidb

package ledger_test

// The database's fence of the ledger: a trigger refuses to change a settled
// row, whoever writes. TiDB has no triggers, so the TiDB run (built with
// -tags tidb) leaves this file out; there, only the fenced API and
// fencedwrite.CreateOnly keep a settled row as it is (docs/tidb.md).

import (
	"testing"

	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

func TestDatabaseRefusesToReopenASettledRow(t *testing.T) {
	d := dbtest.New(t)
	e := &env{t: t, d: d, c: d.Client()}
	l := e.claimed("done")
	if err := e.c.RefundJob.Apply(t.Context(), l.Complete("re_1"), ledger.Refunded("done", "re_1")); err != nil {
		t.Fatal(err)
	}
	r := e.row("done")
	if _, err := d.RawDB().Exec("UPDATE refunds SET status = 'requested' WHERE id = ?", r.ID); !dbtest.IsTriggerRefusal(err, "is settled and never changes") {
		t.Errorf("raw reopening: %v, want the database's refusal", err)
	}
	if r := e.row("done"); r.Status != refund.StatusRefunded {
		t.Fatalf("ledger row is %s after the attack, want refunded", r.Status)
	}
}
