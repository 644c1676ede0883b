package worker

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
)

// stubProvider declares capabilities and is never called: New does no I/O.
type stubProvider struct{ provider.Client }

func (stubProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByReference: true}
}

// New refuses every bad value at once, naming each field, and matches
// fencedwrite.ErrInvalid; it opens nothing.
func TestNewNamesEveryBadField(t *testing.T) {
	_, err := New(Config{
		BudgetName:      strings.Repeat("b", 65),
		BudgetRate:      -1,
		BudgetBurst:     -2,
		Workers:         MaxWorkers + 1,
		ScanInterval:    -time.Second,
		ProviderTimeout: -time.Second,
		WriteBackBatch:  1001,
		WriteBackConns:  65,
		// A share of the budget, not a number of tokens.
		ReconcileReserve: 2,
		// A holder that would forge a line of the attempts log's pages.
		Holder: "worker-a/1\nworker-b/2",
	})
	if err == nil {
		t.Fatal("New accepted a config with no DB, no provider and negative durations")
	}
	if !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Errorf("the error does not match ErrInvalid: %v", err)
	}
	for _, field := range []string{"worker.Config.DB", "worker.Config.Provider", "worker.Config.BudgetName", "worker.Config.BudgetRate",
		"worker.Config.BudgetBurst", "worker.Config.Workers", "worker.Config.ScanInterval", "worker.Config.ProviderTimeout",
		"worker.Config.WriteBackBatch", "worker.Config.WriteBackConns", "worker.Config.ReconcileReserve", "worker.Config.Holder"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("the error does not name %s: %v", field, err)
		}
	}
}

// A zero Config field takes DESIGN.md's default: lease 30 s, scan 5 s,
// provider timeout 3 s.
func TestConfigDefaults(t *testing.T) {
	w, err := New(Config{DB: fencedPool(t), Provider: stubProvider{}})
	if err != nil {
		t.Fatal(err)
	}
	c := w.cfg
	for _, d := range []struct {
		name      string
		got, want time.Duration
	}{
		{"Lease", c.Lease, 30 * time.Second},
		{"ScanInterval", c.ScanInterval, 5 * time.Second},
		{"ProviderTimeout", c.ProviderTimeout, 3 * time.Second},
		{"ReconcileInterval", c.ReconcileInterval, 5 * time.Second},
	} {
		if d.got != d.want {
			t.Errorf("%s defaults to %v, want %v", d.name, d.got, d.want)
		}
	}
	if c.Workers != DefaultWorkers || c.BudgetName != DefaultBudgetName || c.WriteBackBatch != DefaultWriteBackBatch || c.WriteBackConns != DefaultWriteBackConns {
		t.Errorf("Workers %d, BudgetName %q, WriteBackBatch %d, WriteBackConns %d: want the documented defaults",
			c.Workers, c.BudgetName, c.WriteBackBatch, c.WriteBackConns)
	}
	if c.ReconcileReserve != DefaultReconcileReserve {
		t.Errorf("ReconcileReserve defaults to %v, want %v", c.ReconcileReserve, DefaultReconcileReserve)
	}
	if w.opts.Lease != 30*time.Second || w.opts.KeyRetention != 24*time.Hour {
		t.Errorf("the claims' options are %+v: want the lease and the provider's declared retention", w.opts)
	}
}

// The reserve is a share of the budget's capacity: NoReconcileReserve keeps
// none, and anything outside (0, 1) is refused, naming the field.
func TestReconcileReserve(t *testing.T) {
	for _, tc := range []struct {
		share    float64
		capacity float64
		want     int
	}{
		{DefaultReconcileReserve, 100, 20},
		{DefaultReconcileReserve, 3, 0}, // a budget too small to spare a whole token
		{0.5, 7, 3},
		{NoReconcileReserve, 100, 0},
	} {
		w, err := New(Config{DB: fencedPool(t), Provider: stubProvider{}, ReconcileReserve: tc.share})
		if err != nil {
			t.Fatalf("share %v: %v", tc.share, err)
		}
		if got := w.reserve(tc.capacity); got != tc.want {
			t.Errorf("share %v of %v tokens reserves %d, want %d", tc.share, tc.capacity, got, tc.want)
		}
	}
	for _, bad := range []float64{1, 1.5, -0.5, math.NaN()} {
		_, err := New(Config{DB: fencedPool(t), Provider: stubProvider{}, ReconcileReserve: bad})
		if !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "worker.Config.ReconcileReserve:") {
			t.Errorf("ReconcileReserve %v: %v, want it refused by name", bad, err)
		}
	}
}

// fencedPool is a fenced pool that is never used: New does not connect.
func fencedPool(t *testing.T) *sql.DB {
	t.Helper()
	db, err := fencedwrite.OpenDB("app@tcp(127.0.0.1:3306)/payments", fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// The worker writes evidence and takes budget tokens outside the fenced
// runner, so it runs only on a fenced pool, whose sessions are verified.
func TestNewRefusesAPoolItCannotTrust(t *testing.T) {
	raw, err := sql.Open("mysql", "app@tcp(127.0.0.1:3306)/payments?parseTime=true&clientFoundRows=true")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for name, db := range map[string]*sql.DB{"sql.Open": raw, "a zero sql.DB": {}} {
		_, err := New(Config{DB: db, Provider: stubProvider{}})
		if !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "worker.Config.DB: is not a fenced pool") {
			t.Errorf("%s: %v, want worker.Config.DB refused", name, err)
		}
	}
}
