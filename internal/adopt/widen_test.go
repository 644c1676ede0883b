//go:build !tidb

package adopt_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/ledger"
)

// commonestTable is the legacy refund_jobs a tester wrote without looking
// at fencekit's: a VARCHAR(64) payment reference, second-precision
// DATETIMEs with the team's defaults (an ON UPDATE too), a state name of the
// team's own and a note column.
const commonestTable = "CREATE TABLE refund_jobs (" +
	"id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, operation_key VARCHAR(64) NOT NULL, payment_ref VARCHAR(64) NOT NULL, " +
	"amount_minor BIGINT NOT NULL, currency CHAR(3) NOT NULL, attempt INT NOT NULL DEFAULT 0, state VARCHAR(32) NOT NULL DEFAULT 'ready', " +
	"lease_until DATETIME NULL, next_action VARCHAR(16) NOT NULL DEFAULT 'refund', next_run_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, " +
	"provider_refund_id VARCHAR(128) NULL, merchant_note VARCHAR(255) NULL, created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, " +
	"updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, UNIQUE KEY uk (operation_key)) DEFAULT CHARSET=utf8mb4"

// emptyDB creates a fresh database on the test server and returns a raw
// pool on it.
func emptyDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name, drop, err := devdb.Create(context.Background(), cfg, "adopt")
	if err != nil {
		t.Fatalf("no usable server (%s): %v", devdb.EnvDSN, err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	c := cfg.Clone()
	c.DBName = name
	c.ParseTime = true
	return dbtest.OpenDSN(t, c.FormatDSN())
}

// insertRows inserts n rows with values(i) for columns, 500 a statement.
func insertRows(t *testing.T, db *sql.DB, columns string, n int, values func(i int) string) {
	t.Helper()
	for lo := 1; lo <= n; lo += 500 {
		var rows []string
		for i := lo; i < lo+500 && i <= n; i++ {
			rows = append(rows, values(i))
		}
		exec(t, db, "INSERT INTO refund_jobs ("+columns+") VALUES "+strings.Join(rows, ", "))
	}
}

// rowsOf reads every row's values of columns as text, by id, times
// without trailing zero fractions (a DATETIME made DATETIME(6) holds the
// same instant).
func rowsOf(t *testing.T, db *sql.DB, columns string) map[int64]string {
	t.Helper()
	rows, err := db.Query("SELECT id, CONCAT_WS('|', " + columns + ") FROM refund_jobs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var v sql.NullString
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[id] = strings.ReplaceAll(v.String, ".000000", "")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The tester's table is adopted as it is: its VARCHAR(64) and DATETIME
// columns are widened online, every row and every team column kept, the
// team's defaults kept with -keep-defaults; and a job the legacy
// application inserts after adoption is claimed, sent and settled by a
// fenced worker, with its ledger row.
func TestApplyAdoptsTheCommonestLegacyShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptyDB(t)
	exec(t, db, commonestTable)
	insertRows(t, db, "operation_key, payment_ref, amount_minor, currency, state, merchant_note, next_run_at, created_at, updated_at", 2000, func(i int) string {
		state := "ready"
		if i%10 == 0 {
			state = "retry_wait"
		}
		return fmt.Sprintf("('k-%d', 'pay-%d', %d, 'EUR', '%s', 'note %d', '2026-11-01 10:%02d:%02d', '2026-10-01 09:00:00', '2026-10-02 09:00:00')", i, i, 100+i, state, i, i%60, i%60)
	})
	const teamColumns = "operation_key, payment_ref, amount_minor, currency, merchant_note, next_run_at, created_at, updated_at, attempt, lease_until, provider_refund_id"
	before := rowsOf(t, db, teamColumns)

	// Without a mapping for retry_wait, the plan names it in its first run,
	// and nothing else: the widenings are no reason to refuse.
	_, err := adopt.NewPlan(ctx, db, adopt.Options{})
	if !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), `200 row(s) have state "retry_wait"`) || strings.Contains(err.Error(), "payment_ref") || strings.Contains(err.Error(), "next_run_at") {
		t.Fatalf("plan without -states: %v", err)
	}
	o := adopt.Options{States: map[string]string{"retry_wait": "ready"}, KeepDefaults: true, BatchSize: 700}
	p, err := adopt.NewPlan(ctx, db, o)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := p.Format(&text, o.BatchSize); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Step 0: pre-flight", `state "retry_wait"`, "next_run_at (datetime to datetime(6))", "values gain 6 fractional digits", "MODIFY COLUMN `payment_ref` varchar(128)", "updated_at loses its ON UPDATE"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	copied := false
	o.Hooks.ShadowCopy = func(string, error) { copied = true }
	if _, err := adopt.Apply(ctx, db, o); err != nil {
		t.Fatal(err)
	}
	if !copied {
		t.Fatal("the widening did not go through the online copy")
	}
	for col, want := range map[string]string{"payment_ref": "varchar(128)", "next_run_at": "datetime(6)", "created_at": "datetime(6)", "updated_at": "datetime(6)", "attempt": "bigint"} {
		if got := columnType(t, db, "refund_jobs", col); !strings.HasPrefix(got, want) {
			t.Errorf("%s is %s, want %s", col, got, want)
		}
	}
	after := rowsOf(t, db, teamColumns)
	if len(after) != len(before) {
		t.Fatalf("%d rows before, %d after", len(before), len(after))
	}
	for id, b := range before {
		if after[id] != b {
			t.Fatalf("row %d: %q, want %q", id, after[id], b)
		}
	}
	var mapped int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs WHERE state = 'ready'").Scan(&mapped); err != nil || mapped != 2000 {
		t.Fatalf("%d ready rows, want 2000 (%v)", mapped, err)
	}

	// The legacy application's INSERT still works (-keep-defaults kept the
	// team's defaults), and a fenced worker settles that job: its ledger
	// row is opened as it settles.
	exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, merchant_note) VALUES ('legacy-after', 'pay-after', 1234, 'EUR', 'inserted by the legacy app')")
	client := dbtest.ClientOn(t, fencedDB(t, db))
	var id int64
	if err := db.QueryRow("SELECT id FROM refund_jobs WHERE operation_key = 'legacy-after'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	lease, err := client.RefundJob.Claim(ctx, id, fencedwrite.ClaimOptions{Lease: 30 * time.Second})
	if err != nil {
		t.Fatalf("claim the job the legacy application inserted: %v", err)
	}
	if err := client.RefundJob.Apply(ctx, lease.Complete("re_after"), ledger.Refunded("legacy-after", "re_after")); err != nil {
		t.Fatalf("settle the job the legacy application inserted: %v", err)
	}
	var state, status, note string
	var amount int64
	if err := db.QueryRow("SELECT j.state, r.status, r.amount_minor, j.merchant_note FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE j.id = ?", id).Scan(&state, &status, &amount, &note); err != nil ||
		state != "succeeded" || status != "refunded" || amount != 1234 || note != "inserted by the legacy app" {
		t.Fatalf("the legacy job after settling: %s, ledger %s of %d, note %q (%v)", state, status, amount, note, err)
	}
}

