//go:build !tidb

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/migrations"
)

// The rollout of the fence, as the on-call engineer runs it: observe, find
// the legacy writer in the report, enforce. Each command names what it did;
// a mode without a reason, or an unknown one, is refused by name.
func TestFenceCommands(t *testing.T) {
	dsn := demoDSN(t)
	var out bytes.Buffer
	refundd := func(args ...string) (string, error) {
		t.Helper()
		out.Reset()
		err := run(context.Background(), args, &out)
		return out.String(), err
	}
	if _, err := refundd("migrate", "-dsn", dsn, "-create"); err != nil {
		t.Fatal(err)
	}
	if got, err := refundd("fence", "mode", "-dsn", dsn); err != nil || got != "fence mode: enforce\n" {
		t.Fatalf("fence mode of a new database: %q, %v", got, err)
	}
	if _, err := refundd("fence", "mode", "observe", "-dsn", dsn); err == nil || !strings.Contains(err.Error(), "reason: must not be empty") {
		t.Fatalf("observe without a reason: %v", err)
	}
	if _, err := refundd("fence", "mode", "audit", "-dsn", dsn, "-reason", "x"); err == nil || !strings.Contains(err.Error(), "mode: must be enforce or observe") {
		t.Fatalf("an unknown mode: %v", err)
	}
	got, err := refundd("fence", "mode", "observe", "-dsn", dsn, "-reason", "rollout week 1")
	if err != nil || !strings.Contains(got, "fence mode: enforce -> observe") {
		t.Fatalf("observe: %q, %v", got, err)
	}

	// A legacy writer's catch block, through a plain client.
	db := openRaw(t, dsn)
	if _, err := db.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) VALUES ('legacy', 'pay', 100, 'EUR', NOW(6), NOW(6), NOW(6))"); err != nil {
		t.Fatal(err)
	}
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	if _, err := db.Exec("UPDATE refund_jobs SET state = 'running', attempt = attempt + 1, lease_until = NOW(6) WHERE operation_key = 'legacy'"); err != nil {
		t.Fatalf("the legacy claim in observe mode: %v", err)
	}
	// A legacy INSERT of a job born running: recorded with the row it made
	// (its AUTO_INCREMENT id, not the 0 a BEFORE INSERT trigger sees).
	res, err := db.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, next_run_at, created_at, updated_at) VALUES ('born-running', 'pay', 100, 'EUR', 'running', 1, NOW(6), NOW(6), NOW(6))")
	if err != nil {
		t.Fatalf("a legacy insert in observe mode: %v", err)
	}
	bornID, _ := res.LastInsertId()
	var recorded int64
	if err := db.QueryRow("SELECT row_id FROM refund_jobs_fence_violations WHERE operation = 'insert'").Scan(&recorded); err != nil || recorded != bornID || recorded == 0 {
		t.Fatalf("the insert's violation names row %d, want %d (%v)", recorded, bornID, err)
	}
	report, err := refundd("fence", "report", "-dsn", dsn)
	if err != nil || !strings.Contains(report, "2 writes broke the fence's rules") || !strings.Contains(report, "an UPDATE must declare the attempt it holds") ||
		!strings.Contains(report, "root@") {
		t.Fatalf("report:\n%s (%v)", report, err)
	}
	asJSON, err := refundd("fence", "report", "-dsn", dsn, "-json")
	var doc struct {
		Mode   migrations.FenceMode
		Groups []migrations.ViolationGroup
	}
	if err != nil || json.Unmarshal([]byte(asJSON), &doc) != nil || doc.Mode != migrations.FenceObserve || len(doc.Groups) != 2 || doc.Groups[0].Count != 1 {
		t.Fatalf("report -json: %s (%v)", asJSON, err)
	}

	if !strings.Contains(report, "CHANGED") || !strings.Contains(report, "state,attempt,lease_until") {
		t.Fatalf("the report does not name the columns the write changed:\n%s", report)
	}

	// Enforce is refused while a writer was let through lately: the
	// refusal names it, and nothing changes.
	got, err = refundd("fence", "mode", "enforce", "-dsn", dsn, "-reason", "every writer declares its attempt")
	if err == nil || !strings.Contains(err.Error(), "would start failing") || !strings.Contains(err.Error(), "root@") || !strings.Contains(err.Error(), "-force") ||
		!strings.Contains(got, "the last violation was recorded at") {
		t.Fatalf("enforce with a violation a moment ago: %q, %v", got, err)
	}
	if got, err := refundd("fence", "mode", "-dsn", dsn); err != nil || got != "fence mode: observe\n" {
		t.Fatalf("the refused switch changed the mode: %q, %v", got, err)
	}
	// Past the window (here a microsecond), the switch goes through, and
	// still says when the last violation was; -force switches within it.
	if got, err := refundd("fence", "mode", "enforce", "-dsn", dsn, "-reason", "quiet for long enough", "-quiet-for", "1us"); err != nil ||
		!strings.Contains(got, "the last violation was recorded at") || !strings.Contains(got, "observe -> enforce") {
		t.Fatalf("enforce past the window: %q, %v", got, err)
	}
	if _, err := refundd("fence", "mode", "observe", "-dsn", dsn, "-reason", "back to observe"); err != nil {
		t.Fatal(err)
	}
	if got, err := refundd("fence", "mode", "enforce", "-dsn", dsn, "-reason", "every writer declares its attempt", "-force"); err != nil ||
		!strings.Contains(got, "will be refused from now on") || !strings.Contains(got, "observe -> enforce") {
		t.Fatalf("enforce -force: %q, %v", got, err)
	}
	//fencelint:allow a legacy writer's unfenced write, which the fence refuses in enforce mode and records in observe mode: the test's subject
	if _, err := db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE operation_key = 'legacy'"); err == nil {
		t.Fatal("the legacy catch block went through in enforce mode")
	}
}

