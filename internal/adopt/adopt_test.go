//go:build !tidb

package adopt_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/migrations"
)

// legacyTable is a team's refund_jobs as the article describes it, with
// narrower types than fencekit's, its own state and action names, and
// columns and an index of its own.
const legacyTable = "CREATE TABLE refund_jobs (" +
	"id INT NOT NULL AUTO_INCREMENT, " +
	"operation_key VARCHAR(64) NOT NULL, " +
	"payment_ref VARCHAR(128) NOT NULL, " +
	"amount_minor BIGINT NOT NULL, " +
	"currency CHAR(3) NOT NULL, " +
	"attempt INT NOT NULL DEFAULT 0, " +
	"state VARCHAR(32) NOT NULL DEFAULT 'pending', " +
	"lease_until DATETIME NULL, " +
	"next_action VARCHAR(16) NOT NULL DEFAULT 'refund', " +
	"provider_refund_id VARCHAR(255) NULL, " +
	"merchant_note TEXT NULL, " +
	"legacy_flag TINYINT NOT NULL DEFAULT 0, " +
	"PRIMARY KEY (id), KEY team_state (state)) CHARSET utf8mb4 COLLATE utf8mb4_bin"

// legacyRows has a row in every state, by the team's names.
var legacyRows = []string{
	"('k-pending', 'pay-1', 100, 'EUR', 0, 'pending', NULL, 'refund', NULL, 'first', 0)",
	"('k-processing', 'pay-2', 200, 'EUR', 3, 'processing', '2026-01-01 00:00:00', 'check', NULL, NULL, 1)",
	"('k-done', 'pay-3', 300, 'USD', 1, 'done', NULL, 'refund', 're_3', 'paid', 0)",
	"('k-error', 'pay-4', 400, 'USD', 2, 'error', NULL, 'refund', NULL, NULL, 0)",
	"('k-review', 'pay-5', 500, 'GBP', 1, 'review', NULL, 'check', NULL, 'ask finance', 1)",
	"('k-retry', 'pay-6', 600, 'GBP', 1, 'pending', NULL, 'check', NULL, NULL, 0)",
}

var (
	states  = map[string]string{"pending": "ready", "processing": "running", "done": "succeeded", "error": "failed", "review": "manual_review"}
	actions = map[string]string{"check": "reconcile"}
)

// legacyDB creates a fresh database with the legacy table and rows (after
// edit, when it is not nil, runs on it), and returns a raw pool on it.
func legacyDB(t *testing.T, edit func(db *sql.DB)) *sql.DB {
	t.Helper()
	db := emptyDB(t)
	exec(t, db, legacyTable)
	exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, attempt, state, lease_until, next_action, provider_refund_id, merchant_note, legacy_flag) VALUES "+strings.Join(legacyRows, ", "))
	if edit != nil {
		edit(db)
	}
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func options() adopt.Options {
	return adopt.Options{States: states, Actions: actions, BatchSize: 2}
}

// teamRow is what a row holds that the team wrote.
type teamRow struct {
	id                 int64
	key, state, action string
	attempt            int64
	note               sql.NullString
	flag               int
	provider           sql.NullString
	payment, currency  string
	amount             int64
}

