package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/internal/dbtest"
)

func TestDemoPlaysTheZombieScenario(t *testing.T) {
	var out bytes.Buffer
	if err := Zombie(context.Background(), dbtest.ScratchDSN(t, "_demo"), &out); err != nil {
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
	dsn := dbtest.ScratchDSN(t, "_demo")
	for range 2 {
		if err := Zombie(context.Background(), dsn, &out); err != nil {
			t.Fatalf("demo again: %v", err)
		}
	}
}

// The demo at scale: real workers, random faults, one worker paused past its
// lease. Its JSON summary comes from the database and the provider.
func TestDemoAtScalePaysNobodyTwice(t *testing.T) {
	var out bytes.Buffer
	err := Scale(context.Background(), dbtest.ScratchDSN(t, "_demo"), Config{Jobs: 60, Workers: 3, Seed: 42, JSON: true, Lease: 500 * time.Millisecond, Scan: 200 * time.Millisecond, Deadline: 3 * time.Minute}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s Summary
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
	err := Zombie(context.Background(), "root@tcp(127.0.0.1:3306)/payments", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "must end in _demo") {
		t.Fatalf("demo on a database not ending in _demo: %v", err)
	}
}
