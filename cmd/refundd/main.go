// Command refundd runs fencekit's refund jobs.
//
//	refundd run      [-dsn DSN] -provider-url URL [-listen ADDR] [-operator-listen ADDR] [-workers N] ...
//	                 workers, the webhook endpoint (-listen), /metrics and /healthz
//	                 (-operator-listen); graceful on SIGTERM
//	refundd enqueue  [-dsn DSN] -key K -payment P -amount 12.50 -currency C
//	refundd jobs     [-dsn DSN] [-state S] [-key K] [-payment P] [-refund-id ID] [-left] [-limit N] [-after C] [-json] [-id N]
//	                 search jobs, the manual-review queue, the jobs that left it, or one job's timeline
//	refundd resolve  [-dsn DSN] -id N -as succeeded|reconcile|refund -reason TEXT [-refund-id ID] [-operator NAME] [-override]
//	refundd approve  [-dsn DSN] -id REQUEST [-operator NAME] [-decline -reason TEXT] | -list
//	refundd fakeprovider [-addr ADDR] [fault flags]   the fake provider over HTTP, for refundd run -provider-url
//	refundd help     [command]
//	refundd migrate  [-dsn DSN] [-create]   apply the Atlas migrations (Go library, CLI-compatible revisions)
//	refundd console-user -name N -role R[,R] [-proxy-only]   a line of the console's users file; the password on stdin
//	refundd demo     [-dsn DSN] [-scene zombie] [-json] ...
//	refundd chaos    [-dsn DSN] --jobs N --workers W --duration D --seed S [--json]
//	                 a fleet of refundd run processes under injected faults; checks
//	                 the history of every process and the invariants at the end
//
// The webhook endpoint verifies signatures with $FENCEKIT_WEBHOOK_SECRET;
// refundd run refuses to start without it, unless -no-webhooks.
//
// DSN is a go-sql-driver/mysql DSN; the default is $FENCEKIT_DSN, or
// root@tcp(127.0.0.1:3306)/fencekit_demo.
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

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/migrations"
)

const defaultDSN = "root@tcp(127.0.0.1:3306)/fencekit_demo"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  refundd run     -provider-url URL [-listen ADDR] [-operator-listen ADDR] [-workers N] ...   serve the queue
  refundd enqueue -key K -payment P -amount 12.50 -currency C   enqueue an approved refund request
  refundd jobs    [-state S] [-key K] [-payment P] [-refund-id ID] [-left] [-limit N] [-after CURSOR] [-json]
                  [-id N]                                   search jobs, the manual-review queue, or one job's timeline
  refundd resolve -id N -as succeeded|reconcile|refund -reason TEXT [-refund-id ID] [-operator NAME] [-override]
  refundd approve -id REQUEST [-operator NAME] [-decline -reason TEXT] | -list   a second operator's approval
  refundd fakeprovider [-addr ADDR] [fault flags]           serve the fake payment provider over HTTP
  refundd help    [command]                                 this text, or one command's flags
  refundd migrate [-create]                                 apply the migrations to the database
  refundd console-user -name N -role R[,R] < password      a line of the console's users file (bcrypt hash; roles viewer, resolver, approver)
  refundd fence   mode [observe|enforce -reason TEXT] | report [-json]   the fence's rollout mode, and the writes it let through
  refundd demo    [-json] [-scene zombie] ...               the demo at scale, or the article's scene
  refundd chaos   --jobs N --workers W --duration D --seed S [--json]   a fleet under faults, checked
