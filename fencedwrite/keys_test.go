package fencedwrite_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/migrations"
)

// beforeKeyFix is how many files of the server's migration directory come
// before the fence that registers a key only together with its job: every
// file on TiDB, which has no triggers and where a key can be registered
// alone at any time.
func beforeKeyFix(t *testing.T) int {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := migrations.DirFor(t.Context(), dbtest.OpenDSN(t, devdb.DSN(cfg, "")))
	if err != nil {
		t.Fatal(err)
	}
	files, err := dir.Files()
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if strings.Contains(string(f.Bytes()), "_register_key`") {
			return i
		}
	}
	return len(files)
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) sql.Result {
	t.Helper()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return res
}

// A key is archived only when the archive holds its job. A registration
// without any job (left from before the database refused them, or written
// alone on TiDB) is never reported as archived, and never swallows the
// refund: Enqueue adopts it for the same request (creates the job), and
// reports a conflict for another.
func TestKeyWithoutAJobIsNeverArchived(t *testing.T) {
	t.Parallel()
	d := dbtest.NewWithHistory(t, beforeKeyFix(t), func(db *sql.DB) {
		// Registered alone: what the application's account could do.
		mustExec(t, db, "INSERT INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) VALUES "+
			"('alone', 'pay-alone', 1250, 'EUR', UTC_TIMESTAMP(6)), ('other', 'pay-other', 1, 'EUR', UTC_TIMESTAMP(6)), "+
			"('bound', 'pay-bound', 1250, 'EUR', UTC_TIMESTAMP(6)), ('host', 'pay-host', 1250, 'EUR', UTC_TIMESTAMP(6))")
		res := mustExec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
			"VALUES ('host', 'pay-host', 1250, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
		host, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		// Bound by an upsert that inserted no job: its row is a duplicate of
		// the host job, on which its update half is a wake-up.
		//fencelint:allow history: the attack that bound a key without inserting its job
		mustExec(t, db, "INSERT INTO refund_jobs (id, operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
			"VALUES (?, 'bound', 'pay-bound', 1250, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) "+
			"ON DUPLICATE KEY UPDATE writer_attempt = attempt", host)
	})
	ctx := t.Context()
	c := d.Client()
	for _, key := range []string{"alone", "bound"} {
		t.Run("a key registered without a job, for the same request, is adopted: "+key, func(t *testing.T) {
			job, created, err := c.RefundJob.Enqueue(ctx, request(key), ledger.Open(request(key)))
			if err != nil || !created {
				t.Fatalf("enqueue %s: job=%v created=%v err=%v; want its job created", key, job, created, err)
			}
			if job.State != refundjob.StateReady || job.Attempt != 0 {
				t.Fatalf("the adopted job is %s at attempt %d, want ready at 0", job.State, job.Attempt)
			}
			l, err := c.RefundJob.Claim(ctx, job.ID, opts)
			if err != nil {
				t.Fatalf("claim the adopted job: %v", err)
			}
			if l.NextAction() != refundjob.NextActionRefund {
				t.Fatalf("the adopted job's first claim %s, want refund: no request was ever sent with the key", l.NextAction())
			}
			again, created, err := c.RefundJob.Enqueue(ctx, request(key), nil)
			if err != nil || created || again.ID != job.ID {
				t.Fatalf("enqueue %s again: job=%v created=%v err=%v; want the adopted job, nothing new", key, again, created, err)
			}
		})
	}
	t.Run("a key registered without a job, for another request, is a conflict that says so", func(t *testing.T) {
		job, created, err := c.RefundJob.Enqueue(ctx, request("other"), nil)
		if !errors.Is(err, fencedwrite.ErrKeyConflict) || errors.Is(err, fencedwrite.ErrKeyArchived) || created || job != nil {
			t.Fatalf("enqueue other: job=%v created=%v err=%v; want ErrKeyConflict", job, created, err)
		}
		for _, want := range []string{"amount_minor: enqueued as 1, requested as 1250", "no job"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if n, err := c.RefundJob.Query().Where(refundjob.OperationKey("other")).Count(ctx); err != nil || n != 0 {
			t.Fatalf("%d jobs for other (%v), want none", n, err)
		}
	})
}
