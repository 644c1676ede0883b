//go:build !tidb

package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
)

// The cheaper fence (20261204044700_ledger_fence_fast_path.sql,
// 20261204044713_job_fence_fast_path.sql) accepts the common moves by one
// condition, in a session on time_zone '+00:00', before the rule-by-rule
// checks. Every write below runs twice on the same row, each time in a
// transaction rolled back afterwards: in a session on '+00:00', where the
// fast path may accept it, and in one on '+01:00', where only the checks
// decide. Both must give the same answer (the same refusal, or none) and
// leave the same row (times compared as unset, kept or changed: the two
// runs read the clock at different instants).

// fastCase is one write on one row.
type fastCase struct {
	name  string
	table string
	id    int64
	query string
	args  []any
}

// outcome is what a write did: its error's message ("" when accepted) and
// the row it left.
type outcome struct {
	err string
	row string
}

func runFastCase(t *testing.T, db *sql.DB, zone string, c fastCase) outcome {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExec(t, conn, "SET time_zone = '"+zone+"'")
	before := rowSignature(t, conn, c.table, c.id, nil)
	mustExec(t, conn, "BEGIN")
	defer func() { mustExec(t, conn, "ROLLBACK") }()
	var o outcome
	if _, err := conn.ExecContext(ctx, c.query, c.args...); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			t.Fatalf("%s: %v", c.name, err)
		}
		o.err = fmt.Sprintf("%d %s %s", me.Number, string(me.SQLState[:]), me.Message)
	}
	o.row = strings.Join(rowSignature(t, conn, c.table, c.id, before), " ")
	return o
}

// rowSignature is the row's columns as text; with before, a time column is
// "unset", "kept" (as in before) or "changed".
func rowSignature(t *testing.T, conn *sql.Conn, table string, id int64, before []string) []string {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SELECT * FROM "+table+" WHERE id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("%s %d is gone (%v)", table, id, rows.Err())
	}
	cols, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := rows.Scan(dest...); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cols))
	for i, v := range vals {
		s := "NULL"
		if v.Valid {
			s = v.String
		}
		out[i] = cols[i].Name() + "=" + s
		if before != nil && strings.Contains(cols[i].DatabaseTypeName(), "DATETIME") {
			switch {
			case !v.Valid:
				out[i] = cols[i].Name() + "=unset"
			case out[i] == before[i]:
				out[i] = cols[i].Name() + "=kept"
			default:
				out[i] = cols[i].Name() + "=changed"
			}
		}
	}
	return out
}

