package migrations_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
)

// These tests prove each rule of the database's fence (the triggers in
// *_fences.sql) with raw SQL, as any client in any language would write it.
// The statements are unfenced on purpose, so each carries a fencelint
// directive.

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func refused(t *testing.T, db *sql.DB, rule, query string, args ...any) {
	t.Helper()
	_, err := db.Exec(query, args...)
	if !dbtest.IsTriggerRefusal(err, rule) {
		t.Fatalf("%s\n  got error %v\n  want the fence's refusal containing %q", query, err, rule)
	}
}

// newJob inserts a job as Enqueue does and returns its id.
func newJob(t *testing.T, db *sql.DB, key string) int64 {
	t.Helper()
	res, err := db.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
		"VALUES (?, 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", key)
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
	state   string
	attempt int64
	writer  sql.NullInt64
}

func readJob(t *testing.T, db *sql.DB, id int64) jobRow {
	t.Helper()
	var r jobRow
	if err := db.QueryRow("SELECT state, attempt, writer_attempt FROM refund_jobs WHERE id = ?", id).Scan(&r.state, &r.attempt, &r.writer); err != nil {
		t.Fatal(err)
	}
	return r
}

// claim moves a ready job to running at attempt+1 the way the fenced layer
// does, declaring the attempt it holds.
func claim(t *testing.T, db *sql.DB, id, attempt int64) {
	t.Helper()
	mustExec(t, db, "UPDATE refund_jobs SET state = 'running', attempt = ?, writer_attempt = ?, lease_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND "+
		"WHERE id = ? AND state = 'ready' AND attempt = ?", attempt+1, attempt, id, attempt)
}

func TestFenceJobsAreBornReadyAtAttemptZero(t *testing.T) {
	db := dbtest.New(t).RawDB()
	refused(t, db, "born ready at attempt 0",
		"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_run_at, created_at, updated_at) "+
			"VALUES ('k1', 'p', 1, 'EUR', 'running', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	refused(t, db, "born ready at attempt 0",
		"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, attempt, next_run_at, created_at, updated_at) "+
			"VALUES ('k2', 'p', 1, 'EUR', 7, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	refused(t, db, "holds no lease",
		"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, lease_until, next_run_at, created_at, updated_at) "+
			"VALUES ('k3', 'p', 1, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	id := newJob(t, db, "k4")
	if got := readJob(t, db, id); got.state != "ready" || got.attempt != 0 || got.writer.Valid {
		t.Fatalf("new job = %+v, want ready at attempt 0 with no writer", got)
	}
}

func TestFenceEveryUpdateDeclaresTheCurrentAttempt(t *testing.T) {
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
			"UPDATE refund_jobs SET state = 'ready', writer_attempt = 0 WHERE id = ?", id)
	})
	t.Run("the declaration is cleared after each write", func(t *testing.T) {
		//fencelint:allow proves the declaration is cleared whatever the WHERE clause says
		mustExec(t, db, "UPDATE refund_jobs SET last_error = 'x', writer_attempt = 1 WHERE id = ?", id)
		if got := readJob(t, db, id); got.writer.Valid {
			t.Fatalf("writer_attempt = %v after the write, want NULL", got.writer)
		}
		//fencelint:allow the next write must declare again
		refused(t, db, "must declare the attempt it holds", "UPDATE refund_jobs SET last_error = 'y' WHERE id = ?", id)
	})
	t.Run("attempt may only stay or grow by one", func(t *testing.T) {
		refused(t, db, "attempt may only stay or grow by one, not go 1 -> 3",
			//fencelint:allow proves the trigger bounds the token whatever the WHERE clause says
			"UPDATE refund_jobs SET attempt = 3, writer_attempt = 1 WHERE id = ?", id)
		//fencelint:allow proves the trigger refuses a decreasing token
		refused(t, db, "not go 1 -> 0", "UPDATE refund_jobs SET attempt = 0, writer_attempt = 1 WHERE id = ?", id)
		mustExec(t, db, "UPDATE refund_jobs SET attempt = 2, writer_attempt = 1, lease_until = UTC_TIMESTAMP(6) WHERE id = ? AND state = 'running' AND attempt = 1", id)
		if got := readJob(t, db, id); got.attempt != 2 {
			t.Fatalf("attempt = %d, want 2", got.attempt)
		}
	})
	t.Run("the request's identity never changes", func(t *testing.T) {
		for _, set := range []string{"operation_key = 'other'", "amount_minor = 999", "currency = 'USD'", "payment_ref = 'pay-2'", "id = id + 1000"} {
			refused(t, db, "created_at never change", "UPDATE refund_jobs SET "+set+", writer_attempt = 2 WHERE id = ? AND state = 'running' AND attempt = 2", id)
		}
	})
	t.Run("an upsert that declares nothing is refused", func(t *testing.T) {
		refused(t, db, "must declare the attempt it holds",
			//fencelint:allow proves INSERT ... ON DUPLICATE KEY UPDATE meets the same fence
			"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
				"VALUES ('k', 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE state = 'ready'")
	})
}

