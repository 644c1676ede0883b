//go:build !tidb

// The audit's database fence: MySQL and MariaDB only (TiDB has no triggers;
// there only the grants keep the application from changing the audit).

package operator_test

import (
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
	"github.com/fencekit/fencekit/operator"
)

// The application's account records and reads the audit and nothing more;
// no account, not even root, changes or deletes an entry; the database
// stamps its time whatever the statement says.
func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	app := dbtest.Account(t, e.d.RawDB(), e.d.Name, migrations.AppGrants)
	appDSN, err := fencedwrite.DSN(app.FormatDSN(), fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appDB := dbtest.OpenDSN(t, appDSN)
	c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, appDB)))
	ops, err := operator.New(operator.Config{Client: c, Provider: e.fp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	j := e.review(t, ent.RefundJobEnqueue{OperationKey: "k-audit", PaymentRef: "pay-1", AmountMinor: 100, Currency: "EUR"}, "r", "ev")
	res, err := ops.Resolve(ctx, operator.Resolution{JobID: j.ID, As: operator.AsReconcile, Reason: "ask again", Operator: "alice", SeenAttempt: j.Attempt})
	if err != nil {
		t.Fatalf("the application's account cannot resolve: %v", err)
	}

	for _, stmt := range []string{
		"UPDATE refund_audit SET operator = 'mallory' WHERE id = ?",
		"UPDATE refund_audit SET reason = 'nothing to see' WHERE id = ?",
		"DELETE FROM refund_audit WHERE id = ?",
	} {
		if _, err := appDB.ExecContext(ctx, stmt, res.AuditID); err == nil || !strings.Contains(err.Error(), "command denied") {
			t.Errorf("the application's account: %s: %v, want a refused grant", stmt, err)
		}
		if _, err := e.d.RawDB().ExecContext(ctx, stmt, res.AuditID); !dbtest.IsTriggerRefusal(err, "refund_audit: the audit is append-only") {
			t.Errorf("root: %s: %v, want the trigger's refusal", stmt, err)
		}
	}
	if _, err := appDB.ExecContext(ctx, "TRUNCATE refund_audit"); err == nil {
		t.Error("the application's account truncated the audit")
	}
	// An entry without an operator is refused by the database itself.
	_, err = appDB.ExecContext(ctx, "INSERT INTO refund_audit (job_id, operation_key, action, outcome, operator, reason, evidence_shown, "+
		"state_before, attempt_before, state_after, attempt_after, recorded_at) VALUES (?, 'k-audit', 'decline', 'declined', ' ', 'r', '', "+
		"'manual_review', 1, 'manual_review', 1, '2000-01-01')", j.ID)
	if err == nil {
		t.Error("the database took an audit entry without an operator")
	}
	// An override approved by its requester under another case is refused
	// by the database (the columns compare bytes).
	_, err = appDB.ExecContext(ctx, "INSERT INTO refund_audit (job_id, operation_key, action, outcome, operator, requested_by, reason, override, "+
		"evidence_shown, state_before, attempt_before, state_after, attempt_after, recorded_at) VALUES (?, 'k-audit', 'resolve_succeeded', 'done', "+
		"'ALICE', 'alice', 'r', 1, '', 'manual_review', 1, 'succeeded', 2, '2000-01-01')", j.ID)
	if e.d.Engine().DatabaseFence && !dbtest.IsTriggerRefusal(err, "an override is approved by a second operator") {
		t.Errorf("an override entry by its requester in another case: %v, want the trigger's refusal", err)
	}
	// A stated time is replaced by the database's clock.
	if _, err := appDB.ExecContext(ctx, "INSERT INTO refund_audit (job_id, operation_key, action, outcome, operator, reason, evidence_shown, "+
		"state_before, attempt_before, state_after, attempt_after, recorded_at) VALUES (?, 'k-audit', 'decline', 'declined', 'alice', 'r', '', "+
		"'manual_review', 1, 'manual_review', 1, '2000-01-01')", j.ID); err != nil {
		t.Fatal(err)
	}
	var age int64
	if err := appDB.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(SECOND, MAX(recorded_at), "+fencedwrite.ClockUTC+") FROM refund_audit").Scan(&age); err != nil {
		t.Fatal(err)
	}
	if age < 0 || time.Duration(age)*time.Second > time.Minute {
		t.Errorf("the entry's time is %d s from the database's clock: the statement's time was kept", age)
	}
	v, err := ops.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Audit) != 2 || v.Audit[0].Operator != "alice" || v.Audit[0].Reason != "ask again" {
		t.Fatalf("audit after the attacks: %+v", v.Audit)
	}
}
