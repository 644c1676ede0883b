package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

// ceilingResult compares the unbatched fenced cycle (Claim by id, then
// Apply of the completion with its ledger write) with what the server
// allows: two single-row autocommit UPDATEs per job on a plain table, as
// many commits as the cycle makes, at the same concurrency. Two more sides,
// the same cycle on a copy of the schema whose triggers were dropped and on
// one holding only the floor fence (bench/floor.go), are diagnostics only:
// they show what the database's fences cost, and the least a trigger fence
// of DESIGN.md would.
type ceilingResult struct {
	Concurrency      int       `json:"concurrency"`
	JobsPerRound     int       `json:"jobs_per_round"`
	Fenced           []float64 `json:"fenced_jobs_per_s"`
	Ceiling          []float64 `json:"ceiling_jobs_per_s"`
	NoTriggers       []float64 `json:"fenced_without_triggers_jobs_per_s"`
	Floor            []float64 `json:"fenced_floor_fence_jobs_per_s"`
	FencedMedian     float64   `json:"fenced_median_jobs_per_s"`
	CeilingMedian    float64   `json:"ceiling_median_jobs_per_s"`
	NoTriggersMedian float64   `json:"fenced_without_triggers_median_jobs_per_s"`
	FloorMedian      float64   `json:"fenced_floor_fence_median_jobs_per_s"`
	Ratio            float64   `json:"ratio"`
	StatementsPerJob float64   `json:"fenced_statements_per_job"`
	CommitsPerJob    float64   `json:"fenced_commits_per_job"`
	CeilingStmts     float64   `json:"ceiling_statements_per_job"`
	// CPU is the processor time per job of each side, in milliseconds.
	CPU map[string]cpuUse `json:"cpu_ms_per_job"`
	// SessionCPU is the server's CPU per job on each side's own sessions,
	// in milliseconds (sessionCounts.serverNS).
	SessionCPU map[string]float64 `json:"session_mariadb_cpu_ms_per_job"`
}

// ceilingTable is the plain table of the two-commit ceiling: no trigger,
// no secondary index.
const ceilingTable = "CREATE TABLE bench_ceiling (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"

func ceilingSection(ctx context.Context, perRound, rounds, conc int) (ceilingResult, error) {
	res := ceilingResult{Concurrency: conc, JobsPerRound: perRound, CPU: map[string]cpuUse{}, SessionCPU: map[string]float64{}}
	total := perRound * rounds
	// The sides' schemas: the shipped fence (the cycle and the ceiling),
	// none, the floor.
	fences := [...]fenceKind{shippedFence, noFence, floorFence}
	var dbs [len(fences)]*mariaDB
	var ids [len(fences)][]int64
	for i := range dbs {
		m, err := newMariaDB(ctx, "ceiling", nil)
		if err != nil {
			return res, err
		}
		defer m.close()
		dbs[i] = m
		raw, err := m.raw()
		if err != nil {
			return res, err
		}
		defer raw.Close()
		if err := enqueue(ctx, raw, 0, total); err != nil {
			return res, err
		}
		if ids[i], err = jobIDs(ctx, raw); err != nil {
			return res, err
		}
		if i == 0 {
			if err := ceilingRows(ctx, raw, 2*int(ids[0][len(ids[0])-1])+2); err != nil {
				return res, err
			}
		} else if err := fences[i].prepare(ctx, raw, m.name); err != nil {
			return res, err
		}
	}

	// One pool for each side, all with the fenced layer's settings, so that
	// each side's statements are counted on its own sessions.
	var pools []*sql.DB
	defer func() {
		for _, db := range pools {
			db.Close()
		}
	}()
	pool := func(m *mariaDB, c *sessionCounts) (*sql.DB, error) {
		db, err := m.fenced(c)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(conc)
		db.SetMaxIdleConns(conc)
		pools = append(pools, db)
		return db, nil
	}
	opts := fencedwrite.ClaimOptions{}
	// cycle is the fenced cycle through a pool of m counted in c.
	cycle := func(m *mariaDB, c *sessionCounts) (func(int64) error, error) {
		db, err := pool(m, c)
		if err != nil {
			return nil, err
		}
		client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
		return func(id int64) error {
			l, err := client.RefundJob.Claim(ctx, id, opts)
			if err != nil {
				return err
			}
			key := l.Request().OperationKey
			return client.RefundJob.Apply(ctx, l.Complete("re_"+key), ledger.Refunded(key, "re_"+key))
		}, nil
	}
	var fencedCounts, ceilingCounts sessionCounts
	cdb, err := pool(dbs[0], &ceilingCounts)
	if err != nil {
		return res, err
	}
	ceiling := func(id int64) error {
		for _, row := range []int64{2 * id, 2*id + 1} {
			if _, err := cdb.ExecContext(ctx, "UPDATE bench_ceiling SET v = v + 1 WHERE id = ?", row); err != nil {
				return err
			}
		}
		return nil
	}
	// A side runs fn (the fenced cycle on db when nil) over its ids.
	type side struct {
		name   string
		db     *mariaDB
		fn     func(int64) error
		ids    []int64
		out    *[]float64
		counts *sessionCounts
		cpu    cpuUse
	}
	sides := []*side{
		{name: "fenced cycle", db: dbs[0], ids: ids[0], out: &res.Fenced, counts: &fencedCounts},
		{name: "ceiling", fn: ceiling, ids: ids[0], out: &res.Ceiling, counts: &ceilingCounts},
		{name: "fenced cycle without triggers", db: dbs[1], ids: ids[1], out: &res.NoTriggers, counts: new(sessionCounts)},
		{name: "fenced cycle with the floor fence", db: dbs[2], ids: ids[2], out: &res.Floor, counts: new(sessionCounts)},
	}
	for _, s := range sides {
		if s.fn == nil {
			if s.fn, err = cycle(s.db, s.counts); err != nil {
				return res, err
			}
		}
	}
	for r := range rounds {
		for k := range sides {
			s := sides[(r+k)%len(sides)] // each side goes first in turn
			meter := startCPU()
			perS, err := concurrently(s.ids[r*perRound:(r+1)*perRound], conc, s.fn)
			if err != nil {
				return res, fmt.Errorf("%s: %w", s.name, err)
			}
			s.cpu = addCPU(s.cpu, meter.stop())
			*s.out = append(*s.out, perS)
		}
	}
	// Closing a pool counts its sessions' statements and CPU.
	for _, db := range pools {
		if err := db.Close(); err != nil {
			return res, err
		}
	}
	for _, s := range sides {
		res.CPU[s.name] = perJobMS(s.cpu, total)
		res.SessionCPU[s.name] = float64(s.counts.serverNS.Load()) / 1e6 / float64(total)
	}
	res.FencedMedian, res.CeilingMedian, res.NoTriggersMedian, res.FloorMedian = median(res.Fenced), median(res.Ceiling), median(res.NoTriggers), median(res.Floor)
	res.Ratio = res.FencedMedian / res.CeilingMedian
	res.StatementsPerJob = float64(fencedCounts.questions.Load()) / float64(total)
	res.CommitsPerJob = float64(fencedCounts.commits.Load()) / float64(total)
	res.CeilingStmts = float64(ceilingCounts.questions.Load()) / float64(total)
	return res, nil
}

