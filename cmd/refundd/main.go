// Command refundd runs fencekit's refund jobs.
//
//	refundd run      [-dsn DSN] [-provider stripe] -provider-url URL [-listen ADDR] [-operator-listen ADDR] [-workers N] ...
//	                 workers, the webhook endpoint (-listen), /metrics and /healthz
//	                 (-operator-listen); graceful on SIGTERM
//	refundd enqueue  [-dsn DSN] -key K -payment P -amount 12.50 -currency C
//	refundd jobs     [-dsn DSN] [-state S] [-key K] [-payment P] [-refund-id ID] [-left] [-limit N] [-after C] [-json] [-id N]
//	                 search jobs, the manual-review queue, the jobs that left it, or one job's timeline
//	refundd resolve  [-dsn DSN] -id N -as succeeded|reconcile|refund -reason TEXT [-refund-id ID] [-operator NAME] [-override] | -id N -on-it
//	refundd approve  [-dsn DSN] -id REQUEST [-operator NAME] [-confirm REFUND_ID] [-decline -reason TEXT] | -list
//	refundd fakeprovider [-addr ADDR] [-api stripe] [fault flags]   the fake provider over HTTP, for refundd run -provider-url
//	refundd help     [command]
//	refundd migrate  [-dsn DSN] [-create]   apply the Atlas migrations (Go library, CLI-compatible revisions)
//	refundd adopt    plan|apply [-dsn DSN] [-states old=new,…] [-actions old=new,…] [-columns fencekit=team,…] [-keep-defaults] [-batch N]
//	                 bring an existing refund_jobs table to fencekit's schema (docs/adopting.md)
//	refundd adopt    rollback plan|apply -dsn DSN   undo it, step by step in reverse
//	refundd console-user -name N -role R[,R] [-proxy-only]   a line of the console's users file; the password on stdin
//	refundd demo     [-dsn DSN] [-scene zombie] [-json] ...
//	refundd chaos    [-dsn DSN] --jobs N --workers W --duration D --seed S [--provider stripe] [--json] [--keep-history]
//	                 a fleet of refundd processes under injected faults; checks
//	                 the history of every process and the invariants at the end
//	                 (the harness is internal/chaos, the demo internal/demo)
//
// The webhook endpoint verifies signatures with $FENCEKIT_WEBHOOK_SECRET
// ($STRIPE_WEBHOOK_SECRET with -provider stripe, whose key comes from
// $STRIPE_API_KEY); refundd run refuses to start without it, unless
// -no-webhooks.
//
// DSN is a go-sql-driver/mysql DSN, from -dsn or $FENCEKIT_DSN; a command
// that reaches a database without one is refused, but demo and chaos, which
// default to root@tcp(127.0.0.1:3306)/fencekit_demo (fencekit_chaos).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/chaos"
	"github.com/fencekit/fencekit/internal/scratchdb"
	"github.com/fencekit/fencekit/internal/term"
	"github.com/fencekit/fencekit/migrations"
)

const defaultDSN = "root@tcp(127.0.0.1:3306)/fencekit_demo"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}

// printError prints err for the operator's terminal: every line made inert
// (an error may quote a provider's, a webhook's or a DSN's text), and the
// lines after the first indented, so that text inside an error cannot pass
// for a line of its own.
func printError(w io.Writer, err error) {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = shorten(term.Inert(l), maxErrorLine)
	}
	fmt.Fprintln(w, "refundd: "+strings.Join(lines, "\n  "))
}

// maxErrorLine bounds a line of an error printed to the terminal: an
// argument of thousands of characters (a pasted file, an attack) is not
// echoed back in full.
const maxErrorLine = 600

// shorten cuts s to about n bytes (on a rune boundary), saying how much it
// left out.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes not shown)", s[:cut], len(s)-cut)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  refundd run     [-provider stripe] -provider-url URL [-listen ADDR] [-operator-listen ADDR] [-workers N] ...   serve the queue
  refundd enqueue -key K -payment P -amount 12.50 -currency C   enqueue an approved refund request
  refundd jobs    [-state S] [-key K] [-payment P] [-refund-id ID] [-left] [-limit N] [-after CURSOR] [-json]
                  [-id N]                                   search jobs, the manual-review queue, or one job's timeline
  refundd resolve -id N -as succeeded|reconcile|refund -reason TEXT [-refund-id ID] [-operator NAME] [-override]
  refundd approve -id REQUEST [-operator NAME] [-confirm REFUND_ID] [-decline -reason TEXT] | -list   a second operator's approval
  refundd fakeprovider [-addr ADDR] [-api stripe] [fault flags]   serve the fake payment provider over HTTP
  refundd help    [command]                                 this text, or one command's flags
  refundd migrate [-create]                                 apply the migrations to the database
  refundd adopt   plan|apply [-states old=new,…] [-actions old=new,…] [-columns fencekit=team,…] [-keep-defaults] [-batch N]   bring an existing refund_jobs to fencekit's schema
  refundd adopt   rollback plan|apply                       undo an adoption, step by step in reverse
  refundd console-user -name N -role R[,R] < password      a line of the console's users file (bcrypt hash; roles viewer, resolver, approver)
  refundd fence   mode [observe|enforce -reason TEXT] | report [-json]   the fence's rollout mode, and the writes it let through
  refundd demo    [-json] [-scene zombie] ...               the demo at scale, or the article's scene
  refundd chaos   --jobs N --workers W --duration D --seed S [--provider stripe] [--json] [--keep-history]   a fleet under faults, checked
