package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// mariaDB is one throw-away database on the local MySQL-compatible server
// (FENCEKIT_TEST_DSN, or root on 127.0.0.1:3306, as the tests use).
type mariaDB struct {
	cfg  *mysql.Config
	name string
	drop func(context.Context) error
}

// newMariaDB creates an empty database whose name starts with prefix. With
// history, it applies the first migration only (the tables, before the
// fences), lets history write rows the fences would refuse, then applies
// the rest; without, it applies every migration.
func newMariaDB(ctx context.Context, prefix string, history func(*sql.DB) error) (*mariaDB, error) {
	cfg, err := devdb.ServerConfig()
	if err != nil {
		return nil, err
	}
	name, drop, err := devdb.Create(ctx, cfg, "bench_"+prefix)
	if err != nil {
		return nil, fmt.Errorf("no usable MySQL-compatible server at %s (set %s): %w", cfg.Addr, devdb.EnvDSN, err)
	}
	m := &mariaDB{cfg: cfg, name: name, drop: drop}
	raw, err := m.raw()
	if err != nil {
		return nil, m.fail(err)
	}
	defer raw.Close()
	if history != nil {
		if _, err := migrations.ApplyN(ctx, raw, 1); err != nil {
			return nil, m.fail(fmt.Errorf("apply the first migration: %w", err))
		}
		if err := history(raw); err != nil {
			return nil, m.fail(fmt.Errorf("write history: %w", err))
		}
	}
	if _, err := migrations.Apply(ctx, raw); err != nil {
		return nil, m.fail(fmt.Errorf("apply migrations: %w", err))
	}
	return m, nil
}

func (m *mariaDB) fail(err error) error {
	_ = m.drop(context.Background())
	return err
}

// dsn is the database's DSN, without the fenced layer's settings.
func (m *mariaDB) dsn() string { return devdb.DSN(m.cfg, m.name) }

// raw opens a pool as a migration or bulk-load tool would: no fenced
// settings.
func (m *mariaDB) raw() (*sql.DB, error) {
	c := m.cfg.Clone()
	c.DBName = m.name
	c.ParseTime = true
	c.InterpolateParams = true
	return sql.Open("mysql", c.FormatDSN())
}

// fenced opens a pool with the fenced layer's settings whose sessions are
// counted in c (nil: not counted).
func (m *mariaDB) fenced(c *sessionCounts) (*sql.DB, error) {
	if c == nil {
		c = &sessionCounts{}
	}
	return openCounted(m.dsn(), c)
}

func (m *mariaDB) close() error { return m.drop(context.Background()) }

// request is job i's refund request. The benchmark's provider answers from
// the key alone, so both derive the request the same way.
func request(i int) ent.RefundJobEnqueue {
	return ent.RefundJobEnqueue{
		OperationKey: fmt.Sprintf("bench-%08d", i),
		PaymentRef:   fmt.Sprintf("pay-%08d", i),
		AmountMinor:  int64(100 + i%9_900),
		Currency:     "EUR",
	}
}

// requestOf parses a key request made.
func requestOf(key string) (ent.RefundJobEnqueue, bool) {
	i, err := strconv.Atoi(strings.TrimPrefix(key, "bench-"))
	if err != nil || !strings.HasPrefix(key, "bench-") {
		return ent.RefundJobEnqueue{}, false
	}
	return request(i), true
}

// insertBatch is how many rows one multi-row INSERT writes.
const insertBatch = 2_000

// enqueue enqueues jobs first..first+n-1 with the rows Enqueue writes (the
// ready job, which the fence's insert trigger registers its key with, and
// the ledger row opened as requested), but in multi-row INSERTs: the fences'
// insert triggers check every row as they check Enqueue's. Enqueueing is not
// what the benchmark measures.
func enqueue(ctx context.Context, db *sql.DB, first, n int) error {
	for lo := first; lo < first+n; lo += insertBatch {
		hi := min(lo+insertBatch, first+n)
		stmts := []struct{ head, row string }{
			{"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, next_action, next_run_at, created_at, updated_at) VALUES ",
				"(?, ?, ?, ?, 'ready', 0, 'refund', " + fencedwrite.ClockUTC + ", " + fencedwrite.ClockUTC + ", " + fencedwrite.ClockUTC + ")"},
			{"INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, created_at, updated_at) VALUES ",
				"(?, ?, ?, ?, " + fencedwrite.ClockUTC + ", " + fencedwrite.ClockUTC + ")"},
		}
		for _, s := range stmts {
			var b strings.Builder
			b.WriteString(s.head)
			args := make([]any, 0, 4*(hi-lo))
			for i := lo; i < hi; i++ {
				if i > lo {
					b.WriteString(", ")
				}
				b.WriteString(s.row)
				r := request(i)
				args = append(args, r.OperationKey, r.PaymentRef, r.AmountMinor, r.Currency)
			}
			if _, err := db.ExecContext(ctx, b.String(), args...); err != nil {
				return fmt.Errorf("enqueue jobs %d..%d: %w", lo, hi-1, err)
			}
		}
	}
	return nil
}

// countStates returns how many jobs are in each state, and how many ledger
// rows in each status.
func countStates(ctx context.Context, db *sql.DB) (jobs, ledger map[string]int, err error) {
	read := func(q string) (map[string]int, error) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				return nil, err
			}
			out[s] = n
		}
		return out, rows.Err()
	}
	if jobs, err = read("SELECT state, COUNT(*) FROM refund_jobs GROUP BY state"); err != nil {
		return nil, nil, err
	}
	if ledger, err = read("SELECT status, COUNT(*) FROM refunds GROUP BY status"); err != nil {
		return nil, nil, err
	}
	return jobs, ledger, nil
}
