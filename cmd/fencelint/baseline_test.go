package main_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// testdata/legacy is a legacy module whose five findings (two in one
// function, one in a test file, one method) are accepted by its committed
// fencelint.baseline.

// copyLegacy copies testdata/legacy to a fresh directory, to be edited.
func copyLegacy(t *testing.T) string { return copyModule(t, "legacy") }

// copyModule copies testdata/name to a fresh directory.
func copyModule(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// runIn runs name with args in dir (outside the repository's workspace)
// with extra environment variables, and returns its combined output and
// exit code.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"), env...)
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

// goLines keeps the output's file:line:col lines, from the last path
// element that names a directory of the module (jobs/, store/), sorted:
// go vet prints package by package, in no fixed order.
func goLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		end := strings.Index(l, ".go:")
		if end < 0 {
			continue
		}
		for _, d := range []string{"/jobs/", "/store/"} {
			if i := strings.LastIndex(l[:end], d); i >= 0 {
				l = l[i+1:]
				break
			}
		}
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines
}

func assertGoLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if got := goLines(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: diagnostics:\n%s\nwant:\n%s\nfull output:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}

const envBaseline = "FENCELINT_BASELINE=fencelint.baseline"

func TestBaselineAcceptsLegacyFindings(t *testing.T) {
	t.Parallel()
	// TestWriteBaseline shows that the baseline holds the module's
	// findings: fencelint writes exactly it.
	dir := filepath.Join("testdata", "legacy")
	out, code := runIn(t, dir, nil, fencelint, "-baseline=fencelint.baseline", "./...")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("standalone with -baseline: exit %d, output:\n%s", code, out)
	}
	// go vet runs the tool in each package's directory (jobs/, store/):
	// the relative name is found upwards from there.
	out, code = runIn(t, dir, []string{envBaseline}, goTool(), "vet", "-vettool="+fencelint, "./...")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("go vet with $FENCELINT_BASELINE: exit %d, output:\n%s", code, out)
	}
}

// fixOneAddOne edits the legacy module: Requeue is fenced now, and a new
// function writes unfenced.
func fixOneAddOne(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "jobs", "jobs.go")
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(src), `"UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id)`,
		`"UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = ? AND attempt = ?", id, "running", 1)`, 1)
	s += `
// Park is new, and unfenced.
func Park(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'parked' WHERE id = ?", id)
	return err
}
`
	if s == string(src)+"" || !strings.Contains(s, "AND attempt = ?\", id") {
		t.Fatal("jobs.go did not change as expected")
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	newPark    = "jobs/jobs.go:27:32: unfenced UPDATE of refund_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?"
	staleEntry = "jobs/jobs.go:11:6: baseline fencelint.baseline:7: fixed: remove the entry from the baseline: example.com/legacy/jobs jobs/jobs.go Requeue 1 unfenced UPDATE of refund_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?"
)

func TestBaselineReportsNewFindingsAndFixedEntries(t *testing.T) {
	t.Parallel()
	dir := copyLegacy(t)
	fixOneAddOne(t, dir)
	out, code := runIn(t, dir, nil, fencelint, "-baseline=fencelint.baseline", "./...")
	if code != 3 {
		t.Errorf("standalone: exit %d, want 3", code)
	}
	assertGoLines(t, "standalone", out, newPark, staleEntry)
	out, code = runIn(t, dir, []string{envBaseline}, goTool(), "vet", "-vettool="+fencelint, "./...")
	if code == 0 {
		t.Errorf("go vet: exit 0")
	}
	assertGoLines(t, "go vet", out, newPark, staleEntry)
}

