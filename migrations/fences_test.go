//go:build !tidb

// The database's fence (triggers, the archival procedure): MySQL and MariaDB
// only. TiDB has neither; the TiDB run (-tags tidb) leaves this file out.

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

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
)

// These tests prove each rule of the database's fence (the triggers of the
// *_fences.sql files) with raw SQL, as any client in any language would write
// it. Many statements are unfenced on purpose, so they carry a fencelint
// directive.

// clock is the server's real time, which no session can move.
const clock = fencedwrite.ClockUTC

func mustExec(t *testing.T, db execer, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// refused runs query and wants the fence's refusal naming rule, in a message
// that fits MySQL's 128-character MESSAGE_TEXT.
func refused(t *testing.T, db execer, rule, query string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), query, args...)
	if !dbtest.IsTriggerRefusal(err, rule) {
		t.Fatalf("%s\n  got error %v\n  want the fence's refusal containing %q", query, err, rule)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && len(me.Message) > 128 {
		t.Errorf("%d-character refusal exceeds MySQL's 128: %s", len(me.Message), me.Message)
	}
}

// appAccount opens the application's least-privilege account
// (migrations.AppGrants) on d's database: a raw pool, as a client in any
// language would open it, and a client of the fenced layer.
func appAccount(t *testing.T, d *dbtest.DB) (*sql.DB, *ent.Client) {
	t.Helper()
	cfg := dbtest.Account(t, d.RawDB(), d.Name, migrations.AppGrants)
	dsn, err := fencedwrite.DSN(cfg.FormatDSN(), fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = true
	return dbtest.OpenDSN(t, cfg.FormatDSN()), dbtest.ClientOn(t, dbtest.OpenDSN(t, dsn))
}

// rowOf returns every column of job id as text: a refused statement must
// leave it exactly as it was.
func rowOf(t *testing.T, db *sql.DB, id int64) []string {
	t.Helper()
	rows, err := db.Query("SELECT * FROM refund_jobs WHERE id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("job %d is gone (%v)", id, rows.Err())
	}
	cols, err := rows.Columns()
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
		out[i] = cols[i] + "=NULL"
		if v.Valid {
			out[i] = cols[i] + "=" + v.String
		}
	}
	return out
}

// registerAlone registers a key without its job, which the fence refuses.
const registerAlone = "INSERT INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) " +
	"VALUES (?, 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6))"

// refusedAsDuplicate runs query and wants the fence's refusal of a second
// job for a key: a duplicate key (error 1062) whose message names the rule.
func refusedAsDuplicate(t *testing.T, db execer, query string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), query, args...)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 || !strings.Contains(me.Message, "a key takes one job, ever (archived or not)") {
		t.Fatalf("%s\n  got error %v\n  want the fence's duplicate key (1062): a key takes one job, ever", query, err)
	}
}

const insertJob = "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) " +
	"VALUES (?, 'pay-1', 500, 'EUR', " + clock + ", " + clock + ", " + clock + ")"

// newJob inserts key's job (which registers the key), and returns the job's
// id.
func newJob(t *testing.T, db *sql.DB, key string) int64 {
	t.Helper()
	res, err := db.Exec(insertJob, key)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type jobRow struct {
	state     string
	attempt   int64
	writer    sql.NullInt64
	keyFirst  sql.NullTime
	lastSend  sql.NullTime
	updatedAt sql.NullTime
}

func readJob(t *testing.T, db *sql.DB, id int64) jobRow {
	t.Helper()
	var r jobRow
	if err := db.QueryRow("SELECT state, attempt, writer_attempt, key_first_used_at, last_send_at, updated_at FROM refund_jobs WHERE id = ?", id).
		Scan(&r.state, &r.attempt, &r.writer, &r.keyFirst, &r.lastSend, &r.updatedAt); err != nil {
		t.Fatal(err)
	}
	return r
}

// claimSQL moves a ready job to running at attempt+1 to send, the way the
// fenced layer does: declaring the attempt it holds, recording the key's
// first use and the send, with a lease of the given SQL interval from now.
func claimSQL(lease string) string {
	return "UPDATE refund_jobs SET state = 'running', attempt = ?, writer_attempt = ?, lease_until = " + clock + " + INTERVAL " + lease + ", " +
		"key_first_used_at = COALESCE(key_first_used_at, " + clock + "), last_send_at = " + clock + " " +
		"WHERE id = ? AND state = 'ready' AND attempt = ?"
}

func claim(t *testing.T, db execer, id, attempt int64) {
	t.Helper()
	mustExec(t, db, claimSQL("30 SECOND"), attempt+1, attempt, id, attempt)
}

// claimExpired claims with a lease that has already expired: the takeover
// tests' isolated data, never a moved server clock.
func claimExpired(t *testing.T, db execer, id, attempt int64) {
	t.Helper()
	mustExec(t, db, claimSQL("-1 SECOND"), attempt+1, attempt, id, attempt)
}

// movedClock returns a connection whose session clock (NOW(),
// UTC_TIMESTAMP()) is moved by offset seconds.
func movedClock(t *testing.T, db *sql.DB, offset int) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	mustExec(t, conn, "SET timestamp = UNIX_TIMESTAMP(SYSDATE(6)) + ?", offset)
	return conn
}

