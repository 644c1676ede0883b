package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFixAppliesSuggestedFixes: fencelint -fix (singlechecker's) applies
// the mechanical fix where the job is at hand and leaves the other finding
// for a person; the fixed write is fenced by fencelint's own judgement.
func TestFixAppliesSuggestedFixes(t *testing.T) {
	t.Parallel()
	dir := copyModule(t, "fixable")
	out, code := runIn(t, dir, nil, fencelint, "-fix", "./...")
	if code != 0 {
		t.Fatalf("-fix: exit %d, output:\n%s", code, out)
	}
	src, err := os.ReadFile(filepath.Join(dir, "jobs.go"))
	if err != nil {
		t.Fatal(err)
	}
	const fixed = `db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = ? AND attempt = ?", job.ID, job.State, job.Attempt)`
	const untouched = `db.ExecContext(ctx, "UPDATE refund_jobs SET attempt = 0 WHERE id = ?", id)`
	if !strings.Contains(string(src), fixed) || !strings.Contains(string(src), untouched) {
		t.Errorf("after -fix, jobs.go:\n%s\nwant it to hold\n%s\nand\n%s", src, fixed, untouched)
	}
	out, code = runIn(t, dir, nil, fencelint, "./...")
	if code != 3 || len(goLines(out)) != 1 || !strings.Contains(out, "jobs.go:25:32: unfenced UPDATE of refund_jobs") {
		t.Errorf("after -fix: exit %d, want 3 and only Reset's finding; output:\n%s", code, out)
	}
}
