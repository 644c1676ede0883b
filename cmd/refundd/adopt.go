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
// [-actions old=new,…] [-columns fencekit=team,…] [-batch N]` with the migration account's DSN: plan
// prints the SQL that brings an existing refund_jobs to fencekit's schema
// and changes nothing; apply runs it (docs/adopting.md).
func adoptCommand(ctx context.Context, fs *flag.FlagSet, dsn *string, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "apply") {
		return fmt.Errorf("adopt: say plan or apply, then -dsn DSN [-states old=new,…] [-actions old=new,…] [-batch N]")
	}
	sub := args[0]
	statesFlag := fs.String("states", "", "the team's state names mapped onto fencekit's: pending=ready,processing=running,…")
	actionsFlag := fs.String("actions", "", "the team's next-action names mapped onto fencekit's: check=reconcile,…")
	columnsFlag := fs.String("columns", "", "fencekit columns the table lacks, copied from columns of the team's: payment_ref=payment_id,amount_minor=amount_cents,…")
	keepDefaults := fs.Bool("keep-defaults", false, "keep the temporary defaults of the NOT NULL columns adopt adds, so that legacy INSERTs go on working (the plan says how to drop them later)")
	batch := fs.Int("batch", adopt.DefaultBatchSize, "primary-key values per backfill batch (each its own transaction)")
	blockingCopy := fs.Bool("blocking-copy", false, "change column types with ALGORITHM=COPY, LOCK=SHARED (writes to refund_jobs wait for the whole copy) instead of the online copy, "+
		"which refuses team triggers on refund_jobs and foreign keys to or from it")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("adopt %s: unexpected argument %q", sub, fs.Arg(0))
	}
	var o adopt.Options
	var err error
	if o.States, err = adopt.ParseMapping("states", *statesFlag); err != nil {
		return fmt.Errorf("adopt %s: %w", sub, err)
	}
	if o.Actions, err = adopt.ParseMapping("actions", *actionsFlag); err != nil {
		return fmt.Errorf("adopt %s: %w", sub, err)
	}
	if o.Columns, err = adopt.ParseMapping("columns", *columnsFlag); err != nil {
		return fmt.Errorf("adopt %s: %w", sub, err)
	}
	o.BatchSize = *batch
	o.KeepDefaults = *keepDefaults
	o.BlockingCopy = *blockingCopy
	if *batch < 1 {
		return fmt.Errorf("adopt %s: -batch: must be at least 1, got %d", sub, *batch)
	}
	db, err := openMigrationDB(*dsn)
	if err != nil {
		return fmt.Errorf("adopt %s: -dsn: %w", sub, err)
	}
	defer db.Close()
	if sub == "plan" {
		p, err := adopt.NewPlan(ctx, db, o)
		if err != nil {
			return err
		}
		return p.Format(out, *batch)
	}
	o.Hooks.BeforeStep = func(step string) { fmt.Fprintf(out, "adopt: %s …\n", step) }
	res, err := adopt.Apply(ctx, db, o)
	if res != nil {
		names := make([]string, 0, len(res.Durations))
		for n := range res.Durations {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(out, "adopt: %s done in %s\n", n, res.Durations[n].Round(time.Millisecond))
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "adopt: done; the fence observes. Next: `refundd fence report` names the legacy writers to fix; then `refundd fence mode enforce -reason …`")
	return nil
}
