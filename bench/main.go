// Command bench measures fencekit's worker side by side with River, and
// against what its own database server allows, in one run (issue 9):
//
//	cd bench && go run . [-jobs N] [-json] [-plot FILE]
//
// It prints every figure as a ratio measured in the same run; with -json the
// last line is one JSON object. -jobs scales every size: the defaults are
// the (50,000 jobs; 10k and 1M settled rows; 1k and 100k jobs due).
// It needs the local MariaDB (FENCEKIT_TEST_DSN, or root on
// 127.0.0.1:3306) and PostgreSQL (FENCEKIT_BENCH_PG, or
// postgres://root@127.0.0.1:5432/test); it creates a throw-away database
// on each and drops it. See docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// baseJobs is the size: -jobs N scales every size by N / baseJobs.
const baseJobs = 50_000

type options struct {
	jobs, rounds, workers, conns, concurrency int
	sweep                                     []int
	json                                      bool
	plot                                      string
	only                                      map[string]bool
}

// sizes are the sizes of one run, scaled from -jobs.
type sizes struct {
	Jobs             int `json:"jobs"`
	SweepJobs        int `json:"sweep_jobs"`
	CeilingPerRound  int `json:"ceiling_jobs_per_round"`
	HistorySmall     int `json:"history_small_rows"`
	HistoryBig       int `json:"history_big_rows"`
	HistoryProbes    int `json:"history_probes"`
	TakeoverEpisodes int `json:"takeover_episodes"`
	TakeoverJobs     int `json:"takeover_jobs_per_episode"`
	MemorySmall      int `json:"memory_small_jobs"`
	MemoryBig        int `json:"memory_big_jobs"`
	DispatchJobs     int `json:"dispatch_jobs_per_round"`
}

func scaled(n int) sizes {
	s := float64(n) / baseJobs
	at := func(base float64, least int) int { return max(int(base*s+0.5), least) }
	small := at(1_000, 100)
	return sizes{
		Jobs:             n,
		SweepJobs:        at(10_000, 100),
		CeilingPerRound:  at(10_000, 100),
		HistorySmall:     at(10_000, 10),
		HistoryBig:       at(1_000_000, 1_000),
		HistoryProbes:    at(1_000, 50),
		TakeoverEpisodes: at(5, 2),
		TakeoverJobs:     at(100, 10),
		MemorySmall:      small,
		MemoryBig:        100 * small,
		DispatchJobs:     at(1_000, 40),
	}
}

