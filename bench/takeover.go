package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// takeoverResult is how long jobs stayed stuck after the worker holding
// them was killed: from SIGKILL to the takeover's committed claim.
type takeoverResult struct {
	Lease    float64   `json:"lease_s"`
	Scan     float64   `json:"scan_s"`
	Episodes int       `json:"episodes"`
	Jobs     int       `json:"jobs_per_episode"`
	Delays   []float64 `json:"-"`
	P50      float64   `json:"p50_s"`
	P99      float64   `json:"p99_s"`
	Max      float64   `json:"max_s"`
	Bound    float64   `json:"bound_s"` // lease + scan + 1 s
}

// The scaled-down settings of the takeover measurement.
const (
	takeoverLease = 1 * time.Second
	takeoverScan  = 200 * time.Millisecond
)

// takeoverSection runs episodes: a worker process claims jobs and hangs in
// its provider calls; it is SIGKILLed as soon as it holds them all; a
// surviving worker, whose scan timer runs at a random phase, takes them
// over and settles them.
func takeoverSection(ctx context.Context, episodes, jobs int) (takeoverResult, error) {
	res := takeoverResult{Lease: takeoverLease.Seconds(), Scan: takeoverScan.Seconds(), Episodes: episodes, Jobs: jobs,
		Bound: (takeoverLease + takeoverScan + time.Second).Seconds()}
	m, err := newMariaDB(ctx, "takeover", nil)
	if err != nil {
		return res, err
	}
	defer m.close()
	raw, err := m.raw()
	if err != nil {
		return res, err
	}
	defer raw.Close()
	db, err := m.fenced(nil)
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(16)

	for e := range episodes {
		if err := enqueue(ctx, raw, e*jobs, jobs); err != nil {
			return res, err
		}
		// The doomed worker: a process of its own, holding every job in
		// a provider call that never returns.
		cmd := exec.Command(self(), "-child", "hold", "-child-dsn", m.dsn(), "-child-workers", strconv.Itoa(jobs))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		ready := make(chan error, 1)
		go func() {
			line, err := bufio.NewReader(out).ReadString('\n')
			if err == nil && line != "holding\n" {
				err = fmt.Errorf("hold worker said %q", line)
			}
			ready <- err
		}()
		select {
		case err = <-ready:
		case <-time.After(time.Minute):
			err = fmt.Errorf("the hold worker claimed nothing in a minute")
		}
		killed := time.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil {
			return res, err
		}

		// The survivor: already running, its next scan anywhere within
		// one scan interval.
		time.Sleep(time.Duration(rand.Int64N(int64(takeoverScan))))
		var mu sync.Mutex
		taken := map[int64]time.Duration{}
		settled := 0
		all := make(chan struct{})
		stop, err := startWorker(ctx, db, workerSettings{
			Workers: jobs, Lease: takeoverLease, Scan: takeoverScan, Provider: instantProvider{},
			Claimed: func(id int64, takeover bool) {
				if !takeover {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if _, ok := taken[id]; !ok {
					taken[id] = time.Since(killed)
				}
			},
			Done: func(int64, error) {
				mu.Lock()
				defer mu.Unlock()
				if settled++; settled == jobs {
					close(all)
				}
			},
		})
		if err != nil {
			return res, err
		}
		select {
		case <-all:
		case <-time.After(time.Minute):
			_ = stop(ctx)
			return res, fmt.Errorf("episode %d: %d of %d jobs settled a minute after the kill", e, settled, jobs)
		}
		if err := stop(ctx); err != nil {
			return res, err
		}
		if len(taken) != jobs {
			return res, fmt.Errorf("episode %d: %d of %d jobs were taken over", e, len(taken), jobs)
		}
		for _, d := range taken {
			res.Delays = append(res.Delays, d.Seconds())
		}
	}
	states, _, err := countStates(ctx, raw)
	if err != nil {
		return res, err
	}
	if states["succeeded"] != episodes*jobs {
		return res, fmt.Errorf("after the takeovers, jobs %v; want all %d succeeded", states, episodes*jobs)
	}
	res.P50, res.P99, res.Max = quantile(res.Delays, 0.5), quantile(res.Delays, 0.99), quantile(res.Delays, 1)
	return res, nil
}

// holdChild is the doomed worker: it claims jobs and hangs in the provider
// call of each, and says "holding" once it holds n of them.
func holdChild(ctx context.Context, dsn string, n int) error {
	db, err := openCounted(dsn, &sessionCounts{})
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(16)
	var mu sync.Mutex
	held := 0
	_, err = startWorker(ctx, db, workerSettings{
		Workers: n, Lease: takeoverLease, Scan: takeoverScan, Provider: instantProvider{hang: true},
		ProviderTimeout: time.Hour,
		Claimed: func(int64, bool) {
			mu.Lock()
			defer mu.Unlock()
			if held++; held == n {
				fmt.Println("holding")
			}
		},
	})
	if err != nil {
		return err
	}
	select {} // until killed
}

// self is this program's executable, for the child processes.
func self() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}
