//go:build !tidb

// The accounts against the fences of migrations/: MySQL and MariaDB only
// (the TiDB run, -tags tidb, leaves this file out; TiDB has no fences to
// attack, and its grants are migrations.TiDBGrants).

package migrations_test

import (
	"context"
	"errors"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/migrations"
)

// The migration account applies the migrations; the application's account
// runs the whole fenced flow and nothing more. With it TRUNCATE, DROP
// TRIGGER, ALTER and DELETE are refused, and every attack on the fences
// still fails.
func TestLeastPrivilegeAccounts(t *testing.T) {
	ctx := t.Context()
	serverCfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name, drop, err := devdb.Create(ctx, serverCfg, "grants")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	root := dbtest.OpenDSN(t, devdb.DSN(serverCfg, name))

	migrator := dbtest.Account(t, root, name, migrations.MigrationGrants)
	migDB := dbtest.OpenDSN(t, migrator.FormatDSN())
	if _, err := migrations.Apply(ctx, migDB); err != nil {
		t.Fatalf("the migration account cannot migrate: %v", err)
	}

	app := dbtest.Account(t, root, name, migrations.AppGrants)
	appDSN, err := fencedwrite.DSN(app.FormatDSN(), fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appDB := dbtest.OpenDSN(t, appDSN)
	c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, appDB)))

	t.Run("the fenced flow works", func(t *testing.T) {
		req := ent.RefundJobEnqueue{OperationKey: "g-1", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}
		job, _, err := c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, 0, "re_1", "pending"), nil); err != nil {
			t.Fatal(err)
		}
		id, _, err := evidence.Record(ctx, c, evidence.Observation{OperationKey: "g-1", Source: evidence.Webhook,
			ProviderRefundID: "re_1", Status: evidence.Succeeded, Payload: []byte("{}"), EventID: "evt_1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RefundJob.Apply(ctx, c.RefundJob.WakeUp(mustJob(t, c, job.ID)), func(ctx context.Context, tx *ent.Tx) error {
			return evidence.MarkProcessed(ctx, tx, id)
		}); err != nil {
			t.Fatal(err)
		}
		l2, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RefundJob.Apply(ctx, l2.Complete("re_1"), ledger.Refunded("g-1", "re_1")); err != nil {
			t.Fatal(err)
		}
		if _, err := appDB.Exec("CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 31 DAY)"); err != nil {
			t.Fatalf("the application cannot run the archival path: %v", err)
		}
	})

	t.Run("the fleet's budget works", func(t *testing.T) {
		// The statements of worker/internal/budget: create, settle, take, return.
		mustExec(t, appDB, "INSERT INTO provider_budgets (name, tokens, capacity, rate, refilled_at) VALUES ('stripe', 5, 5, 1, "+fencedwrite.ClockUTC+") "+
			"ON DUPLICATE KEY UPDATE tokens = LEAST(VALUES(capacity), tokens), capacity = VALUES(capacity), rate = VALUES(rate)")
		tx, err := appDB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var tokens float64
		if err := tx.QueryRowContext(ctx, "SELECT tokens FROM provider_budgets WHERE name = 'stripe' FOR UPDATE").Scan(&tokens); err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "UPDATE provider_budgets SET tokens = tokens - 2 WHERE name = 'stripe'")
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		mustExec(t, appDB, "UPDATE provider_budgets SET tokens = LEAST(capacity, tokens + 1) WHERE name = 'stripe'")
	})

	t.Run("destructive statements are refused by the grants", func(t *testing.T) {
		for _, q := range []string{
			"TRUNCATE refund_jobs", "TRUNCATE refund_jobs_keys", "DROP TRIGGER refund_jobs_fence", "DROP PROCEDURE refund_jobs_archive",
			"ALTER TABLE refund_jobs DROP COLUMN writer_attempt", "DELETE FROM refund_jobs", "DELETE FROM refund_jobs_keys",
			"DELETE FROM refunds", "DELETE FROM refund_observations", "INSERT INTO refund_jobs_archive SELECT * FROM refund_jobs",
			"UPDATE refund_jobs_keys SET job_created_at = NULL", "DROP TABLE refund_jobs_keys",
			"CREATE TRIGGER t BEFORE UPDATE ON refunds FOR EACH ROW SET NEW.status = 'requested'",
			"DELETE FROM provider_budgets", "TRUNCATE provider_budgets", "DROP TABLE provider_budgets",
			"ALTER TABLE provider_budgets DROP CONSTRAINT provider_budgets_tokens",
		} {
			_, err := appDB.Exec(q)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || (me.Number != 1142 && me.Number != 1370 && me.Number != 1044 && me.Number != 1227) {
				t.Errorf("%s as the application: %v, want a privilege error", q, err)
			}
		}
	})

	t.Run("the fences' attacks still fail", func(t *testing.T) {
		conn, err := appDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustExec(t, conn, "SET timestamp = UNIX_TIMESTAMP(SYSDATE(6)) + 60 * 86400")
		refused(t, conn, "the cutoff must be at least 30 days in the past", "CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 31 DAY)")
		// REPLACE needs DELETE, which the account lacks.
		//fencelint:allow proves REPLACE cannot reset a settled job, even for the application's account
		_, err = conn.ExecContext(ctx, "REPLACE INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
			"VALUES ('g-1', 'pay-1', 100, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
		if me := (*mysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != 1142 {
			t.Errorf("REPLACE as the application: %v, want a privilege error", err)
		}
		//fencelint:allow the zombie's write, as the application's account
		refused(t, conn, "is terminal and never changes", "UPDATE refund_jobs SET state = 'ready', writer_attempt = 2 WHERE operation_key = 'g-1'")
		refused(t, conn, "is settled and never changes", "UPDATE refunds SET status = 'requested' WHERE operation_key = 'g-1'")
		if got := mustJob(t, c, 1); got.State != refundjob.StateSucceeded {
			t.Fatalf("job is %s, want succeeded", got.State)
		}

		// The state machine's and the key window's attacks, on a job the
		// account enqueued and claimed itself (its lease is live, 30 s),
		// from a session whose clock is an hour ahead.
		req := ent.RefundJobEnqueue{OperationKey: "g-2", PaymentRef: "pay-2", AmountMinor: 200, Currency: "EUR"}
		job, _, err := c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, conn, "SET timestamp = UNIX_TIMESTAMP(SYSDATE(6)) + 3600")
		//fencelint:allow the attacks below are unfenced on purpose: the database must refuse each one, for this account too
		refused(t, conn, "a claim takes attempt+1", "UPDATE refund_jobs SET state = 'running', writer_attempt = 0, lease_until = UTC_TIMESTAMP(6) WHERE id = ?", job.ID)
		//fencelint:allow an attack: a key window pushed into the future keeps the key sendable for ever
		refused(t, conn, "key_first_used_at is set once", "UPDATE refund_jobs SET key_first_used_at = UTC_TIMESTAMP(6) + INTERVAL 1 DAY, writer_attempt = 0 WHERE id = ?", job.ID)
		// An attack: a second job for a key already enqueued.
		_, err = conn.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
			"VALUES ('g-1', 'pay-1', 100, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
		if err == nil {
			t.Error("a second job for g-1 was inserted by the application's account")
		}
		l, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// An attack fencelint cannot see (the statement is fenced): a takeover of a
		// live lease, by a session whose clock is an hour ahead.
		refused(t, conn, "a takeover needs a lease expired by the database clock", "UPDATE refund_jobs SET attempt = ?, writer_attempt = ?, lease_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE, "+
			"next_action = 'reconcile' WHERE id = ? AND state = 'running' AND attempt = ?", l.Attempt()+1, l.Attempt(), job.ID, l.Attempt())
		// Another: the key window erased on the way out, so that the next claim
		// would send a key the provider may have forgotten.
		refused(t, conn, "key_first_used_at is set once", "UPDATE refund_jobs SET state = 'ready', lease_until = NULL, key_first_used_at = NULL, writer_attempt = ? "+
			"WHERE id = ? AND state = 'running' AND attempt = ?", l.Attempt(), job.ID, l.Attempt())
		if got := mustJob(t, c, job.ID); got.State != refundjob.StateRunning || got.Attempt != l.Attempt() || got.KeyFirstUsedAt == nil {
			t.Fatalf("job g-2 is %s at attempt %d (key first used %v), want running at %d with its key window", got.State, got.Attempt, got.KeyFirstUsedAt, l.Attempt())
		}
	})
}

func mustJob(t *testing.T, c *ent.Client, id int64) *ent.RefundJob {
	t.Helper()
	j, err := c.RefundJob.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
