package main_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var updateSweep = flag.Bool("update-sweep", false, "rewrite testdata/sweep.golden with the findings of TestSweepRealModules")

// sweepTables fences, beside refund_jobs, a table that each swept module
// writes, on two of its columns, so that the sweep exercises every rule
// on real code: ent's builders and tests (users), the MySQL driver's
// tests (test), River's PostgreSQL driver (river_job, whose state and
// attempt columns are a job's, as in fencekit).
const sweepTables = "refund_jobs,users:name:age,test:value:id,river_job:state:attempt"

// sweepPatterns are the real modules of the module cache the sweep lints,
// test files included: every module the workspace requires that has SQL
// or is large (x/tools). entgo.io/ent/cmd/... is left out: its tests
// import a package no module of the workspace provides.
var sweepPatterns = []string{
	"entgo.io/ent",
	"entgo.io/ent/dialect/...",
	"entgo.io/ent/entc/...",
	"entgo.io/ent/entql",
	"entgo.io/ent/privacy",
	"entgo.io/ent/schema/...",
	"github.com/go-sql-driver/mysql",
	"github.com/riverqueue/river/...",
	"github.com/riverqueue/river/riverdriver/...",
	"golang.org/x/tools/...",
}

var findingLine = regexp.MustCompile(`^(.+?):\d+:\d+: (.*)$`)

// TestSweepRealModules (issue 32): fencelint, run by go vet over real
// modules of the module cache with sweepTables, reports exactly the
// findings of testdata/sweep.golden (counted by file and message): a new
// one fails the test (a false positive, or a new rule to look at), and
// so does one that went away (a lost detection, or a fix: rewrite the
// file with -update-sweep and say why in the change). go vet caches the
// clean packages' results by the tool's build ID, so a run with an
// unchanged analyzer costs little.
func TestSweepRealModules(t *testing.T) {
	args := append([]string{"vet", "-trimpath", "-vettool=" + fencelint, "-tables=" + sweepTables}, sweepPatterns...)
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("go vet: %v", err)
	}
	modcache, err := exec.Command(goTool(), "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSpace(string(modcache)) + string(filepath.Separator)
	got := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := findingLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], prefix) {
			t.Fatalf("go vet printed what is not a finding in the module cache:\n%s\n\nfull output:\n%s", line, out)
		}
		got[filepath.ToSlash(strings.TrimPrefix(m[1], prefix))+"\t"+m[2]]++
	}
	golden := filepath.Join("testdata", "sweep.golden")
	if *updateSweep {
		var b strings.Builder
		b.WriteString("# TestSweepRealModules: fencelint's findings on real modules, -tables=" + sweepTables + "\n")
		b.WriteString("# <count>\t<file in the module cache>\t<message>; rewrite with go test ./cmd/fencelint -run TestSweepRealModules -update-sweep\n")
		for _, k := range sortedKeys(got) {
			fmt.Fprintf(&b, "%d\t%s\n", got[k], k)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, key, ok := strings.Cut(line, "\t")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("%s:%d: want <count>\\t<file>\\t<message>", golden, i+1)
		}
		want[key] = count
	}
	for _, k := range sortedKeys(got) {
		if got[k] > want[k] {
			t.Errorf("new finding (%d, %s accepts %d): %s", got[k], golden, want[k], k)
		}
	}
	for _, k := range sortedKeys(want) {
		if got[k] < want[k] {
			t.Errorf("finding gone (%d, %s has %d): %s", got[k], golden, want[k], k)
		}
	}
	total := 0
	for _, n := range got {
		total += n
	}
	t.Logf("%d findings in %d files and messages, as %s", total, len(got), golden)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
