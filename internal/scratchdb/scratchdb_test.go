package scratchdb_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/internal/scratchdb"
)

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"fk_demo":   "`fk_demo`",
		"a`b":       "`a``b`",
		"``":        "``````",
		"x; DROP y": "`x; DROP y`",
	} {
		got, err := scratchdb.QuoteIdent(in)
		if err != nil || got != want {
			t.Errorf("QuoteIdent(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a\x00b"} {
		if got, err := scratchdb.QuoteIdent(bad); err == nil {
			t.Errorf("QuoteIdent(%q) = %q, want an error", bad, got)
		}
	}
}

// A database name from the user's DSN that carries a backtick and a second
// statement is one identifier: Recreate creates exactly that database and
// drops nothing else, even with multiStatements on.
func TestRecreateQuotesTheDatabaseName(t *testing.T) {
	ctx := context.Background()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	victim, drop, err := devdb.Create(ctx, cfg, "victim")
	if err != nil {
		t.Fatalf("no usable server (%s): %v", devdb.EnvDSN, err)
	}
	t.Cleanup(func() { _ = drop(ctx) })
	name := "fk`; DROP DATABASE `" + victim + "`; --_demo"
	c := cfg.Clone()
	c.DBName = name
	c.MultiStatements = true
	root, err := sql.Open("mysql", devdb.DSN(cfg, ""))
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the drop: a deferred Close ran before the cleanups, and
	// every run left the database behind.
	t.Cleanup(func() {
		if _, err := root.Exec("DROP DATABASE IF EXISTS `" + strings.ReplaceAll(name, "`", "``") + "`"); err != nil {
			t.Errorf("drop %q: %v", name, err)
		}
		root.Close()
	})
	if err := scratchdb.Recreate(ctx, c.FormatDSN(), "demo"); err != nil {
		t.Fatalf("recreate %q: %v", name, err)
	}
	for _, db := range []string{victim, name} {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", db).Scan(&n); err != nil || n != 1 {
			t.Errorf("database %q: %d found (%v), want 1", db, n, err)
		}
	}
}
