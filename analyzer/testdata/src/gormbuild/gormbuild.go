// Package gormbuild checks gorm's writes of the fenced table.
package gormbuild

import (
	"context"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// RefundJob maps to refund_jobs by gorm's default naming.
type RefundJob struct {
	ID      int64
	State   string
	Attempt int64
}

// Job maps to refund_jobs by its TableName method.
type Job struct{ ID int64 }

func (Job) TableName() string { return "refund_jobs" } // want TableName:`returns\("refund_jobs"\)`

// Refund maps to refunds: not fenced.
type Refund struct{ ID int64 }

func writes(ctx context.Context, db *gorm.DB, job *RefundJob, cur string, attempt int64) {
	db.Table("refund_jobs").Where("id = ? AND state = ? AND attempt = ?", job.ID, cur, attempt).Update("state", "ready")
	db.WithContext(ctx).Model(job).Where("state = ?", cur).Where("attempt = ?", attempt).Updates(map[string]any{"state": "ready"})
	db.Model(&RefundJob{}).Where(map[string]any{"id": job.ID, "state": cur, "attempt": attempt}).UpdateColumn("state", "ready")
	db.Model(&Job{}).Where("state", cur).Where("attempt", attempt).Update("state", "ready")
	db.Table("refund_jobs").Where("state = @state AND attempt = @attempt", map[string]any{"state": cur, "attempt": attempt}).Update("state", "ready")

	db.Table("refund_jobs").Where("id = ?", job.ID).Update("state", "ready")                                      // want `gorm DB.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	db.Model(job).Update("state", "ready")                                                                        // want `gorm DB.Update: unfenced UPDATE of refund_jobs`
	db.Model(&Job{}).Where("state = ?", cur).Updates(map[string]any{"state": "ready"})                            // want `gorm DB.Updates: unfenced UPDATE of refund_jobs: WHERE lacks attempt = \?`
	db.Model(job).Where("state = ? AND attempt = ?", cur, attempt).Or("id = ?", job.ID).Update("state", "ready")  // want `lacks state = \? and attempt = \?`
	db.Model(job).Where(&RefundJob{State: cur, Attempt: attempt}).Update("state", "ready")                        // want `gorm DB.Update: query built at run time writes refund_jobs \(UPDATE\): fencelint cannot prove`
	db.Model(job).Where("state = ? AND attempt = ?", cur, attempt).Update("writer_attempt", gorm.Expr("attempt")) // want `sets writer_attempt from the row's own attempt`
	db.Save(job)                                                                                                  // want `gorm DB.Save: Save \(an UPDATE by primary key, then an upsert when no row matched\) writes existing refund_jobs rows and cannot be fenced`
	db.Where("state = ? AND attempt = ?", cur, attempt).Save(&Job{})                                              // want `gorm DB.Save: Save`
	db.Clauses(clause.OnConflict{UpdateAll: true}).Create(job)                                                    // want `gorm DB.Create: INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows`

	tx := db.Table("refund_jobs").Where("id = ?", job.ID)
	tx.Update("state", "ready") // want `gorm DB.Update: unfenced UPDATE of refund_jobs`

	// Enqueue, reads, other tables.
	db.Create(job)
	db.Clauses(clause.OnConflict{DoNothing: true}).Create(job)
	db.Model(&Refund{}).Where("id = ?", 1).Update("status", "paid")
	db.Save(&Refund{})
	db.Where("state = ?", cur).Find(&[]RefundJob{})
	db.Delete(job)
}