func teamRows(t *testing.T, db *sql.DB) []teamRow {
	t.Helper()
	rows, err := db.Query("SELECT id, operation_key, state, next_action, attempt, merchant_note, legacy_flag, provider_refund_id, payment_ref, currency, amount_minor FROM refund_jobs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []teamRow
	for rows.Next() {
		var r teamRow
		if err := rows.Scan(&r.id, &r.key, &r.state, &r.action, &r.attempt, &r.note, &r.flag, &r.provider, &r.payment, &r.currency, &r.amount); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Plan prints the SQL, every step headed by what it locks and how to roll
// it back, and changes nothing: every table's definition and rows are the
// same afterwards.
func TestPlanPrintsSQLAndChangesNothing(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, nil)
	before := dbtest.Fingerprint(t, db)
	p, err := adopt.NewPlan(context.Background(), db, options())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := p.Format(&out, 2); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Step 1/", "add-columns", "ALGORITHM=INSTANT", "map-values", "WHEN 'processing' THEN 'running'",
		"modify-columns (online)", "ALTER TABLE `refund_jobs` MODIFY COLUMN `id` bigint NOT NULL AUTO_INCREMENT", "CREATE TABLE `_refund_jobs_new` LIKE `refund_jobs`",
		"CREATE TRIGGER `_refund_jobs_copy_upd` AFTER UPDATE ON `refund_jobs`", "LOCK IN SHARE MODE ON DUPLICATE KEY UPDATE",
		"RENAME TABLE `refund_jobs` TO `_refund_jobs_old`, `_refund_jobs_new` TO `refund_jobs`", "DROP TABLE `_refund_jobs_old` once", "add-indexes", "ALGORITHM=INPLACE, LOCK=NONE",
		"backfill-keys", "backfill-ledger", "observe-mode", "'observe'", "refundd fence mode enforce", "DELIMITER //",
		"CREATE TRIGGER `refund_jobs_fence`", "baseline", "Roll back:", "Locks:", "Expected: about",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, out.String())
		}
	}
	// The SQL runs as printed in the database it was planned for: nothing
	// names the scratch database the migrations were replayed in, nor the
	// account that replayed them.
	for _, never := range []string{"fencekit_scratch_", "DEFINER"} {
		if strings.Contains(out.String(), never) {
			t.Errorf("the plan names %s:\n%s", never, out.String())
		}
	}
	if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 {
		t.Fatalf("plan changed the database: %v", diff)
	}
}

// Apply keeps every row and every column of the team's, maps the states
// and actions, leaves fencekit's schema plus the team's own columns and
// index, and records the baseline: migrate is a no-op afterwards. The fence
// observes: a legacy UPDATE that declares no attempt goes through and is
// recorded, and a fenced worker claims and completes an adopted job.
func TestApplyAdoptsALegacyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	before := teamRows(t, db)
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatal(err)
	}
	after := teamRows(t, db)
	if len(after) != len(before) {
		t.Fatalf("%d rows before, %d after", len(before), len(after))
	}
	for i, b := range before {
		want := b
		want.state = states[b.state]
		if a, ok := actions[b.action]; ok {
			want.action = a
		}
		if after[i] != want {
			t.Errorf("row %d: %+v, want %+v", b.id, after[i], want)
		}
	}

	// The schema is fencekit's, with the team's own columns and index.
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the adopted schema differs from fencekit's beyond the team's own columns and index:\n%s", strings.Join(extra, "\n"))
	}
	if applied, err := migrations.Apply(ctx, db); err != nil || len(applied) != 0 {
		t.Fatalf("migrate after adopt: %v, %v (want a no-op)", applied, err)
	}
	if m, err := migrations.CurrentFenceMode(ctx, db); err != nil || m != migrations.FenceObserve {
		t.Fatalf("fence mode after adopt: %s, %v", m, err)
	}
	var keys, ledgerRows int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM refund_jobs_keys), (SELECT COUNT(*) FROM refunds)").Scan(&keys, &ledgerRows); err != nil || keys != len(before) || ledgerRows != len(before) {
		t.Fatalf("keys %d, ledger rows %d, want %d each (%v)", keys, ledgerRows, len(before), err)
	}
	// Running apply again has nothing left to do.
	p, err := adopt.NewPlan(ctx, db, options())
	if err == nil || !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "refundd migrate") {
		t.Fatalf("plan after adopt: %v %v", p, err)
	}

	// A legacy writer's catch block, declaring no attempt.
	//fencelint:allow a legacy writer's unfenced write, which the adopted fence lets through and records in observe mode: the test's subject
	exec(t, db, "UPDATE refund_jobs SET state = 'ready', merchant_note = 'retry' WHERE operation_key = 'k-processing'")
	var rule string
	if err := db.QueryRow("SELECT `rule` FROM refund_jobs_fence_violations WHERE `operation` = 'update'").Scan(&rule); err != nil || !strings.Contains(rule, "declare the attempt") {
		t.Fatalf("the legacy write was not recorded: %q, %v", rule, err)
	}

	// A fenced worker claims and completes an adopted job.
	client := dbtest.ClientOn(t, fencedDB(t, db))
	var id int64
	if err := db.QueryRow("SELECT id FROM refund_jobs WHERE operation_key = 'k-pending'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	lease, err := client.RefundJob.Claim(ctx, id, fencedwrite.ClaimOptions{Lease: 30 * time.Second})
	if err != nil {
		t.Fatalf("claim an adopted job: %v", err)
	}
	if err := client.RefundJob.Apply(ctx, lease.Complete("re_1"), ledger.Refunded("k-pending", "re_1")); err != nil {
		t.Fatalf("complete an adopted job: %v", err)
	}
	var state, status string
	if err := db.QueryRow("SELECT j.state, r.status FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE j.id = ?", id).Scan(&state, &status); err != nil || state != "succeeded" || status != "refunded" {
		t.Fatalf("adopted job after completion: %s, ledger %s (%v)", state, status, err)
	}
}

