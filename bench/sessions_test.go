package main

import (
	"testing"
)

// TestSessionCountsMeasureTheServersCPU: a counted pool counts exactly the
// statements its sessions sent (not the read of the server thread's id,
// nor the closing SHOW) and the processor time the server's thread spent
// on them, which a query that burns the server's CPU makes large.
func TestSessionCountsMeasureTheServersCPU(t *testing.T) {
	ctx := t.Context()
	m, err := newMariaDB(ctx, "sessions", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.close() })
	var c sessionCounts
	db, err := m.fenced(&c)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for range 3 {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT BENCHMARK(300000, MD5('fence'))").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if c.sessions.Load() != 1 || c.timed.Load() != 1 {
		t.Fatalf("%d sessions, %d of them timed; want 1 and 1", c.sessions.Load(), c.timed.Load())
	}
	// The fenced layer's connector sends its session settings too; the
	// three queries are the rest.
	if q := c.questions.Load(); q < 3 || q > 6 {
		t.Errorf("%d statements counted, want the 3 queries (and the connector's settings at most)", q)
	}
	if ns := c.serverNS.Load(); ns < 5e6 {
		t.Errorf("the server's thread spent %d ns on 900,000 MD5s, want at least 5 ms", ns)
	}
}
