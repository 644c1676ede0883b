// Command fencebench measures fencelint's own cost: it runs fencelint and a
// no-op analyzer over the same packages, alternately, in one process, and
// prints the ratio of their wall times (loading and type-checking included,
// as in a real run, since that is what a user waits for).
//
// Two sets: "real", a large package set without fenced SQL (by default
// golang.org/x/tools/... from the module cache plus the generated
// github.com/fencekit/fencekit/ent/... package), and "dense", generated
// packages full of fenced, unfenced, run-time and read-only SQL.
//
// fencelint exports facts, so it runs on every dependency too. By default
// (-load=all) both analyzers get packages loaded as go vet gives them to a
// vet tool: every dependency parsed and type-checked from source. With
// -load=roots, dependencies come from export data (and fencelint sees no
// dependency's syntax, so its facts are missing: a lower bound).
//
// With -vet, it also times go vet itself on the real set, with a no-op vet
// tool and with fencelint (each run with a fresh copy of the tool, so that
// go vet's cache of earlier runs does not answer); with -self, the same on
// this repository, as its self-lint runs (issue 32's measure: fencelint
// within 1.15x of the no-op tool). With -paired, each also runs both
// tools package by package on go vet's configurations, alternating, a
// steadier measure on a shared machine:
//
//	go run ./analyzer/internal/fencebench -self -paired -rounds 3 -real "" -dense 0
//
// Besides wall times it prints CPU times (user and system, go list
// included), less disturbed by other work on a shared machine.
//
// Run it from the repository root (the workspace resolves both sets):
//
//	go run ./analyzer/internal/fencebench -rounds 5
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fencekit/fencekit/analyzer"
	_ "github.com/fencekit/fencekit/analyzer/sqlparse" // the in-process sets judge SQL in this process
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"
)

var noop = &analysis.Analyzer{
	Name: "noop",
	Doc:  "does nothing: the baseline",
	Run:  func(*analysis.Pass) (any, error) { return nil, nil },
}

