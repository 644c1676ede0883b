// Package scratchdb makes the throw-away databases that refundd demo and
// refundd chaos run in: it drops and recreates one (only when its name says
// it is throw-away), applies the migrations, and opens fenced clients on it.
package scratchdb

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/migrations"
)

// Recreate drops and creates dsn's database for command, whose name must
// end in _command: a guard against dropping a real database by mistake. On
// an error the database may be gone and not yet recreated.
func Recreate(ctx context.Context, dsn, command string) error {
	suffix := "_" + command
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("%s: parse dsn: %w", command, err)
	}
	if !strings.HasSuffix(cfg.DBName, suffix) {
		return fmt.Errorf("%s: it drops and recreates its database, so the name must end in %s, got %q", command, suffix, cfg.DBName)
	}
	ident, err := QuoteIdent(cfg.DBName)
	if err != nil {
		return fmt.Errorf("%s: -dsn: %w", command, err)
	}
	server := cfg.Clone()
	server.DBName = ""
	db, err := sql.Open("mysql", server.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range []string{
		"DROP DATABASE IF EXISTS " + ident,
		"CREATE DATABASE " + ident + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %s: %w", command, stmt, err)
		}
	}
	return nil
}

// Migrate applies the embedded migrations to dsn's database and prints one
// line per migration applied to out.
func Migrate(ctx context.Context, dsn string, out io.Writer) error {
	db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{ReadTimeout: 5 * time.Minute})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	applied, err := migrations.Apply(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, v := range applied {
		fmt.Fprintf(out, "migrate: applied %s to %s\n", v, Name(dsn))
	}
	return nil
}

// OpenClient opens an Ent client with its own fenced pool on dsn.
func OpenClient(dsn string) (*ent.Client, error) {
	db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
	if err != nil {
		return nil, err
	}
	return ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db))), nil
}

// Name is dsn's database name, or "" when dsn does not parse.
func Name(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return ""
	}
	return cfg.DBName
}

// QuoteIdent quotes a database or table name for MySQL: in backticks, each
// backtick doubled, so that a name from a user's DSN is one identifier
// whatever it holds. An empty name or one with a NUL byte is refused (the
// server cannot hold it).
func QuoteIdent(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("database name: must not be empty")
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("database name %q: must not contain a NUL byte", name)
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`", nil
}