// fencedDB opens the fenced layer's pool on db's database.
func fencedDB(t *testing.T, db *sql.DB) *sql.DB {
	t.Helper()
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	f, err := fencedwrite.OpenDB(devdb.DSN(cfg, name), fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// schemaDiff lists what Atlas would change to make db's schema fencekit's
// (the migrations replayed), leaving out the team's own columns and index.
func schemaDiff(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return schemaDiffBut(t, db, []string{"merchant_note", "legacy_flag"}, []string{"team_state"})
}

// schemaDiffBut is schemaDiff leaving out the team's columns and indexes
// named.
func schemaDiffBut(t *testing.T, db *sql.DB, teamColumns, teamIndexes []string) []string {
	t.Helper()
	ctx := context.Background()
	target, err := migrations.ReplayTarget(ctx, db, mustDir(t))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	drv, err := atlasmysql.Open(conn)
	if err != nil {
		t.Fatal(err)
	}
	have, err := drv.InspectSchema(ctx, "", &schema.InspectOptions{Exclude: []string{migrations.RevisionTable}})
	if err != nil {
		t.Fatal(err)
	}
	from, to := *have, *target.Schema
	from.Name, to.Name, from.Attrs, to.Attrs = "", "", nil, nil
	changes, err := drv.SchemaDiff(&from, &to)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range changes {
		if d, ok := c.(*schema.DropTable); ok && (d.T.Name == adopt.OldTable || d.T.Name == adopt.OldTableWiden) {
			continue // the online copy's old table, kept for the operator to drop
		}
		if d, ok := c.(*schema.DropTable); ok && d.T.Name == adopt.RecordTable {
			continue // the adoption record, which rollback reads
		}
		m, ok := c.(*schema.ModifyTable)
		if !ok {
			out = append(out, fmt.Sprintf("%T", c))
			continue
		}
		for _, tc := range m.Changes {
			switch tc := tc.(type) {
			case *schema.DropColumn:
				if slices.Contains(teamColumns, tc.C.Name) {
					continue
				}
				out = append(out, m.T.Name+": drop column "+tc.C.Name)
			case *schema.DropIndex:
				if slices.Contains(teamIndexes, tc.I.Name) {
					continue
				}
				out = append(out, m.T.Name+": drop index "+tc.I.Name)
			default:
				plan, err := drv.PlanChanges(ctx, "x", []schema.Change{&schema.ModifyTable{T: m.T, Changes: []schema.Change{tc}}})
				if err == nil && len(plan.Changes) > 0 {
					out = append(out, plan.Changes[0].Cmd)
				} else {
					out = append(out, fmt.Sprintf("%s: %T", m.T.Name, tc))
				}
			}
		}
	}
	return out
}

func mustDir(t *testing.T) migrate.Dir {
	t.Helper()
	d, err := migrations.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// What adopting cannot decide, or would lose, is refused by name, and the
// database stays as it was.
func TestPlanRefusesWhatItCannotAdopt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		edit  func(*testing.T, *sql.DB)
		o     func(*adopt.Options)
		wants []string
	}{
		{"rows with a state no flag maps are named by id", nil, func(o *adopt.Options) {
			o.States = map[string]string{"pending": "ready", "processing": "running", "done": "succeeded", "error": "failed"}
		},
			[]string{`1 row(s) have state "review"`, "-states", "id 5"}},
		{"duplicate operation keys are named", func(t *testing.T, db *sql.DB) {
			exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state) VALUES ('k-done', 'pay-3', 300, 'USD', 'pending')")
		}, nil, []string{`2 rows share operation_key "k-done" (id 3,7)`}},
		{"a column fencekit would narrow", func(t *testing.T, db *sql.DB) {
			exec(t, db, "ALTER TABLE refund_jobs MODIFY operation_key VARCHAR(255) NOT NULL")
		}, nil, []string{"refund_jobs.operation_key is varchar(255)", "never narrows"}},
		{"a missing article column", func(t *testing.T, db *sql.DB) {
			exec(t, db, "ALTER TABLE refund_jobs DROP COLUMN lease_until")
		}, nil, []string{"has no column lease_until"}},
		{"a team column with a fencekit name and another type", func(t *testing.T, db *sql.DB) {
			exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN last_error INT NULL")
		}, nil, []string{"refund_jobs.last_error is int and fencekit's is longtext", "would be reinterpreted", "rename it if it is not fencekit's last_error"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := legacyDB(t, func(db *sql.DB) {
				if c.edit != nil {
					c.edit(t, db)
				}
			})
			o := options()
			if c.o != nil {
				c.o(&o)
			}
			before := dbtest.Fingerprint(t, db)
			_, err := adopt.Apply(context.Background(), db, o)
			if !errors.Is(err, adopt.ErrRefused) {
				t.Fatalf("apply: %v, want a refusal", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q:\n%v", w, err)
				}
			}
			if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 {
				t.Fatalf("a refused apply changed the database: %v", diff)
			}
		})
	}
}

