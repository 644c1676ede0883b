package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// memoryResult is a worker process's resident memory with few and with many
// jobs due. The worker claims only what it can send now (free slots and
// outbound budget), so the number of due jobs should not show.
type memoryResult struct {
	SmallJobs int     `json:"small_jobs_due"`
	BigJobs   int     `json:"big_jobs_due"`
	Workers   int     `json:"workers"`
	Rate      float64 `json:"budget_rate_per_s"`
	Window    float64 `json:"window_s"`
	SmallRSS  []int64 `json:"small_rss_bytes"`
	BigRSS    []int64 `json:"big_rss_bytes"`
	SmallHWM  []int64 `json:"small_peak_rss_bytes"`
	BigHWM    []int64 `json:"big_peak_rss_bytes"`
	Settled   []int   `json:"settled_in_window"` // per run, in run order
	Ratio     float64 `json:"ratio"`
}

const (
	memoryWorkers = 50
	memoryWindow  = 3 * time.Second // the small set lasts 5 s at the budget's rate
)

// memorySection runs a worker process against a database with small jobs
// due, then big, then big, then small. The fleet's outbound budget (the
// worker's own throttle) is set so that the small set lasts longer than the
// window, so both cases do the same work in it. It reads the process's
// VmRSS over the window's last two seconds and keeps the largest.
func memorySection(ctx context.Context, small, big int) (memoryResult, error) {
	rate := float64(small) / 5
	res := memoryResult{SmallJobs: small, BigJobs: big, Workers: memoryWorkers, Rate: rate, Window: memoryWindow.Seconds()}
	for _, n := range []int{small, big, big, small} {
		rss, hwm, settled, err := memoryRun(ctx, n, rate)
		if err != nil {
			return res, err
		}
		if n == small {
			res.SmallRSS, res.SmallHWM = append(res.SmallRSS, rss), append(res.SmallHWM, hwm)
		} else {
			res.BigRSS, res.BigHWM = append(res.BigRSS, rss), append(res.BigHWM, hwm)
		}
		res.Settled = append(res.Settled, settled)
	}
	res.Ratio = meanInt(res.BigRSS) / meanInt(res.SmallRSS)
	return res, nil
}

func memoryRun(ctx context.Context, n int, rate float64) (rss, hwm int64, settled int, err error) {
	m, err := newMariaDB(ctx, "memory", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer m.close()
	raw, err := m.raw()
	if err != nil {
		return 0, 0, 0, err
	}
	defer raw.Close()
	if err := enqueue(ctx, raw, 0, n); err != nil {
		return 0, 0, 0, err
	}
	cmd := exec.Command(self(), "-child", "run", "-child-dsn", m.dsn(), "-child-workers", strconv.Itoa(memoryWorkers),
		"-child-rate", strconv.FormatFloat(rate, 'f', -1, 64))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	start := time.Now()
	for time.Since(start) < memoryWindow {
		time.Sleep(100 * time.Millisecond)
		if time.Since(start) < memoryWindow-2*time.Second {
			continue
		}
		r, h, err := vmRSS(cmd.Process.Pid)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("worker process: %w", err)
		}
		rss, hwm = max(rss, r), max(hwm, h)
	}
	states, _, err := countStates(ctx, raw)
	if err != nil {
		return 0, 0, 0, err
	}
	if states["succeeded"] == 0 {
		return 0, 0, 0, fmt.Errorf("the worker process settled no job in %v", memoryWindow)
	}
	return rss, hwm, states["succeeded"], nil
}

// runChild is a plain worker process: the zero-latency provider, slots
// and an outbound budget, until killed.
func runChild(ctx context.Context, dsn string, workers int, rate float64) error {
	db, err := openCounted(dsn, &sessionCounts{})
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(16)
	_, err = startWorker(ctx, db, workerSettings{
		Workers: workers, Provider: instantProvider{}, BudgetRate: rate, BudgetBurst: max(int(rate/10), 1),
	})
	if err != nil {
		return err
	}
	select {} // until killed
}

func meanInt(xs []int64) float64 {
	f := make([]float64, len(xs))
	for i, x := range xs {
		f[i] = float64(x)
	}
	return mean(f)
}
