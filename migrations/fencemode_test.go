//go:build !tidb

// The fence's rollout mode needs triggers: MySQL and MariaDB only.

package migrations_test

import (
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/migrations"
)

// legacyWriter opens an account that writes refund_jobs the way a legacy
// service of the team does: the application's grants, its own name, and
// raw SQL that declares no attempt.
func legacyWriter(t *testing.T, d *dbtest.DB, program string) (*sql.DB, string) {
	t.Helper()
	cfg := dbtest.Account(t, d.RawDB(), d.Name, migrations.AppGrants)
	cfg.ParseTime = true
	cfg.ConnectionAttributes = "program_name:" + program
	return dbtest.OpenDSN(t, cfg.FormatDSN()), cfg.User
}

// violations returns the rows of the violations table, oldest first.
func violations(t *testing.T, raw *sql.DB) []map[string]string {
	t.Helper()
	rows, err := raw.Query("SELECT `operation`, COALESCE(`row_id`, ''), `rule`, COALESCE(`old_state`, ''), COALESCE(`new_state`, ''), " +
		"COALESCE(`old_attempt`, ''), COALESCE(`new_attempt`, ''), COALESCE(`declared_attempt`, ''), `account`, `connection_id`, COALESCE(`statement`, ''), COALESCE(`changed_columns`, '') " +
		"FROM `" + ent.RefundJobFenceViolationsTable + "` ORDER BY `id`")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		v := make([]string, 12)
		dest := make([]any, len(v))
		for i := range v {
			dest[i] = &v[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]string{"operation": v[0], "row": v[1], "rule": v[2], "old_state": v[3], "new_state": v[4],
			"old_attempt": v[5], "new_attempt": v[6], "declared": v[7], "account": v[8], "connection": v[9], "statement": v[10], "changed": v[11]})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// statementsRecorded reports whether the server records the statement a
// session runs (performance_schema on, with its events_statements_current
// consumer): MySQL 8 does by default, MariaDB does not.
func statementsRecorded(t *testing.T, raw *sql.DB) bool {
	t.Helper()
	var on bool
	err := raw.QueryRow("SELECT @@performance_schema AND EXISTS (SELECT 1 FROM performance_schema.setup_consumers WHERE NAME = 'events_statements_current' AND ENABLED = 'YES')").Scan(&on)
	return err == nil && on
}

func connectionID(t *testing.T, db *sql.Conn) string {
	t.Helper()
	var id string
	if err := db.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A new database enforces. In observe mode, a legacy writer's write that
// the fence would refuse goes through and is recorded with what identifies
// the writer (its account and host, its connection, the statement) and the
// rule it broke; back in enforce mode it is refused again. Every change of
// mode is recorded, with its reason and who made it.
func TestFenceObserveRecordsTheWritesItLetsThrough(t *testing.T) {
	d := dbtest.New(t)
	raw := d.RawDB()
	ctx := t.Context()
	if m, err := migrations.CurrentFenceMode(ctx, raw); err != nil || m != migrations.FenceEnforce {
		t.Fatalf("a new database's fence is %q (%v), want enforce", m, err)
	}
	legacy, user := legacyWriter(t, d, "legacy-worker")
	conn, err := legacy.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := newJob(t, raw, "legacy-1")
	const catchBlock = "UPDATE refund_jobs SET state = 'running', attempt = attempt + 1, lease_until = " + clock + " WHERE id = ?"
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	if _, err := conn.ExecContext(ctx, catchBlock, id); !dbtest.IsTriggerRefusal(err, "an UPDATE must declare the attempt it holds") {
		t.Fatalf("a legacy claim in enforce mode: %v, want the fence's refusal", err)
	}

	if from, err := migrations.SetFenceMode(ctx, raw, migrations.FenceObserve, "rollout: find the legacy writers"); err != nil || from != migrations.FenceEnforce {
		t.Fatalf("switch to observe: from %q, %v", from, err)
	}
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	if _, err := conn.ExecContext(ctx, catchBlock, id); err != nil {
		t.Fatalf("a legacy claim in observe mode: %v, want it let through", err)
	}
	if got := rowOf(t, raw, id); !strings.Contains(strings.Join(got, ","), "running") {
		t.Fatalf("the legacy write did not land: %v", got)
	}
	vs := violations(t, raw)
	if len(vs) != 1 {
		t.Fatalf("%d violations recorded, want 1: %v", len(vs), vs)
	}
	v := vs[0]
	for field, want := range map[string]string{"operation": "update", "old_state": "ready", "new_state": "running", "old_attempt": "0",
		"new_attempt": "1", "declared": "", "connection": connectionID(t, conn)} {
		if v[field] != want {
			t.Errorf("violation %s = %q, want %q", field, v[field], want)
		}
	}
	if !strings.HasPrefix(v["account"], user+"@") {
		t.Errorf("violation account %q, want %s@host", v["account"], user)
	}
	if !strings.Contains(v["rule"], "must declare the attempt it holds") || v["changed"] != "state,attempt,lease_until" {
		t.Errorf("violation %v does not name the rule and the columns the write changed", v)
	}
	if statementsRecorded(t, raw) && !strings.Contains(v["statement"], "UPDATE refund_jobs SET state = 'running'") {
		t.Errorf("violation %v does not name the statement, which performance_schema records", v)
	}

	if _, err := migrations.SetFenceMode(ctx, raw, migrations.FenceEnforce, "rollout done: every writer declares its attempt"); err != nil {
		t.Fatal(err)
	}
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	refused(t, conn, "an UPDATE must declare the attempt it holds", "UPDATE refund_jobs SET last_error = 'x' WHERE id = ?", id)
	changes, err := migrations.FenceModeChanges(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].From != migrations.FenceEnforce || changes[0].To != migrations.FenceObserve ||
		changes[0].Reason != "rollout: find the legacy writers" || !strings.HasPrefix(changes[0].Account, "root@") ||
		changes[1].To != migrations.FenceEnforce {
		t.Fatalf("mode changes %+v, want enforce → observe → enforce, each with its reason and account", changes)
	}
	if n := len(violations(t, raw)); n != 1 {
		t.Fatalf("%d violations after enforce, want the one recorded in observe mode", n)
	}
}

// Observe mode covers every rule of the job table: a job inserted other
// than ready at attempt 0, and a job deleted outside the archival path, go
// through and are recorded.
func TestFenceObserveCoversInsertsAndDeletes(t *testing.T) {
	d := dbtest.New(t)
	raw := d.RawDB()
	ctx := t.Context()
	if _, err := migrations.SetFenceMode(ctx, raw, migrations.FenceObserve, "rollout"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, next_run_at, created_at, updated_at) "+
		"VALUES ('legacy-running', 'pay-1', 500, 'EUR', 'running', 3, "+clock+", "+clock+", "+clock+")"); err != nil {
		t.Fatalf("a legacy insert in observe mode: %v", err)
	}
	id := newJob(t, raw, "legacy-delete")
	if _, err := raw.ExecContext(ctx, "DELETE FROM refund_jobs WHERE id = ?", id); err != nil {
		t.Fatalf("a legacy delete in observe mode: %v", err)
	}
	vs := violations(t, raw)
	if len(vs) != 2 || vs[0]["operation"] != "insert" || !strings.Contains(vs[0]["rule"], "born ready at attempt 0") ||
		vs[1]["operation"] != "delete" || !strings.Contains(vs[1]["rule"], "only archived terminal jobs") {
		t.Fatalf("violations %v, want the insert and the delete", vs)
	}
}

// Fenced writers never write over each other, in either mode: their WHERE
// clause is their fence. A zombie's completion after a takeover matches no
// row in observe mode too, and leaves nothing to record.
func TestFencedWritersAreFencedInEitherMode(t *testing.T) {
	for _, mode := range []migrations.FenceMode{migrations.FenceEnforce, migrations.FenceObserve} {
		t.Run(string(mode), func(t *testing.T) {
			d := dbtest.New(t)
			raw := d.RawDB()
			ctx := t.Context()
			if mode == migrations.FenceObserve {
				if _, err := migrations.SetFenceMode(ctx, raw, mode, "rollout"); err != nil {
					t.Fatal(err)
				}
			}
			_, a := appAccount(t, d)
			_, b := appAccount(t, d)
			p := ent.RefundJobEnqueue{OperationKey: "zombie", PaymentRef: "pay-z", AmountMinor: 900, Currency: "EUR"}
			job, _, err := a.RefundJob.Enqueue(ctx, p, ledger.Open(p))
			if err != nil {
				t.Fatal(err)
			}
			zombie, err := a.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			var expired bool
			for !expired { // the lease is one microsecond: it has expired by the database clock once read
				if err := raw.QueryRow("SELECT lease_until < "+clock+" FROM refund_jobs WHERE id = ?", job.ID).Scan(&expired); err != nil {
					t.Fatal(err)
				}
			}
			holder, err := b.RefundJob.Takeover(ctx, job.ID, fencedwrite.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.RefundJob.Apply(ctx, holder.Complete("re_b"), ledger.Refunded("zombie", "re_b")); err != nil {
				t.Fatal(err)
			}
			err = a.RefundJob.Apply(ctx, zombie.Reschedule(refundjob.NextActionRefund, 0, "", "zombie's catch block"), nil)
			if !errors.Is(err, fencedwrite.ErrSuperseded) {
				t.Fatalf("the zombie's reschedule: %v, want ErrSuperseded", err)
			}
			if got, err := b.RefundJob.Get(ctx, job.ID); err != nil || got.State != refundjob.StateSucceeded || got.Attempt != 2 {
				t.Fatalf("the job is %v (%v), want succeeded at attempt 2", got, err)
			}
			if vs := violations(t, raw); len(vs) != 0 {
				t.Fatalf("violations %v: a fenced write that matches no row breaks no rule", vs)
			}
		})
	}
}

// The application's account cannot change the mode, nor touch the record of
// violations or of mode changes; nobody can rewrite either record; a change
// needs a reason.
func TestFenceModeBelongsToTheMigrationAccount(t *testing.T) {
	d := dbtest.New(t)
	raw := d.RawDB()
	ctx := t.Context()
	app, _ := appAccount(t, d)
	denied := func(db *sql.DB, q string) {
		t.Helper()
		_, err := db.ExecContext(ctx, q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1142 {
			t.Errorf("%s as the application: %v, want access denied (1142)", q, err)
		}
	}
	denied(app, "UPDATE `"+ent.RefundJobFenceModeTable+"` SET `mode` = 'observe', `reason` = 'sneaky' WHERE `id` = 1")
	denied(app, "DELETE FROM `"+ent.RefundJobFenceViolationsTable+"`")
	denied(app, "INSERT INTO `"+ent.RefundJobFenceViolationsTable+"` (`observed_at`, `operation`, `rule`, `account`, `connection_id`) VALUES (NOW(), 'update', 'x', 'x', 1)")
	denied(app, "UPDATE `"+ent.RefundJobFenceModeChangesTable+"` SET `reason` = 'x'")
	if m, err := migrations.CurrentFenceMode(ctx, app); err != nil || m != migrations.FenceEnforce {
		t.Errorf("the application reads the mode as %q (%v), want enforce", m, err)
	}

	if _, err := migrations.SetFenceMode(ctx, raw, migrations.FenceObserve, ""); !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(err.Error(), "reason") {
		t.Errorf("a change without a reason: %v, want it refused naming the reason", err)
	}
	if _, err := migrations.SetFenceMode(ctx, raw, "audit", "x"); !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(err.Error(), "mode: must be enforce or observe") {
		t.Errorf("an unknown mode: %v, want it refused naming the mode", err)
	}
	refused(t, raw, "a change of mode gives a new reason", "UPDATE `"+ent.RefundJobFenceModeTable+"` SET `mode` = 'observe' WHERE `id` = 1")
	if _, err := migrations.SetFenceMode(ctx, raw, migrations.FenceObserve, "rollout"); err != nil {
		t.Fatal(err)
	}
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	if _, err := raw.ExecContext(ctx, "UPDATE refund_jobs SET last_error = 'legacy' WHERE id = ?", newJob(t, raw, "k")); err != nil {
		t.Fatal(err)
	}
	refused(t, raw, "the record of violations is append-only", "UPDATE `"+ent.RefundJobFenceViolationsTable+"` SET `rule` = 'nothing to see'")
	refused(t, raw, "the record of violations is append-only", "DELETE FROM `"+ent.RefundJobFenceViolationsTable+"`")
	refused(t, raw, "the record of mode changes is append-only", "DELETE FROM `"+ent.RefundJobFenceModeChangesTable+"`")
	refused(t, raw, "the mode is changed, never deleted", "DELETE FROM `"+ent.RefundJobFenceModeTable+"`")
	if from, err := migrations.SetFenceMode(ctx, raw, migrations.FenceObserve, "again"); err != nil || from != migrations.FenceObserve {
		t.Errorf("switching to the mode in force: from %q, %v", from, err)
	}
	if changes, _ := migrations.FenceModeChanges(ctx, raw); len(changes) != 1 {
		t.Errorf("%d changes recorded, want 1: switching to the mode in force records nothing", len(changes))
	}
}

// The report groups the recorded writes by writer, rule and statement
// shape, the most frequent first, so that each legacy writer shows once per
// piece of code whatever rows and values it wrote.
func TestFenceReportGroupsByWriterAndRule(t *testing.T) {
	d := dbtest.New(t)
	raw := d.RawDB()
	ctx := t.Context()
	if _, err := migrations.SetFenceMode(ctx, raw, migrations.FenceObserve, "rollout"); err != nil {
		t.Fatal(err)
	}
	cron, cronUser := legacyWriter(t, d, "refund-cron")
	panel, panelUser := legacyWriter(t, d, "admin-panel")
	for i := range 3 {
		id := newJob(t, raw, "cron-"+string(rune('a'+i)))
		//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
		if _, err := cron.ExecContext(ctx, "UPDATE refund_jobs SET last_error = ? WHERE id = ?", "retry "+string(rune('a'+i)), id); err != nil {
			t.Fatal(err)
		}
	}
	id := newJob(t, raw, "panel")
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	if _, err := panel.ExecContext(ctx, "UPDATE refund_jobs SET next_run_at = next_run_at + INTERVAL 1 DAY WHERE id = "+strconv.FormatInt(id, 10)); err != nil {
		t.Fatal(err)
	}
	groups, err := migrations.FenceReport(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 {
		t.Fatalf("%d groups, want the cron's and the panel's: %+v", len(groups), groups)
	}
	g := groups[0]
	wantShape := "update changing last_error"
	if statementsRecorded(t, raw) {
		//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
		wantShape = "UPDATE refund_jobs SET last_error = ? WHERE id = ?"
	}
	if !strings.HasPrefix(g.Account, cronUser+"@") || g.Count != 3 || g.Shape != wantShape ||
		g.Rule != "refund_jobs#N: an UPDATE must declare the attempt it holds: SET writer_attempt = N" || len(g.Rows) != 3 || g.Operation != "update" {
		t.Errorf("first group %+v, want the cron's three writes of one shape and rule", g)
	}
	if statementsRecorded(t, raw) && (g.Program != "refund-cron" || groups[1].Program != "admin-panel") {
		t.Errorf("programs %q and %q, want the names each client sent in its connection attributes", g.Program, groups[1].Program)
	}
	if g := groups[1]; !strings.HasPrefix(g.Account, panelUser+"@") || g.Count != 1 || g.Shape != "update changing next_run_at" && !strings.Contains(g.Shape, "INTERVAL ? DAY WHERE id = ?") {
		t.Errorf("second group %+v, want the panel's write", g)
	}
}
