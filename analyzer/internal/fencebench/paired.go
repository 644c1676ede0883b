package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// pairedBench is vetBench's steadier measure: go vet's whole-run CPU time
// moves by ±10 % from run to run on a shared machine, more than the
// difference it measures. It has go vet write the configurations of every
// package run (-work, with the no-op tool), then runs both tools package by
// package, in dependency order, alternating which goes first, each in its
// own copy of the configurations (so that each reads the facts it wrote),
// and sums each tool's CPU time (its own and its waited-for children's:
// fencelint's SQL checker). Both tools then run under the same moment's
// load. go vet's own work (go list, the action graph, its cache) is left
// out, which makes the ratio higher than a whole run's.
func pairedBench(name string, patterns []string, rounds int, dir string) {
	noop := filepath.Join(dir, "noop-work")
	data, err := os.ReadFile(filepath.Join(dir, "noop"))
	if err != nil {
		log.Fatal(err)
	}
	nonce := fmt.Appendf(nil, "work-%d", time.Now().UnixNano())
	if err := os.WriteFile(noop, append(data, nonce...), 0o755); err != nil {
		log.Fatal(err)
	}
	out, err := exec.Command("go", append([]string{"vet", "-work", "-vettool=" + noop}, patterns...)...).CombinedOutput()
	if err != nil {
		log.Fatalf("go vet -work: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^WORK=(\S+)$`).FindSubmatch(out)
	if m == nil {
		log.Fatalf("go vet -work printed no WORK=:\n%s", out)
	}
	work := string(m[1])
	defer os.RemoveAll(work)

	type config struct {
		PackageVetx map[string]string
		VetxOutput  string
		Dir         string
	}
	files, err := filepath.Glob(filepath.Join(work, "b*", "vet.cfg"))
	if err != nil || len(files) == 0 {
		log.Fatalf("no vet.cfg under %s: %v", work, err)
	}
	slices.Sort(files)
	raw := map[string][]byte{}
	cfgs := map[string]config{}
	byOut := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		var c config
		if err := json.Unmarshal(b, &c); err != nil {
			log.Fatalf("%s: %v", f, err)
		}
		raw[f], cfgs[f], byOut[c.VetxOutput] = b, c, f
	}
	var order []string
	seen := map[string]bool{}
	var visit func(f string)
	visit = func(f string) {
		if seen[f] {
			return
		}
		seen[f] = true
		for _, v := range cfgs[f].PackageVetx {
			if g, ok := byOut[v]; ok {
				visit(g)
			}
		}
		order = append(order, f)
	}
	for _, f := range files {
		visit(f)
	}
	tools := []string{filepath.Join(dir, "noop"), filepath.Join(dir, "fencelint")}
	trees := make([]string, len(tools))
	for i := range tools {
		trees[i] = filepath.Join(dir, fmt.Sprintf("work-%d", i))
		for _, f := range files {
			rel, _ := filepath.Rel(work, f)
			dst := filepath.Join(trees[i], rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				log.Fatal(err)
			}
			text := strings.ReplaceAll(string(raw[f]), work+string(filepath.Separator), trees[i]+string(filepath.Separator))
			if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
				log.Fatal(err)
			}
		}
	}
	cpu := func(tool, cfg, dir string) time.Duration {
		cmd := exec.Command(tool, cfg)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "FENCELINT_SQL="+filepath.Join(filepath.Dir(tools[1]), "fencelint-sql"))
		// Findings exit 1 (the real set has some); a tool that could not
		// run has no usage to count.
		if b, err := cmd.CombinedOutput(); err != nil && cmd.ProcessState == nil {
			log.Fatalf("%s %s: %v\n%s", filepath.Base(tool), cfg, err, b)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var noopC, fenceC []time.Duration
	var ratios []float64
	for r := 0; r < rounds; r++ {
		var sum [2]time.Duration
		for i, f := range order {
			rel, _ := filepath.Rel(work, f)
			for k := range 2 {
				t := (k + i + r) % 2
				sum[t] += cpu(tools[t], filepath.Join(trees[t], rel), cfgs[f].Dir)
			}
		}
		noopC, fenceC = append(noopC, sum[0]), append(fenceC, sum[1])
		ratios = append(ratios, float64(sum[1])/float64(sum[0]))
	}
	slices.Sort(ratios)
	fmt.Printf("%-6s %6d %6s %12s %12s %7s %14s %14s %10s %10s %6.3fx   (paired: tool CPU package by package, %d runs each, ratios %s)\n",
		name, len(order), "", "", "", "", "", "",
		medianDur(noopC).Round(time.Millisecond), medianDur(fenceC).Round(time.Millisecond), ratios[len(ratios)/2], len(order), fmtRatios(ratios))
}

func fmtRatios(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%.3f", r)
	}
	return strings.Join(s, " ")
}

func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
