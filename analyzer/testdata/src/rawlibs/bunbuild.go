package rawlibs

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Job is a bun model of the fenced table, with an alias.
type Job struct {
	bun.BaseModel `bun:"table:refund_jobs,alias:j"`

	ID        int64 `bun:",pk,autoincrement"`
	State     string
	Attempt   int64
	UpdatedAt time.Time
}

// RefundJobRow takes bun's naming: refund_job_rows, alias refund_job_row.
type RefundJobRow struct {
	ID      int64 `bun:",pk"`
	State   string
	Attempt int64
}

type AuditEntry struct {
	bun.BaseModel `bun:"table:refund_audit"`

	ID int64
}

func (r *bunRepo) Complete(ctx context.Context, job *Job) error {
	_, err := r.db.NewUpdate().
		Model(job).
		Set("state = ?", "done").
		Set("updated_at = ?", time.Now()).
		Where("j.id = ?", job.ID).
		Where("j.state = ?", job.State).
		Where("?TableAlias.attempt = ?", job.Attempt).
		Exec(ctx)
	return err
}

func (r *bunRepo) CompleteByPK(ctx context.Context, job *Job) error {
	_, err := r.db.NewUpdate().Model(job).Column("state").WherePK().Exec(ctx) // want `bun.NewUpdate: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	return err
}

func (r *bunRepo) Release(ctx context.Context, id int64, state string) error {
	_, err := r.db.NewUpdate().Table("refund_jobs"). // want `bun.NewUpdate: unfenced UPDATE of refund_jobs: WHERE lacks attempt = \?`
								Set("state = ?", "ready").
								Where("id = ?", id).
								Where("state = ?", state).
								Exec(ctx)
	return err
}

func bunBuilders(ctx context.Context, db *bun.DB, job *Job, jobs []Job, extra bool) error {
	// bun's default naming (RefundJobRow: refund_job_rows) is not a fenced table.
	if _, err := db.NewUpdate().Model(&RefundJobRow{ID: 1}).WherePK().Exec(ctx); err != nil {
		return err
	}
	if _, err := db.NewUpdate().Model(&AuditEntry{ID: 1}).WherePK().Exec(ctx); err != nil {
		return err
	}
	// A bulk update by primary key: unfenced.
	if _, err := db.NewUpdate().Model(&jobs).Column("state").Bulk().Exec(ctx); err != nil { // want `bun.NewUpdate: unfenced UPDATE of refund_jobs`
		return err
	}
	// An OR breaks the fence.
	if _, err := db.NewUpdate().Model(job).Set("state = ?", "x"). // want `bun.NewUpdate: unfenced UPDATE of refund_jobs`
									Where("j.state = ?", job.State).WhereOr("j.attempt = ?", job.Attempt).Exec(ctx); err != nil {
		return err
	}
	// Conditions added on one path only do not prove the fence.
	q := db.NewUpdate().Model(job).Set("state = ?", "held").WherePK() // want `bun.NewUpdate: unfenced UPDATE of refund_jobs`
	if extra {
		q = q.Where("j.state = ? AND j.attempt = ?", job.State, job.Attempt)
	}
	if _, err := q.Exec(ctx); err != nil {
		return err
	}
	// Conditions bun builds at run time cannot be proven.
	_, err := db.NewUpdate().Model(job).Set("state = ?", "x"). // want `bun.NewUpdate: query built at run time writes refund_jobs`
									WhereGroup(" AND ", func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Where("j.state = ?", job.State).Where("j.attempt = ?", job.Attempt)
		}).Exec(ctx)
	return err
}