func TestFenceTerminalRowsNeverChange(t *testing.T) {
	db := dbtest.New(t).RawDB()
	for _, terminal := range []string{"succeeded", "failed"} {
		t.Run(terminal, func(t *testing.T) {
			id := newJob(t, db, "k-"+terminal)
			claim(t, db, id, 0)
			mustExec(t, db, "UPDATE refund_jobs SET state = ?, writer_attempt = 1, lease_until = NULL WHERE id = ? AND state = 'running' AND attempt = 1", terminal, id)
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

func TestFenceJobsAreNeverDeletedOrReplaced(t *testing.T) {
	db := dbtest.New(t).RawDB()
	id := newJob(t, db, "k")
	claim(t, db, id, 0)
	mustExec(t, db, "UPDATE refund_jobs SET state = 'succeeded', writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
	refused(t, db, "never deleted or replaced", "DELETE FROM refund_jobs WHERE id = ?", id)
	refused(t, db, "never deleted or replaced",
		//fencelint:allow proves REPLACE cannot reset a settled job to ready
		"REPLACE INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
			"VALUES ('k', 'pay-1', 500, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	if got := readJob(t, db, id); got.state != "succeeded" {
		t.Fatalf("job = %+v, want it still succeeded", got)
	}
}

func TestFenceArchivalPathMovesOnlyOldTerminalRows(t *testing.T) {
	db := dbtest.New(t).RawDB()
	settle := func(key, state, age string) int64 {
		id := newJob(t, db, key)
		claim(t, db, id, 0)
		mustExec(t, db, "UPDATE refund_jobs SET state = ?, writer_attempt = 1, updated_at = UTC_TIMESTAMP(6) - INTERVAL "+age+
			" WHERE id = ? AND state = 'running' AND attempt = 1", state, id)
		return id
	}
	oldOK := settle("old-succeeded", "succeeded", "40 DAY")
	oldFailed := settle("old-failed", "failed", "40 DAY")
	recent := settle("recent", "succeeded", "1 DAY")
	oldRunning := newJob(t, db, "old-running")
	claim(t, db, oldRunning, 0)
	mustExec(t, db, "UPDATE refund_jobs SET updated_at = UTC_TIMESTAMP(6) - INTERVAL 40 DAY, writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", oldRunning)

	refused(t, db, "cutoff must be at least 30 days in the past", "CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 1 DAY)")

	// A session that fakes the procedure's marker still cannot delete a
	// live job or a recent one.
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "SET @refund_jobs_archive_cutoff = UTC_TIMESTAMP(6)"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{oldRunning, recent} {
		_, err := conn.ExecContext(t.Context(), "DELETE FROM refund_jobs WHERE id = ?", id)
		if !dbtest.IsTriggerRefusal(err, "only terminal jobs older than 30 days and the cutoff") {
			t.Fatalf("delete of job %d with a faked marker: %v, want the fence's refusal", id, err)
		}
	}

	mustExec(t, db, "CALL refund_jobs_archive(UTC_TIMESTAMP(6) - INTERVAL 31 DAY)")
	ids := func(table string) map[int64]bool {
		rows, err := db.Query("SELECT id FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got[id] = true
		}
		return got
	}
	live, archived := ids("refund_jobs"), ids("refund_jobs_archive")
	for id, want := range map[int64]bool{oldOK: true, oldFailed: true, recent: false, oldRunning: false} {
		if archived[id] != want || live[id] == want {
			t.Errorf("job %d: archived=%v live=%v, want archived=%v", id, archived[id], live[id], want)
		}
	}
}

func TestFenceObservationLogIsAppendOnly(t *testing.T) {
	db := dbtest.New(t).RawDB()
	res, err := db.Exec("INSERT INTO refund_observations (dedup_key, operation_key, source, provider_status, payload, received_at) " +
		"VALUES ('d1', 'k', 'webhook', 'succeeded', '{}', UTC_TIMESTAMP(6))")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	refused(t, db, "evidence is append-only", "UPDATE refund_observations SET provider_status = 'rejected' WHERE id = ?", id)
	refused(t, db, "evidence is append-only", "UPDATE refund_observations SET payload = 'edited' WHERE id = ?", id)
	mustExec(t, db, "UPDATE refund_observations SET processed_at = UTC_TIMESTAMP(6) WHERE id = ?", id)
	refused(t, db, "processed_at is set once", "UPDATE refund_observations SET processed_at = NULL WHERE id = ?", id)
	refused(t, db, "rows are never deleted", "DELETE FROM refund_observations WHERE id = ?", id)
}

// MySQL refuses a SIGNAL whose MESSAGE_TEXT exceeds 128 characters (MariaDB
// allows more), so every refusal must fit even with the largest ids.
func TestFenceMessagesFitMySQLsLimit(t *testing.T) {
	db := dbtest.New(t).RawDB()
	mustExec(t, db, "ALTER TABLE refund_jobs AUTO_INCREMENT = 9223372036854775000")
	id := newJob(t, db, "k")
	claim(t, db, id, 0)
	statements := []string{
		//fencelint:allow each of these provokes one refusal of the trigger
		"UPDATE refund_jobs SET state = 'ready' WHERE id = ?",
		//fencelint:allow provokes the stale-writer refusal
		"UPDATE refund_jobs SET state = 'ready', writer_attempt = 9223372036854775807 WHERE id = ?",
		//fencelint:allow provokes the attempt-bound refusal
		"UPDATE refund_jobs SET attempt = 9223372036854775807, writer_attempt = 1 WHERE id = ?",
		//fencelint:allow provokes the identity refusal
		"UPDATE refund_jobs SET currency = 'USD', writer_attempt = 1 WHERE id = ?",
		"DELETE FROM refund_jobs WHERE id = ?",
	}
	for _, q := range statements {
		_, err := db.Exec(q, id)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1644 {
			t.Fatalf("%s: %v, want the fence's refusal", q, err)
		}
		if n := len(me.Message); n > 128 {
			t.Errorf("%d-character refusal exceeds MySQL's 128: %s", n, me.Message)
		}
	}
	mustExec(t, db, "UPDATE refund_jobs SET state = 'failed', writer_attempt = 1 WHERE id = ? AND state = 'running' AND attempt = 1", id)
	//fencelint:allow provokes the terminal refusal
	_, err := db.Exec("UPDATE refund_jobs SET last_error = 'x', writer_attempt = 1 WHERE id = ?", id)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || len(me.Message) > 128 {
		t.Errorf("terminal refusal: %v", err)
	}
}
