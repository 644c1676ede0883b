//go:build !tidb

// The attempts log's fence: MySQL and MariaDB only (TiDB has no triggers;
// there the grants alone keep it append-only for the application).

package migrations_test

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
)

// The attempts log is append-only: the application's account records
// claims through the fenced layer but can neither change nor delete a row
// (its grants), the migration account cannot either (the triggers), and a
// row is accepted only from the transaction that took its attempt, with a
// printable holder.
func TestAttemptsLogIsAppendOnly(t *testing.T) {
	d := dbtest.New(t)
	ctx := t.Context()
	appRaw, app := appAccount(t, d)
	root := d.RawDB()

	id := newJob(t, root, "att-1")
	l, err := app.RefundJob.Claim(ctx, id, fencedwrite.ClaimOptions{Holder: "worker-a/1"})
	if err != nil {
		t.Fatalf("the application cannot claim (and record its attempt): %v", err)
	}
	var holder string
	if err := appRaw.QueryRow("SELECT holder FROM refund_job_attempts WHERE job_id = ? AND attempt = ?", id, l.Attempt()).Scan(&holder); err != nil || holder != "worker-a/1" {
		t.Fatalf("the application reads holder %q (%v), want worker-a/1", holder, err)
	}

	t.Run("the application's account may not update or delete", func(t *testing.T) {
		for _, q := range []string{
			"UPDATE refund_job_attempts SET holder = 'worker-b/2' WHERE job_id = 1",
			"DELETE FROM refund_job_attempts WHERE job_id = 1",
			"TRUNCATE refund_job_attempts",
			"REPLACE INTO refund_job_attempts (job_id, attempt, op, holder, claimed_at) VALUES (1, 1, 'claim', 'worker-b/2', UTC_TIMESTAMP(6))",
		} {
			_, err := appRaw.Exec(q)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1142 {
				t.Errorf("%s as the application: %v, want a privilege error (1142)", q, err)
			}
		}
	})
	t.Run("nobody changes or deletes a row", func(t *testing.T) {
		refused(t, root, "rows never change", "UPDATE refund_job_attempts SET holder = 'worker-b/2' WHERE job_id = ?", id)
		refused(t, root, "rows never change", "UPDATE refund_job_attempts SET claimed_at = claimed_at - INTERVAL 1 DAY WHERE job_id = ?", id)
		refused(t, root, "rows are never deleted", "DELETE FROM refund_job_attempts WHERE job_id = ?", id)
	})
	t.Run("a row comes only from the transaction that took its attempt", func(t *testing.T) {
		refused(t, appRaw, "only the transaction that took an attempt records it",
			"INSERT INTO refund_job_attempts (job_id, attempt, op, holder, claimed_at) VALUES (?, 5, 'takeover', 'forger/9', UTC_TIMESTAMP(6))", id)
		refused(t, appRaw, "only the transaction that took an attempt records it",
			"INSERT INTO refund_job_attempts (job_id, attempt, op, holder, claimed_at) VALUES (999, 1, 'claim', 'forger/9', UTC_TIMESTAMP(6))")
		refused(t, root, "the holder is 1 to 255 printable ASCII characters",
			"INSERT INTO refund_job_attempts (job_id, attempt, op, holder, claimed_at) VALUES (?, 1, 'claim', 'a\nb', UTC_TIMESTAMP(6))", id)
		refused(t, root, "the holder is 1 to 255 printable ASCII characters",
			"INSERT INTO refund_job_attempts (job_id, attempt, op, holder, claimed_at) VALUES (?, 1, 'claim', '', UTC_TIMESTAMP(6))", id)
	})
	var n int
	if err := root.QueryRow("SELECT COUNT(*) FROM refund_job_attempts WHERE job_id = ? AND holder = 'worker-a/1'", id).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the log holds %d rows of worker-a/1 (%v), want its one claim, unchanged", n, err)
	}
}
