package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// envPG names the PostgreSQL server River runs on: a URL whose database
// is used only to create and drop the benchmark's own.
const envPG = "FENCEKIT_BENCH_PG"

const defaultPG = "postgres://root@127.0.0.1:5432/test"

// River's own benchmark settings (cmd/river/riverbench): "when
// benchmarking to maximize job throughput these numbers have an outsized
// effect on results".
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
	riverInsertBatch       = 5_000
)

// pgDB is a throw-away PostgreSQL database with River's schema.
type pgDB struct {
	admin, url string
	name       string
}

func newPGDB(ctx context.Context) (*pgDB, error) {
	admin := os.Getenv(envPG)
	if admin == "" {
		admin = defaultPG
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "fk_bench_river_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("no usable PostgreSQL server at %s (set %s): %w", admin, envPG, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	p := &pgDB{admin: admin, url: u.String(), name: name}
	pool, err := pgxpool.New(ctx, p.url)
	if err != nil {
		return nil, p.fail(err)
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return nil, p.fail(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, p.fail(fmt.Errorf("river migrations: %w", err))
	}
	return p, nil
}

func (p *pgDB) fail(err error) error { return errors.Join(err, p.close()) }

func (p *pgDB) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+p.name+" WITH (FORCE)")
	return err
}

// version is the server's version string.
func (p *pgDB) version(ctx context.Context) string {
	conn, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return "?"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "?"
	}
	return "PostgreSQL " + strings.Fields(v)[0]
}

// noopArgs is the benchmark's job: River's own benchmark job, which does
// nothing.
type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "benchmark" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (*noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverRound burns down n no-op jobs with River as its own benchmark does:
// the jobs are inserted first, the client starts, and the run lasts from
// Start to the last completion event (the subscription sees a job through
// River's completer, not just its worker). The pool is pgxpool's default,
// as River's CLI opens it.
func riverRound(ctx context.Context, p *pgDB, n, workers int) (throughput, error) {
	pool, err := pgxpool.New(ctx, p.url)
	if err != nil {
		return throughput{}, err
	}
	defer pool.Close()
	// As riverbench does before each run: an empty, compact table.
	for _, q := range []string{"TRUNCATE river_job", "VACUUM FULL river_job"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return throughput{}, fmt.Errorf("%s: %w", q, err)
		}
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            quietLogger(),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	})
	if err != nil {
		return throughput{}, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: max(n, 1_000),
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()

	batch := make([]river.InsertManyParams, 0, riverInsertBatch)
	for i := 0; i < n; i += riverInsertBatch {
		batch = batch[:0]
		for j := i; j < min(i+riverInsertBatch, n); j++ {
			batch = append(batch, river.InsertManyParams{Args: noopArgs{Num: j}})
		}
		if _, err := client.InsertMany(ctx, batch); err != nil {
			return throughput{}, fmt.Errorf("river insert: %w", err)
		}
	}

	cpu := startCPU()
	if err := client.Start(ctx); err != nil {
		return throughput{}, err
	}
	start := time.Now()
	var last time.Time
	done, failed := 0, 0
	timeout := time.NewTimer(roundTimeout(n))
	defer timeout.Stop()
	for done < n {
		select {
		case ev := <-events:
			if ev == nil {
				return throughput{}, errors.New("river: subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				failed++
			}
			done++
			last = time.Now()
		case <-timeout.C:
			return throughput{}, fmt.Errorf("river: %d of %d jobs done after %v", done, n, roundTimeout(n))
		}
	}
	elapsed := last.Sub(start)
	used := cpu.stop()
	stopCtx, stopCancel := context.WithTimeout(ctx, time.Minute)
	defer stopCancel()
	if err := client.Stop(stopCtx); err != nil {
		return throughput{}, fmt.Errorf("river stop: %w", err)
	}
	if failed > 0 {
		return throughput{}, fmt.Errorf("river: %d of %d no-op jobs did not complete", failed, n)
	}
	return throughput{Jobs: n, Workers: workers, Seconds: elapsed.Seconds(), PerSecond: float64(n) / elapsed.Seconds(), CPU: used}, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
