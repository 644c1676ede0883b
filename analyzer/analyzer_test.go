package analyzer_test

import (
	"testing"

	"github.com/fencekit/fencekit/analyzer"
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
		"sqbuild", "goqubuild", "gormbuild", "entbuild", "generatednames",
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