// A team TIMESTAMP becomes fencekit's DATETIME(6) holding the same instant
// in UTC, whatever the time zone of the session that wrote it, even for a
// row a legacy writer inserts in its own zone while the online copy runs
// (the copy's triggers run in that writer's session).
func TestApplyKeepsATimestampsInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN next_run_at TIMESTAMP NULL DEFAULT NULL")
	})
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET time_zone = '+05:00'", "UPDATE refund_jobs SET next_run_at = '2026-06-01 15:00:00'"} { //fencelint:allow the team's own writes, before adoption
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	o := options()
	o.Hooks.AfterBatch = func(step string, lo, hi int64) {
		if step != "modify-columns" || lo > 1 {
			return
		}
		// A legacy writer in +05:00 inserts while the copy runs.
		if _, err := conn.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_run_at) VALUES ('k-during', 'p', 1, 'EUR', 'ready', '2026-06-01 16:30:00')"); err != nil {
			t.Error(err)
		}
	}
	if _, err := adopt.Apply(ctx, db, o); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT operation_key, CAST(next_run_at AS CHAR) FROM refund_jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key, at string
		if err := rows.Scan(&key, &at); err != nil {
			t.Fatal(err)
		}
		want := "2026-06-01 10:00:00.000000" // 15:00 at +05:00
		if key == "k-during" {
			want = "2026-06-01 11:30:00.000000"
		}
		if at != want {
			t.Errorf("%s: next_run_at %s, want %s (UTC)", key, at, want)
		}
		n++
	}
	if n != len(legacyRows)+1 {
		t.Fatalf("%d rows, want %d", n, len(legacyRows)+1)
	}
}

