// Package deletes is checked with -delete.
package deletes

import (
	"context"
	"database/sql"
	"os"

	sq "github.com/Masterminds/squirrel"
	"gorm.io/gorm"

	"example.com/app/ent"
)

type RefundJob struct{ ID int64 }

func builders(g *gorm.DB, job *RefundJob, cur string, attempt int64) {
	sq.Delete("refund_jobs").Where(sq.Eq{"id": job.ID}).Exec() // want `squirrel.Delete: unfenced DELETE of refund_jobs`
	sq.Delete("refund_jobs").Where(sq.Eq{"id": job.ID, "state": cur, "attempt": attempt}).Exec()
	g.Delete(job) // want `gorm DB.Delete: unfenced DELETE of refund_jobs`
	g.Where("state = ? AND attempt = ?", cur, attempt).Delete(job)
	g.Delete(&RefundJob{}, "state = ? AND attempt = ?", cur, attempt)
}

func deletes(ctx context.Context, db *sql.DB, client *ent.Client) {
	where := os.Getenv("WHERE")
	db.Exec("DELETE FROM refund_jobs WHERE id = ?") // want `unfenced DELETE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	db.Exec("DELETE FROM refund_jobs WHERE id = ? AND state = 'succeeded' AND attempt = ?")
	db.Exec("DELETE j FROM refund_jobs j JOIN refunds r ON r.job_id = j.id WHERE r.id = ?") // want `unfenced DELETE of refund_jobs`
	db.Exec("DELETE r FROM refund_jobs j JOIN refunds r ON r.job_id = j.id WHERE r.id = ?")
	db.Exec("DELETE FROM refund_jobs WHERE " + where) // want `the fence of this DELETE cannot be proven: its WHERE is built at run time from os\.Getenv\("WHERE"\)`
	client.RefundJob.DeleteOneID(1).Exec(ctx)         // want `RefundJob.DeleteOneID bypasses the fence on refund_jobs`
	client.RefundJob.Delete().Exec(ctx)               // want `RefundJob.Delete bypasses the fence on refund_jobs`
}
