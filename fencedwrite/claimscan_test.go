//go:build !tidb

package fencedwrite_test

import (
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// A claim pass reads the due rows, not every ready row: with 5,000 jobs
// ready but due in an hour (backoffs, a provider's outage) and three due,
// each scan of the scheduler reads about three index entries. Before, the
// scans compared the due time with the clock written into the statement
// (SYSDATE(6), which the optimizer evaluates per row and cannot take as a
// range bound), and read, and under REPEATABLE READ locked until the claim
// committed, every ready row: a cost per pass that grew with the backlog.
// Measured on the claim's own session (a pool of one connection) by the
// server's handler counters.
func TestClaimScansReadOnlyTheDueRows(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	raw := d.RawDB()
	generate := func(prefix, action, due string, n int) {
		t.Helper()
		if _, err := raw.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_action, next_run_at, created_at, updated_at) "+
			"SELECT CONCAT(?, a.d + 10*b.d + 100*c.d + 1000*e.d), 'pay-gen', 100, 'EUR', '"+action+"', "+due+", "+fencedwrite.ClockUTC+", "+fencedwrite.ClockUTC+
			" FROM "+dbtest.Digits+" a, "+dbtest.Digits+" b, "+dbtest.Digits+" c, "+dbtest.Digits+" e WHERE a.d + 10*b.d + 100*c.d + 1000*e.d < ?", prefix, n); err != nil {
			t.Fatal(err)
		}
	}
	// 1,000 running jobs whose leases are live, then 5,000 ready sends and
	// 2,000 ready reconciles due in an hour, then three due jobs.
	generate("running-", "refund", fencedwrite.ClockUTC, 1000)
	other := d.Client()
	for n := 0; n < 1000; {
		got, err := other.RefundJob.ClaimDue(t.Context(), fencedwrite.MaxBatch, opts)
		if err != nil || len(got) == 0 {
			t.Fatalf("claim the running jobs: %d claimed, %v", n, err)
		}
		n += len(got)
	}
	generate("later-", "refund", fencedwrite.ClockUTC+" + INTERVAL 1 HOUR", 5000)
	generate("reconcile-later-", "reconcile", fencedwrite.ClockUTC+" + INTERVAL 1 HOUR", 2000)
	// The statistics of a table that grew by thousands of rows in one
	// statement lag behind it until InnoDB recounts them in the background
	// (after a tenth of the table changed); with the old counts the
	// optimizer may read the index by its first column alone, as before.
	// A table in service has grown row by row: its counts are recent.
	if _, err := raw.Exec("ANALYZE TABLE refund_jobs"); err != nil {
		t.Fatal(err)
	}
	pool := d.FencedDB(fencedwrite.DSNOptions{})
	pool.SetMaxOpenConns(1)
	c := dbtest.ClientOn(t, pool)
	for _, k := range []string{"due-1", "due-2", "due-3"} {
		p := request(k)
		if _, _, err := c.RefundJob.Enqueue(t.Context(), p, ledger.Open(p)); err != nil {
			t.Fatal(err)
		}
	}
	// The index entries the session read: those the engine returned
	// (Handler_read_next) and, on MariaDB, those index condition pushdown
	// looked at and dropped before returning them (Handler_icp_attempts).
	reads := func() int64 {
		rows, err := pool.QueryContext(t.Context(), "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_icp_attempts')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var sum int64
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			sum += n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	before := reads()
	claimed, err := c.RefundJob.ClaimDue(t.Context(), 10, opts)
	if err != nil {
		t.Fatal(err)
	}
	readDue := reads() - before
	if len(claimed) != 3 {
		t.Fatalf("claimed %d jobs, want the 3 due", len(claimed))
	}
	before = reads()
	if _, err := c.RefundJob.ClaimDueReconciles(t.Context(), 10, opts); err != nil {
		t.Fatal(err)
	}
	readReconciles := reads() - before
	before = reads()
	if _, err := c.RefundJob.TakeoverExpired(t.Context(), 10, opts); err != nil {
		t.Fatal(err)
	}
	readExpired := reads() - before
	t.Logf("index entries read: ClaimDue %d, ClaimDueReconciles %d, TakeoverExpired %d (7,000 ready jobs due in an hour, 2,000 of them reconciles; 1,000 running on live leases; 3 due)", readDue, readReconciles, readExpired)
	if readDue > 200 {
		table, _ := fencedrt.Registered(ent.RefundJobFencedTable)
		query, args, err := table.Bind(fencedrt.OpDue, fencedrt.Values{fencedrt.ParamLimit: 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the due scan's plan: %v", dbtest.ExplainRows(t, pool, query, args...))
	}
	if readDue > 200 || readReconciles > 200 || readExpired > 200 {
		t.Fatalf("a claim pass read %d, %d, %d index entries with 3 jobs due: it reads the ready rows that are not due", readDue, readReconciles, readExpired)
	}
	var running int
	if err := raw.QueryRow("SELECT COUNT(*) FROM refund_jobs WHERE state = ?", string(refundjob.StateRunning)).Scan(&running); err != nil || running != 1003 {
		t.Fatalf("%d running (%v), want the 1,000 and the 3 claimed", running, err)
	}
}
