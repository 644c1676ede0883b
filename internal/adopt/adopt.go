// Package adopt brings an existing database whose refund_jobs table has the
// article's columns to fencekit's schema, without losing a row or a column
// of the team's own: inspect, plan, apply (`refundd adopt plan|apply`,
// docs/adopting.md).
//
// Inspect reads the table with Atlas's inspection and information_schema
// and refuses what adopting would lose or cannot decide: a missing article
// column, a type fencekit would have to narrow, a team column that collides
// with a fencekit column of another type, state or action names without a
// mapping (naming the rows), duplicate operation keys. The plan is a list
// of steps, each with the SQL it runs, what it locks and how to roll it
// back; DDL runs online where the server allows it, and rows are rewritten
// and backfilled in primary-key batches, each its own short transaction.
// The fence is installed in observe mode, and the Atlas baseline recorded,
// so that `refundd migrate` and the Atlas CLI work afterwards.
//
// Every step is planned from the database as it is when the plan is made,
// and every statement is written to do nothing when its work is done, so
// running apply again after a failure continues where it stopped.
package adopt

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Table is the job table adopt works on.
const Table = "refund_jobs"

// DefaultBatchSize is the number of primary-key values each backfill batch
// covers.
const DefaultBatchSize = 5000

// ArticleColumns are the columns a legacy refund_jobs must have (the
// article's schema). They may be widened; other fencekit columns that the
// team's table already has must have fencekit's type exactly.
var ArticleColumns = []string{"id", "operation_key", "attempt", "state", "lease_until", "next_action", "provider_refund_id"}

// ErrRefused means the database cannot be adopted as it is: the error names
// each column, row or value that stops it. Nothing was changed.
var ErrRefused = errors.New("adopt: refused")

// Options configure a plan.
type Options struct {
	// States and Actions map the team's state and next-action names onto
	// fencekit's (legacy name -> fencekit name). Every value present in the
	// table must be mapped or already be a fencekit name.
	States, Actions map[string]string
	// Columns fill fencekit columns the team's table lacks from columns of
	// the team's (fencekit name -> team column), copied by primary-key
	// range: payment_ref=payment_id,amount_minor=amount_cents. The team's
	// column must fit fencekit's type without narrowing.
	Columns map[string]string
	// KeepDefaults skips drop-defaults: the NOT NULL columns adopt added
	// keep their temporary defaults, so that legacy INSERTs that do not
	// know them go on working while the fence observes. The plan lists the
	// statements that drop them later (the schema is fencekit's only then).
	KeepDefaults bool
	// BatchSize is how many primary-key values one backfill batch covers
	// (DefaultBatchSize when 0).
	BatchSize int
	// Listed bounds the rows a refusal names per value (10 when 0).
	Listed int
	// Hooks let tests and the benchmark observe apply; nil fields are
	// skipped.
	Hooks Hooks
}

// Hooks are called by Apply on its own goroutine; a hook that blocks holds
// apply there (no lock is held between batches or steps).
type Hooks struct {
	// BeforeStep is called before each step runs.
	BeforeStep func(step string)
	// AfterBatch is called after each committed batch of a batched step.
	AfterBatch func(step string, lo, hi int64)
	// AfterStep is called after each step.
	AfterStep func(step string)
}

func (o Options) withDefaults() Options {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Listed == 0 {
		o.Listed = 10
	}
	return o
}

func (o Options) validate() error {
	if o.BatchSize < 1 {
		return &fencedwrite.FieldError{Field: "batch", Problem: fmt.Sprintf("must be at least 1, got %d", o.BatchSize)}
	}
	for flag, m := range map[string]map[string]string{"states": o.States, "actions": o.Actions} {
		valid := fencekitStates
		if flag == "actions" {
			valid = fencekitActions
		}
		for _, from := range slices.Sorted(maps.Keys(m)) {
			to := m[from]
			if !contains(valid, to) {
				return &fencedwrite.FieldError{Field: flag, Problem: fmt.Sprintf("%s=%s: %q is not a fencekit name (%s)", from, to, to, strings.Join(valid, ", "))}
			}
			if contains(valid, from) && from != to {
				// Rows holding a fencekit name keep it: the mapping would
				// be ignored, and rows fencekit's workers wrote meanwhile
				// could not be told from the team's.
				return &fencedwrite.FieldError{Field: flag, Problem: fmt.Sprintf("%s=%s: %q is a fencekit name, which adopt keeps as it is; map only the team's own names", from, to, from)}
			}
		}
	}
	return nil
}

var (
	fencekitStates  = []string{"ready", "running", "succeeded", "manual_review", "failed"}
	fencekitActions = []string{"refund", "reconcile"}
)

// ParseMapping reads a flag's old=new,old=new list; flag names the flag in
// errors.
func ParseMapping(flag, s string) (map[string]string, error) {
	m := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, pair := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(strings.TrimSpace(pair), "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || to == "" {
			return nil, &fencedwrite.FieldError{Field: flag, Problem: fmt.Sprintf("%q: write old=new, separated by commas", pair)}
		}
		if prev, dup := m[from]; dup && prev != to {
			return nil, &fencedwrite.FieldError{Field: flag, Problem: fmt.Sprintf("%q is mapped twice (%s and %s)", from, prev, to)}
		}
		m[from] = to
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// binary is col compared byte for byte, whatever its collation.
func binary(col string) string { return "CAST(" + quote(col) + " AS BINARY)" }

func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
