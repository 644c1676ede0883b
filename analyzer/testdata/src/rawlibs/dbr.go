package rawlibs

import (
	"context"

	"github.com/gocraft/dbr/v2"
)

type dbrRepo struct {
	sess dbr.SessionRunner
}

func (r *dbrRepo) MarkRefunded(ctx context.Context, j RefundJob) error {
	_, err := r.sess.UpdateBySql("UPDATE refund_jobs SET state = 'refunded' WHERE id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt).ExecContext(ctx)
	return err
}

func (r *dbrRepo) Reset(ctx context.Context, id int64) error {
	_, err := r.sess.UpdateBySql("UPDATE refund_jobs SET state = 'ready', attempt = 0 WHERE id = ?", id).ExecContext(ctx) // want `unfenced UPDATE of refund_jobs`
	return err
}

func dbrSession(conn *dbr.Connection, j RefundJob) error {
	sess := conn.NewSession(nil)
	tx, err := sess.Begin()
	if err != nil {
		return err
	}
	defer tx.RollbackUnlessCommitted()
	if _, err := tx.UpdateBySql("UPDATE refund_jobs SET state = 'sent' WHERE " + extraWhere).Exec(); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
		return err
	}
	if _, err := tx.InsertBySql("INSERT INTO refund_jobs (id, state) VALUES (?, 'ready') ON DUPLICATE KEY UPDATE attempt = attempt + 1", j.ID).Exec(); err != nil { // want `INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows`
		return err
	}
	if _, err := tx.InsertBySql("INSERT INTO refund_jobs (id, state) VALUES (?, 'ready')", j.ID).Exec(); err != nil {
		return err
	}
	var n int
	if err := sess.SelectBySql("SELECT COUNT(*) FROM refund_jobs WHERE " + extraWhere).LoadOne(&n); err != nil {
		return err
	}
	if _, err := dbr.UpdateBySql("UPDATE refund_jobs SET state = ? WHERE "+extraWhere, "x").Exec(); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
		return err
	}
	return tx.Commit()
}
