package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/fencekit/fencekit/internal/adopt"
)

// adoptCommand runs `refundd adopt plan|apply -dsn DSN [-states old=new,…]
// [-actions old=new,…] [-columns fencekit=team,…] [-batch N]` with the
// migration account's DSN: plan prints the SQL that brings an existing
// refund_jobs to fencekit's schema and changes nothing; apply runs it. `adopt
// rollback plan|apply -dsn DSN` undoes an adoption the same way
// (docs/adopting.md).
func adoptCommand(ctx context.Context, fs *flag.FlagSet, dsn *string, args []string, out io.Writer) error {
	statesFlag := fs.String("states", "", "the team's state names mapped onto fencekit's: pending=ready,processing=running,…")
	actionsFlag := fs.String("actions", "", "the team's next-action names mapped onto fencekit's: check=reconcile,…")
	columnsFlag := fs.String("columns", "", "fencekit columns the table lacks, copied from columns of the team's: payment_ref=payment_id,amount_minor=amount_cents,…")
	keepDefaults := fs.Bool("keep-defaults", false, "keep the temporary defaults of the NOT NULL columns adopt adds, and the team's own defaults on fencekit's columns, "+
		"so that legacy INSERTs go on working (the plan says how to drop them later)")
	batch := fs.Int("batch", adopt.DefaultBatchSize, "primary-key values per backfill batch (each its own transaction)")
	blockingCopy := fs.Bool("blocking-copy", false, "change column types with ALGORITHM=COPY, LOCK=SHARED (writes to refund_jobs wait for the whole copy) instead of the online copy, "+
		"which refuses team triggers on refund_jobs and foreign keys to or from it")
	const say = "adopt: say plan or apply (or rollback plan|apply), then -dsn DSN [-states old=new,…] [-actions old=new,…] [-batch N]; see refundd help adopt"
	if len(args) == 0 {
		return fmt.Errorf("%s", say)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		return fs.Parse(args[:1]) // flag.ErrHelp: refundd help adopt
	}
	name := "adopt " + args[0]
	rollback := args[0] == "rollback"
	if rollback {
		args = args[1:]
		if len(args) == 0 || (args[0] != "plan" && args[0] != "apply") {
			return fmt.Errorf("adopt rollback: say plan or apply, then -dsn DSN")
		}
		name = "adopt rollback " + args[0]
	} else if args[0] != "plan" && args[0] != "apply" {
		return fmt.Errorf("%s", say)
	}
	sub := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	var o adopt.Options
	var err error
	if o.States, err = adopt.ParseMapping("states", *statesFlag); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if o.Actions, err = adopt.ParseMapping("actions", *actionsFlag); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if o.Columns, err = adopt.ParseMapping("columns", *columnsFlag); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	o.BatchSize = *batch
	o.KeepDefaults = *keepDefaults
	o.BlockingCopy = *blockingCopy
	if *batch < 1 {
		return fmt.Errorf("%s: -batch: must be at least 1, got %d", name, *batch)
	}
	db, err := openMigrationDB(*dsn)
	if err != nil {
		return fmt.Errorf("%s: -dsn: %w", name, err)
	}
	defer db.Close()
	if sub == "plan" {
		plan := adopt.NewPlan
		if rollback {
			plan = adopt.NewRollbackPlan
		}
		p, err := plan(ctx, db, o)
		if err != nil {
			return err
		}
		return p.Format(out, *batch)
	}
	progress := "adopt"
	if rollback {
		progress = "adopt rollback"
	}
	o.Hooks.BeforeStep = func(step string) { fmt.Fprintf(out, "%s: %s …\n", progress, step) }
	apply := adopt.Apply
	if rollback {
		apply = adopt.Rollback
	}
	res, err := apply(ctx, db, o)
	if res != nil {
		names := make([]string, 0, len(res.Durations))
		for n := range res.Durations {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(out, "%s: %s done in %s\n", progress, n, res.Durations[n].Round(time.Millisecond))
		}
	}
	if err != nil {
		return err
	}
	if rollback {
		fmt.Fprintln(out, "adopt rollback: done; the legacy writers write refund_jobs as before adoption. What was kept is in the plan's notes (refundd adopt rollback plan printed them)")
		return nil
	}
	fmt.Fprintln(out, "adopt: done; the fence observes. Next: `refundd fence report` names the legacy writers to fix; then `refundd fence mode enforce -reason …`")
	return nil
}