// A legacy writer keeps writing while apply runs: between every batch and
// every step (the moments no lock of apply's is held), it updates a row,
// and every one of its writes is in the table at the end.
func TestApplyLosesNoConcurrentLegacyWrite(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, nil)
	writer := dbtest.OpenDSN(t, dsnOf(t, db))
	write, done := make(chan string), make(chan error)
	go func() {
		n := 0
		for step := range write {
			n++
			// The legacy writer's statement: no attempt declared, a
			// column of its own. In observe mode (after the fence step) it
			// goes through and is recorded.
			//fencelint:allow a legacy writer's unfenced write during adoption: the test's subject
			_, err := writer.Exec("UPDATE refund_jobs SET legacy_flag = legacy_flag + 1, merchant_note = ? WHERE operation_key = 'k-review'", fmt.Sprintf("write %d during %s", n, step))
			done <- err
		}
	}()
	writes := 0
	legacyWrite := func(step string) {
		write <- step
		if err := <-done; err != nil {
			t.Errorf("legacy write during %s: %v", step, err)
			return
		}
		writes++
	}
	o := options()
	o.Hooks = adopt.Hooks{
		AfterBatch: func(step string, lo, hi int64) { legacyWrite(fmt.Sprintf("%s batch %d-%d", step, lo, hi)) },
		AfterStep: func(step string) {
			legacyWrite(step)
			if step == "backfill-ledger" {
				// A legacy service enqueues a job after the backfills passed.
				exec(t, writer, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_action, next_run_at, created_at, updated_at) "+
					"VALUES ('k-late', 'pay-7', 700, 'EUR', 'ready', 'refund', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
			}
		},
	}
	_, err := adopt.Apply(context.Background(), db, o)
	close(write)
	if err != nil {
		t.Fatal(err)
	}
	var flag int
	var note string
	if err := db.QueryRow("SELECT legacy_flag, merchant_note FROM refund_jobs WHERE operation_key = 'k-review'").Scan(&flag, &note); err != nil {
		t.Fatal(err)
	}
	var keys, ledgerRows int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM refund_jobs_keys WHERE operation_key = 'k-late'), (SELECT COUNT(*) FROM refunds WHERE operation_key = 'k-late')").Scan(&keys, &ledgerRows); err != nil || keys != 1 || ledgerRows != 1 {
		t.Fatalf("the job a legacy writer inserted during apply: %d keys, %d ledger rows (%v), want one each", keys, ledgerRows, err)
	}
	if writes < 10 || flag != 1+writes || note != fmt.Sprintf("write %d during baseline", writes) {
		t.Fatalf("after %d legacy writes: legacy_flag %d (want %d), note %q", writes, flag, 1+writes, note)
	}
}

func dsnOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Clone()
	c.DBName = name
	return c.FormatDSN()
}

// A legacy writer that writes a team state name after its batch was mapped
// makes the type change fail (the enum has no such name): apply stops with
// a StepError saying how to go on, nothing is lost, and running apply
// again maps the row and finishes.
func TestApplyFailsRecoverablyAndContinues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	before := teamRows(t, db)
	o := options()
	o.Hooks.AfterStep = func(step string) {
		if step == "map-values" {
			//fencelint:allow a legacy writer still writing the team's names during adoption: the test's subject
			exec(t, db, "UPDATE refund_jobs SET state = 'pending' WHERE operation_key = 'k-pending'")
		}
	}
	_, err := adopt.Apply(ctx, db, o)
	var se *adopt.StepError
	if !errors.As(err, &se) || se.Step != "modify-columns" || !strings.Contains(err.Error(), "run `refundd adopt apply` again") {
		t.Fatalf("apply with a late team state name: %v", err)
	}
	if got := teamRows(t, db); len(got) != len(before) || got[0].state != "pending" || got[0].note != before[0].note {
		t.Fatalf("rows after the failed step: %+v", got)
	}
	// The failed copy dropped its triggers and its shadow table: a legacy
	// write of a team name goes on working until apply runs again.
	var leftovers int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE <> '" + adopt.RecordTable + "') + " +
		"(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '_refund_jobs_new')").Scan(&leftovers); err != nil || leftovers != 0 {
		t.Fatalf("the failed copy left %d triggers or shadow tables (%v)", leftovers, err)
	}
	//fencelint:allow a legacy writer still writing the team's names during adoption: the test's subject
	exec(t, db, "UPDATE refund_jobs SET state = 'pending' WHERE operation_key = 'k-retry'")
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatalf("apply again: %v", err)
	}
	if got := teamRows(t, db); got[0].state != "ready" || got[4].state != "manual_review" || got[4].note != before[4].note {
		t.Fatalf("rows after apply again: %+v", got)
	}
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the schema after apply again differs: %v", extra)
	}
	// The second run did what the first left undone: the times of every
	// row are backfilled.
	var epoch int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs WHERE YEAR(created_at) = 1970 OR YEAR(next_run_at) = 1970").Scan(&epoch); err != nil || epoch != 0 {
		t.Fatalf("%d rows kept the temporary times after apply again (%v)", epoch, err)
	}
}

