package operator_test

import (
	"fmt"
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/operator"
)

// The queue and the searches read their index, not the table: at a million
// jobs a scan would take seconds per page.
func TestViewsReadTheirIndexes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for i := range 40 {
		req := ent.RefundJobEnqueue{OperationKey: fmt.Sprintf("k-%d", i), PaymentRef: fmt.Sprintf("pay-%d", i), AmountMinor: 100, Currency: "EUR"}
		if _, _, err := e.c.RefundJob.Enqueue(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.d.RawDB().ExecContext(ctx, "ANALYZE TABLE refund_jobs"); err != nil {
		t.Fatal(err)
	}
	for _, p := range operator.Plans() {
		plan := dbtest.Explain(t, e.d.RawDB(), p.Query, p.Args...)
		if len(plan) == 0 || plan[0].Key != p.Index {
			t.Errorf("%s reads %+v, want the index %s", p.Name, plan, p.Index)
		}
	}
}