func main() {
	rounds := flag.Int("rounds", 5, "measurements of each analyzer per set (the median is reported)")
	real := flag.String("real", "golang.org/x/tools/...,github.com/fencekit/fencekit/ent/...", "comma-separated patterns of the real set, resolved from the current directory")
	densePkgs := flag.Int("dense", 40, "packages in the generated SQL-dense set (0 skips it)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	load := flag.String("load", "all", "all: dependencies parsed and type-checked from source, as go vet does; roots: dependencies from export data")
	vet := flag.Bool("vet", false, "also time go vet -vettool on the real set, with a no-op tool and with fencelint")
	paired := flag.Bool("paired", false, "with -vet or -self, also measure package by package, both tools alternating (steadier than whole runs on a shared machine)")
	self := flag.Bool("self", false, "also time go vet -vettool on this repository ("+strings.Join(selfPatterns, " ")+", the self-lint of scripts/test.sh), with a no-op tool and with fencelint")
	flag.Parse()
	switch *load {
	case "all":
		loadMode = packages.LoadAllSyntax
	case "roots":
		loadMode = packages.LoadSyntax
	default:
		log.Fatalf("-load=%s: want all or roots", *load)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	log.SetFlags(0)

	fmt.Printf("fencebench: %s, GOMAXPROCS=%d, %d rounds, -load=%s, median wall time of load+type-check+analysis\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), *rounds, *load)
	fmt.Printf("%-6s %6s %6s %12s %12s %7s %14s %14s %10s %10s %7s\n", "set", "pkgs", "diags", "noop", "fencelint", "ratio", "noop-analysis", "fence-analysis", "noop-cpu", "fence-cpu", "ratio")

	if *real != "" {
		bench("real", ".", strings.Split(*real, ","), nil, *rounds)
	}
	if len(broken) > 0 {
		fmt.Printf("(left out, not type-checking: %d packages)\n", len(broken))
	}
	if *vet && *real != "" {
		vetBench("vet", strings.Split(*real, ","), *rounds, *paired)
	}
	if *self {
		vetBench("self", selfPatterns, *rounds, *paired)
	}
	if *densePkgs > 0 {
		dir, err := os.MkdirTemp("", "fencebench-dense")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := generateDense(dir, *densePkgs); err != nil {
			log.Fatal(err)
		}
		// Warm the build cache for the set's dependencies.
		warm := exec.Command("go", "list", "-export", "./...")
		warm.Dir, warm.Env = dir, append(os.Environ(), "GOWORK=off")
		if out, err := warm.CombinedOutput(); err != nil {
			log.Fatalf("go list in the dense set: %v\n%s", err, out)
		}
		bench("dense", dir, []string{"./..."}, []string{"GOWORK=off"}, *rounds)
	}
}

// sample is one measurement: wall time in total and of the analysis
// alone, and the CPU time (this process and its go list children), which
// other work on a shared machine disturbs less than wall time.
type sample struct{ total, analysis, cpu time.Duration }

// cpuTime is the user and system time of this process and of its waited-for
// children so far.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

var loadMode packages.LoadMode

func bench(name, dir string, patterns, env []string, rounds int) {
	cfg := &packages.Config{Mode: loadMode, Dir: dir, Env: append(os.Environ(), env...)}
	var noopS, fenceS []sample
	var npkgs, ndiags int
	// One unmeasured run of each warms caches (go list, export data).
	measure(noop, cfg, patterns)
	measure(analyzer.Analyzer, cfg, patterns)
	for r := 0; r < rounds; r++ {
		order := []*analysis.Analyzer{noop, analyzer.Analyzer}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, a := range order {
			s, n, d := measure(a, cfg, patterns)
			if a == noop {
				noopS = append(noopS, s)
			} else {
				fenceS = append(fenceS, s)
				npkgs, ndiags = n, d
			}
		}
	}
	n, f := median(noopS), median(fenceS)
	fmt.Printf("%-6s %6d %6d %12s %12s %6.3fx %14s %14s %10s %10s %6.3fx\n", name, npkgs, ndiags,
		n.total.Round(time.Millisecond), f.total.Round(time.Millisecond),
		float64(f.total)/float64(n.total),
		n.analysis.Round(time.Millisecond), f.analysis.Round(time.Millisecond),
		n.cpu.Round(time.Millisecond), f.cpu.Round(time.Millisecond), float64(f.cpu)/float64(n.cpu))
}

// broken collects packages that do not type-check (a work tree in flux):
// they and their importers are left out of the set, and counted.
var broken = map[string]bool{}

func measure(a *analysis.Analyzer, cfg *packages.Config, patterns []string) (sample, int, int) {
	runtime.GC()
	cpu0 := cpuTime()
	start := time.Now()
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		log.Fatalf("load %v: %v", patterns, err)
	}
	var ok []*packages.Package
	// Post-order: a package is broken if it or an import is.
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if len(p.Errors) > 0 || p.Types == nil {
			broken[p.PkgPath] = true
		}
		for _, imp := range p.Imports {
			if broken[imp.PkgPath] {
				broken[p.PkgPath] = true
			}
		}
	})
	for _, p := range pkgs {
		if !broken[p.PkgPath] {
			ok = append(ok, p)
		}
	}
	loaded := time.Now()
	g, err := checker.Analyze([]*analysis.Analyzer{a}, ok, nil)
	if err != nil {
		log.Fatalf("analyze: %v", err)
	}
	end := time.Now()
	diags := 0
	for act := range g.All() {
		if act.Err != nil {
			log.Fatalf("%s: %v", act, act.Err)
		}
		diags += len(act.Diagnostics)
	}
	return sample{end.Sub(start), end.Sub(loaded), cpuTime() - cpu0}, len(ok), diags
}

// selfPatterns are the packages of this repository that its self-lint
// covers (scripts/test.sh).
var selfPatterns = []string{"./...", "./analyzer/...", "./bench/..."}

