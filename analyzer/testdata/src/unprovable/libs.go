package unprovable

import (
	"context"
	"strconv"

	"github.com/gocraft/dbr/v2"
	"github.com/uptrace/bun"
	"xorm.io/xorm"
)

// 7. The raw entry points of xorm, bun and dbr with run-time text: the
// same rule.

type xormRepo struct{ engine *xorm.Engine }

func (r *xormRepo) failWhere(cond string) error {
	_, err := r.engine.Exec("UPDATE refund_jobs SET state = 'failed' WHERE " + cond) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

// Exec(sqlOrArgs ...any): the query and its arguments in one spread
// slice.
func (r *xormRepo) updateWhere(cond string, args ...any) error {
	_, err := r.engine.Exec(append([]any{"UPDATE refund_jobs SET state = ? WHERE " + cond}, args...)...) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

func (r *xormRepo) requeue(id int64) error {
	sqlOrArgs := []any{"UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.FormatInt(id, 10)}
	_, err := r.engine.Exec(sqlOrArgs...) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.FormatInt\(id, 10\)`
	return err
}

func (r *xormRepo) settle(sess *xorm.Session, id int64, attempt int) error {
	sqlOrArgs := []any{"UPDATE refund_jobs SET state = ? WHERE " + fenced, "succeeded", id, "running", attempt}
	if _, err := sess.Exec(sqlOrArgs...); err != nil {
		return err
	}
	_, err := sess.Exec(append([]any{"UPDATE refund_jobs SET state = 'ready' WHERE id = ?"}, id)...) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	return err
}

func (r *xormRepo) sqlWhere(cond string) error {
	_, err := r.engine.SQL("UPDATE refund_jobs SET state = 'failed' WHERE " + cond).Exec() // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

// Proven at its calls.
func (r *xormRepo) markWhere(cond string, args ...any) error {
	_, err := r.engine.Exec(append([]any{"UPDATE refund_jobs SET state = 'sent' WHERE " + cond}, args...)...)
	return err
}

func (r *xormRepo) markSent(id int64, attempt int) error {
	return r.markWhere(fenced, id, "running", attempt)
}

type bunRepo struct{ db bun.IDB }

func (r *bunRepo) failWhere(ctx context.Context, cond string) error {
	_, err := r.db.NewRaw("UPDATE refund_jobs SET state = 'failed' WHERE " + cond).Exec(ctx) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

func (r *bunRepo) sentWhere(ctx context.Context, cond string, args ...any) error {
	_, err := r.db.NewRaw("UPDATE refund_jobs SET state = 'sent' WHERE "+cond, args...).Exec(ctx)
	return err
}

func (r *bunRepo) markSent(ctx context.Context, id int64, attempt int) error {
	return r.sentWhere(ctx, fenced, id, "running", attempt)
}

type dbrRepo struct{ sess dbr.SessionRunner }

func (r *dbrRepo) failWhere(ctx context.Context, cond string) error {
	_, err := r.sess.UpdateBySql("UPDATE refund_jobs SET state = 'failed' WHERE " + cond).ExecContext(ctx) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from cond`
	return err
}

func (r *dbrRepo) sentWhere(ctx context.Context, cond string, args ...any) error {
	_, err := r.sess.UpdateBySql("UPDATE refund_jobs SET state = 'sent' WHERE "+cond, args...).ExecContext(ctx)
	return err
}

func (r *dbrRepo) markSent(ctx context.Context, id int64, attempt int) error {
	return r.sentWhere(ctx, fenced, id, "running", attempt)
}