const (
	hour = 3600
	day  = 24 * hour
)

func TestFenceKeysAreRegisteredOnceAndJobsBornReady(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	t.Run("a job registers its key as it is inserted, and a key is never registered alone", func(t *testing.T) {
		newJob(t, db, "registered")
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs_keys WHERE operation_key = 'registered' AND payment_ref = 'pay-1' " +
			"AND amount_minor = 500 AND currency = 'EUR' AND registered_at IS NOT NULL AND job_created_at IS NOT NULL").Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d registrations of the new job's key (%v), want one, with its request", n, err)
		}
		refused(t, db, "a key is registered only together with its job", registerAlone, "alone")
		// Nor with a request other than its job's.
		refused(t, db, "a key is registered only together with its job",
			"INSERT INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) VALUES ('registered', 'pay-1', 1, 'EUR', UTC_TIMESTAMP(6))")
	})
	t.Run("a key takes one job, ever", func(t *testing.T) {
		id := newJob(t, db, "once")
		_, err := db.Exec(insertJob, "once")
		if err == nil {
			t.Fatal("a second job for a registered key was inserted")
		}
		if got := readJob(t, db, id); got.state != "ready" || got.attempt != 0 || got.writer.Valid {
			t.Fatalf("new job = %+v, want ready at attempt 0 with no writer", got)
		}
	})
	t.Run("a job is born ready at attempt 0 with nothing sent", func(t *testing.T) {
		for key, cols := range map[string]string{
			"running": "state", "seven": "attempt", "leased": "lease_until", "used": "key_first_used_at", "sent": "last_send_at",
		} {
			val := map[string]string{"state": "'running'", "attempt": "7"}[cols]
			if val == "" {
				val = clock
			}
			_, err := db.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at, "+cols+") "+
				"VALUES (?, 'pay-1', 500, 'EUR', "+clock+", "+clock+", "+clock+", "+val+")", key)
			if !dbtest.IsTriggerRefusal(err, "refund_jobs: a ") {
				t.Errorf("a job born with %s: %v, want the fence's refusal", cols, err)
			}
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs_keys WHERE operation_key IN ('running', 'seven', 'leased', 'used', 'sent')").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d keys registered by refused jobs (%v), want none", n, err)
		}
	})
	t.Run("a registered key never changes and is never deleted", func(t *testing.T) {
		newJob(t, db, "kept")
		refused(t, db, "never changes", "UPDATE refund_jobs_keys SET amount_minor = 1 WHERE operation_key = 'kept'")
		refused(t, db, "never changes", "UPDATE refund_jobs_keys SET job_created_at = NULL WHERE operation_key = 'kept'")
		refused(t, db, "stays known for ever", "DELETE FROM refund_jobs_keys WHERE operation_key = 'kept'")
		refused(t, db, "stays known for ever",
			"REPLACE INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) VALUES ('kept', 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6))")
	})
	t.Run("a creation time from the session's clock is replaced by the server's", func(t *testing.T) {
		conn := movedClock(t, db, -40*day)
		if _, err := conn.ExecContext(t.Context(), insertJob, "old-looking"); err != nil {
			t.Fatal(err)
		}
		var age int64
		if err := db.QueryRow("SELECT TIMESTAMPDIFF(DAY, created_at, " + clock + ") FROM refund_jobs WHERE operation_key = 'old-looking'").Scan(&age); err != nil {
			t.Fatal(err)
		}
		if age != 0 {
			t.Fatalf("a job created with the session clock 40 days back is %d days old", age)
		}
	})
}

