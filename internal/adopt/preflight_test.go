//go:build !tidb

package adopt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
)

// Step 0: the plan opens with the pre-flight checks it ran itself: the
// migration account's grants, LOCK TABLES, binary logging, the AUTO-INC
// lock mode, performance_schema, the time zone, the team's names still in
// the table, and the other accounts whose grants reach the tables (a legacy
// account granted UPDATE on the database is named). An account without
// TRIGGER is refused with the GRANT that fixes it, beside the plan's other
// refusals.
func TestPlanOpensWithStepZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	legacy := dbtest.Account(t, db, name, func(db, account string) []string {
		return []string{fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.* TO %s", db, account)}
	})
	p, err := adopt.NewPlan(ctx, db, options())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := p.Format(&text, 2); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"-- Step 0: pre-flight", "[ok] the migration account's grants", "binary logging", "innodb_autoinc_lock_mode", "performance_schema",
		"time zone", `the legacy writers' names: the table holds the team's names`, `state "pending"`, `next_action "check"`, "'" + legacy.User + "'@"} {
		if !strings.Contains(out, want) {
			t.Errorf("step 0 does not say %q", want)
		}
	}
	if i, j := strings.Index(out, "Step 0"), strings.Index(out, "Step 1/"); i < 0 || j < i {
		t.Errorf("step 0 is not first")
	}
	if t.Failed() {
		t.Fatal(out)
	}
	// A legacy account granted everything on the database can drop the
	// fence's triggers, or shadow its mode table for its own session with a
	// temporary table: step 0 names it, and not the data-only account.
	all := dbtest.Account(t, db, name, func(db, account string) []string {
		return []string{fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO %s", db, account)}
	})
	p, err = adopt.NewPlan(ctx, db, options())
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	if err := p.Format(&text, 2); err != nil {
		t.Fatal(err)
	}
	undo := ""
	for _, line := range strings.Split(text.String(), "\n") {
		if strings.Contains(line, "[warn] the accounts that can undo the fence") {
			undo = line
		}
	}
	if !strings.Contains(undo, "'"+all.User+"'@'%' (") || !strings.Contains(undo, "CREATE TEMPORARY TABLES on "+name) || !strings.Contains(undo, "TRIGGER on "+name) ||
		strings.Contains(undo, legacy.User) {
		t.Errorf("step 0's line on the accounts that can undo the fence: %q", undo)
	}

	// An account without TRIGGER (nor the routines' privileges).
	weak := dbtest.Account(t, db, name, func(db, account string) []string {
		return []string{fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX ON `%s`.* TO %s", db, account),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO %s", migrations.ScratchPrefix+"%", account)}
	})
	weak.ParseTime = true
	_, err = adopt.NewPlan(ctx, dbtest.OpenDSN(t, weak.FormatDSN()), options())
	if !errors.Is(err, adopt.ErrRefused) || !strings.Contains(err.Error(), "lacks TRIGGER, CREATE ROUTINE, ALTER ROUTINE") || !strings.Contains(err.Error(), "GRANT TRIGGER, CREATE ROUTINE, ALTER ROUTINE ON") {
		t.Fatalf("plan by an account without TRIGGER: %v", err)
	}
}

// With the binary log on, creating a trigger needs SUPER or
// log_bin_trust_function_creators (error 1419): refused, with the fix.
// (log_bin cannot be switched on a running server: the decision is
// checked on its own.)
func TestBinaryLoggingNeedsTrustedCreators(t *testing.T) {
	for _, c := range []struct {
		logBin, trust, super bool
		want                 adopt.CheckStatus
	}{
		{false, false, false, adopt.CheckOK},
		{true, true, false, adopt.CheckOK},
		{true, false, true, adopt.CheckOK},
		{true, false, false, adopt.CheckRefused},
	} {
		got := adopt.BinlogCheck(c.logBin, c.trust, c.super)
		if got.Status != c.want || c.want == adopt.CheckRefused && !strings.Contains(got.Fix, "log_bin_trust_function_creators = 1") {
			t.Errorf("log_bin %v, trust %v, super %v: %+v, want %s", c.logBin, c.trust, c.super, got, c.want)
		}
	}
}