// report is the JSON object of the last line.
type report struct {
	FencekitJobsPerS float64 `json:"fencekit_jobs_per_s"`
	RiverJobsPerS    float64 `json:"river_jobs_per_s"`
	RiverRatio       float64 `json:"river_ratio"`
	// The same burn-downs per second of processor time of the queue's
	// client and its database server: steadier than jobs/s on a machine
	// shared with other work (the server's time is its whole process's, so
	// these are lower bounds).
	FencekitJobsPerCPUS float64 `json:"fencekit_jobs_per_cpu_s"`
	RiverJobsPerCPUS    float64 `json:"river_jobs_per_cpu_s"`
	RiverCPURatio       float64 `json:"river_cpu_ratio"`
	// The diagnostic burn-down: fencekit on a schema whose triggers were
	// dropped after the jobs were loaded (not a configuration fencekit
	// ships), alternating with the two above. What the database fence costs
	// on this server, and what the rest of fencekit reaches without it.
	NoTriggersJobsPerS float64 `json:"fencekit_without_triggers_jobs_per_s"`
	NoTriggersRatio    float64 `json:"river_ratio_without_triggers"`
	// FenceDBCPURatio is MariaDB's CPU per job of the burn-down with the
	// fence ÷ without it (issue 21's goal: ≤ 1.25); WithoutFenceRatio the
	// burn-down's jobs/s with the fence ÷ without it (goal ≥ 0.8);
	// CycleFenceCPURatio MariaDB's CPU per job of the unbatched cycle with
	// the fence ÷ without it (goal ≤ 1.2). All three are measured in one run,
	// the sides alternating.
	FenceDBCPURatio    float64 `json:"fence_db_cpu_ratio"`
	WithoutFenceRatio  float64 `json:"without_fence_ratio"`
	CycleFenceCPURatio float64 `json:"cycle_fence_cpu_ratio"`
	// The same two CPU ratios from the server's threads serving the
	// benchmark's own sessions only (sessionCounts.serverNS): the server
	// process's figures above count every other client of a shared server
	// and the server's background threads too.
	FenceSessionCPURatio      float64 `json:"fence_session_cpu_ratio"`
	CycleFenceSessionCPURatio float64 `json:"cycle_fence_session_cpu_ratio"`
	CeilingRatio              float64 `json:"ceiling_ratio"`
	// The floor fence's figures (bench/floor.go): the same two CPU ratios
	// and the jobs/s ratio with the least per-row work DESIGN.md's trigger
	// fence asks for, over no triggers, in the same run: a lower bound of
	// what any trigger fence holding DESIGN.md's rules costs.
	FloorFenceDBCPURatio    float64 `json:"floor_fence_db_cpu_ratio"`
	FloorWithoutFenceRatio  float64 `json:"floor_without_fence_ratio"`
	FloorCycleFenceCPURatio float64 `json:"floor_cycle_fence_cpu_ratio"`
	// StatementsPerJob is what the worker sent per job in the burn-down
	// against River, counted by the server on the worker's sessions.
	StatementsPerJob float64 `json:"statements_per_job"`
	CommitsPerJob    float64 `json:"commits_per_job"`
	// CycleStatementsPerJob is the unbatched cycle's (Claim + Apply).
	CycleStatementsPerJob float64 `json:"cycle_statements_per_job"`
	ClaimP50Ratio         float64 `json:"claim_p50_ratio_1m_vs_10k"`
	ClaimP99Ratio         float64 `json:"claim_p99_ratio_1m_vs_10k"`
	TakeoverP99           float64 `json:"takeover_p99_s"`
	TakeoverBound         float64 `json:"takeover_bound_s"`
	// Dispatch latency, enqueue → claim, in milliseconds: the table scan
	// alone against RabbitMQ's and Kafka's hints (section "dispatch").
	DispatchScanP50   float64 `json:"dispatch_scan_p50_ms"`
	DispatchScanP99   float64 `json:"dispatch_scan_p99_ms"`
	DispatchBrokerP50 float64 `json:"dispatch_broker_p50_ms"`
	DispatchBrokerP99 float64 `json:"dispatch_broker_p99_ms"`
	DispatchKafkaP50  float64 `json:"dispatch_kafka_p50_ms"`
	DispatchKafkaP99  float64 `json:"dispatch_kafka_p99_ms"`
	RSSRatio          float64 `json:"rss_ratio_100k_vs_1k"`

	Machine    machine         `json:"machine"`
	Sizes      sizes           `json:"sizes"`
	Workers    int             `json:"workers"`
	Conns      int             `json:"fencekit_pool_conns"`
	Rounds     int             `json:"rounds"`
	Fencekit   []throughput    `json:"fencekit_rounds,omitempty"`
	NoTriggers []throughput    `json:"fencekit_without_triggers_rounds,omitempty"`
	Floor      []throughput    `json:"fencekit_floor_fence_rounds,omitempty"`
	River      []throughput    `json:"river_rounds,omitempty"`
	Sweep      []sweepPoint    `json:"sweep,omitempty"`
	Ceiling    *ceilingResult  `json:"ceiling,omitempty"`
	History    *historyResult  `json:"history,omitempty"`
	Takeover   *takeoverResult `json:"takeover,omitempty"`
	Memory     *memoryResult   `json:"memory,omitempty"`
	Dispatch   *dispatchResult `json:"dispatch,omitempty"`
	Seconds    float64         `json:"seconds"`
	Unfinished []string        `json:"skipped,omitempty"`
}

type sweepPoint struct {
	Workers  int     `json:"workers"`
	Fencekit float64 `json:"fencekit_jobs_per_s"`
	River    float64 `json:"river_jobs_per_s"`
}

var sections = []string{"throughput", "ceiling", "history", "takeover", "memory", "dispatch"}