every command that reaches a database needs -dsn DSN or $FENCEKIT_DSN; only demo and chaos default to `+defaultDSN+` (and _chaos)
`)
}

// command runs one command; run (cli.go) wraps it with help and one-line
// flag errors.
func command(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet(ctx, args[0])
	// Only the demo and the chaos harness, which drop and recreate a
	// throw-away database of their own (its name must end in _demo or
	// _chaos), have a default: every other command writes or reads the
	// database it is told, never fencekit_demo by mistake.
	def, usage := os.Getenv("FENCEKIT_DSN"), "go-sql-driver/mysql DSN of the database (required, or $FENCEKIT_DSN)"
	switch args[0] {
	case "demo", "chaos", chaos.AgentCommand:
		def, usage = envOr("FENCEKIT_DSN", defaultDSN), "go-sql-driver/mysql DSN of the database (default $FENCEKIT_DSN or "+defaultDSN+")"
	}
	dsn := fs.String("dsn", def, usage)
	// parse reads the command's flags; a command that reaches a database
	// then needs one named.
	parse := func() error {
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return requireDSN(args[0], *dsn)
	}
	switch args[0] {
	case "run":
		var f runFlags
		f.register(fs)
		if err := parse(); err != nil {
			return err
		}
		f.dsn = *dsn
		return runWorker(ctx, f, os.Stderr)
	case "enqueue":
		var f enqueueFlags
		fs.StringVar(&f.key, "key", "", "the refund request's operation key (its idempotency key)")
		fs.StringVar(&f.payment, "payment", "", "the payment to refund")
		fs.StringVar(&f.amount, "amount", "", "amount in major units with the currency's decimals: 12.50 EUR, 1250 JPY, 1.250 KWD")
		fs.StringVar(&f.currency, "currency", "", "ISO 4217 code")
		f.dispatch.register(fs, false)
		if err := parse(); err != nil {
			return err
		}
		return enqueue(ctx, *dsn, f, out)
	case "jobs":
		var f jobsFlags
		f.register(fs)
		if err := parse(); err != nil {
			return err
		}
		return jobs(ctx, *dsn, f, out)
	case "resolve":
		var f resolveFlags
		f.register(fs)
		if err := parse(); err != nil {
			return err
		}
		return resolve(ctx, *dsn, f, out)
	case "approve":
		var f approveFlags
		f.register(fs)
		if err := parse(); err != nil {
			return err
		}
		return approve(ctx, *dsn, f, out)
	case "fakeprovider":
		var f fakeFlags
		f.register(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return serveFake(ctx, f, out)
	case "console-user":
		return consoleUser(fs, args[1:], os.Stdin, out)
	case "migrate":
		create := fs.Bool("create", false, "create the database first when it does not exist")
		if err := parse(); err != nil {
			return err
		}
		return migrate(ctx, *dsn, *create, out)
	case "fence":
		return fenceCommand(ctx, fs, dsn, args[1:], out)
	case "adopt":
		return adoptCommand(ctx, fs, dsn, args[1:], out)
	case "demo":
		return demoCommand(ctx, fs, dsn, args[1:], out)
	case "chaos":
		return chaosCommand(ctx, fs, dsn, args[1:], out)
	case chaos.AgentCommand: // the chaos fleet's processes; listed nowhere
		return chaosAgentCommand(ctx, fs, dsn, args[1:])
	default:
		return fmt.Errorf("unknown command %q: see refundd help", args[0])
	}
}

// requireDSN refuses a command that reaches a database without one named.
func requireDSN(command, dsn string) error {
	if err := namedDSN(dsn); err != nil {
		return fmt.Errorf("%s: -dsn: %w", command, err)
	}
	return nil
}

// namedDSN refuses an empty DSN.
func namedDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return errors.New("required: name the database with -dsn DSN or $FENCEKIT_DSN (only refundd demo and chaos have a default)")
	}
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// migrate applies the embedded migration directory to dsn's database. It
// checks the DSN (the fenced layer's checks) before it creates anything:
// a refused DSN leaves no empty database behind. A failed run leaves the
// database as it found it (migrations.Apply), and the error says how to go
// on.
func migrate(ctx context.Context, dsn string, create bool, out io.Writer) error {
	o := fencedwrite.DSNOptions{ReadTimeout: 5 * time.Minute}
	cfg, err := fencedwrite.Config(dsn, o)
	if err != nil {
		return fmt.Errorf("migrate: -dsn: %w", err)
	}
	if cfg.DBName == "" {
		return errors.New("migrate: -dsn: names no database")
	}
	if create {
		ident, err := scratchdb.QuoteIdent(cfg.DBName)
		if err != nil {
			return fmt.Errorf("migrate: -dsn: %w", err)
		}
		server := cfg.Clone()
		server.DBName = ""
		db, err := sql.Open("mysql", server.FormatDSN())
		if err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+ident+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		db.Close()
		if err != nil {
			return fmt.Errorf("migrate: create database %s: %w", cfg.DBName, err)
		}
	}
	// A plain pool with the checked settings: recognising a database the
	// plain client migrated replays the files on a scratch database, which
	// a fenced pool (no USE) would refuse.
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := migrations.Apply(ctx, db)
	if err != nil {
		var ae *migrations.ApplyError
		if errors.As(err, &ae) {
			return fmt.Errorf("%w\nto go on: refundd migrate -dsn '%s'", err, redacted(dsn))
		}
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(out, "migrate: %s is up to date\n", cfg.DBName)
	}
	for _, v := range applied {
		fmt.Fprintf(out, "migrate: applied %s to %s\n", v, cfg.DBName)
	}
	return nil
}

// redacted is dsn with its password replaced by "***", for messages.
func redacted(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Passwd == "" {
		return dsn
	}
	user, rest, ok := strings.Cut(dsn, "@")
	if !ok {
		return dsn
	}
	name, _, _ := strings.Cut(user, ":")
	return name + ":***@" + rest
}
