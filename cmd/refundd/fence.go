package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/term"
	"github.com/fencekit/fencekit/migrations"
)

// fenceCommand runs `refundd fence mode observe|enforce` and `refundd fence
// report`, with the migration account's DSN: the rollout of the database's
// fence on a live table (docs/adopting.md).
func fenceCommand(ctx context.Context, fs *flag.FlagSet, dsn *string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("fence: say mode observe|enforce -reason TEXT, or report [-json]")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		return fs.Parse(args[:1]) // flag.ErrHelp: refundd help fence
	case "mode":
		reason := fs.String("reason", "", "why the fence changes mode (required; it is recorded)")
		// refundd fence mode observe -dsn DSN -reason R: the mode may come
		// before the flags, as the runbook writes it, or after them.
		rest, positional := args[1:], []string(nil)
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			positional, rest = rest[:1], rest[1:]
		}
		if err := fs.Parse(rest); err != nil {
			return err
		}
		positional = append(positional, fs.Args()...)
		db, err := openMigrationDB(*dsn)
		if err != nil {
			return fmt.Errorf("fence mode: -dsn: %w", err)
		}
		defer db.Close()
		if len(positional) == 0 {
			m, err := migrations.CurrentFenceMode(ctx, db)
			if err != nil {
				return fmt.Errorf("fence mode: %w", err)
			}
			fmt.Fprintf(out, "fence mode: %s\n", m)
			return nil
		}
		if len(positional) != 1 {
			return fmt.Errorf("fence mode: one mode, observe or enforce, got %q", strings.Join(positional, " "))
		}
		mode, err := migrations.ParseFenceMode(positional[0])
		if err != nil {
			return fmt.Errorf("fence mode: %w", err)
		}
		from, err := migrations.SetFenceMode(ctx, db, mode, *reason)
		if err != nil {
			return fmt.Errorf("fence mode: %w", err)
		}
		if from == mode {
			fmt.Fprintf(out, "fence mode: already %s; nothing changed\n", mode)
			return nil
		}
		fmt.Fprintf(out, "fence mode: %s -> %s (recorded with the reason %q)\n", from, mode, *reason)
		if mode == migrations.FenceObserve {
			fmt.Fprintln(out, "fence mode: writes that break the fence's rules now go through and are recorded: `refundd fence report` names their writers")
		}
		return nil
	case "report":
		asJSON := fs.Bool("json", false, "print the groups as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		db, err := openMigrationDB(*dsn)
		if err != nil {
			return fmt.Errorf("fence report: -dsn: %w", err)
		}
		defer db.Close()
		mode, err := migrations.CurrentFenceMode(ctx, db)
		if err != nil {
			return fmt.Errorf("fence report: %w", err)
		}
		groups, err := migrations.FenceReport(ctx, db)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(out).Encode(struct {
				Mode   migrations.FenceMode        `json:"mode"`
				Groups []migrations.ViolationGroup `json:"groups"`
			}{mode, groups})
		}
		return printFenceReport(out, mode, groups)
	default:
		return fmt.Errorf("fence: unknown subcommand %q (mode, report)", args[0])
	}
}

func printFenceReport(out io.Writer, mode migrations.FenceMode, groups []migrations.ViolationGroup) error {
	total := 0
	for _, g := range groups {
		total += g.Count
	}
	fmt.Fprintf(out, "fence mode: %s; %d writes broke the fence's rules, from %d writer(s) and statement shape(s)\n", mode, total, len(groups))
	if len(groups) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "COUNT\tACCOUNT\tPROGRAM\tRULE\tSTATEMENT\tFIRST\tLAST\tROWS")
	for _, g := range groups {
		prog := g.Program
		if prog == "" {
			prog = "-"
		}
		rows := make([]string, len(g.Rows))
		for i, r := range g.Rows {
			rows[i] = fmt.Sprint(r)
		}
		// The account, the program name and the statement are the
		// writer's: printed inert, so that an ESC sequence or a newline in
		// them cannot rewrite the operator's screen or forge a row.
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Count, term.Inert(g.Account), term.Inert(prog), term.Inert(g.Rule), term.Inert(g.Shape),
			g.First.Format(time.DateTime), g.Last.Format(time.DateTime), strings.Join(rows, ","))
	}
	return w.Flush()
}

// openMigrationDB opens the migration account's pool for the fence's
// commands: a plain client, which changes no session setting.
func openMigrationDB(dsn string) (*sql.DB, error) {
	cfg, err := fencedwrite.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("dsn: names no database")
	}
	cfg.ParseTime = true
	return sql.Open("mysql", cfg.FormatDSN())
}
