//go:build !tidb

package main

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
)

// The on-call engineer's commands: a bad flag is refused by name, plan
// prints the SQL and changes nothing, apply adopts, migrate is then a
// no-op, and the fence observes.
func TestAdoptCommands(t *testing.T) {
	t.Parallel()
	dsn := dbtest.ScratchDSN(t, "_adopt")
	var out bytes.Buffer
	refundd := func(args ...string) (string, error) {
		t.Helper()
		out.Reset()
		err := run(context.Background(), args, &out)
		return out.String(), err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.DBName
	server, err := sql.Open("mysql", devdb.DSN(cfg, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	db := openRaw(t, dsn)
	for _, q := range []string{
		"CREATE TABLE refund_jobs (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, operation_key VARCHAR(128) NOT NULL, payment_ref VARCHAR(128) NOT NULL, " +
			"amount_minor BIGINT NOT NULL, currency CHAR(3) NOT NULL, attempt BIGINT NOT NULL DEFAULT 0, state VARCHAR(20) NOT NULL, lease_until DATETIME(6) NULL, " +
			"next_action VARCHAR(20) NOT NULL, provider_refund_id VARCHAR(255) NULL, legacy_flag TINYINT NOT NULL DEFAULT 0) CHARSET utf8mb4 COLLATE utf8mb4_bin",
		"INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_action) VALUES ('a', 'p', 1, 'EUR', 'todo', 'refund'), ('b', 'p', 2, 'EUR', 'done', 'refund')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := refundd("adopt", "plan", "-dsn", dsn, "-states", "todo"); err == nil || !strings.Contains(err.Error(), "states: \"todo\": write old=new") {
		t.Fatalf("a malformed -states: %v", err)
	}
	if _, err := refundd("adopt", "plan", "-dsn", dsn, "-states", "todo=queued"); err == nil || !strings.Contains(err.Error(), `states: todo=queued: "queued" is not a fencekit name`) {
		t.Fatalf("a -states naming no fencekit state: %v", err)
	}
	if _, err := refundd("adopt", "plan", "-dsn", dsn, "-states", "todo=ready"); err == nil || !strings.Contains(err.Error(), `state "done", which -states does not map`) {
		t.Fatalf("an unmapped state: %v", err)
	}
	plan, err := refundd("adopt", "plan", "-dsn", dsn, "-states", "todo=ready,done=succeeded")
	if err != nil || !strings.Contains(plan, "-- Step 1/") || !strings.Contains(plan, "WHEN 'todo' THEN 'ready'") {
		t.Fatalf("plan:\n%s\n%v", plan, err)
	}
	if !strings.Contains(plan, "modify-columns (online)") || !strings.Contains(plan, "RENAME TABLE `refund_jobs` TO `_refund_jobs_old`, `_refund_jobs_new` TO `refund_jobs`") {
		t.Fatalf("the plan does not change the types by the online copy:\n%s", plan)
	}
	// -blocking-copy plans the type changes as a blocking copy.
	blocking, err := refundd("adopt", "plan", "-dsn", dsn, "-states", "todo=ready,done=succeeded", "-blocking-copy")
	if err != nil || !strings.Contains(blocking, "modify-columns (NOT ONLINE") || !strings.Contains(blocking, "ALGORITHM=COPY, LOCK=SHARED") || strings.Contains(blocking, "_refund_jobs_new") {
		t.Fatalf("plan -blocking-copy:\n%s\n%v", blocking, err)
	}
	if _, err := refundd("fence", "mode", "-dsn", dsn); err == nil {
		t.Fatal("plan installed the fence")
	}
	got, err := refundd("adopt", "apply", "-dsn", dsn, "-states", "todo=ready,done=succeeded", "-batch", "1")
	if err != nil || !strings.Contains(got, "adopt: fence …") || !strings.Contains(got, "refundd fence mode enforce") {
		t.Fatalf("apply:\n%s\n%v", got, err)
	}
	if got, err := refundd("migrate", "-dsn", dsn); err != nil || !strings.Contains(got, "is up to date") {
		t.Fatalf("migrate after adopt: %q, %v", got, err)
	}
	if got, err := refundd("fence", "mode", "-dsn", dsn); err != nil || got != "fence mode: observe\n" {
		t.Fatalf("fence mode after adopt: %q, %v", got, err)
	}
}