func openRaw(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := openMigrationDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// What a writer controls (its program name, the statement it sends) is
// printed inert by the text report: an ESC sequence cannot clear the
// operator's screen, a newline cannot forge a row. The JSON report is valid
// JSON and carries the raw value.
func TestFenceReportPrintsWriterTextInert(t *testing.T) {
	t.Parallel()
	dsn := demoDSN(t)
	var out bytes.Buffer
	refundd := func(args ...string) (string, error) {
		t.Helper()
		out.Reset()
		err := run(context.Background(), args, &out)
		return out.String(), err
	}
	if _, err := refundd("migrate", "-dsn", dsn, "-create"); err != nil {
		t.Fatal(err)
	}
	if _, err := refundd("fence", "mode", "observe", "-dsn", dsn, "-reason", "find the writers"); err != nil {
		t.Fatal(err)
	}
	const program = "evil\x1b[2J\x1b]0;owned\x07\nforged row\u202e"
	// This server runs without performance_schema, so the fence records no
	// program name nor statement: the row is written as a server with it
	// records a writer whose connection attributes and statement carry
	// them (and whose account name does).
	db := openRaw(t, dsn)
	if _, err := db.Exec("INSERT INTO refund_jobs_fence_violations (observed_at, operation, row_id, rule, account, connection_id, program_name, statement) "+
		"VALUES (NOW(6), 'update', 1, 'refund_jobs#1: an UPDATE must declare the attempt it holds: SET writer_attempt = 1', ?, 7, ?, ?)",
		"ev\x1b[1Ail\n@host", program,
		//fencelint:allow the violation row's recorded statement text is data (an unfenced UPDATE a legacy writer sent), never run
		"UPDATE refund_jobs /* \x1b[2J\nforged shape */ SET state = 'ready' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	report, err := refundd("fence", "report", "-dsn", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(report, "\x1b\x07\r\u202e") {
		t.Errorf("the report prints a writer's control characters raw:\n%q", report)
	}
	if lines := strings.Split(strings.TrimSuffix(report, "\n"), "\n"); len(lines) != 3 {
		t.Errorf("the report has %d lines, want 3 (summary, header, one group): a writer's newline forged a line:\n%s", len(lines), report)
	}
	if !strings.Contains(report, `evil\x1b[2J`) {
		t.Errorf("the report does not show the program name escaped:\n%s", report)
	}
	asJSON, err := refundd("fence", "report", "-dsn", dsn, "-json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(asJSON, "\x1b\x07") || strings.Count(asJSON, "\n") != 1 {
		t.Errorf("the JSON report carries raw control characters or newlines:\n%q", asJSON)
	}
	var doc struct{ Groups []migrations.ViolationGroup }
	if err := json.Unmarshal([]byte(asJSON), &doc); err != nil || len(doc.Groups) != 1 || doc.Groups[0].Program != program {
		t.Fatalf("report -json: %v, groups %+v, want the program name %q", err, doc.Groups, program)
	}
}
