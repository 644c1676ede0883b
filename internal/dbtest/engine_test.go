package dbtest_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
)

// Every difference between engines that the suite states (dbtest.Engine) is
// true of the server it runs against: on MySQL and MariaDB, and on TiDB.
func TestEngineIsWhatTheSuiteStates(t *testing.T) {
	d := dbtest.New(t)
	e := d.Engine()
	t.Logf("%s (%s): %+v", e.Name, e.Version, e)
	raw := d.RawDB()
	c := d.Client()
	ctx := t.Context()
	enqueue := func(key string) *ent.RefundJob {
		t.Helper()
		job, _, err := c.RefundJob.Enqueue(ctx, ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 100, Currency: "EUR"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		if err := raw.QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("DatabaseFence and Procedures: the migrations made triggers and a procedure, or none", func(t *testing.T) {
		triggers := count("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", d.Name)
		routines := count("SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?", d.Name)
		if (triggers > 0) != e.DatabaseFence || (routines > 0) != e.Procedures {
			t.Fatalf("%d triggers and %d routines, but the suite states fence %v, procedures %v", triggers, routines, e.DatabaseFence, e.Procedures)
		}
		if _, err := raw.Exec("CREATE PROCEDURE fk_probe() SELECT 1"); (err == nil) != e.Procedures {
			t.Fatalf("CREATE PROCEDURE: %v, but the suite states procedures %v", err, e.Procedures)
		}
	})
	t.Run("DatabaseFence: a write that declares no attempt is refused, or lands", func(t *testing.T) {
		job := enqueue("undeclared")
		//fencelint:allow a write that bypasses the fenced layer, on purpose: only the database's fence can refuse it
		_, err := raw.Exec("UPDATE refund_jobs SET last_error = 'bypass' WHERE id = ?", job.ID)
		refused := dbtest.IsTriggerRefusal(err, "must declare the attempt it holds")
		if refused != e.DatabaseFence || (!refused && err != nil) {
			t.Fatalf("undeclared write: %v, but the suite states fence %v", err, e.DatabaseFence)
		}
	})
	t.Run("DatabaseFence: a fenced write leaves writer_attempt cleared, or declared", func(t *testing.T) {
		job := enqueue("declared")
		if _, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
		var writer sql.NullInt64
		if err := raw.QueryRow("SELECT writer_attempt FROM refund_jobs WHERE id = ?", job.ID).Scan(&writer); err != nil {
			t.Fatal(err)
		}
		// The claim declared attempt 0, the attempt it held.
		if writer.Valid == e.DatabaseFence || (writer.Valid && writer.Int64 != 0) {
			t.Fatalf("writer_attempt after a claim is %v, but the suite states fence %v", writer, e.DatabaseFence)
		}
	})
	t.Run("SkipLocked: a scan skips the rows others hold and locks what it returns, or neither", func(t *testing.T) {
		held, free := enqueue("held"), enqueue("free")
		holder, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.Exec("SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE", held.ID); err != nil {
			t.Fatal(err)
		}
		scanner, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer scanner.Rollback()
		rows, err := scanner.Query("SELECT id FROM refund_jobs WHERE id IN (?, ?) ORDER BY id FOR UPDATE SKIP LOCKED", held.ID, free.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		rows.Close()
		sawHeld := len(got) > 0 && got[0] == held.ID
		prober, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer prober.Rollback()
		_, err = prober.Exec("SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE NOWAIT", free.ID)
		lockedFree := err != nil
		if sawHeld == e.SkipLocked || lockedFree != e.SkipLocked {
			t.Fatalf("the scan returned %v (held %d) and locked the free row: %v; the suite states skip locked %v", got, held.ID, lockedFree, e.SkipLocked)
		}
	})
	t.Run("ExplainFormat: the columns of EXPLAIN", func(t *testing.T) {
		rows, err := raw.Query("EXPLAIN SELECT id FROM refund_jobs WHERE id = 1")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		rows.Close()
		joined := "," + strings.Join(cols, ",") + ","
		mysql, tidb := strings.Contains(joined, ",possible_keys,"), strings.Contains(joined, ",access object,")
		if mysql != (e.ExplainFormat == "mysql") || tidb != (e.ExplainFormat == "tidb") {
			t.Fatalf("EXPLAIN columns %v, but the suite states format %q", cols, e.ExplainFormat)
		}
		if plan := dbtest.Explain(t, raw, "SELECT id FROM refund_jobs WHERE id = ?", 1); plan[0].Table != "refund_jobs" || plan[0].Key != "PRIMARY" {
			t.Fatalf("a lookup by id reads %+v, want refund_jobs by PRIMARY", plan)
		}
	})
	t.Run("ClockIsText: the clock's type, and comparisons that hold either way", func(t *testing.T) {
		rows, err := raw.Query("SELECT " + fencedwrite.ClockUTC)
		if err != nil {
			t.Fatal(err)
		}
		types, _ := rows.ColumnTypes()
		rows.Close()
		if text := types[0].DatabaseTypeName() != "DATETIME"; text != e.ClockIsText {
			t.Fatalf("the clock is a %s, but the suite states text %v", types[0].DatabaseTypeName(), e.ClockIsText)
		}
		// A whole second, which TiDB writes without a fraction, against a
		// DATETIME(6) value of the same instant: equal as times, not as text.
		const second = "TIMESTAMPADD(MICROSECOND, 1796281205000000, TIMESTAMP'1970-01-01 00:00:00')"
		var le, lt bool
		var least string
		if err := raw.QueryRow("SELECT CAST('2026-12-03 07:00:05.000000' AS DATETIME(6)) <= "+second+
			", CAST('2026-12-03 07:00:05.000000' AS DATETIME(6)) < "+second+
			", "+fencedwrite.Micros("LEAST(CAST('2026-12-03 07:00:05.000001' AS DATETIME(6)), "+second+")")).Scan(&le, &lt, &least); err != nil {
			t.Fatal(err)
		}
		if !le || lt || least != "1796281205000000" {
			t.Fatalf("<= %v, < %v, LEAST %s: the clock does not compare as a DATETIME", le, lt, least)
		}
	})
	t.Run("SessionMovesSysdate: a session can move the clock no session should, or not", func(t *testing.T) {
		one := dbtest.OpenDSN(t, d.Config().FormatDSN()) // its session settings stay in its own pool
		one.SetMaxOpenConns(1)
		_, err := one.Exec("SET SESSION tidb_sysdate_is_now = ON")
		if err == nil {
			_, err = one.Exec("SET timestamp = 1000000")
		}
		var micros int64
		if err := one.QueryRow("SELECT " + fencedwrite.ClockMicros).Scan(&micros); err != nil {
			t.Fatal(err)
		}
		if moved := micros < 2_000_000_000_000; moved != e.SessionMovesSysdate {
			t.Fatalf("the clock reads %d µs after a session tried to move it (%v), but the suite states %v", micros, err, e.SessionMovesSysdate)
		}
	})
	t.Run("SessionQuestions: a per-session statement counter, or none", func(t *testing.T) {
		rows, err := raw.Query("SHOW SESSION STATUS LIKE 'Questions'")
		if err != nil {
			t.Fatal(err)
		}
		has := rows.Next()
		rows.Close()
		if has != e.SessionQuestions {
			t.Fatalf("Questions counter: %v, but the suite states %v", has, e.SessionQuestions)
		}
	})
}

// CountedDB counts each statement once, however the driver writes it, and
// nothing else: not the connection's set-up, not the pings.
func TestCountedDBCountsStatements(t *testing.T) {
	d := dbtest.New(t)
	db, sent := d.CountedDB(fencedwrite.DSNOptions{})
	if n := sent.Sent(); n != 0 {
		t.Fatalf("a fresh pool counts %d statements, want 0", n)
	}
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 70_000) // several writes, and packets, of one statement
	for _, q := range []struct {
		sql  string
		args []any
	}{{"SELECT 1", nil}, {"SELECT '" + big + "'", nil}, {"SELECT ?", []any{7}}} {
		var v any
		if err := db.QueryRow(q.sql, q.args...).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := sent.Sent(); n != 5 {
		t.Fatalf("counted %d statements, want 5 (three SELECTs, BEGIN, COMMIT)", n)
	}
}
