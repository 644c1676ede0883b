// Command refundd runs fencekit's refund jobs.
//
//	refundd migrate [-dsn DSN] [-create]   apply the Atlas migrations (Go library, CLI-compatible revisions)
//	refundd demo    [-dsn DSN]             recreate a *_demo database, migrate it, and play the
//	                                       article's zombie scenario, printing what happened
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
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/migrations"
)

const defaultDSN = "root@tcp(127.0.0.1:3306)/fencekit_demo"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  refundd migrate [-dsn DSN] [-create]   apply the migrations to the database
  refundd demo    [-dsn DSN]             recreate a *_demo database and play the zombie scenario
`)
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		usage(os.Stderr)
		return errors.New("missing command")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dsn := fs.String("dsn", envOr("FENCEKIT_DSN", defaultDSN), "go-sql-driver/mysql DSN of the database")
	switch args[0] {
	case "migrate":
		create := fs.Bool("create", false, "create the database first when it does not exist")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return migrate(ctx, *dsn, *create, out)
	case "demo":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return demo(ctx, *dsn, out)
	default:
		usage(os.Stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
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
