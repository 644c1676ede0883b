package analyzer_test

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/analyzer"
	_ "github.com/fencekit/fencekit/analyzer/sqlparse" // judge SQL in this process
	"golang.org/x/tools/go/analysis/analysistest"
)

// TestAnalyzer runs the default configuration over every case package in
// one load (loading dominates the cost, above all under -race):
//
//   - sqlconst, queries: constant SQL, the fence, the lease regression,
//     upserts, multi-statement strings, constants from other packages;
//   - heads: strings used only as heads of longer strings;
//   - notsql: log and error text, reads, discarded and unused constants;
//   - dynamic: queries built at run time that reach SQL sinks;
//   - suppress: //fencelint:allow directives;
//   - entuse, example.com/app/ent: Ent's generic builders;
//   - runtimeuse, example.com/gen, …/fencedwrite/entext: the runtime is for
//     generated code and the fenced layer only.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer,
		"sqlconst", "queries", "heads", "notsql", "dynamic", "suppress", "entuse", "example.com/app/ent",
		"wrappers", "sqlhelp", "edits", "unreadable", "variants", "selfdeclare", "embedded", "libsinks",
		"sqbuild", "goqubuild", "gormbuild", "entbuild", "generatednames", "rawlibs", "bulkload", "sqlcgen/...",
		"runtimeuse", "example.com/gen", "github.com/fencekit/fencekit/fencedwrite/entext")
}

// withFlag runs the analyzer with one flag set, restoring it afterwards.
func withFlag(t *testing.T, name, value string) {
	t.Helper()
	f := analyzer.Analyzer.Flags.Lookup(name)
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}

// TestTablesFlag: other tables and columns (the writer column too),
// several tables, default Ent naming for an entity fenced by flag.
func TestTablesFlag(t *testing.T) {
	withFlag(t, "tables", "refund_jobs,payouts:status:version:held_until:declared_version,audit_entries")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "tables")
}

// TestSinksFlag: extra sinks by name, package function and method.
func TestSinksFlag(t *testing.T) {
	withFlag(t, "sinks", "runSQL,custom/dbx.Pool.Do,custom/dbx.Send")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "custom")
}

// TestDeleteFlag: DELETE statements and Ent delete builders.
func TestDeleteFlag(t *testing.T) {
	withFlag(t, "delete", "true")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "deletes")
}

func TestNewRejectsBadTables(t *testing.T) {
	for _, spec := range []string{"refund_jobs:state:state", "refund-jobs", "a,a", "a:s:t:l:t"} {
		if _, err := analyzer.New(spec, false); err == nil {
			t.Errorf("New(%q) succeeded", spec)
		}
	}
	for _, sinks := range []string{"a/b", "(*x.T).M", "a.b.c.d", "pkg.", "x y"} {
		if _, err := analyzer.NewWithOptions(analyzer.Options{Sinks: sinks}); err == nil {
			t.Errorf("NewWithOptions(Sinks: %q) succeeded", sinks)
		}
	}
}

// TestBaselineAndSuggestedFixes, in one load (loading dominates):
//
//   - baselined, with testdata/baselined.baseline: accepted findings are
//     not reported wherever they moved in their function; a new one is,
//     and so is a function that grew beyond its entry; an entry that
//     matches fewer findings (or none, or whose file is gone) is reported
//     so that the baseline shrinks; entries of other packages are not
//     judged here; directive problems are never baselined.
//   - fixes (no entry: the baseline leaves its findings alone): the
//     mechanical fixes, applied, give testdata/src/fixes/fixes.go.golden;
//     the cases without one keep only the diagnostic.
func TestBaselineAndSuggestedFixes(t *testing.T) {
	path, err := filepath.Abs(filepath.Join(analysistest.TestData(), "baselined.baseline"))
	if err != nil {
		t.Fatal(err)
	}
	withFlag(t, "baseline", path)
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), analyzer.Analyzer, "baselined", "fixes")
}

// errorRecorder is an analysistest.Testing that keeps the errors.
type errorRecorder struct{ errs []string }

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestMalformedBaselineIsAnError: a bad line fails the analysis, naming
// the file, the line and the problem; it never means an empty baseline
// (every malformation: analyzer/baseline's TestParseErrorsNameFileAndLine).
// A missing file named by an absolute path is an error too.
func TestMalformedBaselineIsAnError(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.baseline")
	if err := os.WriteFile(bad, []byte("# ok\n\nbaselined baselined.go Old one unfenced UPDATE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		bad:                                    "fencelint baseline " + bad + `:3: count "one" is not a positive integer`,
		filepath.Join(dir, "missing.baseline"): "missing.baseline: no such file",
	} {
		withFlag(t, "baseline", path)
		var r errorRecorder
		analysistest.Run(&r, analysistest.TestData(), analyzer.Analyzer, "baselinebad")
		if !strings.Contains(strings.Join(r.errs, "\n"), want) {
			t.Errorf("-baseline=%s: errors\n%s\nwant one containing %q", path, strings.Join(r.errs, "\n"), want)
		}
	}
}

// TestCallForms (issue 20): a write is judged however Go calls the sink
// (callforms), fenced writes built with run-time parts are left alone
// (leavealone), and queries built by other means are followed
// (builtqueries).
func TestCallForms(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "callforms", "leavealone", "builtqueries", "cmdhelper")
}

// TestReportOrderIsStable: the findings of a package come out in the
// order of their positions in the source (file name, then offset), the
// same on every run. The loader parses a package's files concurrently,
// so token.Pos order across files changes from load to load; rawlibs has
// six files. Run three loads and compare each run's order with the
// source order.
func TestReportOrderIsStable(t *testing.T) {
	var first []string
	for run := 0; run < 3; run++ {
		results := analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "rawlibs")
		var got []string
		var posns []token.Position
		for _, r := range results {
			for _, d := range r.Diagnostics {
				p := r.Pass.Fset.Position(d.Pos)
				posns = append(posns, p)
				got = append(got, fmt.Sprintf("%s:%d:%d: %s", filepath.Base(p.Filename), p.Line, p.Column, d.Message))
			}
		}
		if len(got) == 0 {
			t.Fatal("rawlibs: no findings")
		}
		for i := 1; i < len(posns); i++ {
			a, b := posns[i-1], posns[i]
			if a.Filename > b.Filename || a.Filename == b.Filename && a.Offset > b.Offset {
				t.Fatalf("run %d: finding %d (%s) reported before %s: not in source order", run, i-1, got[i-1], got[i])
			}
		}
		if first == nil {
			first = got
			continue
		}
		if strings.Join(got, "\n") != strings.Join(first, "\n") {
			t.Fatalf("run %d: findings in another order than run 0:\n%s\nvs\n%s", run, strings.Join(got, "\n"), strings.Join(first, "\n"))
		}
	}
}

// TestUnprovable (issue 32): a write whose WHERE or SET list is finished
// at run time is reported where the text is finished unless every caller
// completes it with a fenced constant (unprovable); through channels and
// closures (travel); the raw entry points of xorm, bun and dbr (libs);
// SQL text in a test's table of expectations is no write (tables_test).
func TestUnprovable(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "unprovable")
}