// One plan lists every reason the table cannot be adopted: a column that
// would be narrowed, one whose values would be read as another type, a
// missing article column, an unmapped state, duplicate keys, a trailing
// space a CHAR would drop. Nothing is changed.
func TestPlanListsEveryRefusalAtOnce(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY operation_key VARCHAR(255) NOT NULL, DROP COLUMN lease_until, ADD COLUMN last_error INT NULL, MODIFY currency VARCHAR(3) NOT NULL")
		exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state) VALUES ('k-done', 'pay-3', 300, 'US ', 'pending')")
	})
	o := options()
	o.States = map[string]string{"pending": "ready", "processing": "running", "done": "succeeded", "error": "failed"}
	before := dbtest.Fingerprint(t, db)
	_, err := adopt.NewPlan(context.Background(), db, o)
	if !errors.Is(err, adopt.ErrRefused) {
		t.Fatalf("plan: %v, want a refusal", err)
	}
	for _, want := range []string{
		"refund_jobs.operation_key is varchar(255)", "refund_jobs has no column lease_until", "refund_jobs.last_error is int",
		`have state "review"`, `2 rows share operation_key "k-done"`, "refund_jobs.currency ends in a space in rows with id 7",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 {
		t.Fatalf("a refused plan changed the database: %v", diff)
	}
}

// A legacy write of a zero TIMESTAMP while the online copy runs has no
// instant to carry into the UTC DATETIME: the copy's trigger refuses the
// write, as the plan refused the rows that held one before, and the copy
// goes on.
func TestAZeroTimestampWrittenDuringTheCopyIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN next_run_at TIMESTAMP NULL DEFAULT NULL")
	})
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION sql_mode = ''", "UPDATE refund_jobs SET next_run_at = '2026-06-01 15:00:00'"} { //fencelint:allow the team's own writes, before adoption
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var during error
	o := options()
	o.Hooks.AfterBatch = func(step string, lo, hi int64) {
		if step != "modify-columns" || lo > 1 {
			return
		}
		//fencelint:allow the team's own write of its own column, during adoption: the test's subject
		_, during = conn.ExecContext(ctx, "UPDATE refund_jobs SET next_run_at = '0000-00-00 00:00:00' WHERE operation_key = 'k-pending'")
	}
	if _, err := adopt.Apply(ctx, db, o); err != nil {
		t.Fatal(err)
	}
	if !dbtest.IsTriggerRefusal(during, "a zero timestamp in next_run_at has no instant") {
		t.Fatalf("a zero TIMESTAMP written during the copy: %v, want the copy trigger's refusal", during)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs WHERE next_run_at <> '2026-06-01 15:00:00'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows hold another next_run_at after the refused write (%v)", n, err)
	}
}

// fencekit writes its own columns: a team's generated column of one of
// their names is refused by the plan, with the others it finds.
func TestAGeneratedColumnOfFencekitsNameIsRefused(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN writer_attempt bigint AS (attempt) VIRTUAL")
	})
	_, err := adopt.NewPlan(context.Background(), db, options())
	if !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "refund_jobs.writer_attempt is a generated column") {
		t.Fatalf("plan with a generated writer_attempt: %v", err)
	}
}

// One apply or rollback at a time on a database: a second one, started
// while the first holds its lock, is refused and changes nothing.
func TestASecondApplyAtTheSameMomentIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var got int
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", "fencekit_adopt:"+name).Scan(&got); err != nil || got != 1 {
		t.Fatalf("take the lock as the first apply: %d, %v", got, err)
	}
	before := teamRows(t, db)
	if _, err := adopt.Apply(ctx, db, options()); !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "one at a time") {
		t.Fatalf("a second apply: %v, want a refusal", err)
	}
	if got := teamRows(t, db); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("rows after the refused apply: %+v, want %+v", got, before)
	}
	var tables int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", adopt.RecordTable).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the refused apply wrote its record (%d, %v)", tables, err)
	}
	if _, err := holder.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", "fencekit_adopt:"+name); err != nil {
		t.Fatal(err)
	}
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatalf("apply once the first is done: %v", err)
	}
}

