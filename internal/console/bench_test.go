package console

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/operator"
)

// BenchmarkConsolePages measures the console's pages on a table of a
// million jobs (FENCEKIT_CONSOLE_BENCH_JOBS to change it), nearly all
// settled, as a long-lived deployment's table is: 1% failed, 2% ready, 0.4%
// running, 0.1% in manual review. The rows are written before the fences
// exist (dbtest.NewWithHistory), in one statement; filling takes a minute
// or two. The dashboard is measured uncached (its figures are otherwise
// reused for dashTTL).
//
//	go test -run '^$' -bench ConsolePages -benchtime 20x ./internal/console
func BenchmarkConsolePages(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("FENCEKIT_CONSOLE_BENCH_JOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10_000 || n > 10_000_000 {
			b.Fatalf("FENCEKIT_CONSOLE_BENCH_JOBS=%q: want a number of jobs from 10000 to 10000000", s)
		}
	}
	start := time.Now()
	db := dbtest.NewWithHistory(b, 1, func(raw *sql.DB) { fill(b, raw, n) })
	fillAttempts(b, db.RawDB())
	b.Logf("%d jobs written and migrated, their attempts logged, in %v", n, time.Since(start).Round(time.Second))
	f := fixtureOn(b, db)
	a := f.agent("192.0.2.1:1000")
	a.signIn("rita")
	q, err := f.op.Queue(context.Background(), "", operator.Page{Limit: 50})
	if err != nil || len(q.Items) == 0 {
		b.Fatalf("queue: %v (%d items)", err, len(q.Items))
	}
	review := q.Items[0].ID
	deep, err := f.op.Queue(context.Background(), "", operator.Page{Limit: 500})
	if err != nil {
		b.Fatal(err)
	}
	pages := []struct{ name, path string }{
		{"dashboard", "/"},
		{"queue", "/queue"},
		{"queue-page-11", "/queue?after=" + deep.Next},
		{"search-key", "/search?by=key&q=bench-777777"},
		{"search-payment", "/search?by=payment&q=pay-388888"},
		{"search-refund-id", "/search?by=refund&q=re_555555"},
		{"search-any", "/search?q=pay-400000"},
		{"job", fmt.Sprintf("/jobs/%d", review)},
		{"approvals", "/approvals"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				f.con.dash.mu.Lock()
				f.con.dash.at = time.Time{}
				f.con.dash.mu.Unlock()
				rw := a.do("GET", p.path, nil)
				if rw.Code != http.StatusOK && rw.Code != http.StatusSeeOther {
					b.Fatalf("%s: %d %s", p.path, rw.Code, rw.Body)
				}
			}
		})
	}
}

// fillAttempts writes the attempts log of every job past attempt 0, as
// the fenced claims would have (the log's trigger checks each row against
// its job): a claim each, 1% of them takeovers, so that the dashboard's
// count of takeovers in the last hour and the job page's attempts read a
// log of the table's size.
func fillAttempts(b testing.TB, raw *sql.DB) {
	b.Helper()
	if _, err := raw.Exec(`INSERT INTO refund_job_attempts (job_id, attempt, op, holder, claimed_at, lease_until)
		SELECT id, attempt, IF(id % 100 = 7, 'takeover', 'claim'), CONCAT('bench-host/', id % 16), created_at + INTERVAL 1 SECOND,
			created_at + INTERVAL 31 SECOND
		FROM refund_jobs WHERE attempt >= 1`); err != nil {
		b.Fatalf("fill the attempts log: %v", err)
	}
}

// fill writes n jobs in one INSERT … SELECT over a generated sequence.
func fill(b testing.TB, raw *sql.DB, n int) {
	b.Helper()
	q := fmt.Sprintf(`INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, lease_until,
		next_action, next_run_at, provider_refund_id, review_reason, created_at, updated_at)
	SELECT CONCAT('bench-', s.n), CONCAT('pay-', s.n DIV 2), 1000 + s.n %% 9000, 'EUR', s.state,
		IF(s.state = 'ready', 0, 1), IF(s.state = 'running', UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, NULL),
		'refund', UTC_TIMESTAMP(6) - INTERVAL (%[1]d - s.n) SECOND,
		IF(s.state IN ('succeeded', 'manual_review'), CONCAT('re_', s.n), NULL),
		IF(s.state = 'manual_review', 'not found after the lookup lag', NULL),
		UTC_TIMESTAMP(6) - INTERVAL (%[1]d - s.n) SECOND, UTC_TIMESTAMP(6) - INTERVAL (%[1]d - s.n) SECOND + INTERVAL 2 SECOND
	FROM (SELECT q.n, CASE WHEN q.n %% 1000 = 0 THEN 'manual_review' WHEN q.n %% 100 = 1 THEN 'failed'
			WHEN q.n %% 50 = 2 THEN 'ready' WHEN q.n %% 250 = 3 THEN 'running' ELSE 'succeeded' END AS state
		FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*d.d + 10000*e.d + 100000*f.d + 1000000*g.d + 1 AS n
			FROM %[2]s a, %[2]s b, %[2]s c, %[2]s d, %[2]s e, %[2]s f, %[2]s g) q
		WHERE q.n <= %[1]d) s`, n, dbtest.Digits)
	if _, err := raw.Exec(q); err != nil {
		b.Fatalf("fill %d jobs: %v", n, err)
	}
}
