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
//   - entuse, example.com/app/ent: Ent's generic builders.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer,
		"sqlconst", "queries", "heads", "notsql", "dynamic", "suppress", "entuse", "example.com/app/ent")
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

// TestTablesFlag: other tables and columns, several tables, default Ent
// naming for an entity fenced by flag.
func TestTablesFlag(t *testing.T) {
	withFlag(t, "tables", "refund_jobs,payouts:status:version:held_until,audit_entries")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "tables")
}

// TestDeleteFlag: DELETE statements and Ent delete builders.
func TestDeleteFlag(t *testing.T) {
	withFlag(t, "delete", "true")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "deletes")
}

func TestNewRejectsBadTables(t *testing.T) {
	for _, spec := range []string{"refund_jobs:state:state", "refund-jobs", "a,a"} {
		if _, err := analyzer.New(spec, false); err == nil {
			t.Errorf("New(%q) succeeded", spec)
		}
	}
}
