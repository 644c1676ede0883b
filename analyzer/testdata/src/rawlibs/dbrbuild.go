package rawlibs

import (
	"context"
	"time"

	"github.com/gocraft/dbr/v2"
)

// dbr's update builder, as a dbr service writes it.
func (r *dbrRepo) Complete(ctx context.Context, j RefundJob) error {
	_, err := r.sess.Update("refund_jobs").
		Set("state", "done").
		Set("completed_at", time.Now()).
		Where("id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt).
		ExecContext(ctx)
	return err
}

func (r *dbrRepo) CompleteByID(ctx context.Context, j RefundJob) error {
	_, err := r.sess.Update("refund_jobs"). // want `dbr.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
						Set("state", "done").
						Where("id = ?", j.ID).
						ExecContext(ctx)
	return err
}

func dbrBuilders(sess *dbr.Session, tx *dbr.Tx, j RefundJob, states []string, retry bool) error {
	if _, err := tx.Update("refund_jobs").
		SetMap(map[string]interface{}{"state": "failed", "attempt": dbr.Expr("attempt + 1")}).
		Where(dbr.And(dbr.Eq("id", j.ID), dbr.Eq("state", j.State), dbr.Eq("attempt", j.Attempt))).
		Exec(); err != nil {
		return err
	}
	// Eq with a slice is IN (…): not an equality.
	if _, err := tx.Update("refund_jobs").Set("state", "ready"). // want `dbr.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \?`
									Where(dbr.Eq("state", states)).Where(dbr.Eq("attempt", j.Attempt)).Exec(); err != nil {
		return err
	}
	// An OR breaks the fence.
	if _, err := dbr.Update("refund_jobs").Set("state", "ready"). // want `dbr.Update: unfenced UPDATE of refund_jobs`
									Where(dbr.Or(dbr.Eq("state", j.State), dbr.Eq("attempt", j.Attempt))).Exec(); err != nil {
		return err
	}
	// A WHERE added on one path only does not prove the fence.
	q := sess.Update("refund_jobs").Set("state", "held").Where("id = ?", j.ID) // want `dbr.Update: unfenced UPDATE of refund_jobs`
	if retry {
		q = q.Where("state = ? AND attempt = ?", j.State, j.Attempt)
	}
	if _, err := q.Exec(); err != nil {
		return err
	}
	// Another table, and reads: not judged.
	if _, err := sess.Update("refund_audit").Set("seen", true).Where("id = ?", j.ID).Exec(); err != nil {
		return err
	}
	_, err := sess.DeleteFrom("refund_jobs").Where("id = ?", j.ID).Exec() // DELETE is judged only with -delete
	return err
}