every command takes -dsn DSN (default $FENCEKIT_DSN or `+defaultDSN+`)
`)
}

// command runs one command; run (cli.go) wraps it with help and one-line
// flag errors.
func command(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet(ctx, args[0])
	dsn := fs.String("dsn", envOr("FENCEKIT_DSN", defaultDSN), "go-sql-driver/mysql DSN of the database")
	switch args[0] {
	case "run":
		var f runFlags
		f.register(fs)
		if err := fs.Parse(args[1:]); err != nil {
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
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return enqueue(ctx, *dsn, f, out)
	case "jobs":
		var f jobsFlags
		f.register(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return jobs(ctx, *dsn, f, out)
	case "resolve":
		var f resolveFlags
		f.register(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return resolve(ctx, *dsn, f, out)
	case "approve":
		var f approveFlags
		f.register(fs)
		if err := fs.Parse(args[1:]); err != nil {
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
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return migrate(ctx, *dsn, *create, out)
	case "fence":
		return fenceCommand(ctx, fs, dsn, args[1:], out)
	case "demo":
		scene := fs.String("scene", "", "play a scripted scene instead: zombie (the article's story, step by step)")
		var f scaleFlags
		fs.IntVar(&f.jobs, "jobs", 300, "refunds to enqueue")
		fs.IntVar(&f.workers, "workers", 4, "worker clients sharing the queue and its budget")
		fs.Uint64Var(&f.seed, "seed", 0, "seed of the injected faults (0: a new one, printed)")
		fs.BoolVar(&f.json, "json", false, "print the summary as one JSON object on the last line")
		fs.DurationVar(&f.lease, "lease", time.Second, "the workers' lease")
		fs.DurationVar(&f.scan, "scan", 200*time.Millisecond, "the workers' scan interval")
		fs.DurationVar(&f.deadline, "deadline", 3*time.Minute, "give up waiting for the jobs to settle after this long")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		switch *scene {
		case "zombie":
			return demo(ctx, *dsn, out)
		case "":
			return demoScale(ctx, *dsn, f, out)
		default:
			return fmt.Errorf("demo: unknown scene %q (zombie)", *scene)
		}
	case "chaos":
		var f chaosFlags
		fs.IntVar(&f.jobs, "jobs", 300, "refunds to enqueue")
		fs.IntVar(&f.workers, "workers", 4, "refundd run processes in the fleet")
		fs.IntVar(&f.slots, "slots", 8, "provider calls each process makes at once (refundd run -workers)")
		fs.DurationVar(&f.duration, "duration", 60*time.Second, "how long faults are injected; then the fleet settles every job")
		fs.DurationVar(&f.settle, "settle", 0, "how long the fleet has to settle every job once faults stop (0: 10 leases + 1m)")
		fs.DurationVar(&f.lease, "lease", 2*time.Second, "the fleet's lease")
		fs.Uint64Var(&f.seed, "seed", 0, "seed of the faults (0: a new one, printed)")
		fs.Float64Var(&f.pause, "pause", 0.004, "probability that a process is frozen (SIGSTOP) past its lease right after a provider answer")
		fs.BoolVar(&f.json, "json", false, "print the summary as one JSON object on the last line")
		fs.StringVar(&f.dir, "history", "", "keep the histories and logs in this directory (default: a temporary one, kept when a check fails)")
		fs.StringVar(&f.exe, "exe", "", "the refundd binary the fleet runs (default: this one)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if cfg, err := mysql.ParseDSN(*dsn); err == nil && !flagSet(fs, "dsn") && !strings.HasSuffix(cfg.DBName, "_chaos") {
			// chaos drops and recreates its database: never the demo's.
			cfg.DBName = strings.TrimSuffix(cfg.DBName, "_demo") + "_chaos"
			*dsn = cfg.FormatDSN()
		}
		return chaos(ctx, *dsn, f, out)
	default:
		return fmt.Errorf("unknown command %q: see refundd help", args[0])
	}
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

// migrate applies the embedded migration directory to dsn's database.
func migrate(ctx context.Context, dsn string, create bool, out io.Writer) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("migrate: parse dsn: %w", err)
	}
	if cfg.DBName == "" {
		return errors.New("migrate: the DSN names no database")
	}
	if create {
		server := cfg.Clone()
		server.DBName = ""
		db, err := sql.Open("mysql", server.FormatDSN())
		if err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+cfg.DBName+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		db.Close()
		if err != nil {
			return fmt.Errorf("migrate: create database %s: %w", cfg.DBName, err)
		}
	}
	db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{ReadTimeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := migrations.Apply(ctx, db)
	if err != nil {
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
