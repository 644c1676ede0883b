//go:build !tidb

package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
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

// fastCase is one write on one row (the row compared; the write may touch
// others), in a session first given the statements of session (a moved
// session clock).
type fastCase struct {
	name    string
	table   string
	id      int64
	query   string
	args    []any
	session []string
}

// outcome is what a write did: its error's message ("" when accepted), the
// row it left and the rules the fence recorded in observe mode.
type outcome struct {
	err      string
	row      string
	stamped  string
	recorded string
}

// slowZones are the sessions where only the checks decide: a numeric
// offset, and SYSTEM (the server's own zone, UTC on the test server).
var slowZones = []string{"+01:00", "SYSTEM"}

func runFastCase(t *testing.T, db *sql.DB, zone string, c fastCase) outcome {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExec(t, conn, "SET time_zone = '"+zone+"', timestamp = DEFAULT")
	defer mustExec(t, conn, "SET timestamp = DEFAULT")
	for _, q := range c.session {
		mustExec(t, conn, q)
	}
	before := rowSignature(t, conn, c.table, c.id, nil)
	var lastViolation int64
	if err := conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM refund_jobs_fence_violations").Scan(&lastViolation); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "BEGIN")
	defer func() { mustExec(t, conn, "ROLLBACK") }()
	var start string
	if err := conn.QueryRowContext(ctx, "SELECT CAST("+clock+" AS CHAR)").Scan(&start); err != nil {
		t.Fatal(err)
	}
	var o outcome
	if _, err := conn.ExecContext(ctx, c.query, c.args...); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			t.Fatalf("%s: %v", c.name, err)
		}
		o.err = fmt.Sprintf("%d %s %s", me.Number, string(me.SQLState[:]), me.Message)
	}
	o.row = strings.Join(rowSignature(t, conn, c.table, c.id, before), " ")
	// The stamps the fence leaves: on the server's real clock, between the
	// write's start and now ("real"), or not stamped by this write.
	stamps := []string{"updated_at"}
	if c.table == "refunds" {
		stamps = append(stamps, "settled_at")
	}
	for _, col := range stamps {
		var on string
		err := conn.QueryRowContext(ctx, "SELECT CASE WHEN "+col+" IS NULL THEN 'unset' WHEN "+col+" >= ? AND "+col+" <= "+clock+" THEN 'real' ELSE 'other' END FROM "+c.table+" WHERE id = ?", start, c.id).Scan(&on)
		if errors.Is(err, sql.ErrNoRows) {
			on = "gone"
		} else if err != nil {
			t.Fatal(err)
		}
		o.stamped += col + "=" + on + " "
	}
	if err := conn.QueryRowContext(ctx, "SELECT COALESCE(GROUP_CONCAT(`rule` ORDER BY `id` SEPARATOR ' | '), '') FROM refund_jobs_fence_violations WHERE id > ?", lastViolation).Scan(&o.recorded); err != nil {
		t.Fatal(err)
	}
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
		if before != nil && rows.Err() == nil {
			return []string{"gone"} // its id changed (observe mode lets it)
		}
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

	ready2 := insert("fp-ready-2", clock, "refund")
	review := insert("fp-review", clock, "refund")
	claim(t, db, review, 0)
	mustExec(t, db, "UPDATE refund_jobs SET state = 'manual_review', writer_attempt = 1, lease_until = NULL, review_reason = 'look' WHERE id = ?", review) //fencelint:allow the fence's own test
	// A job succeeded without a refund id, which only observe mode lets
	// through: the ledger's NULL on both sides.
	nullRef := insert("fp-succeeded-null", clock, "refund")
	claim(t, db, nullRef, 0)
	if _, err := migrations.SetFenceMode(context.Background(), db, migrations.FenceObserve, "fast-path test: a job succeeded without a refund id"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL WHERE id = ?", nullRef) //fencelint:allow the fence's own test, in observe mode
	if _, err := migrations.SetFenceMode(context.Background(), db, migrations.FenceEnforce, "fast-path test: back to enforce"); err != nil {
		t.Fatal(err)
	}

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
	// The attacks of the review of issue 21: each a write the fast path
	// might accept where the checks refuse, or stamp differently.
	sendAt := func(at string) string { // a claim that sends, its times from at
		return "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = " + at + " + INTERVAL 30 SECOND, key_first_used_at = " + at + ", last_send_at = " + at
	}
	movedBy := func(seconds int) []string { // a session clock (NOW(), UTC_TIMESTAMP()) moved; SYSDATE is not
		return []string{fmt.Sprintf("SET timestamp = UNIX_TIMESTAMP() + %d", seconds)}
	}
	onClock := func(c fastCase, seconds int) fastCase { c.session = movedBy(seconds); return c }
	cases = append(cases,
		job("claim by a zombie a whole claim behind", resend, send),
		job("claim declaring the attempt it takes", ready, strings.Replace(send, "writer_attempt = 0", "writer_attempt = 1", 1)),
		job("claim declaring writer_attempt after attempt moved (SET reads left to right)", ready, "UPDATE refund_jobs SET state = 'running', attempt = attempt + 1, writer_attempt = attempt, lease_until = "+lease+", key_first_used_at = "+clock+", last_send_at = "+clock), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim declaring writer_attempt before attempt moves", ready, "UPDATE refund_jobs SET writer_attempt = attempt, state = 'running', attempt = attempt + 1, lease_until = "+lease+", key_first_used_at = "+clock+", last_send_at = "+clock),                          //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim at attempt-1", ready, strings.Replace(send, "attempt = 1,", "attempt = -1,", 1)),
		job("claim with the times one second ahead (the tolerance)", ready, sendAt(clock+" + INTERVAL 1 SECOND")), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim with the times two seconds ahead", ready, sendAt(clock+" + INTERVAL 2 SECOND")),                //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim with the key's first use two seconds ahead only", ready, strings.Replace(send, "key_first_used_at = "+clock, "key_first_used_at = "+clock+" + INTERVAL 2 SECOND", 1)),
		job("claim with the times an hour back", ready, sendAt(clock+" - INTERVAL 1 HOUR")), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim with a lease already expired", ready, strings.Replace(send, "lease_until = "+lease, "lease_until = "+clock+" - INTERVAL 1 HOUR", 1)),
		job("claim with a lease ending as it starts", ready, strings.Replace(send, "lease_until = "+lease, "lease_until = "+clock, 1)),
		job("claim moving next_run_at", ready, send+", next_run_at = "+clock+" + INTERVAL 1 DAY"),                                                                                                                                                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim recording a provider refund id and an error", ready, send+", provider_refund_id = 're_x', last_error = 'x'"),                                                                                                                                        //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim changing the operation key", ready, send+", operation_key = 'fp-ready-moved'"),                                                                                                                                                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim changing the currency's case", ready, send+", currency = 'eur'"),                                                                                                                                                                                    //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim giving the request a trailing space", ready, send+", payment_ref = 'pay-1 '"),                                                                                                                                                                       //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim stamping its own updated_at", ready, send+", updated_at = '2000-01-01 00:00:00'"),                                                                                                                                                                   //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a job not due, by a second", notDue, send+", next_run_at = "+clock),                                                                                                                                                                              //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend with the send a microsecond later", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = last_send_at + INTERVAL 1 MICROSECOND"),                                            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend keeping the key's first use by name", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock+", key_first_used_at = key_first_used_at"),                               //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend moving the key's first use a microsecond", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock+", key_first_used_at = key_first_used_at - INTERVAL 1 MICROSECOND"), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resend turned into a reconcile recording a send", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock+", next_action = 'reconcile'"),                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a reconcile clearing nothing but declaring a stale writer", recon, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 1, lease_until = "+lease),                                                                            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim of a reconcile at attempt+2", recon, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 0, lease_until = "+lease),                                                                                                             //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete at attempt-1", running, "UPDATE refund_jobs SET state = 'succeeded', attempt = 0, writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1'"),                                                                                          //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete clearing the key's first use", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', key_first_used_at = NULL"),                                                             //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete clearing the send", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', last_send_at = NULL"),                                                                             //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete with an empty refund id", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = ''"),                                                                                                //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete changing the id", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', id = id + 100000"),                                                                                  //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete changing the operation key", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1', operation_key = 'fp-other'"),                                                             //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("reschedule at attempt+1", running, "UPDATE refund_jobs SET state = 'ready', attempt = 2, writer_attempt = 1, lease_until = NULL, next_run_at = "+clock),                                                                                                   //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("reschedule turning the send into a reconcile", running, "UPDATE refund_jobs SET state = 'ready', writer_attempt = 1, lease_until = NULL, next_action = 'reconcile', next_run_at = "+clock),                                                                //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("manual review changing the creation time", running, "UPDATE refund_jobs SET state = 'manual_review', writer_attempt = 1, lease_until = NULL, created_at = "+clock),                                                                                        //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("fail by a zombie", running, "UPDATE refund_jobs SET state = 'failed', writer_attempt = 0, lease_until = NULL"),                                                                                                                                            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("complete a succeeded job again, as it is", succeeded, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL"),                                                                                                               //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim a failed job", failed, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock),                                                                                                 //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("fail a failed job again", failed, "UPDATE refund_jobs SET state = 'failed', writer_attempt = 1, lease_until = NULL"),                                                                                                                                      //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("claim a job in manual review", review, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = "+clock),                                                                                       //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("leave manual review as if running (same attempt)", review, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, provider_refund_id = 're_1'"),                                                                                                 //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		job("resolve manual review", review, "UPDATE refund_jobs SET state = 'succeeded', attempt = 2, writer_attempt = 1, provider_refund_id = 're_1', review_evidence = 'seen'"),                                                                                     //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "claim of two due jobs in one UPDATE", table: "refund_jobs", id: ready, query: send + " WHERE id IN (?, ?)", args: []any{ready, ready2}},
		fastCase{name: "claim of a due and a not-due job in one UPDATE", table: "refund_jobs", id: ready, query: send + " WHERE id IN (?, ?) ORDER BY id", args: []any{ready, notDue}},                                                                                                                            //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "claim of a not-due and a due job in one UPDATE", table: "refund_jobs", id: ready, query: send + " WHERE id IN (?, ?) ORDER BY id DESC", args: []any{ready, notDue}},                                                                                                                       //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "complete the running job and a succeeded one in one UPDATE", table: "refund_jobs", id: running, query: "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1' WHERE id IN (?, ?) ORDER BY id", args: []any{running, succeeded}}, //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "claim by INSERT … ON DUPLICATE KEY UPDATE", table: "refund_jobs", id: ready, query: "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) VALUES ('fp-ready', 'pay-1', 500, 'EUR', " + clock + ", " + clock + ", " + clock + ") " +
			"ON DUPLICATE KEY UPDATE state = 'running', attempt = 1, writer_attempt = 0, lease_until = " + lease + ", key_first_used_at = " + clock + ", last_send_at = " + clock}, //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "claim of a job not due by INSERT … ON DUPLICATE KEY UPDATE", table: "refund_jobs", id: notDue, query: "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) VALUES ('fp-not-due', 'pay-1', 500, 'EUR', " + clock + ", " + clock + ", " + clock + ") " +
			"ON DUPLICATE KEY UPDATE state = 'running', attempt = 1, writer_attempt = 0, lease_until = " + lease + ", key_first_used_at = " + clock + ", last_send_at = " + clock}, //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "claim by a multi-table UPDATE joined to the ledger", table: "refund_jobs", id: ready, query: "UPDATE refund_jobs j JOIN refunds r ON r.operation_key = j.operation_key SET j.state = 'running', j.attempt = 1, j.writer_attempt = 0, j.lease_until = " + lease + ", j.key_first_used_at = " + clock + ", j.last_send_at = " + clock + " WHERE j.id = ?", args: []any{ready}},                 //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		fastCase{name: "complete by a zombie in a multi-table UPDATE settling the ledger too", table: "refund_jobs", id: running, query: "UPDATE refund_jobs j JOIN refunds r ON r.operation_key = j.operation_key SET j.state = 'succeeded', j.writer_attempt = 0, j.lease_until = NULL, j.provider_refund_id = 're_1', r.status = 'refunded', r.provider_refund_id = 're_1' WHERE j.id = ?", args: []any{running}}, //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("claim that sends on a session clock an hour ahead", ready, sendAt("UTC_TIMESTAMP(6)")), 3600),                                                                                                                   //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("claim that sends on a session clock an hour back", ready, sendAt("UTC_TIMESTAMP(6)")), -3600),                                                                                                                   //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("claim of a job not due on a session clock two hours ahead", notDue, sendAt("UTC_TIMESTAMP(6) - INTERVAL 2 HOUR")), 7200),                                                                                        //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("resend with the send from a session clock an hour back", resend, "UPDATE refund_jobs SET state = 'running', attempt = 2, writer_attempt = 1, lease_until = "+lease+", last_send_at = UTC_TIMESTAMP(6)"), -3600), //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("complete on a session clock an hour ahead", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1'"), 3600),                                  //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("complete on a session clock an hour back", running, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1, lease_until = NULL, provider_refund_id = 're_1'"), -3600),                                  //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
		onClock(job("claim of a reconcile on a session clock a day back", recon, "UPDATE refund_jobs SET state = 'running', attempt = 1, writer_attempt = 0, lease_until = "+lease), -86400),                                         //fencelint:allow the fast paths are tested against the checks with unfenced writes on purpose
	)
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
		ledger("refunded with no refund id on either side", "fp-succeeded-null", "UPDATE refunds SET status = 'refunded'"),
		ledger("refunded with an empty refund id while the job has none", "fp-succeeded-null", "UPDATE refunds SET status = 'refunded', provider_refund_id = ''"),
		ledger("refunded with the refund id in another case", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 'RE_FP'"),
		ledger("refunded with the refund id and a trailing space", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp '"),
		ledger("refunded with another key's refund id while its job runs", "fp-running", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp'"),
		ledger("refunded taking a succeeded job's key", "fp-running", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp', operation_key = 'fp-succeeded'"),
		ledger("failed while its job is ready and another key's job failed", "fp-ready", "UPDATE refunds SET status = 'failed'"),
		ledger("failed taking a failed job's key", "fp-succeeded", "UPDATE refunds SET status = 'failed', operation_key = 'fp-failed'"),
		ledger("failed while its job is in manual review", "fp-review", "UPDATE refunds SET status = 'failed'"),
		ledger("requested to requested, nothing changed", "fp-succeeded", "UPDATE refunds SET status = 'requested'"),
		ledger("requested to requested, settled_at set", "fp-succeeded", "UPDATE refunds SET settled_at = UTC_TIMESTAMP(6)"),
		ledger("refunded with its own settled_at and updated_at", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp', settled_at = '2000-01-01', updated_at = '2000-01-01'"),
		ledger("refunded changing the id", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp', id = id + 100000"),
		ledger("refunded changing the currency's case", "fp-succeeded", "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp', currency = 'eur'"),
		ledger("failed with its job, recording a refund id", "fp-failed", "UPDATE refunds SET status = 'failed', provider_refund_id = 're_fp'"),
		fastCase{name: "ledger: refunded, two rows in one UPDATE, one with its job running", table: "refunds", id: ledgerID("fp-succeeded"), query: "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp' WHERE operation_key IN ('fp-succeeded', 'fp-running') ORDER BY id"},
		fastCase{name: "ledger: refunded on a session clock an hour ahead", table: "refunds", id: ledgerID("fp-succeeded"), query: "UPDATE refunds SET status = 'refunded', provider_refund_id = 're_fp' WHERE id = ?", args: []any{ledgerID("fp-succeeded")}, session: movedBy(3600)},
		fastCase{name: "ledger: failed on a session clock an hour back", table: "refunds", id: ledgerID("fp-failed"), query: "UPDATE refunds SET status = 'failed' WHERE id = ?", args: []any{ledgerID("fp-failed")}, session: movedBy(-3600)},
	)
}

// mismatches runs every case on +00:00 and in each of zones and lists those
// whose outcomes differ; accepted counts the cases the fast-path session
// accepted.
func mismatches(t *testing.T, db *sql.DB, cases []fastCase, zones []string) (diff []string, accepted int) {
	t.Helper()
	for _, c := range cases {
		fast := runFastCase(t, db, "+00:00", c)
		if fast.err == "" {
			accepted++
		}
		for _, zone := range zones {
			if slow := runFastCase(t, db, zone, c); fast != slow {
				diff = append(diff, fmt.Sprintf("%s:\n    on +00:00: %q, %s, stamped %s, recorded %q\n    on %s: %q, %s, stamped %s, recorded %q", c.name, fast.err, fast.row, fast.stamped, fast.recorded, zone, slow.err, slow.row, slow.stamped, slow.recorded))
			}
		}
	}
	return diff, accepted
}

func TestFenceFastPathsAcceptOnlyWhatTheRulesAccept(t *testing.T) {
	db := dbtest.New(t).RawDB()
	cases := fastCases(t, db)
	diff, accepted := mismatches(t, db, cases, slowZones)
	if len(diff) > 0 {
		t.Fatalf("the fast paths and the checks disagree:\n  %s", strings.Join(diff, "\n  "))
	}
	t.Logf("%d of %d writes accepted, the same in every zone", accepted, len(cases))
	if accepted < 10 || accepted == len(cases) {
		t.Fatalf("%d of %d cases accepted: the cases must both pass and break the rules", accepted, len(cases))
	}

	// In observe mode the checks let a refused write through and record it:
	// the fast path must leave the same row and the same record.
	if _, err := migrations.SetFenceMode(context.Background(), db, migrations.FenceObserve, "fast-path test: the cases in observe mode"); err != nil {
		t.Fatal(err)
	}
	diff, observed := mismatches(t, db, cases, slowZones)
	if _, err := migrations.SetFenceMode(context.Background(), db, migrations.FenceEnforce, "fast-path test: back to enforce"); err != nil {
		t.Fatal(err)
	}
	if len(diff) > 0 {
		t.Fatalf("in observe mode, the fast paths and the checks disagree:\n  %s", strings.Join(diff, "\n  "))
	}
	t.Logf("observe mode: %d of %d writes accepted, the same in every zone", observed, len(cases))

	// Not vacuous: a fast path that forgets one of its conditions is seen.
	for _, m := range []struct{ trigger, drop, with, caseName string }{
		{"refund_jobs_fence", "AND NEW.`lease_until` IS NOT NULL", "", "claim without a lease"},
		{"refund_jobs_fence", "AND (NEW.`state` <> 'succeeded' OR NEW.`provider_refund_id` IS NOT NULL)", "", "complete without the refund id"},
		// Each move's own expression (the claim that sends, the claim of a
		// reconcile, leaving running) is seen alone.
		{"refund_jobs_fence", "AND NEW.`key_first_used_at` <=> OLD.`key_first_used_at` AND NEW.`last_send_at` <=> OLD.`last_send_at`\n         AND", "AND", "claim of a reconcile recording a send only"},
		{"refund_jobs_fence", "NEW.`state` = 'running' AND NEW.`next_action` = 'refund' AND", "NEW.`state` = 'running' AND", "claim turning a refund into a reconcile that sends"},
		{"refunds_follow_job", "AND CAST(j.`provider_refund_id` AS BINARY) = CAST(NEW.`provider_refund_id` AS BINARY)", "", "ledger: refunded with another refund id"},
		// The review's columns: a zombie, the session's clock, the stamps.
		{"refund_jobs_fence", "NEW.`writer_attempt` = OLD.`attempt`", "TRUE", "fail by a zombie"},
		{"refund_jobs_fence", "OLD.`next_run_at` <= utc", "OLD.`next_run_at` <= UTC_TIMESTAMP(6)", "claim of a job not due on a session clock two hours ahead"},
		{"refund_jobs_fence", "NEW.`updated_at` = utc", "NEW.`updated_at` = UTC_TIMESTAMP(6)", "complete on a session clock an hour ahead"},
		{"refunds_follow_job", "NEW.`settled_at` = utc", "NEW.`settled_at` = UTC_TIMESTAMP(6)", "ledger: refunded on a session clock an hour ahead"},
	} {
		restore := mutateTrigger(t, db, m.trigger, m.drop, m.with)
		// Only the case the mutant must be seen by (a name matching none runs
		// nothing, and the mutant goes unseen: the test says so).
		named := slices.DeleteFunc(slices.Clone(cases), func(c fastCase) bool { return c.name != m.caseName })
		diff, _ := mismatches(t, db, named, slowZones[:1])
		restore()
		if !strings.Contains(strings.Join(diff, "\n"), m.caseName+":") {
			t.Errorf("a fast path of %s with %q for %q: the cases did not see it (differences: %v)", m.trigger, m.with, m.drop, diff)
		}
	}
	if diff, _ := mismatches(t, db, cases, slowZones); len(diff) > 0 {
		t.Fatalf("after restoring the triggers:\n  %s", strings.Join(diff, "\n  "))
	}
}

// mutateTrigger recreates trigger with every occurrence of drop in its fast
// paths (the text before its rule-by-rule checks declare now) replaced by
// with, and returns the function that restores it.
func mutateTrigger(t *testing.T, db *sql.DB, trigger, drop, with string) (restore func()) {
	t.Helper()
	var timing, event, table, body string
	if err := db.QueryRow("SELECT ACTION_TIMING, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?", trigger).
		Scan(&timing, &event, &table, &body); err != nil {
		t.Fatal(err)
	}
	fastEnd := strings.Index(body, "DECLARE now ")
	if fastEnd < 0 || !strings.Contains(body[:fastEnd], drop) {
		t.Fatalf("%s: %q is not in its fast paths", trigger, drop)
	}
	mutated := strings.ReplaceAll(body[:fastEnd], drop, with) + body[fastEnd:]
	create := func(b string) {
		mustExec(t, db, "DROP TRIGGER `"+trigger+"`")
		mustExec(t, db, fmt.Sprintf("CREATE TRIGGER `%s` %s %s ON `%s` FOR EACH ROW %s", trigger, timing, event, table, b))
	}
	create(mutated)
	return func() { create(body) }
}

// A named time zone whose name is '+00:00' with a trailing space equals
// '+00:00' in the server's collation of @@time_zone (utf8mb3_general_ci pads
// with spaces), yet it is no offset: it needs a zone of that name in the
// server's time zone tables (a name the offset parser takes first, so only
// reachable with the space), as a DBA could load one. The checks refuse
// every job write in a named zone; the fast paths must not take such a
// session for UTC, whose SYSDATE(6) is then the zone's local time.
func TestFenceFastPathsNeedTheNumericUTCOffset(t *testing.T) {
	db := dbtest.New(t).RawDB()
	const zone = "+00:00 " // the named zone '+00:00', two hours ahead of UTC
	var have int
	if err := db.QueryRow("SELECT COUNT(*) FROM mysql.time_zone_name WHERE Name = '+00:00'").Scan(&have); err != nil {
		t.Fatal(err)
	}
	if have == 0 {
		mustExec(t, db, "INSERT INTO mysql.time_zone (Use_leap_seconds) VALUES ('N')")
		var tz int64
		if err := db.QueryRow("SELECT MAX(Time_zone_id) FROM mysql.time_zone").Scan(&tz); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "INSERT INTO mysql.time_zone_transition_type (Time_zone_id, Transition_type_id, `Offset`, Is_DST, Abbreviation) VALUES (?, 0, 7200, 0, 'FP')", tz)
		mustExec(t, db, "INSERT INTO mysql.time_zone_name (Name, Time_zone_id) VALUES ('+00:00', ?)", tz)
		t.Cleanup(func() {
			for _, table := range []string{"time_zone_name", "time_zone_transition_type", "time_zone"} {
				mustExec(t, db, "DELETE FROM mysql."+table+" WHERE Time_zone_id = ?", tz)
			}
		})
	}
	var shown string
	var same, ahead bool
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "SET time_zone = '"+zone+"'")
	if err := conn.QueryRowContext(t.Context(), "SELECT @@session.time_zone, @@session.time_zone = '+00:00', SYSDATE(6) > UTC_TIMESTAMP(6) + INTERVAL 1 HOUR").Scan(&shown, &same, &ahead); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "SET time_zone = DEFAULT")
	conn.Close()
	if shown != zone || !same || !ahead {
		t.Fatalf("the named zone %q: shown %q, equal to '+00:00' %v, two hours ahead %v: the premise of this test does not hold", zone, shown, same, ahead)
	}

	var diff []string
	for _, c := range fastCases(t, db) {
		named, slow := runFastCase(t, db, zone, c), runFastCase(t, db, "+01:00", c)
		want := slow
		if c.table == "refund_jobs" {
			// The checks refuse any job write in a named zone.
			if !strings.Contains(named.err, "named zones repeat an hour") {
				diff = append(diff, fmt.Sprintf("%s: on the named zone %q: %q, %s, stamped %s; want the named zone's refusal", c.name, zone, named.err, named.row, named.stamped))
			}
			continue
		}
		if named != want {
			diff = append(diff, fmt.Sprintf("%s:\n    on the named zone %q: %q, %s, stamped %s\n    on +01:00: %q, %s, stamped %s", c.name, zone, named.err, named.row, named.stamped, slow.err, slow.row, slow.stamped))
		}
	}
	if len(diff) > 0 {
		t.Fatalf("a named zone equal to '+00:00' in the server's collation took the fast paths:\n  %s", strings.Join(diff, "\n  "))
	}
}