// ceilingRows writes rows 0..n-1 of the ceiling's table: job i's rows are
// 2i and 2i+1.
func ceilingRows(ctx context.Context, raw *sql.DB, n int) error {
	if _, err := raw.ExecContext(ctx, ceilingTable); err != nil {
		return err
	}
	for lo := 0; lo < n; lo += insertBatch {
		var b strings.Builder
		b.WriteString("INSERT INTO bench_ceiling (id) VALUES ")
		for i := lo; i < min(lo+insertBatch, n); i++ {
			if i > lo {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "(%d)", i)
		}
		if _, err := raw.ExecContext(ctx, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// dropTriggers drops every trigger of database name: the diagnostic copy.
func dropTriggers(ctx context.Context, raw *sql.DB, name string) error {
	rows, err := raw.QueryContext(ctx, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", name)
	if err != nil {
		return err
	}
	var triggers []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		triggers = append(triggers, t)
	}
	rows.Close()
	if len(triggers) == 0 {
		return fmt.Errorf("no triggers in %s", name)
	}
	for _, t := range triggers {
		if _, err := raw.ExecContext(ctx, "DROP TRIGGER `"+t+"`"); err != nil {
			return err
		}
	}
	return nil
}

func addCPU(a, b cpuUse) cpuUse {
	return cpuUse{Wall: a.Wall + b.Wall, Client: a.Client + b.Client, MariaDB: a.MariaDB + b.MariaDB, Postgres: a.Postgres + b.Postgres, Machine: a.Machine + b.Machine}
}

// perJobMS is u per job, in milliseconds.
func perJobMS(u cpuUse, jobs int) cpuUse {
	k := 1000 / float64(max(jobs, 1))
	return cpuUse{Wall: u.Wall * k, Client: u.Client * k, MariaDB: u.MariaDB * k, Postgres: u.Postgres * k, Machine: u.Machine * k}
}

// concurrently runs fn over ids from conc goroutines and returns the jobs
// per second.
func concurrently(ids []int64, conc int, fn func(int64) error) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) {
					return
				}
				if err := fn(ids[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(len(ids)) / elapsed.Seconds(), nil
}

func jobIDs(ctx context.Context, db *sql.DB) ([]int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT id FROM refund_jobs WHERE state = 'ready' ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
