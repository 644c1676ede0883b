package main

import (
	"strings"
	"testing"

	"github.com/fencekit/fencekit/analyzer"
	"github.com/fencekit/fencekit/ent"
)

// The names of the fence live once, in the schema's annotation: the
// generated constants carry them to fencelint (which reads them wherever
// the generated package is in sight), and fencelint's default -tables must
// say the same for code that cannot see it.
func TestLinterDefaultsAreTheGeneratedNames(t *testing.T) {
	want := strings.Join([]string{ent.RefundJobFencedTable, ent.RefundJobFencedStateColumn, ent.RefundJobFencedTokenColumn,
		ent.RefundJobFencedLeaseColumn, ent.RefundJobFencedWriterColumn}, ":")
	if got := analyzer.Analyzer.Flags.Lookup("tables").DefValue; got != want {
		t.Fatalf("fencelint's default -tables is %q; the schema's annotation generates %q", got, want)
	}
}