// The article's minimum: only its seven columns and one of the team's.
// Apply adds the request's columns with empty strings and 0 (the plan says they
// must be filled in before fencekit refunds those jobs), and the schema is
// fencekit's.
func TestApplyAdoptsTheArticleMinimum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "DROP TABLE refund_jobs")
		exec(t, db, "CREATE TABLE refund_jobs (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, operation_key VARCHAR(128) NOT NULL, attempt BIGINT NOT NULL DEFAULT 0, "+
			"state ENUM('ready','running','succeeded','manual_review','failed') NOT NULL DEFAULT 'ready', lease_until DATETIME(6) NULL, "+
			"next_action ENUM('refund','reconcile') NOT NULL DEFAULT 'refund', provider_refund_id VARCHAR(255) NULL, merchant_note TEXT NULL, "+
			"UNIQUE KEY operation_key (operation_key)) CHARSET utf8mb4 COLLATE utf8mb4_bin")
		exec(t, db, "INSERT INTO refund_jobs (operation_key, attempt, state, next_action, provider_refund_id, merchant_note) VALUES "+
			"('a', 0, 'ready', 'refund', NULL, 'x'), ('b', 2, 'running', 'reconcile', NULL, NULL), ('c', 1, 'succeeded', 'refund', 're_c', 'y')")
	})
	p, err := adopt.NewPlan(ctx, db, adopt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := p.Format(&out, 100); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "NOTE: the table has no payment_ref") || strings.Contains(out.String(), "modify-columns") || strings.Contains(out.String(), "map-values") {
		t.Fatalf("plan:\n%s", out.String())
	}
	if _, err := adopt.Apply(ctx, db, adopt.Options{}); err != nil {
		t.Fatal(err)
	}
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the adopted schema differs: %v", extra)
	}
	var n int
	var first, last sql.NullTime
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE j.payment_ref = '' AND j.amount_minor = 0 AND " +
		"(j.merchant_note IS NOT NULL OR j.operation_key = 'b')").Scan(&n); err != nil || n != 3 {
		t.Fatalf("adopted rows with their ledger rows: %d (%v)", n, err)
	}
	if err := db.QueryRow("SELECT key_first_used_at, last_send_at FROM refund_jobs WHERE operation_key = 'b'").Scan(&first, &last); err != nil || !first.Valid || first.Time.Year() != 1970 || !last.Valid {
		t.Fatalf("a job claimed before adoption: key first used %v, last send %v (%v): want long ago, so it is reconciled, not sent", first, last, err)
	}
}

// A team whose request columns have other names copies them with -columns;
// a column that would not fit, or holds NULLs, is refused by name.
func TestApplyCopiesTheRequestFromTheTeamsColumns(t *testing.T) {
	t.Parallel()
	minimal := func(t *testing.T, amount string) func(db *sql.DB) {
		return func(db *sql.DB) {
			exec(t, db, "DROP TABLE refund_jobs")
			exec(t, db, "CREATE TABLE refund_jobs (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, operation_key VARCHAR(128) NOT NULL, attempt BIGINT NOT NULL DEFAULT 0, "+
				"state VARCHAR(16) NOT NULL, lease_until DATETIME(6) NULL, next_action VARCHAR(16) NOT NULL, provider_refund_id VARCHAR(255) NULL, "+
				"payment_id VARCHAR(64) NULL, amount_cents "+amount+" NOT NULL, currency_code CHAR(3) NOT NULL) CHARSET utf8mb4 COLLATE utf8mb4_bin")
			exec(t, db, "INSERT INTO refund_jobs (operation_key, state, next_action, payment_id, amount_cents, currency_code) VALUES "+
				"('a', 'ready', 'refund', 'pay-a', 1250, 'EUR'), ('b', 'succeeded', 'refund', 'pay-b', 99, 'USD')")
		}
	}
	columns := map[string]string{"payment_ref": "payment_id", "amount_minor": "amount_cents", "currency": "currency_code"}
	t.Run("the request is copied from the team's columns, which stay", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		db := legacyDB(t, minimal(t, "INT"))
		if _, err := adopt.Apply(ctx, db, adopt.Options{Columns: columns}); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRow("SELECT GROUP_CONCAT(CONCAT_WS('/', j.payment_ref, j.amount_minor, j.currency, j.payment_id, j.amount_cents, k.payment_ref, r.amount_minor) ORDER BY j.id) " +
			"FROM refund_jobs j JOIN refund_jobs_keys k USING (operation_key) JOIN refunds r USING (operation_key)").Scan(&got); err != nil ||
			got != "pay-a/1250/EUR/pay-a/1250/pay-a/1250,pay-b/99/USD/pay-b/99/pay-b/99" {
			t.Fatalf("copied request: %q (%v)", got, err)
		}
	})
	t.Run("an amount that is not an integer is refused", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, minimal(t, "DECIMAL(10,2)"))
		_, err := adopt.NewPlan(context.Background(), db, adopt.Options{Columns: columns})
		if !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "-columns amount_minor=amount_cents: refund_jobs.amount_cents is decimal(10,2)") {
			t.Fatalf("plan: %v", err)
		}
	})
	t.Run("NULLs where fencekit needs a value are refused by id", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			minimal(t, "INT")(db)
			//fencelint:allow the team's legacy table before adoption, which has no fence yet
			exec(t, db, "UPDATE refund_jobs SET payment_id = NULL WHERE operation_key = 'b'")
		})
		_, err := adopt.NewPlan(context.Background(), db, adopt.Options{Columns: columns})
		if !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "refund_jobs.payment_id is NULL in rows with id 2") {
			t.Fatalf("plan: %v", err)
		}
	})
}

