// Command fencelint reports writes of fenced tables (by default
// refund_jobs) that lack the state + attempt fence.
//
// It runs standalone:
//
//	fencelint ./...
//
// and as a vet tool:
//
//	go vet -vettool=$(which fencelint) ./...
//
// A legacy codebase adopts it with a baseline of today's findings, written
// standalone and then checked in either mode:
//
//	fencelint -write-baseline fencelint.baseline ./...
//	go vet -vettool=$(which fencelint) -baseline=fencelint.baseline ./...
//
// See docs/fencelint.md for flags, suppression and the baseline.
package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencekit/fencekit/analyzer"
	"github.com/fencekit/fencekit/analyzer/baseline"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/singlechecker"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-V=full" || os.Args[1] == "--V=full") {
		os.Exit(version(os.Stdout, os.Stderr))
	}
	if vetMode(os.Args[1:]) && hasFlag(os.Args[1:], "baseline") && !vetxOnly(os.Args[len(os.Args)-1]) {
		fmt.Fprintf(os.Stderr, "fencelint: under go vet, name the baseline with %s=FILE, not -baseline: go vet caches a clean package by the tool's flags, not the file's content, and would replay it after an edit of the baseline\n", analyzer.BaselineEnv)
		os.Exit(1)
	}
	if writeMode(os.Args[1:]) {
		os.Exit(writeBaseline(os.Args[1:], os.Stderr))
	}
	if vetMode(os.Args[1:]) {
		// One package a process: wait for the SQL checker before the
		// process exits, so that go vet counts its CPU time as this tool's.
		run := analyzer.Analyzer.Run
		analyzer.Analyzer.Run = func(pass *analysis.Pass) (any, error) {
			defer analyzer.StopSQLHelper()
			return run(pass)
		}
	}
	singlechecker.Main(analyzer.Analyzer)
}

// version answers -V=full as singlechecker does (go vet keys its cache by
// the answer), with a build ID that hashes what decides the findings: this
// executable, its SQL checker fencelint-sql (which judges the SQL text this
// one finds), and the baseline file that $FENCELINT_BASELINE names, if any:
// go vet replays a package's cached clean result whatever the flags name,
// so an edit of the baseline alone, or a new helper alone, must change the
// tool's identity. The baseline is found as the analyzer finds it, from
// this directory (go vet's) upwards. Not finding the helper or the
// baseline is an error: go vet stops at once, before any package, with the
// reason.
func version(stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "fencelint -V=full: %v\n", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	helper, err := analyzer.SQLHelper()
	if err != nil {
		return fail(err)
	}
	files := []string{exe, helper}
	if name := os.Getenv(analyzer.BaselineEnv); name != "" {
		wd, err := os.Getwd()
		if err != nil {
			return fail(err)
		}
		path, err := baseline.Locate(name, wd)
		if err != nil {
			return fail(fmt.Errorf("%s=%s: %w (run go vet where the file is found from the working directory upwards, or give an absolute path)", analyzer.BaselineEnv, name, err))
		}
		files = append(files, filepath.Clean(path))
	}
	h := sha256.New()
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return fail(err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(stdout, "%s version devel comments-go-here buildID=%02x\n", exe, string(h.Sum(nil)))
	return 0
}

// vetMode reports whether go vet runs the tool: its last argument is the
// package's vet configuration.
func vetMode(args []string) bool {
	return len(args) > 0 && strings.HasSuffix(args[len(args)-1], ".cfg")
}

// vetxOnly reports whether go vet runs the tool on a dependency, only for
// its facts (its findings are not shown).
func vetxOnly(cfg string) bool {
	data, err := os.ReadFile(cfg)
	if err != nil {
		return false // the checker reports it
	}
	var c struct{ VetxOnly bool }
	return json.Unmarshal(data, &c) == nil && c.VetxOnly
}

// hasFlag reports whether args set the flag name (-name, -name=v, --name).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			return false
		}
		n := strings.TrimLeft(a, "-")
		if n == name || strings.HasPrefix(n, name+"=") {
			return true
		}
	}
	return false
}