// TestBaselineEditIsNotHiddenByVetCache: go vet caches a package's clean
// result; removing an entry (and nothing else) must still report the
// finding it accepted. With -baseline (a flag) go vet replayed the cached
// clean result; $FENCELINT_BASELINE folds the file into the tool's ID.
func TestBaselineEditIsNotHiddenByVetCache(t *testing.T) {
	t.Parallel()
	dir := copyLegacy(t)
	out, code := runIn(t, dir, []string{envBaseline}, goTool(), "vet", "-vettool="+fencelint, "./...")
	if code != 0 {
		t.Fatalf("go vet before the edit: exit %d, output:\n%s", code, out)
	}
	p := filepath.Join(dir, "fencelint.baseline")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(l, " Requeue ") {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(p, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = runIn(t, dir, []string{envBaseline}, goTool(), "vet", "-vettool="+fencelint, "./...")
	if code == 0 {
		t.Errorf("go vet after removing Requeue's entry: exit 0")
	}
	assertGoLines(t, "go vet after the edit", out,
		"jobs/jobs.go:12:32: unfenced UPDATE of refund_jobs: WHERE lacks state = ? and attempt = ?; add AND state = ? AND attempt = ?")
}

func TestBaselineFlagIsRefusedUnderVet(t *testing.T) {
	t.Parallel()
	out, code := runIn(t, filepath.Join("testdata", "legacy"), nil, goTool(), "vet", "-vettool="+fencelint, "-baseline=fencelint.baseline", "./...")
	if code == 0 || !strings.Contains(out, "under go vet, name the baseline with FENCELINT_BASELINE=FILE, not -baseline") {
		t.Errorf("go vet -baseline: exit %d, output:\n%s", code, out)
	}
	if n := strings.Count(out, "under go vet"); n != 2 {
		t.Errorf("go vet -baseline: refused %d times, want once for each of the 2 packages vet reports on (not their dependencies); output:\n%s", n, out)
	}
}

// TestMalformedBaselineFailsBothModes: the standalone mode runs the same
// analyzer code as go vet (TestMalformedBaselineIsAnError in analyzer/).
func TestMalformedBaselineFailsBothModes(t *testing.T) {
	t.Parallel()
	dir := copyLegacy(t)
	p := filepath.Join(dir, "fencelint.baseline")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("example.com/legacy/jobs jobs/jobs.go Park many unfenced\n")
	f.Close()
	before, _ := os.ReadFile(p)
	const want = `fencelint.baseline:11: count "many" is not a positive integer`
	for _, c := range []struct {
		what string
		env  []string
		args []string
	}{
		{"go vet", []string{envBaseline}, []string{goTool(), "vet", "-vettool=" + fencelint, "./..."}},
		{"-write-baseline", nil, []string{fencelint, "-write-baseline", "fencelint.baseline", "./..."}},
	} {
		out, code := runIn(t, dir, c.env, c.args[0], c.args[1:]...)
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want 1 and %q; output:\n%s", c.what, code, want, out)
		}
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Errorf("-write-baseline changed a malformed baseline:\n%s", after)
	}
}

func TestWriteBaseline(t *testing.T) {
	t.Parallel()
	dir := copyLegacy(t)
	p := filepath.Join(dir, "fencelint.baseline")
	committed, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	// A new file takes every finding, in a fixed order: the committed one.
	os.Remove(p)
	out, code := runIn(t, dir, nil, fencelint, "-write-baseline", "fencelint.baseline", "./...")
	if code != 0 || read() != string(committed) {
		t.Fatalf("new baseline: exit %d, output:\n%s\nfile:\n%s\nwant:\n%s", code, out, read(), committed)
	}

	// Without test files, the test file's entry is kept, not dropped.
	out, code = runIn(t, dir, nil, fencelint, "-write-baseline", "fencelint.baseline", "-test=false", "./...")
	if code != 0 || read() != string(committed) {
		t.Fatalf("-test=false: exit %d, output:\n%s\nfile:\n%s", code, out, read())
	}

	// Rewriting shrinks: the fixed entry goes, the new finding stays out.
	fixOneAddOne(t, dir)
	out, code = runIn(t, dir, nil, fencelint, "-write-baseline", "fencelint.baseline", "./...")
	if code != 3 {
		t.Errorf("shrink: exit %d, want 3 (a finding left out); output:\n%s", code, out)
	}
	for _, want := range []string{
		"fencelint.baseline: removed 1 fixed: example.com/legacy/jobs jobs/jobs.go Requeue unfenced UPDATE",
		newPark + " (not in fencelint.baseline: fix it, or accept it with -baseline-add)",
		"wrote fencelint.baseline: 3 entries accepting 4 findings (removed 1, added 0, left out 1)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("shrink: output lacks %q:\n%s", want, out)
		}
	}
	shrunk := read()
	if strings.Contains(shrunk, " Requeue ") || strings.Contains(shrunk, " Park ") {
		t.Errorf("shrink: file still holds Requeue or already holds Park:\n%s", shrunk)
	}

	// Adding debt is explicit.
	out, code = runIn(t, dir, nil, fencelint, "-write-baseline", "fencelint.baseline", "-baseline-add", "./...")
	if code != 0 || !strings.Contains(read(), "example.com/legacy/jobs jobs/jobs.go Park 1 unfenced UPDATE") ||
		!strings.Contains(out, newPark+" (added to fencelint.baseline)") {
		t.Errorf("-baseline-add: exit %d, output:\n%s\nfile:\n%s", code, out, read())
	}

	// Bad use.
	out, code = runIn(t, dir, nil, fencelint, "-write-baseline", "fencelint.baseline", "-baseline=x", "./...")
	if code != 1 || !strings.Contains(out, "drop -baseline") {
		t.Errorf("-write-baseline with -baseline: exit %d, output:\n%s", code, out)
	}
}

// TestVersionFoldsTheBaseline: -V=full (go vet's cache key for the tool)
// changes with the content of the file $FENCELINT_BASELINE names, and is
// an error where that file cannot be found (an edit of it would go
// unnoticed).
func TestVersionFoldsTheBaseline(t *testing.T) {
	t.Parallel()
	dir := copyLegacy(t)
	id := func(env ...string) string {
		t.Helper()
		out, code := runIn(t, dir, env, fencelint, "-V=full")
		if code != 0 || !strings.Contains(out, " buildID=") {
			t.Fatalf("-V=full: exit %d, output:\n%s", code, out)
		}
		return out
	}
	plain, before := id(), id(envBaseline)
	if err := os.WriteFile(filepath.Join(dir, "fencelint.baseline"), []byte("# emptied\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := id(envBaseline)
	if plain == before || before == after {
		t.Errorf("-V=full does not follow the baseline:\nno baseline: %s\nbaseline:    %s\nedited:      %s", plain, before, after)
	}
	out, code := runIn(t, t.TempDir(), []string{envBaseline}, fencelint, "-V=full")
	if code != 1 || !strings.Contains(out, "FENCELINT_BASELINE=fencelint.baseline: locate fencelint baseline fencelint.baseline: not in") {
		t.Errorf("-V=full without the file: exit %d, output:\n%s", code, out)
	}
}

// TestWriteBaselineRefusesBrokenPackages: a package that does not compile
// has no findings; writing would drop its entries as fixed.
func TestWriteBaselineRefusesBrokenPackages(t *testing.T) {
	t.Parallel()
	dir := copyLegacy(t)
	if err := os.WriteFile(filepath.Join(dir, "store", "broken.go"), []byte("package store\n\nfunc broken() int { return \"x\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "fencelint.baseline")
	before, _ := os.ReadFile(p)
	out, code := runIn(t, dir, nil, fencelint, "-write-baseline", "fencelint.baseline", "./...")
	if code != 1 || !strings.Contains(out, "packages have errors: the baseline is not written") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Errorf("the baseline changed:\n%s", after)
	}
}
