// Package rogueops is what TestOperatorsWriteOnlyThroughTheOperatorAPI must
// catch: an operator command that writes a job, the ledger or evidence by
// itself instead of through the operator API, in each form Go can call it.
package rogueops

import (
	"context"
	"database/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/operator"
)

// resolve marks job 1 succeeded with a raw statement, through a method value.
func resolve(ctx context.Context, db *sql.DB) error {
	exec := db.ExecContext
	_, err := exec(ctx, "UPDATE refund_jobs SET state = 'succeeded' WHERE id = 1")
	return err
}

// edit writes through the generated client, inside a closure run later.
func edit(ctx context.Context, c *ent.Client) func() error {
	return func() error { return c.RefundJob.UpdateOneID(1).SetReviewReason("x").Exec(ctx) }
}

// record appends evidence by itself, deferred.
func record(ctx context.Context, db *sql.DB) {
	defer evidence.Record(ctx, db, evidence.Observation{})
}

// decide goes through the API: not a finding.
func decide(ctx context.Context, s *operator.Service, r operator.Resolution) error {
	_, err := s.Resolve(ctx, r)
	return err
}