// vetBench times go vet -vettool on patterns: a no-op vet tool
// against fencelint, alternately. go vet runs the tool on every package and
// dependency and caches the results by the tool's content, so each run
// gets a copy of the tool made unique by trailing bytes.
func vetBench(name string, patterns []string, rounds int, paired bool) {
	dir, err := os.MkdirTemp("", "fencebench-vet")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tools := map[string]string{
		"noop":      "./analyzer/internal/fencebench/noopvet",
		"fencelint": "./cmd/fencelint",
		// fencelint's SQL checker, which it starts where text names a
		// fenced table; the copies below are not beside it, so
		// FENCELINT_SQL names it.
		"fencelint-sql": "./cmd/fencelint-sql",
	}
	for name, pkg := range tools {
		out := filepath.Join(dir, name)
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			log.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	copies := 0
	// run returns the wall time and the CPU time of go vet and everything
	// it ran (the rusage of a waited-for child includes its waited-for
	// descendants).
	run := func(name string) (time.Duration, time.Duration) {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			log.Fatal(err)
		}
		copies++
		tool := filepath.Join(dir, fmt.Sprintf("%s-%d", name, copies))
		// A trailing nonce changes the tool's content hash, which keys
		// go vet's cache, without changing what it runs.
		nonce := fmt.Appendf(nil, "%d-%d", time.Now().UnixNano(), copies)
		if err := os.WriteFile(tool, append(src, nonce...), 0o755); err != nil {
			log.Fatal(err)
		}
		defer os.Remove(tool)
		start := time.Now()
		cmd := exec.Command("go", append([]string{"vet", "-vettool=" + tool}, patterns...)...)
		cmd.Env = append(os.Environ(), "FENCELINT_SQL="+filepath.Join(dir, "fencelint-sql"))
		if b, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("go vet with %s: %v\n%s", name, err, b)
		}
		wall := time.Since(start)
		var cpu time.Duration
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		return wall, cpu
	}
	run("noop") // warms the build cache (export data of every package)
	run("fencelint")
	var noopT, fenceT, noopC, fenceC []time.Duration
	for r := 0; r < rounds; r++ {
		order := []string{"noop", "fencelint"}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, name := range order {
			d, c := run(name)
			if name == "noop" {
				noopT, noopC = append(noopT, d), append(noopC, c)
			} else {
				fenceT, fenceC = append(fenceT, d), append(fenceC, c)
			}
		}
	}
	med := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	n, f, nc, fc := med(noopT), med(fenceT), med(noopC), med(fenceC)
	fmt.Printf("%-6s %6s %6s %12s %12s %6.3fx %14s %14s %10s %10s %6.3fx   (go vet -vettool, fresh tool each run)\n", name, "", "",
		n.Round(time.Millisecond), f.Round(time.Millisecond), float64(f)/float64(n), "", "",
		nc.Round(time.Millisecond), fc.Round(time.Millisecond), float64(fc)/float64(nc))
	if paired {
		pairedBench(name, patterns, rounds, dir)
	}
}

func median(s []sample) sample {
	slices.SortFunc(s, func(a, b sample) int { return int(a.total - b.total) })
	m := s[len(s)/2]
	an := make([]time.Duration, len(s))
	for i := range s {
		an[i] = s[i].analysis
	}
	slices.Sort(an)
	m.analysis = an[len(an)/2]
	cpu := make([]time.Duration, len(s))
	for i := range s {
		cpu[i] = s[i].cpu
	}
	slices.Sort(cpu)
	m.cpu = cpu[len(cpu)/2]
	return m
}

// generateDense writes a module of n packages, each with files full of SQL:
// fenced and unfenced constants, run-time queries, reads and inserts.
func generateDense(dir string, n int) error {
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/dense\n\ngo 1.26.0\n"), 0o644); err != nil {
		return err
	}
	for p := 0; p < n; p++ {
		pdir := filepath.Join(dir, fmt.Sprintf("p%02d", p))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return err
		}
		for f := 0; f < 5; f++ {
			var b strings.Builder
			fmt.Fprintf(&b, "package p%02d\n\nimport (\n\t\"context\"\n\t\"database/sql\"\n\t\"fmt\"\n\t\"strconv\"\n)\n\n", p)
			fmt.Fprintf(&b, "const fenced%d = \"UPDATE refund_jobs SET state = 'succeeded', lease_until = NULL WHERE id = ? AND state = 'running' AND attempt = ?\"\n\n", f)
			for i := 0; i < 20; i++ {
				fmt.Fprintf(&b, denseFunc, f, i, f)
			}
			if err := os.WriteFile(filepath.Join(pdir, fmt.Sprintf("f%d.go", f)), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

const denseFunc = `func Job%[1]d_%[2]d(ctx context.Context, db *sql.DB, tx *sql.Tx, id, attempt int64, where string) error {
	if _, err := tx.ExecContext(ctx, fenced%[3]d, id, attempt); err != nil {
		return fmt.Errorf("complete job %%d: %%w", id, err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id); err != nil {
		return err
	}
	q := "UPDATE refund_jobs SET state = ?, next_run_at = UTC_TIMESTAMP(6) WHERE id = ?"
	q += " AND state = 'ready' AND attempt = ?"
	if _, err := db.ExecContext(ctx, q, "ready", id, attempt); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE id = "+strconv.FormatInt(id, 10)); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO refund_jobs (operation_key, state, attempt) VALUES (?, 'ready', 0)", where); err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT id, state FROM refund_jobs WHERE state = 'ready' AND id > %%d LIMIT 100", id))
	if err != nil {
		return err
	}
	defer rows.Close()
	if _, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? AND lease_until > NOW()", "ready", id, "running", attempt); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "UPDATE refunds SET status = 'paid' WHERE job_id = ?", id)
	return err
}

`