// The migration account adopts: its grants on the database, and the
// scratch databases' (migrations.ScratchGrants), without LOCK TABLES (the
// triggers are then created without the lock).
func TestApplyWithTheMigrationAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := legacyDB(t, nil)
	var name string
	if err := root.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg := dbtest.Account(t, root, name, func(db, account string) []string {
		return append(migrations.MigrationGrants(db, account), migrations.ScratchGrants(account)...)
	})
	cfg.ParseTime = true
	db := dbtest.OpenDSN(t, cfg.FormatDSN())
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatalf("apply with the migration account: %v", err)
	}
	if applied, err := migrations.Apply(ctx, db); err != nil || len(applied) != 0 {
		t.Fatalf("migrate after adopt: %v, %v", applied, err)
	}
	if extra := schemaDiff(t, root); len(extra) > 0 {
		t.Fatalf("the adopted schema differs: %v", extra)
	}
}

// The legacy application of testdata/legacy (the article's queue with the
// team's own columns, utf8mb4 with the server's default collation): adopt
// copies the request from the team's columns, leaves fencekit's schema
// beside the team's columns and indexes, and fencekit's layer enqueues,
// claims and completes on it.
func TestApplyAdoptsTheLegacyApplication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaSQL, err := os.ReadFile("../../testdata/legacy/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "DROP TABLE refund_jobs")
		exec(t, db, string(schemaSQL))
		exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_id, amount_cents, currency, attempt, state, lease_until, next_action, merchant_note) VALUES "+
			"('a', 'pay-a', 100, 'EUR', 0, 'ready', NULL, 'refund', 'n'), ('b', 'pay-b', 200, 'EUR', 2, 'running', UTC_TIMESTAMP(), 'reconcile', NULL), "+
			"('c', 'pay-c', 300, 'USD', 1, 'succeeded', NULL, 'refund', NULL)")
	})
	o := adopt.Options{Columns: map[string]string{"payment_ref": "payment_id", "amount_minor": "amount_cents", "created_at": "created"}}
	p, err := adopt.NewPlan(ctx, db, o)
	if err != nil {
		t.Fatal(err)
	}
	var plan bytes.Buffer
	if err := p.Format(&plan, 100); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the team's column payment_id is NOT NULL without a default", "the team's column amount_cents is NOT NULL without a default",
		"DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "MODIFY COLUMN `currency` char(3) NOT NULL COLLATE utf8mb4_bin"} {
		if !strings.Contains(plan.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan.String())
		}
	}
	if _, err := adopt.Apply(ctx, db, o); err != nil {
		t.Fatal(err)
	}
	if extra := schemaDiffBut(t, db, []string{"payment_id", "amount_cents", "merchant_note", "legacy_flag", "created"}, []string{"uk_operation_key", "idx_state_lease"}); len(extra) > 0 {
		t.Fatalf("the adopted schema differs from fencekit's beyond the team's own columns and indexes:\n%s", strings.Join(extra, "\n"))
	}
	// What the plan's note tells the team to do for fencekit's enqueues.
	exec(t, db, "ALTER TABLE refund_jobs ALTER COLUMN payment_id SET DEFAULT '', ALTER COLUMN amount_cents SET DEFAULT 0")
	client := dbtest.ClientOn(t, fencedDB(t, db))
	req := ent.RefundJobEnqueue{OperationKey: "new", PaymentRef: "pay-new", AmountMinor: 500, Currency: "EUR"}
	if _, _, err := client.RefundJob.Enqueue(ctx, req, ledger.Open(req)); err != nil {
		t.Fatalf("enqueue on the adopted table: %v", err)
	}
	var id int64
	if err := db.QueryRow("SELECT id FROM refund_jobs WHERE operation_key = 'a'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	lease, err := client.RefundJob.Claim(ctx, id, fencedwrite.ClaimOptions{Lease: 30 * time.Second})
	if err != nil {
		t.Fatalf("claim an adopted job: %v", err)
	}
	if err := client.RefundJob.Apply(ctx, lease.Complete("re_a"), ledger.Refunded("a", "re_a")); err != nil {
		t.Fatalf("complete an adopted job: %v", err)
	}
}

