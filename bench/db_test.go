package main

import (
	"database/sql"
	"testing"
)

// scratchDB is a test's own migrated database (newMariaDB, history as
// there) and a plain pool on it, both dropped or closed when the test ends.
func scratchDB(t *testing.T, prefix string, history func(*sql.DB) error) (*mariaDB, *sql.DB) {
	t.Helper()
	m, err := newMariaDB(t.Context(), prefix, history)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.close() })
	raw, err := m.raw()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return m, raw
}
