package main

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/internal/devdb"
)

// A DSN the fenced layer refuses is refused before -create creates
// anything: no empty database is left behind.
func TestMigrateRefusesABadDSNBeforeCreating(t *testing.T) {
	t.Parallel()
	dsn := freshDSN(t, "_baddsn")
	for _, bad := range []string{"?multiStatements=true", "?sql_mode=%27%27", "?clientFoundRows=false"} {
		err := run(context.Background(), []string{"migrate", "-create", "-dsn", dsn + bad}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "-dsn") {
			t.Fatalf("migrate -create with %s: %v", bad, err)
		}
		name := dsn[strings.LastIndex(dsn, "/")+1:]
		cfg, err := devdb.ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("mysql", devdb.DSN(cfg, ""))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n)
		db.Close()
		if err != nil || n != 0 {
			t.Fatalf("migrate -create with %s left database %s behind (%v)", bad, name, err)
		}
	}
}
