//go:build !tidb

package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
)

// A DSN the fenced layer refuses is refused before -create creates
// anything: no empty database is left behind.
func TestMigrateRefusesABadDSNBeforeCreating(t *testing.T) {
	t.Parallel()
	dsn := dbtest.ScratchDSN(t, "_baddsn")
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

// A team that applied the files with the plain client switches to refundd
// migrate: the database is recognised and baselined, not refused as "not
// clean".
func TestMigrateBaselinesAPlainClientDatabase(t *testing.T) {
	t.Parallel()
	dsn := dbtest.ScratchDSN(t, "_plain")
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	server, err := sql.Open("mysql", devdb.DSN(cfg, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.Exec("CREATE DATABASE `" + cfg.DBName + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	slices.Sort(files)
	var in bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteString("\n")
	}
	host, port, _ := strings.Cut(cfg.Addr, ":")
	args := []string{"--protocol=tcp", "-h" + host, "-P" + port, "-u" + cfg.User}
	if cfg.Passwd != "" {
		args = append(args, "-p"+cfg.Passwd)
	}
	client, err := exec.LookPath("mariadb")
	if err != nil {
		if client, err = exec.LookPath("mysql"); err != nil {
			t.Fatal("neither the mariadb nor the mysql client is installed (scripts/ensure-db.sh installs mariadb-client)")
		}
	}
	cmd := exec.Command(client, append(args, cfg.DBName)...)
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plain client: %v\n%s", err, out)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "-dsn", dsn}, &out); err != nil || !strings.Contains(out.String(), "is up to date") {
		t.Fatalf("migrate on a plain-client database: %v\n%s", err, out.String())
	}
}

// The database name of -dsn is one identifier in migrate -create's CREATE
// DATABASE: a backtick and a second statement in it create exactly that
// database, and touch no other.
func TestMigrateCreateQuotesTheDatabaseName(t *testing.T) {
	t.Parallel()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	victim, drop, err := devdb.Create(context.Background(), cfg, "victim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	name := "fk`; DROP DATABASE `" + victim + "`; --"
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
	err = run(context.Background(), []string{"migrate", "-create", "-dsn", devdb.DSN(cfg, name)}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("migrate -create %q: %v", name, err)
	}
	for _, db := range []string{victim, name} {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", db).Scan(&n); err != nil || n != 1 {
			t.Errorf("database %q: %d found (%v), want 1", db, n, err)
		}
	}
}

// A DSN the driver reads but cannot dial (a network that is not tcp or
// unix, an address without a port) is refused by every command that takes
// -dsn, naming the flag and the problem, before any connection: not in the
// dialer's words at the first query ("dial foo: unknown network foo").
func TestEveryCommandNamesABadDSNsNetwork(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"migrate"}, {"adopt", "plan"}, {"fence", "report"}, {"fence", "mode"}, {"jobs"}, {"resolve", "-id", "1", "-as", "reconcile", "-reason", "r", "-operator", "alice"}, {"approve", "-list"}} {
		for _, tc := range []struct{ dsn, want string }{
			{"app@foo(127.0.0.1:3306)/x", `network: must be tcp or unix, not "foo"`},
			{"app@tcp(127.0.0.1:)/x", `address: must be host:port, not "127.0.0.1:"`},
			{"app@bogus/x", "dsn: cannot be read (want user:password@tcp(host:port)/database?params)"},
		} {
			args := append(slices.Clone(cmd), "-dsn", tc.dsn)
			err := run(context.Background(), args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "-dsn: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refundd %s: %v, want -dsn named with %q", strings.Join(args, " "), err, tc.want)
			}
		}
	}
}
