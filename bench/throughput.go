package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fencekit/fencekit/provider"
)

// throughput is one burn-down of n jobs.
type throughput struct {
	Jobs      int     `json:"jobs"`
	Workers   int     `json:"workers"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"jobs_per_s"`
	// StatementsPerJob and CommitsPerJob are counted by the server on the
	// worker's sessions (fencekit only).
	StatementsPerJob float64 `json:"statements_per_job,omitempty"`
	CommitsPerJob    float64 `json:"commits_per_job,omitempty"`
	Sessions         int64   `json:"sessions,omitempty"`
	// SessionCPUMS is the server's CPU per job on the worker's own
	// sessions, in milliseconds (sessionCounts.serverNS; fencekit only).
	SessionCPUMS float64 `json:"session_mariadb_cpu_ms_per_job,omitempty"`
	CPU          cpuUse  `json:"cpu"`
}

// roundTimeout bounds one burn-down: generous, so that a loaded machine
// gives a slow figure rather than none.
func roundTimeout(n int) time.Duration { return time.Minute + time.Duration(n)*5*time.Millisecond }

// fencekitRound burns down n no-op jobs through a fencekit worker with
// the given slots, on a fresh database, measured like River's benchmark:
// the jobs are enqueued first, and the run lasts from Start to the last
// write-back. conns bounds the worker's pool. Once the jobs are loaded,
// the schema gets the fence named (fenceKind.prepare): anything but the
// shipped one is a diagnostic run, never a figure of fencekit itself.
func fencekitRound(ctx context.Context, n, workers, conns int, prov provider.Client, fence fenceKind) (throughput, error) {
	m, err := newMariaDB(ctx, "throughput", nil)
	if err != nil {
		return throughput{}, err
	}
	defer m.close()
	raw, err := m.raw()
	if err != nil {
		return throughput{}, err
	}
	defer raw.Close()
	if err := enqueue(ctx, raw, 0, n); err != nil {
		return throughput{}, err
	}
	if err := fence.prepare(ctx, raw, m.name); err != nil {
		return throughput{}, err
	}

	counts := &sessionCounts{}
	db, err := m.fenced(counts)
	if err != nil {
		return throughput{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)

	var done, failed, last atomic.Int64
	finished := make(chan struct{})
	cpu := startCPU()
	stop, err := startWorker(ctx, db, workerSettings{
		Workers:  workers,
		Provider: prov,
		Done: func(_ int64, err error) {
			if err != nil {
				failed.Add(1)
			}
			last.Store(time.Now().UnixNano())
			if done.Add(1) == int64(n) {
				close(finished)
			}
		},
	})
	if err != nil {
		return throughput{}, err
	}
	start := time.Now()
	select {
	case <-finished:
	case <-time.After(roundTimeout(n)):
		_ = stop(ctx)
		return throughput{}, fmt.Errorf("fencekit: %d of %d jobs done after %v", done.Load(), n, roundTimeout(n))
	}
	elapsed := time.Unix(0, last.Load()).Sub(start)
	used := cpu.stop()
	if err := stop(ctx); err != nil {
		return throughput{}, err
	}
	if err := db.Close(); err != nil {
		return throughput{}, err
	}
	if f := failed.Load(); f > 0 {
		return throughput{}, fmt.Errorf("fencekit: %d of %d write-backs failed", f, n)
	}
	jobs, ledger, err := countStates(ctx, raw)
	if err != nil {
		return throughput{}, err
	}
	if jobs["succeeded"] != n || ledger["refunded"] != n {
		return throughput{}, fmt.Errorf("fencekit: after the run, jobs %v and ledger %v; want all %d succeeded and refunded", jobs, ledger, n)
	}
	if lost := counts.lost.Load(); lost > 0 {
		return throughput{}, fmt.Errorf("fencekit: %d sessions broke before their statements were counted", lost)
	}
	return throughput{
		Jobs: n, Workers: workers, Seconds: elapsed.Seconds(), PerSecond: float64(n) / elapsed.Seconds(),
		StatementsPerJob: float64(counts.questions.Load()) / float64(n),
		CommitsPerJob:    float64(counts.commits.Load()) / float64(n),
		Sessions:         counts.sessions.Load(),
		SessionCPUMS:     float64(counts.serverNS.Load()) / 1e6 / float64(n),
		CPU:              used,
	}, nil
}
