package analyzer_test

import (
	"testing"

	"github.com/fencekit/fencekit/analyzer"
	"golang.org/x/tools/go/analysis/analysistest"
)

func TestConstantSQL(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "sqlconst", "queries")
}

func TestHeads(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "heads")
}

func TestNotSQL(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "notsql")
}

func TestDynamic(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "dynamic")
}

func TestSuppression(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "suppress")
}

func TestEntBuilders(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "entuse", "example.com/app/ent")
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

func TestTablesFlag(t *testing.T) {
	withFlag(t, "tables", "refund_jobs,payouts:status:version:held_until,audit_entries")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "tables")
}

func TestDeleteFlag(t *testing.T) {
	withFlag(t, "delete", "true")
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "deletes")
}
