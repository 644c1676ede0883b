package analyzer_test

import (
	"testing"

	"github.com/fencekit/fencekit/analyzer"
	"golang.org/x/tools/go/analysis/analysistest"
)

func TestConstantSQL(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), analyzer.Analyzer, "sqlconst", "queries")
}
