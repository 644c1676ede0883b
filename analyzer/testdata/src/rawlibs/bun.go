// Package rawlibs checks the raw-SQL entry points of uptrace/bun, xorm and
// gocraft/dbr, in the shapes services write them: repositories over the
// library's handle or interface, transactions, queries completed at run
// time.
package rawlibs

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/uptrace/bun"
)

var extraWhere = os.Getenv("EXTRA_WHERE")

const (
	markSentFenced   = "UPDATE refund_jobs SET state = 'sent', sent_at = ? WHERE id = ? AND state = ? AND attempt = ?"
	markSentUnfenced = "UPDATE refund_jobs SET state = 'sent', sent_at = ? WHERE id = ?"
)

type RefundJob struct {
	ID      int64
	State   string
	Attempt int64
}

// bunRepo is the usual shape: the repository holds bun.IDB so that the
// same code runs on *bun.DB and on bun.Tx.
type bunRepo struct {
	db bun.IDB
}

func (r *bunRepo) MarkSent(ctx context.Context, j RefundJob) error {
	_, err := r.db.NewRaw(markSentFenced, time.Now(), j.ID, j.State, j.Attempt).Exec(ctx)
	return err
}

func (r *bunRepo) MarkSentLegacy(ctx context.Context, j RefundJob) error {
	_, err := r.db.NewRaw(markSentUnfenced, time.Now(), j.ID).Exec(ctx) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	return err
}

func (r *bunRepo) Requeue(ctx context.Context, id int64) error {
	_, err := r.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id) // want `unfenced UPDATE of refund_jobs`
	return err
}

func (r *bunRepo) Filtered(ctx context.Context, state string) error {
	q := "UPDATE refund_jobs SET state = 'held' WHERE " + extraWhere
	_, err := r.db.NewRaw(q, state).Exec(ctx) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
	return err
}

func (r *bunRepo) Scan(ctx context.Context, dst *[]RefundJob) error {
	// Reads are never reported, built at run time or not.
	return r.db.NewRaw("SELECT * FROM refund_jobs WHERE "+extraWhere).Scan(ctx, dst)
}

func bunDirect(ctx context.Context, db *bun.DB, j RefundJob, age time.Duration) error {
	if _, err := db.Exec("UPDATE refund_jobs SET state = 'failed' WHERE id = ?", j.ID); err != nil { // want `unfenced UPDATE of refund_jobs`
		return err
	}
	if _, err := db.NewRaw("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?", "failed", j.ID, j.State, j.Attempt).Exec(ctx); err != nil {
		return err
	}
	stale := fmt.Sprintf("UPDATE refund_jobs SET state = 'ready' WHERE updated_at < NOW() - INTERVAL %d SECOND", int(age.Seconds())) // want `unfenced UPDATE of refund_jobs`
	if _, err := db.NewRaw(stale).Exec(ctx); err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	_, err = conn.NewRaw("UPDATE refund_jobs SET state = 'ready' WHERE " + extraWhere).Exec(ctx) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
	return err
}

func bunTx(ctx context.Context, db *bun.DB, j RefundJob, where string) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(markSentFenced, time.Now(), j.ID, j.State, j.Attempt).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewRaw("UPDATE refund_jobs SET attempt = attempt + 1 WHERE " + extraWhere).Exec(ctx); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
			return err
		}
		_, err := tx.ExecContext(ctx, markSentUnfenced, time.Now(), j.ID) // want `unfenced UPDATE of refund_jobs`
		return err
	})
}

// REPLACE through bun is the same REPLACE.
func bunReplace(ctx context.Context, db *bun.DB) error {
	_, err := db.NewRaw("REPLACE INTO refund_jobs (id, state) VALUES (?, 'ready')", 1).Exec(ctx) // want `REPLACE writes existing refund_jobs rows and cannot be fenced`
	return err
}