// fastCases builds the rows and the writes: every move the fast paths
// accept, and each of their conditions broken on its own.
func fastCases(t *testing.T, db *sql.DB) []fastCase {
	t.Helper()
	insert := func(key, nextRun, action string) int64 {
		res, err := db.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_action, next_run_at, created_at, updated_at) "+
			"VALUES (?, 'pay-1', 500, 'EUR', ?, "+nextRun+", "+clock+", "+clock+")", key, action)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		mustExec(t, db, "INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, created_at, updated_at) VALUES (?, 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", key)
		return id
	}
	ledgerID := func(key string) int64 {
		var id int64
		if err := db.QueryRow("SELECT id FROM refunds WHERE operation_key = ?", key).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	complete := func(id int64, attempt int64, ref string) {
		mustExec(t, db, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = ?, lease_until = NULL, provider_refund_id = ? WHERE id = ?", attempt, ref, id) //fencelint:allow the fence's own test
	}
	fail := func(id int64, attempt int64) {
		mustExec(t, db, "UPDATE refund_jobs SET state = 'failed', writer_attempt = ?, lease_until = NULL, last_error = 'no' WHERE id = ?", attempt, id) //fencelint:allow the fence's own test
	}

	ready := insert("fp-ready", clock, "refund")
	notDue := insert("fp-not-due", clock+" + INTERVAL 1 HOUR", "refund")
	recon := insert("fp-reconcile", clock, "reconcile")
	resend := insert("fp-resend", clock, "refund")
	claim(t, db, resend, 0)
	mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', writer_attempt = 1, lease_until = NULL, next_run_at = "+clock+" - INTERVAL 1 SECOND WHERE id = ?", resend) //fencelint:allow the fence's own test
	running := insert("fp-running", clock, "refund")
	claim(t, db, running, 0)
	expired := insert("fp-expired", clock, "refund")
	claimExpired(t, db, expired, 0)
	succeeded := insert("fp-succeeded", clock, "refund")
	claim(t, db, succeeded, 0)
	complete(succeeded, 1, "re_fp")
	failed := insert("fp-failed", clock, "refund")
	claim(t, db, failed, 0)
	fail(failed, 1)
	settledKey := "fp-settled"
	settledJob := insert(settledKey, clock, "refund")
	claim(t, db, settledJob, 0)
	complete(settledJob, 1, "re_fp")
	mustExec(t, db, "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp' WHERE operation_key = ?", settledKey)

	lease := clock + " + INTERVAL 30 SECOND"
	send := "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = " + lease + ", key_first_used_at = " + clock + ", last_send_at = " + clock //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
	job := func(name string, id int64, query string, args ...any) fastCase {
		return fastCase{name: name, table: "refund_jobs", id: id, query: query + " WHERE id = ?", args: append(args, id)}
	}
	cases := []fastCase{
		job("claim that sends", ready, send),
		job("claim on a named zone's behalf declares no writer", ready, "UPDATE refund_jobs SET state = 'running', attempt = 1, lease_until = "+lease+", key_first_used_at = "+clock+", last_send_at = "+clock), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim by a stale writer", ready, strings.Replace(send, "writer_attempt = 0", "writer_attempt = 1", 1)),
		job("claim at attempt+2", ready, strings.Replace(send, "attempt = 1,", "attempt = 2,", 1)),
		job("claim keeping the attempt", ready, strings.Replace(send, "attempt = 1,", "attempt = 0,", 1)),
		job("claim without a lease", ready, strings.Replace(send, "lease_until = "+lease, "lease_until = NULL", 1)),
		job("claim that sends without the key's first use", ready, strings.Replace(send, "key_first_used_at = "+clock, "key_first_used_at = NULL", 1)),
		job("claim that sends without the send", ready, strings.Replace(send, "last_send_at = "+clock, "last_send_at = NULL", 1)),
		job("claim with the key's first use in the future", ready, strings.Replace(send, "key_first_used_at = "+clock, "key_first_used_at = "+clock+" + INTERVAL 1 HOUR", 1)),
		job("claim with the send in the future", ready, strings.Replace(send, "last_send_at = "+clock, "last_send_at = "+clock+" + INTERVAL 1 HOUR", 1)),
		job("claim changing the request", ready, send+", payment_ref = 'pay-2'"),                                                                                                            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim changing the amount", ready, send+", amount_minor = 501"),                                                                                                                //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim changing the creation time", ready, send+", created_at = created_at - INTERVAL 1 DAY"),                                                                                   //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim changing the id", ready, send+", id = id + 100000"),                                                                                                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim turning a refund into a reconcile that sends", ready, send+", next_action = 'reconcile'"),                                                                                //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim as a reconcile without sending", ready, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = "+lease+", next_action = 'reconcile'"), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a job not due", notDue, send),
		job("claim of a reconcile", recon, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = "+lease), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a reconcile that sends", recon, send),
		job("claim of a reconcile turned into a send", recon, send+", next_action = 'refund'"), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a reconcile recording a send only", recon, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = "+lease+", last_send_at = "+clock),                        //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a reconcile recording the key's first use only", recon, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = "+lease+", key_first_used_at = "+clock),      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a reconcile without a lease", recon, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0"),                                                                              //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock),                                                           //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend moving the key's first use", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock+", key_first_used_at = "+clock), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend clearing the key's first use", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock+", key_first_used_at = NULL"), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend moving the send back", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = last_send_at - INTERVAL 1 SECOND"),            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend without a new send", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease),                                                                  //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1'"),                                                                  //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete without the refund id", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL"),                                                                         //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete keeping the lease", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, provider_refund_id = 're_1'"),                                                                    //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete at attempt+1", running, "UPDATE refund_jobs SET state = 'succeeded', attempt = 2, writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1'"),                                        //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete by a stale writer", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 0, lease_until = NULL, provider_refund_id = 're_1'"),                                                //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete declaring no writer", running, "UPDATE refund_jobs SET state = 'succeeded', lease_until = NULL, provider_refund_id = 're_1'"),                                                                  //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete moving the key's first use", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', key_first_used_at = "+clock),           //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete recording a send", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', last_send_at = "+clock),                          //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete changing the currency", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', currency = 'USD'"),                          //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("reschedule", running, "UPDATE refund_jobs SET state = 'ready', writer_attempt = 1, lease_until = NULL, next_run_at = "+clock+" + INTERVAL 1 MINUTE, last_error = 'later'"),                              //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("reschedule keeping the lease", running, "UPDATE refund_jobs SET state = 'ready', writer_attempt = 1, next_run_at = "+clock),                                                                             //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("manual review", running, "UPDATE refund_jobs SET state = 'manual_review', writer_attempt = 1, lease_until = NULL, review_reason = 'look'"),                                                              //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("fail", running, "UPDATE refund_jobs SET state = 'failed', writer_attempt = 1, lease_until = NULL, last_error = 'no'"),                                                                                   //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("renew the lease", running, "UPDATE refund_jobs SET writer_attempt = 1, lease_until = "+clock+" + INTERVAL 1 HOUR"),                                                                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("take over a live lease", running, "UPDATE refund_jobs SET attempt = 2, writer_attempt = 1, lease_until = "+lease+", next_action = 'reconcile'"),                                                         //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("take over an expired lease", expired, "UPDATE refund_jobs SET attempt = 2, writer_attempt = 1, lease_until = "+lease+", next_action = 'reconcile'"),                                                     //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("change a succeeded job", succeeded, "UPDATE refund_jobs SET state = 'failed', writer_attempt = 1"),                                                                                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("wake up", ready, "UPDATE refund_jobs SET writer_attempt = 0, next_run_at = next_run_at - INTERVAL 1 SECOND"),                                                                                            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
	}
	ledger := func(name, key, query string) fastCase {
		return fastCase{name: "ledger: " + name, table: "refunds", id: ledgerID(key), query: query + " WHERE id = ?", args: []any{ledgerID(key)}}
	}
	return append(cases,
		ledger("refunded with its job", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp'"),
		ledger("refunded with another refund id", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_other'"),
		ledger("refunded without a refund id", "fp-succeeded", "UPDATE refunds SET status = 'refunded'"),
		ledger("refunded changing the request", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp', amount_minor = 1"),
		ledger("refunded changing the creation time", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp', created_at = created_at - INTERVAL 1 DAY"),
		ledger("failed while its job succeeded", "fp-succeeded", "UPDATE refunds SET status = 'failed'"),
		ledger("failed with its job", "fp-failed", "UPDATE refunds SET status = 'failed'"),
		ledger("refunded while its job failed", "fp-failed", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp'"),
		ledger("refunded while its job runs", "fp-running", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp'"),
		ledger("requested recording a refund id", "fp-succeeded", "UPDATE refunds SET provider_refund_id = 're_fp'"),
		ledger("settled again", settledKey, "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp'"),
		ledger("settled changed to failed", settledKey, "UPDATE refunds SET status = 'failed'"),
	)
}

// mismatches runs every case in both zones and lists those whose outcomes
// differ; accepted counts the cases the fast-path session accepted.
func mismatches(t *testing.T, db *sql.DB, cases []fastCase) (diff []string, accepted int) {
	t.Helper()
	for _, c := range cases {
		fast, slow := runFastCase(t, db, "+00:00", c), runFastCase(t, db, "+01:00", c)
		if fast.err == "" {
			accepted++
		}
		if fast != slow {
			diff = append(diff, fmt.Sprintf("%s:\n    on +00:00: %q, %s\n    on +01:00: %q, %s", c.name, fast.err, fast.row, slow.err, slow.row))
		}
	}
	return diff, accepted
}

func TestFenceFastPathsAcceptOnlyWhatTheRulesAccept(t *testing.T) {
	db := dbtest.New(t).RawDB()
	cases := fastCases(t, db)
	diff, accepted := mismatches(t, db, cases)
	if len(diff) > 0 {
		t.Fatalf("the fast paths and the checks disagree:\n  %s", strings.Join(diff, "\n  "))
	}
	t.Logf("%d of %d writes accepted, the same in both zones", accepted, len(cases))
	if accepted < 10 || accepted == len(cases) {
		t.Fatalf("%d of %d cases accepted: the cases must both pass and break the rules", accepted, len(cases))
	}

	// Not vacuous: a fast path that forgets one of its conditions is seen.
	for _, m := range []struct{ trigger, drop, caseName string }{
		{"refund_jobs_fence", "AND NEW.`lease_until` IS NOT NULL", "claim without a lease"},
		{"refund_jobs_fence", "AND (NEW.`state` <> 'succeeded' OR NEW.`provider_refund_id` IS NOT NULL)", "complete without the refund id"},
		{"refunds_follow_job", "AND j.`provider_refund_id` = NEW.`provider_refund_id`", "ledger: refunded with another refund id"},
	} {
		restore := mutateTrigger(t, db, m.trigger, m.drop)
		diff, _ := mismatches(t, db, cases)
		restore()
		if !strings.Contains(strings.Join(diff, "\n"), m.caseName+":") {
			t.Errorf("a fast path of %s without %q: the cases did not see it (differences: %v)", m.trigger, m.drop, diff)
		}
	}
	if diff, _ := mismatches(t, db, cases); len(diff) > 0 {
		t.Fatalf("after restoring the triggers:\n  %s", strings.Join(diff, "\n  "))
	}
}

// mutateTrigger recreates trigger with the first occurrence of drop (in
// its fast path) removed, and returns the function that restores it.
func mutateTrigger(t *testing.T, db *sql.DB, trigger, drop string) (restore func()) {
	t.Helper()
	var timing, event, table, body string
	if err := db.QueryRow("SELECT ACTION_TIMING, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?", trigger).
		Scan(&timing, &event, &table, &body); err != nil {
		t.Fatal(err)
	}
	fastEnd := strings.Index(body, "LEAVE main;")
	i := strings.Index(body, drop)
	if i < 0 || fastEnd < 0 || i > fastEnd {
		t.Fatalf("%s: %q is not in its fast path", trigger, drop)
	}
	create := func(b string) {
		mustExec(t, db, "DROP TRIGGER `"+trigger+"`")
		mustExec(t, db, fmt.Sprintf("CREATE TRIGGER `%s` %s %s ON `%s` FOR EACH ROW %s", trigger, timing, event, table, b))
	}
	create(body[:i] + body[i+len(drop):])
	return func() { create(body) }
}
