package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFencelintDoesNotLinkTheParser: the vet tool's cost (issue 32) rests
// on fencelint not linking the TiDB parser, whose start-up go vet would
// pay for every package; only fencelint-sql links it.
func TestFencelintDoesNotLinkTheParser(t *testing.T) {
	for pkg, want := range map[string]bool{".": false, "../fencelint-sql": true} {
		out, err := exec.Command(goTool(), "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if got := strings.Contains(string(out), "github.com/pingcap/tidb/pkg/parser\n"); got != want {
			t.Errorf("%s links the TiDB parser: %v, want %v", pkg, got, want)
		}
	}
}

// alone copies fencelint into a directory of its own, without its SQL
// checker beside it.
func alone(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(fencelint)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "fencelint")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// script writes an executable shell script standing in for fencelint-sql.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fencelint-sql")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWithoutItsSQLCheckerFencelintFails: a fencelint installed without
// fencelint-sql must not pass a module it cannot judge. go vet stops at
// once (-V=full names the missing helper), and fencelint alone fails at
// its first question, clean module or not, with the way to install it.
func TestWithoutItsSQLCheckerFencelintFails(t *testing.T) {
	t.Setenv("FENCELINT_SQL", "")
	gobin := goAbs(t)
	t.Setenv("PATH", filepath.Dir(gobin))
	lone := alone(t)
	for _, dir := range []string{"bad", "clean"} {
		for _, args := range [][]string{{gobin, "vet", "-vettool=" + lone, "./..."}, {lone, "./..."}} {
			out, code := run(t, dir, args[0], args[1:]...)
			if code == 0 {
				t.Errorf("%s in %s without fencelint-sql exited 0:\n%s", strings.Join(args, " "), dir, out)
			}
			for _, want := range []string{"fencelint-sql is neither at " + filepath.Join(filepath.Dir(lone), "fencelint-sql"), "go install github.com/fencekit/fencekit/cmd/fencelint@VERSION github.com/fencekit/fencekit/cmd/fencelint-sql@VERSION"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s in %s: output lacks %q:\n%s", strings.Join(args, " "), dir, want, out)
				}
			}
		}
	}
}

// TestABrokenSQLCheckerFailsTheRun: a helper of another version is
// refused, one that dies on its first question or answers garbage fails
// the run with what it said on its way out, and one that hangs is
// stopped; none lets the clean module or the bad one pass, under go vet
// (twice: the second from its cache) or alone. (The greeting below is the
// protocol's: a change of protocol changes it.)
func TestABrokenSQLCheckerFailsTheRun(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"another version": {`echo 'fencelint-sql protocol 1'; cat >/dev/null`,
			`speaks "fencelint-sql protocol 1" where this fencelint speaks "fencelint-sql protocol 2": install both from the same version`},
		"dies": {`echo 'fencelint-sql protocol 2'; head -c 1 >/dev/null; echo 'panic: the parser fell over' >&2; exit 2`,
			"stopped answering (it exited): panic: the parser fell over"},
		"answers garbage": {`echo 'fencelint-sql protocol 2'; head -c 1 >/dev/null; echo 'not gob at all'`,
			"stopped answering: unexpected EOF"},
		// FENCELINT_SQL_TIMEOUT is 1s below.
		"hangs": {`echo 'fencelint-sql protocol 2'; exec sleep 600`,
			"did not answer within 1s ($FENCELINT_SQL_TIMEOUT) and was stopped"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("FENCELINT_SQL", script(t, tc.body))
			t.Setenv("FENCELINT_SQL_TIMEOUT", "1s")
			// Alone on the clean module; and, for one case, under go vet
			// twice on both modules: the second run answers from go vet's
			// cache, which must replay the failure (Go 1.26 caches an
			// analysis's error as a clean result). Each case's helper is
			// new to go vet's cache, so each go vet run type-checks every
			// dependency again: one case keeps the suite's time.
			runs := [][]string{{"clean", fencelint, "./..."}}
			if name == "dies" {
				for _, dir := range []string{"bad", "clean"} {
					vet := []string{dir, goTool(), "vet", "-vettool=" + fencelint, "./..."}
					runs = append(runs, vet, vet)
				}
			}
			for _, r := range runs {
				out, code := run(t, r[0], r[1], r[2:]...)
				if code == 0 || !strings.Contains(out, tc.want) {
					t.Errorf("%s in %s exited %d, want a failure saying %q:\n%s", strings.Join(r[1:], " "), r[0], code, tc.want, out)
				}
			}
		})
	}
}

// TestAMalformedBaselineFailsEveryRun: go vet caches a package whose
// analysis returned an error as clean (Go 1.26), so a malformed baseline
// failed the first run and passed the next. The error is a diagnostic now,
// replayed from the cache.
func TestAMalformedBaselineFailsEveryRun(t *testing.T) {
	base := filepath.Join(t.TempDir(), "fencelint.baseline")
	if err := os.WriteFile(base, []byte("this is not a baseline\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FENCELINT_BASELINE", base)
	for round := range 2 {
		out, code := run(t, "clean", goTool(), "vet", "-vettool="+fencelint, "./...")
		// The path is not matched: go vet keys its cache by the file's
		// content, and replays a message naming an earlier run's file.
		for _, want := range []string{"fencelint cannot judge this package: fencelint baseline ", `fencelint.baseline:1: count "a" is not a positive integer`} {
			if code == 0 || !strings.Contains(out, want) {
				t.Errorf("go vet run %d with a malformed baseline exited %d, want a failure saying %q:\n%s", round+1, code, want, out)
			}
		}
	}
}

// TestAFencelintBuiltAloneBuildsItsSQLChecker: fencelint built from a
// checkout on its own (go build -o X ./cmd/fencelint, no -trimpath) builds
// its SQL checker from that checkout at go vet's first question, once,
// into the user's cache directory, and then judges as if both had been
// installed: the bad module's findings, twice.
func TestAFencelintBuiltAloneBuildsItsSQLChecker(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fencelint")
	build := exec.Command(goTool(), "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=") // the checkout's paths compiled in
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The user's cache directory moves to a new one; go's build cache
	// (which defaults to a directory in it) stays where it is.
	gocache, err := exec.Command(goTool(), "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("FENCELINT_SQL", "")
	gobin := goAbs(t)
	t.Setenv("PATH", filepath.Dir(gobin))
	for round := range 2 {
		out, code := run(t, "bad", gobin, "vet", "-vettool="+bin, "./...")
		if code == 0 {
			t.Fatalf("go vet run %d exited 0 on the bad module:\n%s", round+1, out)
		}
		for _, want := range wantBad {
			if !strings.Contains(out, want) {
				t.Errorf("go vet run %d: output lacks %q:\n%s", round+1, want, out)
			}
		}
	}
	built, err := filepath.Glob(filepath.Join(cache, "fencekit", "fencelint-sql-*"))
	if err != nil || len(built) != 1 {
		t.Fatalf("helpers built in the cache: %v (%v), want one", built, err)
	}
}

// goAbs is the go command's absolute path, for tests that narrow PATH to
// its directory (a test binary built with -trimpath knows no GOROOT, and
// goTool then says "go").
func goAbs(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath(goTool())
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
