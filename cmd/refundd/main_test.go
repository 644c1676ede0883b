package main

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// demoDSN returns the DSN of a fresh *_demo database name on the test server,
// dropped when t ends.
func demoDSN(t *testing.T) string {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name := devdb.Name(t.Name()) + "_demo"
	t.Cleanup(func() {
		db, err := sql.Open("mysql", devdb.DSN(cfg, ""))
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
	})
	return devdb.DSN(cfg, name)
}

func TestDemoPlaysTheZombieScenario(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"demo", "-dsn", demoDSN(t)}, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"worker B   took over job 1 after the lease expired: attempt 2, next action reconcile",
		"worker A   complete at attempt 1: refused, 0 rows",
		"is refused by the database",
		"result     job 1 is succeeded at attempt 2; ledger is refunded; the provider moved money 1 time(s) for refund-123",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	// A second run starts clean.
	out.Reset()
	dsn := demoDSN(t)
	for range 2 {
		if err := run(context.Background(), []string{"demo", "-dsn", dsn}, &out); err != nil {
			t.Fatalf("demo again: %v", err)
		}
	}
}

func TestDemoRefusesToDropOtherDatabases(t *testing.T) {
	err := run(context.Background(), []string{"demo", "-dsn", "root@tcp(127.0.0.1:3306)/payments"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "must end in _demo") {
		t.Fatalf("demo on a database not ending in _demo: %v", err)
	}
}

func TestMigrateCreatesAndIsIdempotent(t *testing.T) {
	dsn := demoDSN(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "-create", "-dsn", dsn}, &out); err != nil {
		t.Fatal(err)
	}
	dir, err := migrations.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := dir.Files()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "migrate: applied") != len(files) {
		t.Fatalf("first migrate:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"migrate", "-dsn", dsn}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "is up to date") {
		t.Fatalf("second migrate:\n%s", out.String())
	}
	if err := run(context.Background(), []string{"bogus"}, &out); err == nil {
		t.Fatal("an unknown command succeeded")
	}
}