func main() {
	var o options
	var sweep, only string
	child := flag.String("child", "", "internal: run as a worker process (hold, run)")
	childDSN := flag.String("child-dsn", "", "internal")
	childWorkers := flag.Int("child-workers", 0, "internal")
	childRate := flag.Float64("child-rate", 0, "internal")
	flag.IntVar(&o.jobs, "jobs", baseJobs, "jobs per burn-down; every other size scales with it")
	flag.BoolVar(&o.json, "json", false, "print the figures as one JSON object on the last line")
	flag.IntVar(&o.rounds, "rounds", 3, "burn-downs of each queue, alternating, and rounds of the ceiling")
	flag.IntVar(&o.workers, "workers", 2_000, "worker slots of both queues (River's benchmark: 2,000)")
	flag.IntVar(&o.conns, "conns", 16, "fencekit worker's pool size (River's pool is pgxpool's default)")
	flag.IntVar(&o.concurrency, "concurrency", 16, "clients of the fenced cycle and of the ceiling")
	flag.StringVar(&sweep, "sweep", "10,50,200,1000", "other worker counts for the plot, with -jobs/5 jobs each")
	flag.StringVar(&o.plot, "plot", "", "write the plot of jobs/s against workers to this PNG file")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (the queues' client side) to this file")
	replot := flag.String("replot", "", "only redraw -plot from a -json report (docs/benchmarks-river.json, or a run's output)")
	flag.StringVar(&only, "only", "", "run only these sections, comma-separated: "+strings.Join(sections, ","))
	parts := flag.Bool("fence-parts", false, "diagnostic: only measure what each part of the database fence costs, variants side by side (docs/benchmarks.md)")
	partsRows := flag.Int("parts-rows", 1_000, "with -fence-parts: rows of each many-row UPDATE")
	partsSingles := flag.Int("parts-singles", 200, "with -fence-parts: jobs settled by single-row UPDATEs per variant and repetition")
	partsReps := flag.Int("parts-reps", 5, "with -fence-parts: repetitions of every variant, alternating")
	partsOnly := flag.String("parts-only", "", "with -fence-parts: measure only the variants whose names match this regular expression (and the references)")
	flag.Parse()

	ctx := context.Background()
	switch *child {
	case "":
	case "hold":
		fail(holdChild(ctx, *childDSN, *childWorkers))
	case "run":
		fail(runChild(ctx, *childDSN, *childWorkers, *childRate))
	default:
		fail(fmt.Errorf("unknown -child %q", *child))
	}
	for _, f := range strings.Split(sweep, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		w, err := strconv.Atoi(f)
		if err != nil || w < 1 {
			fail(fmt.Errorf("-sweep: bad worker count %q", f))
		}
		o.sweep = append(o.sweep, w)
	}
	if only != "" {
		o.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			if !slices.Contains(sections, s) {
				fail(fmt.Errorf("-only: unknown section %q (%s)", s, strings.Join(sections, ",")))
			}
			o.only[s] = true
		}
	}
	if o.jobs < 1 || o.rounds < 1 || o.workers < 1 || o.conns < 1 || o.concurrency < 1 {
		fail(fmt.Errorf("-jobs, -rounds, -workers, -conns and -concurrency must be positive"))
	}
	if *replot != "" {
		fail(redraw(*replot, o.plot))
		return
	}
	if *parts {
		pr, err := fenceParts(ctx, *partsRows, *partsSingles, *partsReps, *partsOnly, os.Stdout)
		fail(err)
		if o.json {
			b, err := json.Marshal(pr)
			fail(err)
			fmt.Println(string(b))
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		fail(err)
		fail(pprof.StartCPUProfile(f))
	}
	r, err := run(ctx, o, os.Stdout)
	pprof.StopCPUProfile()
	fail(err)
	if o.json {
		b, err := json.Marshal(r)
		fail(err)
		fmt.Println(string(b))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) (*report, error) {
	start := time.Now()
	sz := scaled(o.jobs)
	r := &report{Machine: describeMachine(ctx), Sizes: sz, Workers: o.workers, Conns: o.conns, Rounds: o.rounds}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
	want := func(s string) bool {
		if o.only == nil || o.only[s] {
			return true
		}
		r.Unfinished = append(r.Unfinished, s)
		return false
	}
	say("machine: %s, %d cores, %.0f GiB, %s, MariaDB %s; load average %.2f at the start",
		r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryGiB, r.Machine.Go, r.Machine.MariaDB, r.Machine.LoadStart)

	if want("throughput") {
		pg, err := newPGDB(ctx)
		if err != nil {
			return nil, err
		}
		defer pg.close()
		r.Machine.PostgreSQL = pg.version(ctx)
		const noTriggers, floor = "fencekit without triggers", "fencekit with the floor fence"
		burn := func(queue string, n, workers int) (throughput, error) {
			progress("%s: %d jobs, %d workers", queue, n, workers)
			switch queue {
			case "fencekit":
				return fencekitRound(ctx, n, workers, o.conns, instantProvider{}, shippedFence)
			case noTriggers:
				return fencekitRound(ctx, n, workers, o.conns, instantProvider{}, noFence)
			case floor:
				return fencekitRound(ctx, n, workers, o.conns, instantProvider{}, floorFence)
			}
			return riverRound(ctx, pg, n, workers)
		}
		for round := range o.rounds {
			queues := []string{"fencekit", "river", noTriggers, floor}
			if round%2 == 1 {
				slices.Reverse(queues)
			}
			for _, q := range queues {
				t, err := burn(q, sz.Jobs, o.workers)
				if err != nil {
					return nil, fmt.Errorf("%s round %d: %w", q, round+1, err)
				}
				switch q {
				case "fencekit":
					r.Fencekit = append(r.Fencekit, t)
				case noTriggers:
					r.NoTriggers = append(r.NoTriggers, t)
				case floor:
					r.Floor = append(r.Floor, t)
				default:
					r.River = append(r.River, t)
				}
			}
		}
		f, rv := perSecond(r.Fencekit), perSecond(r.River)
		r.FencekitJobsPerS, r.RiverJobsPerS = median(f), median(rv)
		r.RiverRatio = r.FencekitJobsPerS / r.RiverJobsPerS
		r.StatementsPerJob = median(field(r.Fencekit, func(t throughput) float64 { return t.StatementsPerJob }))
		r.CommitsPerJob = median(field(r.Fencekit, func(t throughput) float64 { return t.CommitsPerJob }))
		say("")
		say("1. fencekit vs River: %d no-op jobs, %d workers each, %d rounds alternating (median)", sz.Jobs, o.workers, o.rounds)
		say("   fencekit  %8.0f jobs/s  rounds %s  (MariaDB; pool %d; zero-latency provider; ledger write included)", r.FencekitJobsPerS, list(f), o.conns)
		say("   River     %8.0f jobs/s  rounds %s  (PostgreSQL; v0.51.2, fetch cooldown 2 ms, poll 20 ms)", r.RiverJobsPerS, list(rv))
		say("   ratio     %8.2f× River", r.RiverRatio)
		say("   fencekit's worker sent %.2f statements and %.2f COMMITs per job (server counters, its sessions)", r.StatementsPerJob, r.CommitsPerJob)
		cf, cr := cpuPerJob(r.Fencekit), cpuPerJob(r.River)
		r.FencekitJobsPerCPUS, r.RiverJobsPerCPUS = 1000/(cf.Client+cf.MariaDB), 1000/(cr.Client+cr.Postgres)
		r.RiverCPURatio = r.FencekitJobsPerCPUS / r.RiverJobsPerCPUS
		say("   CPU ms per job: fencekit worker %.3f + MariaDB %.3f; River client %.3f + PostgreSQL %.3f; machine busy %.0f%% / %.0f%% of its cores",
			cf.Client, cf.MariaDB, cr.Client, cr.Postgres, busy(r.Fencekit, r.Machine.Cores), busy(r.River, r.Machine.Cores))
		say("   jobs per CPU-second of queue + server: fencekit %.0f, River %.0f; ratio %.2f×", r.FencekitJobsPerCPUS, r.RiverJobsPerCPUS, r.RiverCPURatio)
		nt := perSecond(r.NoTriggers)
		r.NoTriggersJobsPerS = median(nt)
		r.NoTriggersRatio = r.NoTriggersJobsPerS / r.RiverJobsPerS
		cn := cpuPerJob(r.NoTriggers)
		say("   diagnostic: fencekit with the schema's triggers dropped %7.0f jobs/s  rounds %s  ratio %.2f× River; CPU ms per job: worker %.3f + MariaDB %.3f",
			r.NoTriggersJobsPerS, list(nt), r.NoTriggersRatio, cn.Client, cn.MariaDB)
		r.FenceDBCPURatio, r.WithoutFenceRatio = ratio(cf.MariaDB, cn.MariaDB), ratio(r.FencekitJobsPerS, r.NoTriggersJobsPerS)
		sf, sn := median(field(r.Fencekit, func(t throughput) float64 { return t.SessionCPUMS })), median(field(r.NoTriggers, func(t throughput) float64 { return t.SessionCPUMS }))
		r.FenceSessionCPURatio = ratio(sf, sn)
		say("   the fence's cost: MariaDB CPU per job %.2f× without it (fence_db_cpu_ratio), jobs/s %.2f× without it (without_fence_ratio)",
			r.FenceDBCPURatio, r.WithoutFenceRatio)
		say("   on the worker's own sessions: MariaDB CPU ms per job %.3f with the fence, %.3f without: %.2f× (fence_session_cpu_ratio)", sf, sn, r.FenceSessionCPURatio)
		fl := perSecond(r.Floor)
		cl := cpuPerJob(r.Floor)
		r.FloorFenceDBCPURatio, r.FloorWithoutFenceRatio = ratio(cl.MariaDB, cn.MariaDB), ratio(median(fl), r.NoTriggersJobsPerS)
		say("   diagnostic: fencekit with the floor fence (the least a trigger fence of DESIGN.md does per row) %7.0f jobs/s  rounds %s; MariaDB CPU ms per job %.3f:",
			median(fl), list(fl), cl.MariaDB)
		say("   %.2f× without triggers (floor_fence_db_cpu_ratio), jobs/s %.2f× (floor_without_fence_ratio)", r.FloorFenceDBCPURatio, r.FloorWithoutFenceRatio)

		counts := slices.DeleteFunc(slices.Clone(o.sweep), func(w int) bool { return w == o.workers })
		for i, w := range counts {
			p := sweepPoint{Workers: w}
			queues := []string{"fencekit", "river"}
			if i%2 == 1 {
				slices.Reverse(queues)
			}
			for _, q := range queues {
				t, err := burn(q, sz.SweepJobs, w)
				if err != nil {
					return nil, fmt.Errorf("%s with %d workers: %w", q, w, err)
				}
				if q == "fencekit" {
					p.Fencekit = t.PerSecond
				} else {
					p.River = t.PerSecond
				}
			}
			r.Sweep = append(r.Sweep, p)
		}
		r.Sweep = append(r.Sweep, sweepPoint{Workers: o.workers, Fencekit: r.FencekitJobsPerS, River: r.RiverJobsPerS})
		slices.SortFunc(r.Sweep, func(a, b sweepPoint) int { return a.Workers - b.Workers })
		say("   by worker count (%d jobs each, one round; %d: the median above):", sz.SweepJobs, o.workers)
		for _, p := range r.Sweep {
			say("     %5d workers  fencekit %7.0f  River %7.0f  ratio %.2f×", p.Workers, p.Fencekit, p.River, p.Fencekit/p.River)
		}
		if o.plot != "" {
			if err := plotSweep(o.plot, r); err != nil {
				return nil, err
			}
			say("   plot: %s", o.plot)
		}
	}

	if want("ceiling") {
		progress("ceiling: %d jobs per round, %d clients", sz.CeilingPerRound, o.concurrency)
		c, err := ceilingSection(ctx, sz.CeilingPerRound, o.rounds, o.concurrency)
		if err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
		r.Ceiling, r.CeilingRatio, r.CycleStatementsPerJob = &c, c.Ratio, c.StatementsPerJob
		say("")
		say("2. the unbatched fenced cycle against the server's two-commit ceiling: %d jobs a round, %d clients, %d rounds alternating (median)",
			c.JobsPerRound, c.Concurrency, o.rounds)
		say("   fenced cycle (Claim by id + Apply complete with ledger)  %7.0f jobs/s  rounds %s", c.FencedMedian, list(c.Fenced))
		say("   ceiling (two single-row autocommit UPDATEs)            %7.0f jobs/s  rounds %s", c.CeilingMedian, list(c.Ceiling))
		say("   ratio %.2f× the ceiling; the cycle sent %.2f statements and %.2f COMMITs per job (the ceiling %.2f statements)",
			c.Ratio, c.StatementsPerJob, c.CommitsPerJob, c.CeilingStmts)
		say("   diagnostic: the same cycle with the schema's triggers dropped %7.0f jobs/s  rounds %s", c.NoTriggersMedian, list(c.NoTriggers))
		say("   diagnostic: the same cycle with the floor fence (bench/floor.go) %7.0f jobs/s  rounds %s", c.FloorMedian, list(c.Floor))
		for _, name := range []string{"fenced cycle", "fenced cycle without triggers", "fenced cycle with the floor fence", "ceiling"} {
			u := c.CPU[name]
			say("   CPU ms per job, %-33s client %.3f  MariaDB %.3f", name, u.Client, u.MariaDB)
		}
		r.CycleFenceCPURatio = ratio(c.CPU["fenced cycle"].MariaDB, c.CPU["fenced cycle without triggers"].MariaDB)
		r.CycleFenceSessionCPURatio = ratio(c.SessionCPU["fenced cycle"], c.SessionCPU["fenced cycle without triggers"])
		say("   the fence's cost in the cycle: MariaDB CPU per job %.2f× without it (cycle_fence_cpu_ratio); on the cycle's own sessions %.3f vs %.3f ms, %.2f× (cycle_fence_session_cpu_ratio)",
			r.CycleFenceCPURatio, c.SessionCPU["fenced cycle"], c.SessionCPU["fenced cycle without triggers"], r.CycleFenceSessionCPURatio)
		r.FloorCycleFenceCPURatio = ratio(c.CPU["fenced cycle with the floor fence"].MariaDB, c.CPU["fenced cycle without triggers"].MariaDB)
		say("   the floor fence's cost in the cycle: MariaDB CPU per job %.2f× without triggers (floor_cycle_fence_cpu_ratio)", r.FloorCycleFenceCPURatio)
	}

	if want("history") {
		progress("history: %d and %d settled rows, %d probes", sz.HistorySmall, sz.HistoryBig, sz.HistoryProbes)
		h, err := historySection(ctx, sz.HistorySmall, sz.HistoryBig, sz.HistoryProbes)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		r.History, r.ClaimP50Ratio, r.ClaimP99Ratio = &h, h.ClaimP50Ratio, h.ClaimP99Ratio
		say("")
		say("3. flat cost as history grows: %d vs %d settled jobs (with ledger rows and evidence), %d probes alternating, one client",
			h.SmallRows, h.BigRows, h.Probes)
		for _, op := range historyOps {
			s, b := h.Small[op], h.Big[op]
			say("   %-21s p50 %6.3f → %6.3f ms (%.2f×)   p99 %6.3f → %6.3f ms (%.2f×)", op, s.P50, b.P50, b.P50/s.P50, s.P99, b.P99, b.P99/s.P99)
		}
		say("   claim p50 ratio %.2f× (big / small)", h.ClaimP50Ratio)
	}

	if want("takeover") {
		progress("takeover: %d episodes of %d jobs", sz.TakeoverEpisodes, sz.TakeoverJobs)
		t, err := takeoverSection(ctx, sz.TakeoverEpisodes, sz.TakeoverJobs)
		if err != nil {
			return nil, fmt.Errorf("takeover: %w", err)
		}
		r.Takeover, r.TakeoverP99, r.TakeoverBound = &t, t.P99, t.Bound
		say("")
		say("4. takeover after a worker process is SIGKILLed holding its jobs: lease %.1fs, scan %.1fs, %d episodes × %d jobs",
			t.Lease, t.Scan, t.Episodes, t.Jobs)
		say("   kill → takeover claim: p50 %.3fs  p99 %.3fs  max %.3fs; bound lease + scan + 1s = %.1fs (p99 %.2f× the bound)",
			t.P50, t.P99, t.Max, t.Bound, t.P99/t.Bound)
	}

	if want("memory") {
		progress("memory: %d and %d jobs due", sz.MemorySmall, sz.MemoryBig)
		m, err := memorySection(ctx, sz.MemorySmall, sz.MemoryBig)
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		r.Memory, r.RSSRatio = &m, m.Ratio
		say("")
		say("5. a worker process's resident memory (%d slots, budget %.0f/s) with %d vs %d jobs due, runs small, big, big, small",
			m.Workers, m.Rate, m.SmallJobs, m.BigJobs)
		say("   VmRSS %s vs %s MiB (peak %s vs %s); ratio %.2f×; jobs settled in the %.0fs window %v",
			mib(m.SmallRSS), mib(m.BigRSS), mib(m.SmallHWM), mib(m.BigHWM), m.Ratio, m.Window, m.Settled)
	}

	if want("dispatch") {
		progress("dispatch: %d jobs per mode and round, %d rounds, broker %s", sz.DispatchJobs, o.rounds, redactedURL(benchAMQP()))
		d, err := dispatchSection(ctx, sz.DispatchJobs, o.rounds)
		if err != nil {
			return nil, fmt.Errorf("dispatch: %w", err)
		}
		r.Dispatch = &d
		r.DispatchScanP50, r.DispatchScanP99, r.DispatchBrokerP50, r.DispatchBrokerP99 = d.ScanP50, d.ScanP99, d.BrokerP50, d.BrokerP99
		r.DispatchKafkaP50, r.DispatchKafkaP99 = d.KafkaP50, d.KafkaP99
		say("")
		say("6. dispatch latency, enqueue COMMIT → claim COMMIT: the table scan (every %.1fs) alone vs RabbitMQ's and Kafka's hints beside it; %d jobs each, arriving one by one, %d rounds rotating",
			d.Scan, d.Jobs, d.Rounds)
		say("   table scan  p50 %8.1f ms  p99 %8.1f ms", d.ScanP50, d.ScanP99)
		say("   RabbitMQ    p50 %8.1f ms  p99 %8.1f ms  (publish with confirm, delivery, claim by id; %.0f%% of the jobs claimed by their hint)",
			d.BrokerP50, d.BrokerP99, 100*d.Hinted)
		say("   Kafka       p50 %8.1f ms  p99 %8.1f ms  (publish acknowledged by the in-sync replicas, fetch, claim by id; %.0f%% claimed by their hint; %s)",
			d.KafkaP50, d.KafkaP99, 100*d.KafkaHinted, d.Kafka)
	}

	r.Machine.LoadEnd = loadAvg()
	r.Seconds = time.Since(start).Seconds()
	say("")
	say("load average %.2f at the end; %.0fs in all", r.Machine.LoadEnd, r.Seconds)
	return r, nil
}

// ratio is a / b, or 0 when b is not positive (a side that measured
// nothing: the JSON says 0 rather than +Inf, which it cannot encode).
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func perSecond(ts []throughput) []float64 {
	return field(ts, func(t throughput) float64 { return t.PerSecond })
}

func field(ts []throughput, f func(throughput) float64) []float64 {
	out := make([]float64, len(ts))
	for i, t := range ts {
		out[i] = f(t)
	}
	return out
}

// cpuPerJob is the CPU milliseconds per job over all rounds.
func cpuPerJob(ts []throughput) cpuUse {
	var u cpuUse
	jobs := 0
	for _, t := range ts {
		u = addCPU(u, t.CPU)
		jobs += t.Jobs
	}
	return perJobMS(u, jobs)
}

// busy is the share of the machine's cores busy during the rounds.
func busy(ts []throughput, cores int) float64 {
	var b, w float64
	for _, t := range ts {
		b += t.CPU.Machine
		w += t.CPU.Wall
	}
	return 100 * b / (w * float64(max(cores, 1)))
}

func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}

func mib(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(float64(x)/(1<<20), 'f', 1, 64)
	}
	return strings.Join(parts, ", ")
}

// plotSweep draws jobs/s against worker count for both queues.
func plotSweep(path string, r *report) error {
	fk := series{Name: "fencekit (MariaDB)", Color: color.RGBA{31, 119, 180, 255}}
	rv := series{Name: "River (PostgreSQL)", Color: color.RGBA{230, 120, 20, 255}}
	for _, p := range r.Sweep {
		fk.X, fk.Y = append(fk.X, float64(p.Workers)), append(fk.Y, p.Fencekit)
		rv.X, rv.Y = append(rv.X, float64(p.Workers)), append(rv.Y, p.River)
	}
	title := fmt.Sprintf("no-op jobs/s by worker count, %d-core machine", r.Machine.Cores)
	return writePlot(path, title, []series{fk, rv})
}

// redraw draws the plot of a finished run from its -json report: the file
// holds the report alone, or the run's output ending with it.
func redraw(from, to string) error {
	if to == "" {
		return fmt.Errorf("-replot needs -plot")
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil { // the JSON alone, or a run's whole output
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			return fmt.Errorf("%s: neither the file nor its last line is a -json report: %w", from, err)
		}
	}
	return plotSweep(to, &r)
}
