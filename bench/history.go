package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

// latency is the p50 and p99 of one operation, in milliseconds.
type latency struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

func latencyOf(ds []time.Duration) latency {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = ms(d)
	}
	return latency{P50: quantile(xs, 0.5), P99: quantile(xs, 0.99)}
}

// historyResult is the cost of the worker's statements with little and with
// much settled history in refund_jobs, the ledger and the observation log.
type historyResult struct {
	SmallRows int                `json:"small_settled_rows"`
	BigRows   int                `json:"big_settled_rows"`
	Probes    int                `json:"probes"`
	Small     map[string]latency `json:"small"`
	Big       map[string]latency `json:"big"`
	// ClaimP50Ratio and ClaimP99Ratio are big / small for the worker's
	// claim (ClaimDue of one job: the pending index's scan, the primary
	// key's lock, the fenced UPDATE).
	ClaimP50Ratio float64 `json:"claim_p50_ratio"`
	ClaimP99Ratio float64 `json:"claim_p99_ratio"`
	LoadSeconds   float64 `json:"load_seconds"`
}

// The operations timed on each database, one job at a time.
var historyOps = []string{"claim", "complete", "takeover scan", "evidence for key", "unprocessed evidence"}

func historySection(ctx context.Context, small, big, probes int) (historyResult, error) {
	res := historyResult{SmallRows: small, BigRows: big, Probes: probes}
	start := time.Now()
	dbs := make([]*mariaDB, 2)
	for i, rows := range []int{small, big} {
		m, err := newMariaDB(ctx, fmt.Sprintf("history_%d", rows), func(db *sql.DB) error { return loadHistory(ctx, db, rows) })
		if err != nil {
			return res, err
		}
		defer m.close()
		dbs[i] = m
		raw, err := m.raw()
		if err != nil {
			return res, err
		}
		err = enqueue(ctx, raw, 0, probes)
		if err == nil {
			// Fresh statistics, as a server that had grown this history
			// would have.
			_, err = raw.ExecContext(ctx, "ANALYZE TABLE refund_jobs, refunds, refund_observations, refund_jobs_keys")
		}
		raw.Close()
		if err != nil {
			return res, err
		}
	}
	res.LoadSeconds = time.Since(start).Seconds()

	clients := make([]*ent.Client, 2)
	for i, m := range dbs {
		db, err := m.fenced(nil)
		if err != nil {
			return res, err
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		clients[i] = ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
	}
	timings := []map[string][]time.Duration{{}, {}}
	warm := max(probes/10, 5)
	for p := range probes {
		order := []int{0, 1}
		if p%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			t, err := probe(ctx, clients[i])
			if err != nil {
				return res, fmt.Errorf("probe %d on %d settled rows: %w", p, []int{small, big}[i], err)
			}
			if p < warm {
				continue
			}
			for op, d := range t {
				timings[i][op] = append(timings[i][op], d)
			}
		}
	}
	res.Small, res.Big = map[string]latency{}, map[string]latency{}
	for _, op := range historyOps {
		res.Small[op] = latencyOf(timings[0][op])
		res.Big[op] = latencyOf(timings[1][op])
	}
	res.ClaimP50Ratio = res.Big["claim"].P50 / res.Small["claim"].P50
	res.ClaimP99Ratio = res.Big["claim"].P99 / res.Small["claim"].P99
	return res, nil
}

// probe claims the oldest due job as the scheduler does, completes it with
// its ledger write, and times the reads a takeover scan and a reconcile
// make.
func probe(ctx context.Context, c *ent.Client) (map[string]time.Duration, error) {
	opts := fencedwrite.ClaimOptions{}
	t := map[string]time.Duration{}
	at := time.Now()
	leases, err := c.RefundJob.ClaimDue(ctx, 1, opts)
	t["claim"] = time.Since(at)
	if err != nil {
		return nil, err
	}
	if len(leases) != 1 {
		return nil, errors.New("no due job left to claim")
	}
	l := leases[0]
	key := l.Request().OperationKey
	at = time.Now()
	err = c.RefundJob.Apply(ctx, l.Complete("re_"+key), ledger.Refunded(key, "re_"+key))
	t["complete"] = time.Since(at)
	if err != nil {
		return nil, err
	}
	at = time.Now()
	taken, err := c.RefundJob.TakeoverExpired(ctx, 1, opts)
	t["takeover scan"] = time.Since(at)
	if err != nil || len(taken) != 0 {
		return nil, fmt.Errorf("takeover scan: %d leases, %v", len(taken), err)
	}
	at = time.Now()
	_, err = evidence.ForKey(ctx, c, key)
	t["evidence for key"] = time.Since(at)
	if err != nil {
		return nil, err
	}
	at = time.Now()
	_, err = evidence.Unprocessed(ctx, c, 100)
	t["unprocessed evidence"] = time.Since(at)
	return t, err
}

// historyBatch is how many rows one INSERT of history writes.
const historyBatch = 5_000

// loadHistory writes n settled jobs as they were before the fences: each
// succeeded at attempt 1 with its ledger row refunded and a processed
// webhook in the observation log, 40 days old. The three tables load in
// parallel, in multi-row INSERTs.
func loadHistory(ctx context.Context, db *sql.DB, n int) error {
	const t = "UTC_TIMESTAMP(6) - INTERVAL 40 DAY"
	tables := []struct{ head, row string }{
		{"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, next_action, next_run_at, provider_refund_id, key_first_used_at, last_send_at, created_at, updated_at) VALUES ",
			"('hist-%[1]d', 'hpay-%[1]d', %[2]d, 'EUR', 'succeeded', 1, 'refund', " + t + ", 're_hist-%[1]d', " + t + ", " + t + ", " + t + ", " + t + ")"},
		{"INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, status, provider_refund_id, settled_at, created_at, updated_at) VALUES ",
			"('hist-%[1]d', 'hpay-%[1]d', %[2]d, 'EUR', 'refunded', 're_hist-%[1]d', " + t + ", " + t + ", " + t + ")"},
		{"INSERT INTO refund_observations (dedup_key, operation_key, source, provider_refund_id, provider_status, payload, received_at, processed_at) VALUES ",
			"('webhook/evt_hist-%[1]d', 'hist-%[1]d', 'webhook', 're_hist-%[1]d', 'succeeded', '{\"id\":\"evt_hist-%[1]d\",\"type\":\"refund.succeeded\"}', " + t + ", " + t + ")"},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(tables))
	for ti, tb := range tables {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := 0; lo < n; lo += historyBatch {
				var b strings.Builder
				b.WriteString(tb.head)
				for i := lo; i < min(lo+historyBatch, n); i++ {
					if i > lo {
						b.WriteString(", ")
					}
					fmt.Fprintf(&b, tb.row, i, 100+i%9_900)
				}
				if _, err := db.ExecContext(ctx, b.String()); err != nil {
					errs[ti] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
