package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fencelint is the binary under test, built once by TestMain.
var fencelint string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fencelint-e2e")
	if err != nil {
		panic(err)
	}
	fencelint = filepath.Join(dir, "fencelint")
	// -trimpath: the binary does not name the checkout, so a clone's
	// build hits the cache of another's.
	// fencelint-sql beside it: where fencelint looks for its SQL checker.
	build := exec.Command(goTool(), "build", "-trimpath", "-o", dir+string(filepath.Separator), ".", "../fencelint-sql")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("build fencelint and fencelint-sql: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool is the go command that runs the tests: the installation's, or,
// in a test binary built with -trimpath (which knows no GOROOT), the one on
// PATH.
func goTool() string {
	if root := runtime.GOROOT(); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// run runs name with args in testdata/dir, outside the repository's
// workspace, and returns its combined output and exit code.
func run(t *testing.T, dir, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = filepath.Join("testdata", dir)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("run %s %v: %v", name, args, err)
		return "", 0
	}
}

// The diagnostics expected on testdata/bad, as go vet prints them.
var wantBad = []string{
	"jobs.go:14:32: unfenced UPDATE of refund_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?",
	"jobs.go:20:32: unfenced UPDATE of refund_jobs: WHERE lacks attempt = ?; add AND state = ? AND attempt = ?",
	"jobs.go:27:32: UPDATE of refund_jobs requires lease_until to be in the future: lease expiry must not revoke write rights; fence with AND state = ? AND attempt = ? only (drop the lease_until check)",
	"jobs.go:33:32: the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.FormatInt(id, 10); a write of refund_jobs must hold AND state = ? AND attempt = ? in constant text, or be justified with //fencelint:allow <reason>",
	"jobs.go:52:2: //fencelint:allow needs a reason: write //fencelint:allow <why this write is safe>; without one it suppresses nothing",
	"jobs.go:53:32: unfenced UPDATE of refund_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?",
	// Through store.Exec, a wrapper in another package: followed by facts,
	// which go vet carries between packages.
	"jobs.go:59:29: the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.FormatInt(id, 10); a write of refund_jobs must hold AND state = ? AND attempt = ? in constant text, or be justified with //fencelint:allow <reason>",
}

// diagnostics keeps the lines that look like file:line:col: diagnostics,
// with the directory stripped.
func diagnostics(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "jobs.go:"); i >= 0 {
			lines = append(lines, l[i:])
		}
	}
	return lines
}

func assertLines(t *testing.T, out string, want []string) {
	t.Helper()
	got := diagnostics(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s\nfull output:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}

func TestVetToolReportsUnfencedWrites(t *testing.T) {
	out, code := run(t, "bad", goTool(), "vet", "-vettool="+fencelint, "./...")
	if code == 0 {
		t.Fatalf("go vet exited 0 on unfenced writes; output:\n%s", out)
	}
	assertLines(t, out, wantBad)
}

func TestVetToolPassesCleanModule(t *testing.T) {
	out, code := run(t, "clean", goTool(), "vet", "-vettool="+fencelint, "./...")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("go vet exited %d on a clean module; output:\n%s", code, out)
	}
}

func TestVetToolPassesFlags(t *testing.T) {
	out, code := run(t, "bad", goTool(), "vet", "-vettool="+fencelint, "-tables=refund_jobs,payouts:status:version", "./...")
	if code == 0 {
		t.Fatalf("go vet exited 0; output:\n%s", out)
	}
	want := append([]string{}, wantBad[:4]...)
	want = append(want, "jobs.go:39:32: unfenced UPDATE of payouts: WHERE lacks status = ? and version = ?; add AND status = ? AND version = ?")
	want = append(want, wantBad[4:]...)
	assertLines(t, out, want)
}

func TestVetToolPassesSinks(t *testing.T) {
	out, code := run(t, "bad", goTool(), "vet", "-vettool="+fencelint, "-sinks=rpcExec", "./...")
	if code == 0 {
		t.Fatalf("go vet exited 0; output:\n%s", out)
	}
	want := append([]string{}, wantBad...)
	want = append(want, "jobs.go:65:22: the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.FormatInt(id, 10); a write of refund_jobs must hold AND state = ? AND attempt = ? in constant text, or be justified with //fencelint:allow <reason>")
	assertLines(t, out, want)
}

func TestStandalone(t *testing.T) {
	out, code := run(t, "bad", fencelint, "./...")
	if code == 0 {
		t.Fatalf("fencelint exited 0 on unfenced writes; output:\n%s", out)
	}
	assertLines(t, out, wantBad)

	out, code = run(t, "clean", fencelint, "./...")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("fencelint exited %d on a clean module; output:\n%s", code, out)
	}
}

func TestVersionAndFlags(t *testing.T) {
	out, code := run(t, "clean", fencelint, "-V=full")
	if code != 0 || !strings.HasPrefix(out, fencelint+" version ") || !strings.Contains(out, "buildID=") {
		t.Errorf("-V=full: exit %d, output %q", code, out)
	}
	out, code = run(t, "clean", fencelint, "-flags")
	if code != 0 {
		t.Fatalf("-flags: exit %d, output %q", code, out)
	}
	var flags []struct{ Name, Usage string }
	if err := json.Unmarshal([]byte(out), &flags); err != nil {
		t.Fatalf("-flags is not JSON: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, f := range flags {
		names[f.Name] = true
	}
	for _, n := range []string{"tables", "delete", "sinks", "runtime", "baseline"} {
		if !names[n] {
			t.Errorf("-flags lacks %q: %s", n, out)
		}
	}
}

func TestBadFlagIsAnError(t *testing.T) {
	out, code := run(t, "clean", fencelint, "-tables=refund_jobs:state:state", "./...")
	if code == 0 || !strings.Contains(out, "state and token columns must differ") {
		t.Errorf("bad -tables: exit %d, output %q", code, out)
	}
}

// A second fenced entity needs no configuration: with its generated package
// in sight (the transcoding example's, examples/transcode/ent), fencelint
// reads transcode_jobs and its fence from TranscodeJobFencedTable and its
// column constants (its default -tables name refund_jobs alone), and reports the article's catch block on it,
// written with the table's name or with the constant. The same write where
// the generated package is not in sight is not reported: the table came from
// the constants.
func TestVetToolReadsASecondEntityFromGeneratedConstants(t *testing.T) {
	cmd := exec.Command(goTool(), "vet", "-vettool="+fencelint, "./testdata/transcode/seen", "./testdata/transcode/unseen")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go vet exited 0 on an unfenced write of transcode_jobs; output:\n%s", out)
	}
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "transcode/"); i >= 0 {
			got = append(got, l[i:])
		}
	}
	want := []string{
		"transcode/seen/jobs.go:15:32: unfenced UPDATE of transcode_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?",
		"transcode/seen/jobs.go:27:32: unfenced UPDATE of transcode_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s\nfull output:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}
