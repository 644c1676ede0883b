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
// many commits as the cycle makes, at the same concurrency.
type ceilingResult struct {
	Concurrency      int       `json:"concurrency"`
	JobsPerRound     int       `json:"jobs_per_round"`
	Fenced           []float64 `json:"fenced_jobs_per_s"`
	Ceiling          []float64 `json:"ceiling_jobs_per_s"`
	FencedMedian     float64   `json:"fenced_median_jobs_per_s"`
	CeilingMedian    float64   `json:"ceiling_median_jobs_per_s"`
	Ratio            float64   `json:"ratio"`
	StatementsPerJob float64   `json:"fenced_statements_per_job"`
	CommitsPerJob    float64   `json:"fenced_commits_per_job"`
	CeilingStmts     float64   `json:"ceiling_statements_per_job"`
}

// ceilingTable is the plain table of the two-commit ceiling: no trigger,
// no secondary index.
const ceilingTable = "CREATE TABLE bench_ceiling (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"

func ceilingSection(ctx context.Context, perRound, rounds, conc int) (ceilingResult, error) {
	res := ceilingResult{Concurrency: conc, JobsPerRound: perRound}
	m, err := newMariaDB(ctx, "ceiling", nil)
	if err != nil {
		return res, err
	}
	defer m.close()
	raw, err := m.raw()
	if err != nil {
		return res, err
	}
	defer raw.Close()
	total := perRound * rounds
	if err := enqueue(ctx, raw, 0, total); err != nil {
		return res, err
	}
	if _, err := raw.ExecContext(ctx, ceilingTable); err != nil {
		return res, err
	}
	ids, err := jobIDs(ctx, raw)
	if err != nil {
		return res, err
	}
	// Job i's ceiling rows are 2i and 2i+1.
	rowsNeeded := 2*int(ids[len(ids)-1]) + 2
	for lo := 0; lo < rowsNeeded; lo += insertBatch {
		var b strings.Builder
		b.WriteString("INSERT INTO bench_ceiling (id) VALUES ")
		for i := lo; i < min(lo+insertBatch, rowsNeeded); i++ {
			if i > lo {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "(%d)", i)
		}
		if _, err := raw.ExecContext(ctx, b.String()); err != nil {
			return res, err
		}
	}

	// One pool for each side, both with the fenced layer's settings, so
	// that each side's statements are counted on its own sessions.
	var fencedCounts, ceilingCounts sessionCounts
	fdb, err := m.fenced(&fencedCounts)
	if err != nil {
		return res, err
	}
	defer fdb.Close()
	cdb, err := m.fenced(&ceilingCounts)
	if err != nil {
		return res, err
	}
	defer cdb.Close()
	for _, db := range []*sql.DB{fdb, cdb} {
		db.SetMaxOpenConns(conc)
		db.SetMaxIdleConns(conc)
	}
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, fdb)))
	opts := fencedwrite.ClaimOptions{}

	fenced := func(id int64) error {
		l, err := client.RefundJob.Claim(ctx, id, opts)
		if err != nil {
			return err
		}
		key := l.Request().OperationKey
		return client.RefundJob.Apply(ctx, l.Complete("re_"+key), ledger.Refunded(key, "re_"+key))
	}
	ceiling := func(id int64) error {
		for _, row := range []int64{2 * id, 2*id + 1} {
			if _, err := cdb.ExecContext(ctx, "UPDATE bench_ceiling SET v = v + 1 WHERE id = ?", row); err != nil {
				return err
			}
		}
		return nil
	}
	for r := range rounds {
		batch := ids[r*perRound : (r+1)*perRound]
		sides := []struct {
			name string
			fn   func(int64) error
			out  *[]float64
		}{{"fenced cycle", fenced, &res.Fenced}, {"ceiling", ceiling, &res.Ceiling}}
		if r%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, s := range sides {
			perS, err := concurrently(batch, conc, s.fn)
			if err != nil {
				return res, fmt.Errorf("%s: %w", s.name, err)
			}
			*s.out = append(*s.out, perS)
		}
	}
	if err := fdb.Close(); err != nil {
		return res, err
	}
	if err := cdb.Close(); err != nil {
		return res, err
	}
	res.FencedMedian, res.CeilingMedian = median(res.Fenced), median(res.Ceiling)
	res.Ratio = res.FencedMedian / res.CeilingMedian
	res.StatementsPerJob = float64(fencedCounts.questions.Load()) / float64(total)
	res.CommitsPerJob = float64(fencedCounts.commits.Load()) / float64(total)
	res.CeilingStmts = float64(ceilingCounts.questions.Load()) / float64(total)
	return res, nil
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
