package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// demoDSN returns the DSN of a fresh *_demo database name on the test server,
// dropped when t ends.
func demoDSN(t *testing.T) string {
	t.Helper()
	return freshDSN(t, "_demo")
}

// freshDSN returns the DSN of a fresh database name ending in suffix on the
// test server, dropped when t ends: the name demo and chaos require before
// they drop and recreate it.
func freshDSN(t *testing.T, suffix string) string {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name := devdb.Name(t.Name()) + suffix
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
	if err := run(context.Background(), []string{"demo", "-scene", "zombie", "-dsn", demoDSN(t)}, &out); err != nil {
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
		if err := run(context.Background(), []string{"demo", "-scene", "zombie", "-dsn", dsn}, &out); err != nil {
			t.Fatalf("demo again: %v", err)
		}
	}
}

// The demo at scale: real workers, random faults, one worker paused past its
// lease. Its JSON summary comes from the database and the provider.
func TestDemoAtScalePaysNobodyTwice(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"demo", "-jobs", "60", "-workers", "3", "-seed", "42", "-json", "-lease", "500ms", "-dsn", demoDSN(t)}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %v\n%s", err, out.String())
	}
	if s.Jobs != 60 || s.Succeeded+s.Failed+s.ManualReview != 60 || s.Unfinished != 0 {
		t.Fatalf("summary %+v: want 60 jobs, all settled", s)
	}
	if s.OperationKeysPaidMoreThanOne != 0 || s.LedgerMismatches != 0 || s.ProviderRefundsExecuted > 60 {
		t.Fatalf("summary %+v: a key was paid twice or a ledger row parted from its job", s)
	}
	if s.Takeovers < 1 || s.StaleWritesRejected < 1 || s.LateEvidenceRecorded < 1 {
		t.Fatalf("summary %+v: the paused worker's zombie episode did not happen", s)
	}
	for _, field := range []string{`"jobs"`, `"succeeded"`, `"failed"`, `"manual_review"`, `"unfinished"`, `"takeovers"`,
		`"stale_writes_rejected"`, `"provider_refunds_executed"`, `"operation_keys_paid_more_than_once"`, `"late_evidence_recorded"`} {
		if !strings.Contains(lines[len(lines)-1], field) {
			t.Errorf("summary lacks %s", field)
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