// The commonest legacy shape, adopted and rolled back twice, with
// -blocking-copy: a NOT NULL column the adoption made nullable and a row
// has made NULL since is refused by the plan, naming the row; the
// CURRENT_TIMESTAMP defaults and ON UPDATE come back (MODIFY, never
// ALTER … SET DEFAULT CURRENT_TIMESTAMP, which MySQL refuses), the
// restore is one ALTER with no shadow table, and each rollback keeps the
// dropped columns' values in a table of its own.
func TestTheCommonestShapeRolledBackTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptyDB(t)
	exec(t, db, strings.Replace(commonestTable, "provider_refund_id VARCHAR(128) NULL", "provider_refund_id VARCHAR(128) NOT NULL DEFAULT '' COMMENT 'the PSP''s id'", 1))
	insertRows(t, db, "operation_key, payment_ref, amount_minor, currency, state", 20, func(i int) string {
		return fmt.Sprintf("('k-%d', 'pay-%d', %d, 'EUR', 'ready')", i, i, 100+i)
	})
	columns := func() map[string]string {
		rows, err := db.Query("SELECT COLUMN_NAME, CONCAT_WS(' | ', COLUMN_TYPE, IS_NULLABLE, IFNULL(COLUMN_DEFAULT, '-'), EXTRA, COLUMN_COMMENT) FROM information_schema.COLUMNS " +
			"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'refund_jobs'")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var n, d string
			if err := rows.Scan(&n, &d); err != nil {
				t.Fatal(err)
			}
			out[n] = d
		}
		return out
	}
	o := adopt.Options{BlockingCopy: true}
	var saved []string
	for cycle := 1; cycle <= 2; cycle++ {
		if _, err := adopt.Apply(ctx, db, o); err != nil {
			t.Fatalf("cycle %d: apply: %v", cycle, err)
		}
		if got := columns()["provider_refund_id"]; !strings.Contains(got, "| YES |") {
			t.Fatalf("cycle %d: provider_refund_id after adoption: %s (the test needs it nullable)", cycle, got)
		}
		//fencelint:allow a write made after the adoption, in observe mode: the test's subject
		exec(t, db, "UPDATE refund_jobs SET provider_refund_id = NULL WHERE operation_key IN ('k-3', 'k-7')")
		var ids string
		if err := db.QueryRow("SELECT GROUP_CONCAT(id ORDER BY id SEPARATOR ', ') FROM refund_jobs WHERE operation_key IN ('k-3', 'k-7')").Scan(&ids); err != nil {
			t.Fatal(err)
		}
		_, err := adopt.NewRollbackPlan(ctx, db, o)
		if !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "refund_jobs.provider_refund_id was NOT NULL before the adoption and is NULL in rows with id "+ids+" ") {
			t.Fatalf("cycle %d: rollback plan with NULLs in a NOT NULL column: %v", cycle, err)
		}
		//fencelint:allow the team filling in its column before the rollback, as the refusal asks
		exec(t, db, "UPDATE refund_jobs SET provider_refund_id = '' WHERE provider_refund_id IS NULL")
		p, err := adopt.NewRollbackPlan(ctx, db, o)
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		var text strings.Builder
		if err := p.Format(&text, 100); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "ALGORITHM=COPY, LOCK=SHARED") || strings.Contains(text.String(), adopt.ShadowTable) || strings.Contains(text.String(), "SET DEFAULT CURRENT_TIMESTAMP") {
			t.Fatalf("cycle %d: the blocking rollback's plan:\n%s", cycle, text.String())
		}
		if _, err := adopt.Rollback(ctx, db, o); err != nil {
			t.Fatalf("cycle %d: rollback: %v", cycle, err)
		}
		got := columns()
		for col, want := range map[string][]string{
			"created_at":         {"datetime(6) | NO | current_timestamp(6) |"},
			"next_run_at":        {"datetime(6) | NO | current_timestamp(6) |"},
			"updated_at":         {"datetime(6) | NO | current_timestamp(6) | on update current_timestamp(6)"},
			"provider_refund_id": {"| NO | '' |", "the PSP's id"},
		} {
			for _, w := range want {
				if !strings.Contains(strings.ToLower(got[col]), strings.ToLower(w)) {
					t.Errorf("cycle %d: %s after rollback: %s, want %q", cycle, col, got[col], w)
				}
			}
		}
		if _, ok := got["writer_attempt"]; ok {
			t.Errorf("cycle %d: fencekit's column writer_attempt survived the rollback", cycle)
		}
		saved = dbtest.Column(t, db, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ? ORDER BY TABLE_NAME", adopt.SetAsidePrefix+"refund_jobs_columns%")
		if len(saved) != cycle {
			t.Fatalf("cycle %d: the saved columns' tables: %v, want one per rollback", cycle, saved)
		}
		// The next cycle's set-aside companions would take the same names.
		for _, n := range []string{"refunds", "refund_audit", "refund_observations", "refund_jobs_keys", "refund_jobs_attempts", "refund_jobs_fence_violations", "refund_jobs_fence_mode_changes", "refund_job_calls"} {
			exec(t, db, "DROP TABLE IF EXISTS "+adopt.SetAsidePrefix+n)
		}
	}
	if t.Failed() {
		return
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + saved[0]).Scan(&n); err != nil || n != 20 {
		t.Fatalf("the first rollback's saved values: %d rows (%v), want 20", n, err)
	}
}
