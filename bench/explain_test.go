package main

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	//fencelint:allow this test EXPLAINs every statement the generated table declares, which only the runtime's table lists
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// explainHistory is the settled history the plans are checked against: big
// enough that the optimizer prefers an index wherever one serves.
const explainHistory = 3_000

// Every statement the worker and the data layer send reads or writes by an
// index, with history in the table: each statement a real worker sent while
// settling jobs, each statement of the transitions, takeovers, re-reads,
// operator resolutions and the observation log, and every statement the
// generated fenced table declares. EXPLAIN must show no full scan of a
// table or of an index, and an estimate of rows examined that does not grow
// with the settled history.
func TestEveryStatementUsesAnIndex(t *testing.T) {
	ctx := t.Context()
	m, raw := scratchDB(t, "explain", func(db *sql.DB) error { return loadHistory(ctx, db, explainHistory) })
	const due = 40
	if err := enqueue(ctx, raw, 0, due); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, "ANALYZE TABLE refund_jobs, refunds, refund_observations, refund_jobs_keys"); err != nil {
		t.Fatal(err)
	}

	seen := newStatements()
	counts := &sessionCounts{record: seen.add}
	db, err := m.fenced(counts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))

	t.Run("a worker settles jobs", func(t *testing.T) {
		const n = 20
		var mu sync.Mutex
		settled := 0
		all := make(chan struct{})
		stop, err := startWorker(ctx, db, workerSettings{Workers: 5, Provider: instantProvider{}, Done: func(_ int64, err error) {
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if settled++; settled == n {
				close(all)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-all:
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d jobs settled in a minute", settled, n)
		}
		if err := stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the data layer's other paths", func(t *testing.T) {
		dataLayerPaths(t, c)
	})

	// Every statement the generated table declares, bound by name.
	table, ok := fencedrt.Registered(ent.RefundJobFencedTable)
	if !ok {
		t.Fatal("no generated fenced table")
	}
	var id int64
	if err := raw.QueryRowContext(ctx, "SELECT MAX(id) FROM refund_jobs").Scan(&id); err != nil {
		t.Fatal(err)
	}
	now := fencedrt.SQLTime(time.Now())
	vals := fencedrt.Values{
		fencedrt.ParamID: id, fencedrt.ParamIDs: []int64{id - 1, id}, fencedrt.Each(fencedrt.ParamProviderRef): []any{"re_a", "re_b"}, fencedrt.ParamAttempt: 1, fencedrt.ParamWriter: 1, fencedrt.ParamNewAttempt: 2,
		fencedrt.ParamLeaseUntil: now, fencedrt.ParamNow: now, fencedrt.ParamKeyWindow: int64(time.Hour / time.Microsecond),
		fencedrt.ParamProviderRef: "re_x", fencedrt.ParamNextAction: "reconcile", fencedrt.ParamDelay: 0,
		fencedrt.ParamLastError: "x", fencedrt.ParamReason: "x", fencedrt.ParamEvidence: "x", fencedrt.ParamKey: "bench-00000001",
		fencedrt.ParamLimit: 10, fencedrt.ParamAttemptOp: "claim", fencedrt.ParamHolder: "bench/1",
	}
	for _, col := range table.Spec().Request {
		vals[fencedrt.RequestParam(col)] = "x"
	}
	for op := range table.Spec().Stmts {
		query, args, err := table.Bind(op, vals)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		seen.addArgs(query, args)
	}

	checked := 0
	for _, s := range seen.list() {
		verb := strings.ToUpper(strings.Fields(s.query)[0])
		if verb != "SELECT" && verb != "UPDATE" && verb != "DELETE" {
			continue // INSERTs, transaction control, session settings
		}
		if !strings.Contains(s.query, "FROM") && verb == "SELECT" {
			continue // a reading of the clock
		}
		checked++
		for _, p := range dbtest.ExplainRows(t, raw, s.query, s.args...) {
			if p["table"] == "" || strings.HasPrefix(p["table"], "<") {
				continue
			}
			rows, _ := strconv.Atoi(p["rows"])
			switch {
			case p["type"] == "ALL" || p["type"] == "index":
				t.Errorf("full scan (%s) of %s:\n  %s\n  plan %v", p["type"], p["table"], s.query, p)
			case p["key"] == "":
				t.Errorf("no index on %s:\n  %s\n  plan %v", p["table"], s.query, p)
			case rows > explainHistory/10:
				t.Errorf("%d rows examined in %s, with %d settled rows:\n  %s\n  plan %v", rows, p["table"], explainHistory, s.query, p)
			}
		}
	}
	t.Logf("%d distinct statements sent, %d reads and writes explained", len(seen.list()), checked)
	if checked < 20 {
		t.Fatalf("only %d statements explained: the capture missed the worker's", checked)
	}
}

// dataLayerPaths sends every kind of statement a worker, the reconciler and
// an operator send besides the happy path: a takeover, a stale write and its
// re-read, a reschedule, a wake-up, a manual review and its resolutions, a
// failure, a re-enqueued key, the observation log.
func dataLayerPaths(t *testing.T, c *ent.Client) {
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := ent.RefundJobEnqueue{OperationKey: "explain-1", PaymentRef: "pay-explain-1", AmountMinor: 500, Currency: "EUR"}
	job, _, err := c.RefundJob.Enqueue(ctx, p, ledger.Open(p))
	must(err)
	_, created, err := c.RefundJob.Enqueue(ctx, p, ledger.Open(p))
	if err != nil || created {
		t.Fatalf("re-enqueue: created %v, %v", created, err)
	}
	short := fencedwrite.ClaimOptions{Lease: time.Microsecond}
	stale, err := c.RefundJob.Claim(ctx, job.ID, short) // expired by the next statement
	must(err)
	taken, err := c.RefundJob.TakeoverExpired(ctx, 10, fencedwrite.ClaimOptions{})
	must(err)
	if len(taken) != 1 {
		t.Fatalf("took over %d jobs, want 1", len(taken))
	}
	if err := c.RefundJob.Apply(ctx, stale.Complete("re_1"), ledger.Refunded(p.OperationKey, "re_1")); !errors.Is(err, fencedwrite.ErrSuperseded) {
		t.Fatalf("stale write: %v, want ErrSuperseded", err)
	}
	must(c.RefundJob.Apply(ctx, taken[0].Reschedule(refundjob.NextActionReconcile, time.Hour, "", "pending"), nil))
	job, err = c.RefundJob.Get(ctx, job.ID)
	must(err)
	must(c.RefundJob.Apply(ctx, c.RefundJob.WakeUp(job), nil))
	l, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
	must(err)
	must(c.RefundJob.Apply(ctx, l.ManualReview("not found after the lag", "{}", ""), nil))
	job, err = c.RefundJob.Get(ctx, job.ID)
	must(err)
	must(c.RefundJob.Apply(ctx, c.RefundJob.ResolveReconcile(job, "asked the provider again"), nil))
	job, err = c.RefundJob.Get(ctx, job.ID)
	must(err)
	l, err = c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
	must(err)
	must(c.RefundJob.Apply(ctx, l.Fail("declined", ""), ledger.Failed(p.OperationKey)))

	o := evidence.Observation{OperationKey: p.OperationKey, JobID: job.ID, Source: evidence.Webhook, Status: evidence.Succeeded,
		ProviderRefundID: "re_1", Payload: []byte(`{"id":"evt_explain"}`), EventID: "evt_explain"}
	id, _, err := evidence.Record(ctx, c, o)
	must(err)
	_, _, err = evidence.Record(ctx, c, o)
	must(err)
	_, err = evidence.ForKey(ctx, c, p.OperationKey)
	must(err)
	_, err = evidence.Unprocessed(ctx, c, 100)
	must(err)
	must(evidence.MarkProcessed(ctx, c, id))
}

type statement struct {
	query string
	args  []any
}

// statements keeps the first arguments each distinct statement was sent
// with.
type statements struct {
	mu sync.Mutex
	by map[string]statement
}

func newStatements() *statements { return &statements{by: map[string]statement{}} }

func (s *statements) add(query string, args []driver.NamedValue) {
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a.Value
	}
	s.addArgs(query, vals)
}

func (s *statements) addArgs(query string, args []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.by[query]; !ok {
		s.by[query] = statement{query: query, args: args}
	}
}

func (s *statements) list() []statement {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []statement
	for _, st := range s.by {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b statement) int { return strings.Compare(a.query, b.query) })
	return out
}