func TestFenceEveryUpdateDeclaresTheCurrentAttempt(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	id := newJob(t, db, "k")
	claim(t, db, id, 0)

	t.Run("an update that declares nothing is refused", func(t *testing.T) {
		//fencelint:allow the zombie's catch block from the article: the database must refuse it
		refused(t, db, "must declare the attempt it holds", "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id)
	})
	t.Run("an update that declares a stale attempt is refused", func(t *testing.T) {
		refused(t, db, "stale writer declares attempt 0, row is at 1",
			//fencelint:allow proves the trigger refuses a stale declaration even without the WHERE fence
			"UPDATE refund_jobs SET state = 'ready', writer_attempt = 0, lease_until = NULL WHERE id = ?", id)
	})
	t.Run("the declaration is cleared after each write", func(t *testing.T) {
		mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		if got := readJob(t, db, id); got.writer.Valid {
			t.Fatalf("writer_attempt = %v after the write, want NULL", got.writer)
		}
		//fencelint:allow the next write must declare again
		refused(t, db, "must declare the attempt it holds", "UPDATE refund_jobs SET next_run_at = next_run_at - INTERVAL 1 SECOND WHERE id = ?", id)
		claim(t, db, id, 1)
	})
	t.Run("attempt may only stay or grow by one", func(t *testing.T) {
		refused(t, db, "attempt may only stay or grow by one, not go 2 -> 4",
			//fencelint:allow proves the trigger bounds the token whatever the WHERE clause says
			"UPDATE refund_jobs SET attempt = 4, writer_attempt = 2 WHERE id = ?", id)
		//fencelint:allow proves the trigger refuses a decreasing token
		refused(t, db, "not go 2 -> 0", "UPDATE refund_jobs SET attempt = 0, writer_attempt = 2 WHERE id = ?", id)
	})
	t.Run("the request's identity never changes", func(t *testing.T) {
		for _, set := range []string{"operation_key = 'other'", "amount_minor = 999", "currency = 'USD'", "payment_ref = 'pay-2'", "id = id + 1000", "created_at = created_at - INTERVAL 1 DAY"} {
			refused(t, db, "the request and its creation time never change", "UPDATE refund_jobs SET "+set+", writer_attempt = 2 WHERE id = ? AND state = 'running' AND attempt = 2", id)
		}
	})
	t.Run("an upsert that declares nothing is refused", func(t *testing.T) {
		// The row is a duplicate of job k, so the update half runs, and
		// meets the fence.
		refused(t, db, "must declare the attempt it holds",
			//fencelint:allow proves INSERT ... ON DUPLICATE KEY UPDATE meets the same fence
			"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
				"VALUES ('k', 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE state = 'ready'")
	})
}

// The trigger allows exactly the moves of the state machine, each with its
// attempt rule, even when the statement declares the right attempt and
// carries a lint-clean fence.
func TestFenceAllowsOnlyTheStateMachine(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	job := func(key string) int64 { return newJob(t, db, key) }

	t.Run("a claim takes attempt+1", func(t *testing.T) {
		// The attack: a declared, lint-clean claim that keeps the attempt,
		// so that the lease which gave the job up still holds it.
		id := job("same-attempt")
		claim(t, db, id, 0)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		refused(t, db, "ready -> running: a claim takes attempt+1",
			"UPDATE refund_jobs SET state = 'running', writer_attempt = 1, lease_until = "+clock+" + INTERVAL 30 SECOND WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	})
	t.Run("a claim needs a due job, by the server's clock", func(t *testing.T) {
		id := job("not-due")
		claim(t, db, id, 0)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', lease_until = NULL, next_run_at = "+clock+" + INTERVAL 1 HOUR, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		conn := movedClock(t, db, 2*hour)
		refused(t, conn, "a claim needs a due job", claimSQL("30 SECOND"), 2, 1, id, 1)
	})
	t.Run("a claim never turns a reconcile into a send", func(t *testing.T) {
		id := job("reconcile")
		claim(t, db, id, 0)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', next_action = 'reconcile', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		refused(t, db, "a claim never turns a reconcile into a send",
			"UPDATE refund_jobs SET state = 'running', attempt = 2, next_action = 'refund', last_send_at = "+clock+", lease_until = "+clock+" + INTERVAL 30 SECOND, writer_attempt = 1 "+
				"WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	})
	t.Run("a claim that sends records the key's first use and the send", func(t *testing.T) {
		id := job("unrecorded")
		refused(t, db, "records the key's first use and the send",
			"UPDATE refund_jobs SET state = 'running', attempt = 1, lease_until = "+clock+" + INTERVAL 30 SECOND, writer_attempt = 0 WHERE id = ? AND state = 'ready' AND attempt = 0", id)
	})
	t.Run("a running job keeps its lease: no renewal, no takeover of a live lease", func(t *testing.T) {
		id := job("live")
		claim(t, db, id, 0)
		refused(t, db, "only a takeover stays running",
			"UPDATE refund_jobs SET lease_until = lease_until + INTERVAL 1 HOUR, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		takeover := "UPDATE refund_jobs SET attempt = 2, next_action = 'reconcile', lease_until = " + clock + " + INTERVAL 30 SECOND, writer_attempt = 1 " +
			"WHERE id = ? AND state = 'running' AND attempt = 1"
		refused(t, db, "a takeover needs a lease expired by the database clock", takeover, id)
		// A session whose clock runs an hour ahead sees the lease expired;
		// the fence reads the server's real clock.
		conn := movedClock(t, db, hour)
		var expiredToSession bool
		if err := conn.QueryRowContext(t.Context(), "SELECT lease_until < UTC_TIMESTAMP(6) FROM refund_jobs WHERE id = ?", id).Scan(&expiredToSession); err != nil || !expiredToSession {
			t.Fatalf("the moved session clock does not see the lease expired (%v): the test proves nothing", err)
		}
		refused(t, conn, "a takeover needs a lease expired by the database clock", takeover, id)
	})
	t.Run("a takeover takes attempt+1, a new lease, and reconciles", func(t *testing.T) {
		id := job("expired")
		claimExpired(t, db, id, 0)
		refused(t, db, "a takeover holds a new lease and reconciles",
			"UPDATE refund_jobs SET attempt = 2, lease_until = "+clock+" + INTERVAL 30 SECOND, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		mustExec(t, db, "UPDATE refund_jobs SET attempt = 2, next_action = 'reconcile', lease_until = "+clock+" + INTERVAL 30 SECOND, writer_attempt = 1 "+
			"WHERE id = ? AND state = 'running' AND attempt = 1", id)
	})
	t.Run("complete, reschedule, manual review and fail keep the attempt and give the lease up", func(t *testing.T) {
		id := job("settle")
		claim(t, db, id, 0)
		refused(t, db, "keep the attempt",
			"UPDATE refund_jobs SET state = 'succeeded', attempt = 2, provider_refund_id = 're_1', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		refused(t, db, "leaving running gives the lease up",
			"UPDATE refund_jobs SET state = 'ready', writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		refused(t, db, "success needs the provider refund id",
			"UPDATE refund_jobs SET state = 'succeeded', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'manual_review', review_reason = 'why', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
	})
	t.Run("a wake-up only makes a job due sooner", func(t *testing.T) {
		id := job("wake")
		for _, set := range []string{"next_run_at = next_run_at + INTERVAL 1 DAY", "next_action = 'reconcile'", "last_error = 'x'", "attempt = 1"} {
			refused(t, db, "ready -> ready: ", "UPDATE refund_jobs SET "+set+", writer_attempt = 0 WHERE id = ? AND state = 'ready' AND attempt = 0", id)
		}
		mustExec(t, db, "UPDATE refund_jobs SET next_run_at = next_run_at - INTERVAL 1 SECOND, writer_attempt = 0 WHERE id = ? AND state = 'ready' AND attempt = 0", id)
	})
	t.Run("an operator resolution takes attempt+1 and records its evidence", func(t *testing.T) {
		id := job("resolve")
		claim(t, db, id, 0)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'manual_review', review_reason = 'why', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		refused(t, db, "an operator resolution takes attempt+1",
			"UPDATE refund_jobs SET state = 'ready', review_evidence = 'e', writer_attempt = 1 WHERE id = ? AND state = 'manual_review' AND attempt = 1", id)
		refused(t, db, "records its evidence",
			"UPDATE refund_jobs SET state = 'ready', attempt = 2, writer_attempt = 1 WHERE id = ? AND state = 'manual_review' AND attempt = 1", id)
		refused(t, db, "success needs the provider refund id",
			"UPDATE refund_jobs SET state = 'succeeded', attempt = 2, review_evidence = 'e', writer_attempt = 1 WHERE id = ? AND state = 'manual_review' AND attempt = 1", id)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', next_action = 'reconcile', attempt = 2, review_evidence = 'e', writer_attempt = 1 WHERE id = ? AND state = 'manual_review' AND attempt = 1", id)
	})
	t.Run("moves outside the state machine are refused", func(t *testing.T) {
		id := job("outside")
		for _, to := range []string{"succeeded", "failed", "manual_review"} {
			refused(t, db, "ready -> "+to+": not a move of the state machine",
				"UPDATE refund_jobs SET state = ?, provider_refund_id = 're', writer_attempt = 0 WHERE id = ? AND state = 'ready' AND attempt = 0", to, id)
		}
		claim(t, db, id, 0)
		mustExec(t, db, "UPDATE refund_jobs SET state = 'manual_review', review_reason = 'why', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
		for _, to := range []string{"running", "failed", "manual_review"} {
			refused(t, db, "manual_review -> "+to+": ",
				"UPDATE refund_jobs SET state = ?, attempt = 2, review_evidence = 'e', lease_until = "+clock+", writer_attempt = 1 WHERE id = ? AND state = 'manual_review' AND attempt = 1", to, id)
		}
	})
}

// Two moves outside the state machine, written as an attacker would: with
// the application's account, declaring the row's true attempt (so that only
// the state machine can stop them), each carrying everything its target
// state would. What counts is behaviour, not an error's wording: the fence
// refuses the statement and the row stays exactly as it was.
func TestFenceRefusesMovesOutsideTheStateMachine(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	root := d.RawDB()
	app, c := appAccount(t, d)
	ctx := t.Context()
	jobs := map[string]func(key string) *ent.RefundJob{
		"a new job": func(key string) *ent.RefundJob {
			req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 500, Currency: "EUR"}
			job, _, err := c.RefundJob.Enqueue(ctx, req, nil)
			if err != nil {
				t.Fatal(err)
			}
			return job
		},
	}
	jobs["a job rescheduled once"] = func(key string) *ent.RefundJob {
		job := jobs["a new job"](key)
		l, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionReconcile, 0, "re_pending", "provider answered pending"), nil); err != nil {
			t.Fatal(err)
		}
		job, err = c.RefundJob.Get(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	moves := []struct{ name, query string }{
		{"a ready job cannot go straight to succeeded, even at attempt+1 with evidence and a refund id",
			"UPDATE refund_jobs SET state = 'succeeded', attempt = attempt + 1, writer_attempt = ?, review_evidence = 'the provider says refunded', " +
				"provider_refund_id = 're_1', lease_until = NULL, last_error = NULL WHERE id = ? AND state = 'ready' AND attempt = ?"},
		// A claim in every other respect: a send records the key's first
		// use and the send, a reconcile touches neither.
		{"a claim cannot take attempt+2, even due and with a lease",
			"UPDATE refund_jobs SET state = 'running', attempt = attempt + 2, writer_attempt = ?, lease_until = " + clock + " + INTERVAL 30 SECOND, " +
				"key_first_used_at = IF(next_action = 'refund', COALESCE(key_first_used_at, " + clock + "), key_first_used_at), " +
				"last_send_at = IF(next_action = 'refund', " + clock + ", last_send_at) WHERE id = ? AND state = 'ready' AND attempt = ?"},
	}
	n := 0
	for _, m := range moves {
		for _, kind := range []string{"a new job", "a job rescheduled once"} {
			n++
			key := fmt.Sprintf("move-%d", n)
			t.Run(m.name+" ("+kind+")", func(t *testing.T) {
				job := jobs[kind](key)
				var due bool
				if err := root.QueryRow("SELECT state = 'ready' AND next_run_at <= "+clock+" FROM refund_jobs WHERE id = ?", job.ID).Scan(&due); err != nil || !due {
					t.Fatalf("job %d is not ready and due (%v): the test proves nothing", job.ID, err)
				}
				before := rowOf(t, root, job.ID)
				_, err := app.ExecContext(ctx, m.query, job.Attempt, job.ID, job.Attempt)
				if !dbtest.IsTriggerRefusal(err, fmt.Sprintf("refund_jobs#%d: ", job.ID)) {
					t.Errorf("the move as the application's account: %v, want the fence's refusal naming the job", err)
				}
				if after := rowOf(t, root, job.ID); !slices.Equal(after, before) {
					t.Fatalf("the refused move changed the row:\n before %v\n after  %v", before, after)
				}
			})
		}
	}
}

// The key's window and the lookup-lag window are measured from
// key_first_used_at and last_send_at: nobody may reopen or stretch them.
func TestFenceKeyWindowIsSetOnceNeverMovedBack(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	id := newJob(t, db, "k")
	claim(t, db, id, 0)
	mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
	first := readJob(t, db, id)

	refused(t, db, "key_first_used_at is set once",
		"UPDATE refund_jobs SET key_first_used_at = NULL, writer_attempt = 1 WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	refused(t, db, "key_first_used_at is set once",
		"UPDATE refund_jobs SET next_run_at = next_run_at - INTERVAL 1 SECOND, key_first_used_at = key_first_used_at + INTERVAL 2 DAY, writer_attempt = 1 WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	// Not even a claim that sends may move it.
	refused(t, db, "key_first_used_at is set once",
		"UPDATE refund_jobs SET state = 'running', attempt = 2, lease_until = "+clock+" + INTERVAL 30 SECOND, key_first_used_at = "+clock+", last_send_at = "+clock+", writer_attempt = 1 "+
			"WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	refused(t, db, "last_send_at moves forward only",
		"UPDATE refund_jobs SET state = 'running', attempt = 2, lease_until = "+clock+" + INTERVAL 30 SECOND, last_send_at = last_send_at - INTERVAL 1 DAY, writer_attempt = 1 "+
			"WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	refused(t, db, "never into the future",
		"UPDATE refund_jobs SET state = 'running', attempt = 2, lease_until = "+clock+" + INTERVAL 30 SECOND, last_send_at = "+clock+" + INTERVAL 1 DAY, writer_attempt = 1 "+
			"WHERE id = ? AND state = 'ready' AND attempt = 1", id)
	refused(t, db, "last_send_at moves forward only",
		"UPDATE refund_jobs SET next_run_at = next_run_at - INTERVAL 1 SECOND, last_send_at = NULL, writer_attempt = 1 WHERE id = ? AND state = 'ready' AND attempt = 1", id)

	fresh := newJob(t, db, "fresh")
	refused(t, db, "key_first_used_at is set once, by a claim that sends, never in the future",
		"UPDATE refund_jobs SET state = 'running', attempt = 1, lease_until = "+clock+" + INTERVAL 30 SECOND, key_first_used_at = "+clock+" + INTERVAL 1 DAY, last_send_at = "+clock+", writer_attempt = 0 "+
			"WHERE id = ? AND state = 'ready' AND attempt = 0", fresh)
	refused(t, db, "key_first_used_at is set once, by a claim that sends",
		"UPDATE refund_jobs SET next_run_at = next_run_at - INTERVAL 1 SECOND, key_first_used_at = "+clock+", writer_attempt = 0 WHERE id = ? AND state = 'ready' AND attempt = 0", fresh)

	if got := readJob(t, db, id); !got.keyFirst.Time.Equal(first.keyFirst.Time) || !got.lastSend.Time.Equal(first.lastSend.Time) {
		t.Fatalf("key window moved: %+v, was %+v", got, first)
	}
}

func TestFenceTerminalRowsNeverChange(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	for _, terminal := range []string{"succeeded", "failed"} {
		t.Run(terminal, func(t *testing.T) {
			id := newJob(t, db, "k-"+terminal)
			claim(t, db, id, 0)
			mustExec(t, db, "UPDATE refund_jobs SET state = ?, provider_refund_id = 're_1', writer_attempt = 1, lease_until = NULL WHERE id = ? AND state = 'running' AND attempt = 1", terminal, id)
			// Even a write that holds the current attempt and names the state
			// and attempt in its WHERE clause is refused.
			refused(t, db, "is terminal and never changes",
				"UPDATE refund_jobs SET state = 'ready', writer_attempt = 1 WHERE id = ? AND state = ? AND attempt = 1", id, terminal)
			refused(t, db, "is terminal and never changes",
				"UPDATE refund_jobs SET last_error = 'note', writer_attempt = 1 WHERE id = ? AND state = ? AND attempt = 1", id, terminal)
			if got := readJob(t, db, id); got.state != terminal || got.attempt != 1 {
				t.Fatalf("job = %+v, want %s at attempt 1", got, terminal)
			}
		})
	}
}

// settled claims and completes a new job.
func settled(t *testing.T, db *sql.DB, key string) int64 {
	t.Helper()
	id := newJob(t, db, key)
	claim(t, db, id, 0)
	mustExec(t, db, "UPDATE refund_jobs SET state = 'succeeded', provider_refund_id = 're_1', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
	return id
}

// A settled job is never reset or removed, whatever the session's clock
// says: not by DELETE, not by REPLACE, not by the archival procedure.
func TestFenceSettledJobsAreNeverDeletedOrReplaced(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	id := settled(t, db, "k")
	for name, offset := range map[string]int{"an honest clock": 0, "a session clock 60 days ahead": 60 * day} {
		t.Run(name, func(t *testing.T) {
			conn := movedClock(t, db, offset)
			refused(t, conn, "only archived terminal jobs 30 days old are deleted", "DELETE FROM refund_jobs WHERE id = ?", id)
			refused(t, conn, "only archived terminal jobs 30 days old are deleted",
				//fencelint:allow proves REPLACE cannot reset a settled job to ready
				"REPLACE INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
					"VALUES ('k', 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
			// The session's "31 days ago" is 29 days from now when its clock
			// runs 60 days ahead: refused. With an honest clock the call
			// archives nothing younger than 30 days.
			_, err := conn.ExecContext(t.Context(), "CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 31 DAY)")
			if offset != 0 && !dbtest.IsTriggerRefusal(err, "the cutoff must be at least 30 days in the past") || offset == 0 && err != nil {
				t.Fatalf("archive with %s: %v", name, err)
			}
			refused(t, conn, "only terminal jobs 30 days old are archived",
				"INSERT INTO refund_jobs_archive SELECT * FROM refund_jobs WHERE id = ?", id)
			if got := readJob(t, db, id); got.state != "succeeded" || got.attempt != 1 {
				t.Fatalf("job = %+v, want it still succeeded at attempt 1", got)
			}
		})
	}
}

// Archival moves old terminal jobs out and keeps their keys: a re-delivered
// request for an archived key can never become a new job. The old rows are
// written as history before the fences existed: the fences themselves would
// never let anyone write a job that looks 40 days old.
func TestFenceArchivalMovesOldTerminalJobsAndKeepsTheirKeys(t *testing.T) {
	t.Parallel()
	aged := func(key, state string, days int) string {
		return fmt.Sprintf("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, next_run_at, created_at, updated_at) "+
			"VALUES ('%s', 'pay-1', 500, 'EUR', '%s', 1, UTC_TIMESTAMP(6) - INTERVAL %[3]d DAY, UTC_TIMESTAMP(6) - INTERVAL %[3]d DAY, UTC_TIMESTAMP(6) - INTERVAL %[3]d DAY)", key, state, days)
	}
	d := dbtest.NewWithHistory(t, 1, func(db *sql.DB) {
		for _, q := range []string{aged("old-succeeded", "succeeded", 40), aged("old-failed", "failed", 40),
			aged("recent", "succeeded", 1), aged("old-running", "running", 40)} {
			mustExec(t, db, q)
		}
	})
	db := d.RawDB()
	ids := func(table string) map[string]bool {
		rows, err := db.Query("SELECT operation_key FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]bool{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			got[k] = true
		}
		return got
	}
	if keys := ids("refund_jobs_keys"); len(keys) != 4 {
		t.Fatalf("the migration registered keys %v, want the four jobs' keys", keys)
	}
	// Not even an old terminal job is deleted unless it was archived.
	refused(t, db, "only archived terminal jobs 30 days old are deleted", "DELETE FROM refund_jobs WHERE operation_key = 'old-failed'")

	refused(t, db, "the cutoff must be at least 30 days in the past", "CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 1 DAY)")
	mustExec(t, db, "CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 31 DAY)")
	live, archived := ids("refund_jobs"), ids("refund_jobs_archive")
	for key, want := range map[string]bool{"old-succeeded": true, "old-failed": true, "recent": false, "old-running": false} {
		if archived[key] != want || live[key] == want {
			t.Errorf("job %s: archived=%v live=%v, want archived=%v", key, archived[key], live[key], want)
		}
	}
	t.Run("an archived job never changes and is never deleted", func(t *testing.T) {
		refused(t, db, "archived jobs never change", "UPDATE refund_jobs_archive SET state = 'ready' WHERE operation_key = 'old-succeeded'")
		refused(t, db, "archived jobs are never deleted", "DELETE FROM refund_jobs_archive WHERE operation_key = 'old-succeeded'")
	})
	t.Run("an archived key is never a new job", func(t *testing.T) {
		refusedAsDuplicate(t, db, insertJob, "old-succeeded")
		if _, err := db.Exec("INSERT INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) " +
			"VALUES ('old-succeeded', 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6))"); err == nil {
			t.Fatal("an archived key was registered again")
		}
		if ids("refund_jobs")["old-succeeded"] {
			t.Fatal("a re-delivered archived key became a new job")
		}
	})
}

func TestFenceObservationLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	refused(t, db, "evidence is born unprocessed",
		"INSERT INTO refund_observations (dedup_key, operation_key, source, provider_status, payload, received_at, processed_at) "+
			"VALUES ('d0', 'k', 'webhook', 'succeeded', '{}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	conn := movedClock(t, db, -10*day)
	res, err := conn.ExecContext(t.Context(), "INSERT INTO refund_observations (dedup_key, operation_key, source, provider_status, payload, received_at) "+
		"VALUES ('d1', 'k', 'webhook', 'succeeded', '{}', UTC_TIMESTAMP(6))")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	var age int64
	if err := db.QueryRow("SELECT TIMESTAMPDIFF(DAY, received_at, "+clock+") FROM refund_observations WHERE id = ?", id).Scan(&age); err != nil || age != 0 {
		t.Fatalf("evidence received with a session clock 10 days back is stamped %d days old (%v)", age, err)
	}
	refused(t, db, "evidence is append-only", "UPDATE refund_observations SET provider_status = 'rejected' WHERE id = ?", id)
	refused(t, db, "evidence is append-only", "UPDATE refund_observations SET payload = 'edited' WHERE id = ?", id)
	mustExec(t, db, "UPDATE refund_observations SET processed_at = UTC_TIMESTAMP(6) WHERE id = ?", id)
	refused(t, db, "processed_at is set once", "UPDATE refund_observations SET processed_at = NULL WHERE id = ?", id)
	refused(t, db, "rows are never deleted", "DELETE FROM refund_observations WHERE id = ?", id)
}

// The ledger follows its job: refunded only while the job is succeeded with
// the same refund id, never changed or removed afterwards.
func TestFenceLedgerFollowsItsJob(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	open := "INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, created_at, updated_at) VALUES (?, 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
	refused(t, db, "opened with its job", open, "no-job")
	id := newJob(t, db, "k")
	mustExec(t, db, open, "k")
	settle := "UPDATE refunds SET status = ?, provider_refund_id = ? WHERE operation_key = 'k'"

	claim(t, db, id, 0)
	refused(t, db, "refunded only with its job succeeded", settle, "refunded", "re_1")
	mustExec(t, db, "UPDATE refund_jobs SET state = 'ready', lease_until = NULL, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
	refused(t, db, "refunded only with its job succeeded", settle, "refunded", "re_1")
	refused(t, db, "failed only with its job failed", settle, "failed", nil)
	refused(t, db, "records a refund only by settling", settle, "requested", "re_1")

	claim(t, db, id, 1)
	mustExec(t, db, "UPDATE refund_jobs SET state = 'succeeded', provider_refund_id = 're_1', lease_until = NULL, writer_attempt = 2 WHERE id = ? AND state = 'running' AND attempt = 2", id)
	refused(t, db, "with the same provider refund id", settle, "refunded", "re_2")
	mustExec(t, db, settle, "refunded", "re_1")
	refused(t, db, "refunded is settled and never changes", settle, "requested", nil)
	refused(t, db, "refunded is settled and never changes", settle, "refunded", "re_2")
	refused(t, db, "ledger rows are never deleted", "DELETE FROM refunds WHERE operation_key = 'k'")
}

// MySQL refuses a SIGNAL whose MESSAGE_TEXT exceeds 128 characters (MariaDB
// allows more), so every refusal must fit even with the largest ids; refused
// checks the length of every refusal the other tests provoke.
func TestFenceMessagesFitMySQLsLimit(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t).RawDB()
	mustExec(t, db, "ALTER TABLE refund_jobs AUTO_INCREMENT = 9223372036854775000")
	id := newJob(t, db, "k")
	claim(t, db, id, 0)
	for _, q := range []string{
		//fencelint:allow each of these provokes one refusal of the trigger
		"UPDATE refund_jobs SET state = 'ready' WHERE id = ?",
		//fencelint:allow provokes the stale-writer refusal
		"UPDATE refund_jobs SET state = 'ready', writer_attempt = 9223372036854775807 WHERE id = ?",
		//fencelint:allow provokes the attempt-bound refusal
		"UPDATE refund_jobs SET attempt = 9223372036854775807, writer_attempt = 1 WHERE id = ?",
		//fencelint:allow provokes the identity refusal
		"UPDATE refund_jobs SET currency = 'USD', writer_attempt = 1 WHERE id = ?",
		//fencelint:allow provokes the state-machine refusal
		"UPDATE refund_jobs SET state = 'manual_review', review_reason = 'x', lease_until = NULL, attempt = 2, writer_attempt = 1 WHERE id = ?",
		//fencelint:allow provokes the key-window refusal
		"UPDATE refund_jobs SET key_first_used_at = NULL, writer_attempt = 1 WHERE id = ?",
		"DELETE FROM refund_jobs WHERE id = ?",
	} {
		refused(t, db, "refund_jobs#9223372036854775000: ", q, id)
	}
	mustExec(t, db, "UPDATE refund_jobs SET state = 'failed', writer_attempt = 1, lease_until = NULL WHERE id = ? AND state = 'running' AND attempt = 1", id)
	//fencelint:allow provokes the terminal refusal
	refused(t, db, "is terminal", "UPDATE refund_jobs SET last_error = 'x', writer_attempt = 1 WHERE id = ?", id)
}
