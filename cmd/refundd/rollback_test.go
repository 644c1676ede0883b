//go:build !tidb

package main

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/testdata/legacy/legacyworker"
)

// originalColumns are testdata/legacy/schema.sql's columns: the legacy
// application's table before adoption.
const originalColumns = "id, operation_key, payment_id, amount_cents, currency, attempt, state, lease_until, next_action, provider_refund_id, merchant_note, legacy_flag, created"

// rowsAsText reads every row's original columns as text, by id, times
// without a zero fraction (a DATETIME widened to DATETIME(6) holds the same
// instant).
func rowsAsText(t *testing.T, db *sql.DB) map[int64]string {
	t.Helper()
	rows, err := db.Query("SELECT id, CONCAT_WS('|', " + strings.ReplaceAll(originalColumns, ", ", ", '|', ") + ") FROM refund_jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[id] = strings.ReplaceAll(v, ".000000", "")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The way back: the legacy application's table is adopted and enforced,
// then `refundd adopt rollback` undoes it step by step. Afterwards the
// legacy application's own statements (testdata/legacy: its enqueue, its
// worker's claim and write-backs, its catch block) work again, no row and
// no column of the team's is lost, the fence's triggers and procedures are
// gone, and fencekit's tables that hold rows (the ledger) are set aside,
// not dropped.
func TestAdoptionRolledBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCutover(t)
	for i := 1; i <= 12; i++ {
		c.legacyEnqueue(i)
	}
	l := c.legacyProcess(time.Hour)
	for range 4 {
		c.step(l)
	}
	c.refunddOut("adopt", "apply", "-dsn", c.rootDSN, "-columns", "payment_ref=payment_id,amount_minor=amount_cents,created_at=created")
	// The legacy application runs on in observe mode, then the fence
	// enforces.
	c.step(l)
	c.refunddOut("fence", "mode", "enforce", "-dsn", c.rootDSN, "-reason", "rolled over", "-force")
	//fencelint:allow the legacy worker's catch block, which enforce refuses: the test's subject
	if _, err := c.legacyDB().ExecContext(ctx, legacyworker.Requeue, c.id("legacy-01")); !dbtest.IsTriggerRefusal(err, "") {
		t.Fatalf("the legacy catch block in enforce mode: %v, want the fence's refusal", err)
	}
	// The team's own columns are the team's in any state, even enforced.
	//fencelint:allow the admin panel's write of the team's own column, which the fence lets through in any state: the test's subject
	if _, err := c.legacyDB().ExecContext(ctx, "UPDATE refund_jobs SET merchant_note = 'edited by the admin panel' WHERE id = ?", c.id("legacy-01")); err != nil {
		t.Fatalf("the admin panel edits a settled job's note in enforce mode: %v", err)
	}
	before := rowsAsText(t, c.root)

	plan := c.refunddOut("adopt", "rollback", "plan", "-dsn", c.rootDSN)
	for _, want := range []string{"refundd adopt rollback: the plan for", "drop-fence", "set-aside-tables", "drop-columns", "stays varchar(128) (was varchar(64))"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the rollback plan does not say %q", want)
		}
	}
	if t.Failed() {
		t.Fatal(plan)
	}
	c.refunddOut("adopt", "rollback", "apply", "-dsn", c.rootDSN)

	// No row, no column of the team's lost.
	after := rowsAsText(t, c.root)
	if len(after) != len(before) {
		t.Fatalf("%d rows after rollback, %d before", len(after), len(before))
	}
	for id, row := range before {
		if after[id] != row {
			t.Errorf("job %d after rollback: %q, want %q", id, after[id], row)
		}
	}
	var cols []string
	rows, err := c.root.Query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'refund_jobs' ORDER BY ORDINAL_POSITION")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	rows.Close()
	if got := strings.Join(cols, ", "); got != originalColumns {
		t.Fatalf("columns after rollback: %s, want %s", got, originalColumns)
	}
	var triggers, routines, record, ledgerAside int
	if err := c.root.QueryRow("SELECT (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()), "+
		"(SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()), "+
		"(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?), "+
		"(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?)", adopt.RecordTable, adopt.SetAsidePrefix+"refunds").
		Scan(&triggers, &routines, &record, &ledgerAside); err != nil {
		t.Fatal(err)
	}
	if triggers != 0 || routines != 0 || record != 0 || ledgerAside != 1 {
		t.Fatalf("after rollback: %d triggers, %d procedures, adoption record %d, ledger set aside %d (want 0, 0, 0, 1)", triggers, routines, record, ledgerAside)
	}

	// The legacy application works as before: it enqueues (without
	// fencekit's columns), its workers claim and settle, and its catch
	// block goes through (the article's bug is back, as it was before).
	c.legacyEnqueue(13)
	settled := 0
	for {
		id, err := l.Step(ctx)
		if err == legacyworker.ErrNothingToDo {
			break
		}
		if err != nil {
			t.Fatalf("the legacy worker after rollback, job %d: %v", id, err)
		}
		settled++
	}
	if settled == 0 {
		t.Fatal("the legacy worker found nothing to settle after rollback")
	}
	var state string
	if err := c.root.QueryRow("SELECT state FROM refund_jobs WHERE operation_key = 'legacy-13'").Scan(&state); err != nil || state != "succeeded" {
		t.Fatalf("legacy-13, enqueued and settled by the legacy application after rollback: %s (%v)", state, err)
	}
	//fencelint:allow the legacy worker's catch block after rollback: unfenced again, as before adoption
	if _, err := c.legacyDB().ExecContext(ctx, legacyworker.Requeue, c.id("legacy-13")); err != nil {
		t.Fatalf("the legacy catch block after rollback: %v", err)
	}
	// Nothing is left to roll back.
	if err := c.refundd("adopt", "rollback", "plan", "-dsn", c.rootDSN); !errors.Is(err, adopt.ErrNotAdopted) {
		t.Fatalf("rollback plan after rollback: %v, want %v", err, adopt.ErrNotAdopted)
	}
}
