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
		quietFor := fs.Duration("quiet-for", 24*time.Hour, "enforce: refuse while the fence recorded a violation within this window (every such writer would start failing)")
		force := fs.Bool("force", false, "enforce: switch even though violations were recorded within -quiet-for")
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
		if mode == migrations.FenceEnforce {
			if err := enforceGuard(ctx, db, *quietFor, *force, out); err != nil {
				return err
			}
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

// enforceGuard says when the fence last let a write through, and by whom,
// and refuses to enforce while writes were let through within quietFor
// (unless force): each of those writers would start failing.
func enforceGuard(ctx context.Context, db *sql.DB, quietFor time.Duration, force bool, out io.Writer) error {
	if quietFor < 0 {
		return fmt.Errorf("fence mode: -quiet-for: must not be negative, got %s", quietFor)
	}
	r, err := migrations.EnforceReadiness(ctx, db, quietFor)
	if err != nil {
		return fmt.Errorf("fence mode: %w", err)
	}
	if r.Last == nil {
		fmt.Fprintln(out, "fence mode: no violation was ever recorded")
		return nil
	}
	fmt.Fprintf(out, "fence mode: the last violation was recorded at %s UTC (%s ago) from %s: %s\n", r.Last.Last.Format("2006-01-02 15:04:05"),
		r.Now.Sub(r.Last.Last).Round(time.Second), writerOf(*r.Last), term.Inert(r.Last.Rule))
	if len(r.Recent) == 0 {
		return nil
	}
	var lines []string
	for _, g := range r.Recent {
		lines = append(lines, fmt.Sprintf("%s: %d write(s), the last at %s UTC (%s)", writerOf(g), g.Count, g.Last.Format("2006-01-02 15:04:05"), term.Inert(g.Shape)))
	}
	if force {
		fmt.Fprintf(out, "fence mode: -force: these writers were let through within %s and will be refused from now on:\n  %s\n", quietFor, strings.Join(lines, "\n  "))
		return nil
	}
	return fmt.Errorf("fence mode: refused: the fence let writes through within the last %s, and these writers would start failing with error 1644:\n%s\n"+
		"fix them (refundd fence report), wait until none writes for %s, or switch anyway with -force", quietFor, strings.Join(lines, "\n"), quietFor)
}

// writerOf names a group's writer, inert.
func writerOf(g migrations.ViolationGroup) string {
	w := term.Inert(g.Account)
	if g.Program != "" {
		w += " (" + term.Inert(g.Program) + ")"
	}
	return w
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
	fmt.Fprintln(w, "COUNT\tACCOUNT\tPROGRAM\tRULE\tSTATEMENT\tCHANGED\tFIRST\tLAST\tROWS")
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
		changed := strings.Join(g.Columns, ",")
		if changed == "" {
			changed = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Count, term.Inert(g.Account), term.Inert(prog), term.Inert(g.Rule), term.Inert(g.Shape),
			term.Inert(changed), g.First.Format(time.DateTime), g.Last.Format(time.DateTime), strings.Join(rows, ","))
	}
	return w.Flush()
}

// openMigrationDB opens the migration account's pool for the fence's
// commands: a plain client, which changes no session setting.
func openMigrationDB(dsn string) (*sql.DB, error) {
	if err := namedDSN(dsn); err != nil {
		return nil, err
	}
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