// With -keep-defaults a legacy INSERT that knows none of fencekit's columns
// goes on working while the fence observes; the statements the plan lists
// drop the defaults later, and the schema is then fencekit's.
func TestApplyKeepsDefaultsForLegacyInserts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	o := options()
	o.KeepDefaults = true
	res, err := adopt.Apply(ctx, db, o)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_action, merchant_note) VALUES ('legacy-new', 'pay-9', 900, 'EUR', 'ready', 'refund', 'a legacy enqueue')")
	var keys int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs_keys WHERE operation_key = 'legacy-new'").Scan(&keys); err != nil || keys != 1 {
		t.Fatalf("the legacy enqueue's key: %d registrations (%v)", keys, err)
	}
	var later []string
	for _, n := range res.Plan.Notes {
		if _, stmts, ok := strings.Cut(n, "(metadata only; the schema is fencekit's exactly only then): "); ok {
			later = strings.Split(stmts, "; ")
		}
	}
	if len(later) == 0 {
		t.Fatalf("the plan does not say how to drop the defaults later: %v", res.Plan.Notes)
	}
	if extra := schemaDiff(t, db); len(extra) == 0 {
		t.Fatal("the schema is fencekit's while the temporary defaults are kept: the check cannot see them")
	}
	for _, q := range later {
		exec(t, db, q)
	}
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the schema after dropping the defaults differs: %v", extra)
	}
}

// The adoption record is read back into DDL by rollback: a legacy account
// with every privilege on the database cannot add a row to it, nobody
// changes or deletes one, and a record changed behind its triggers' back
// (an account that dropped them) is refused, not run.
func TestTheAdoptionRecordIsTheMigrationAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg := dbtest.Account(t, db, name, func(db, account string) []string {
		return []string{fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO %s", db, account)}
	})
	team := dbtest.OpenDSN(t, cfg.FormatDSN())
	_, err := team.Exec("INSERT INTO " + adopt.RecordTable + " (`event`, `detail`, `at`) VALUES ('started', '{}', NOW())")
	if !dbtest.IsTriggerRefusal(err, "only the migration account writes the adoption record") {
		t.Errorf("the team's account adds to the record: %v", err)
	}
	for _, q := range []string{
		"UPDATE " + adopt.RecordTable + " SET `detail` = '{}'",
		"DELETE FROM " + adopt.RecordTable,
	} {
		for _, conn := range []*sql.DB{team, db} {
			if _, err := conn.Exec(q); !dbtest.IsTriggerRefusal(err, "the adoption record") {
				t.Errorf("%s: %v, want the record's refusal", q, err)
			}
		}
	}
	// Behind the triggers' back: a default that is a statement.
	exec(t, db, "DROP TRIGGER "+adopt.RecordTable+"_append_only")
	exec(t, db, "UPDATE "+adopt.RecordTable+" SET `detail` = JSON_SET(`detail`, '$.columns[0].default', '0; DROP TABLE refunds') WHERE `event` = 'started'")
	if _, err := adopt.NewRollbackPlan(ctx, db, options()); !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "DROP TABLE refunds") || !strings.Contains(err.Error(), "not a literal") {
		t.Fatalf("rollback of a tampered record: %v, want a refusal naming the default", err)
	}
}
