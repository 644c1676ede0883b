// Package dbtest gives each test its own fresh database, with fencekit's
// migrations applied (or an example's: NewFrom), on a real MySQL-compatible
// server: FENCEKIT_TEST_DSN, or the local server that scripts/ensure-db.sh
// brings up. There are no mocks. A test fails, never skips, when the server
// cannot be reached.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// DB is one test's database.
type DB struct {
	t    testing.TB
	cfg  *mysql.Config
	Name string
}

// New creates a fresh database for t with the migrations applied (a copy of
// the migrated template, see template.go), and drops it when t ends (keep it with FENCEKIT_KEEP_DB=1 to inspect a failure).
// The migrations are the server's (migrations.Apply): migrations/tidb on
// TiDB, migrations/ on MySQL and MariaDB. It fails t when the server is TiDB
// and the tests were built without the tidb tag, or the other way round
// (see Engine).
func New(t testing.TB) *DB {
	t.Helper()
	return newDB(t, migrations.Core, 0, nil)
}

// NewFrom is New for another set of migrations than fencekit's: an
// example's (examples/transcode/migrations.Source), copied from a template
// of its own.
func NewFrom(t testing.TB, src migrations.Source) *DB {
	t.Helper()
	return newDB(t, src, 0, nil)
}

// NewWithHistory is New for rows older than the fences: it applies the first
// `before` migration files, lets history write rows as they were before the
// later files existed (aged rows, say, which the fences would never let
// anyone write), then applies the rest.
func NewWithHistory(t testing.TB, before int, history func(*sql.DB)) *DB {
	t.Helper()
	return newDB(t, migrations.Core, before, history)
}

func newDB(t testing.TB, src migrations.Source, before int, history func(*sql.DB)) *DB {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, drop, err := devdb.Create(ctx, cfg, t.Name())
	if err != nil {
		t.Fatalf("no usable MySQL-compatible server at %s (set %s, or run scripts/ensure-db.sh): %v", cfg.Addr, devdb.EnvDSN, err)
	}
	t.Cleanup(func() {
		if os.Getenv("FENCEKIT_KEEP_DB") != "" {
			t.Logf("kept database %s", name)
			return
		}
		err := drop(context.Background())
		// MariaDB refuses to drop a database whose directory holds a file
		// it does not know (error 1010, errno 39): under load its atomic
		// DDL once left a trigger file's backup (refund_audit.TRG-) in a
		// cloned database. Tried again, then the database stays, named in
		// the log for a person to drop: the test's own assertions ran.
		var me *mysql.MySQLError
		for try := 0; try < 3 && errors.As(err, &me) && me.Number == 1010; try++ {
			time.Sleep(200 * time.Millisecond)
			err = drop(context.Background())
		}
		if errors.As(err, &me) && me.Number == 1010 {
			t.Logf("left test database %s behind: %v", name, err)
			return
		}
		if err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	engine, err := ServerEngine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, engine, cfg.Addr)
	d := &DB{t: t, cfg: cfg, Name: name}
	raw := d.RawDB()
	if history != nil {
		if _, err := migrations.ApplyN(ctx, raw, before); err != nil {
			t.Fatalf("apply the first %d migrations to %s: %v", before, name, err)
		}
		history(raw)
	}
	if history != nil {
		if _, err := migrations.Apply(ctx, raw); err != nil {
			t.Fatalf("apply migrations to %s: %v", name, err)
		}
		return d
	}
	tpl, err := templateFor(ctx, cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := copyTemplate(ctx, cfg, tpl, name); err != nil {
		t.Fatal(err)
	}
	return d
}

// Config returns the database's driver configuration, without the fenced
// layer's settings.
func (d *DB) Config() *mysql.Config {
	c := d.cfg.Clone()
	c.DBName = d.Name
	return c
}

// DSN returns the database's DSN with the fenced layer's settings
// (fencedwrite.DSN with o).
func (d *DB) DSN(o fencedwrite.DSNOptions) string {
	d.t.Helper()
	dsn, err := fencedwrite.DSN(devdb.DSN(d.cfg, d.Name), o)
	if err != nil {
		d.t.Fatal(err)
	}
	return dsn
}

// RawDB opens a pool on the database as an unconfigured client would: no
// fenced settings, parseTime on. Tests use it to write raw SQL the way a
// careless service or a person at a console would.
func (d *DB) RawDB() *sql.DB {
	d.t.Helper()
	c := d.Config()
	c.ParseTime = true
	c.MultiStatements = false
	return d.open(c.FormatDSN())
}

// FencedDB opens a fenced pool (fencedwrite.OpenDB), closed when the test
// ends.
func (d *DB) FencedDB(o fencedwrite.DSNOptions) *sql.DB {
	d.t.Helper()
	db, err := fencedwrite.OpenDB(devdb.DSN(d.cfg, d.Name), o)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = db.Close() })
	return db
}

func (d *DB) open(dsn string) *sql.DB {
	d.t.Helper()
	return OpenDSN(d.t, dsn)
}

// OpenDSN opens a pool on dsn, closed when t ends.
func OpenDSN(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Client opens an Ent client with its own pool and the fenced settings: one
// per simulated worker, so that workers never share a connection.
func (d *DB) Client() *ent.Client {
	d.t.Helper()
	return ClientOn(d.t, d.FencedDB(fencedwrite.DSNOptions{}))
}

// ClientOn wraps db in an Ent client closed when t ends.
func ClientOn(t testing.TB, db *sql.DB) *ent.Client {
	c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Account creates an account on root's server with the grants that grants
// returns for database db (migrations.AppGrants, say), dropped when t ends,
// and returns its driver configuration, connected to db. On an engine
// without stored procedures (TiDB) the grants on procedures are left out
// (migrations.TiDBGrants), as docs/tidb.md tells operators to.
func Account(t testing.TB, root *sql.DB, db string, grants func(db, account string) []string) *mysql.Config {
	t.Helper()
	engine, err := engineOf(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if !engine.Procedures {
		grants = migrations.TiDBGrants(grants)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	user, pass := "fk_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])+"!Pw"
	name := fmt.Sprintf("'%s'@'%%'", user)
	if _, err := root.Exec(fmt.Sprintf("CREATE USER %s IDENTIFIED BY '%s'", name, pass)); err != nil {
		t.Fatalf("create account: %v", err)
	}
	t.Cleanup(func() { _, _ = root.Exec("DROP USER " + name) })
	for _, g := range grants(db, name) {
		if _, err := root.Exec(g); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd, cfg.DBName = user, pass, db
	return cfg
}

// Digits is a derived table of the ten digits, column d: cross-joined with
// itself it generates rows in one INSERT … SELECT, on MariaDB and MySQL
// alike (no sequence engine, no recursion limit).
const Digits = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"

// IsTriggerRefusal reports whether err is the database fence's refusal
// (SIGNAL SQLSTATE '45000', error 1644) and its message contains want.
func IsTriggerRefusal(err error, want string) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == 1644 && strings.Contains(me.Message, want)
}

// AwaitLockWait returns true once a statement on raw's server that starts
// with prefix waits for a row lock, or false when stop is closed first. A
// test uses it to release a held statement exactly when a competing one is
// blocked behind it. It reads the server's live state, not InnoDB's
// INNODB_TRX (refreshed only when nobody read it for 100 ms, so a poll can
// starve it): on MariaDB the processlist, where a statement blocked by a
// lock has run for more than 50 ms (a read that takes no lock answers in
// well under a millisecond, and one seen late still reads the old row, so
// the test fails either way); on TiDB information_schema.DATA_LOCK_WAITS;
// on MySQL performance_schema.data_lock_waits.
func AwaitLockWait(raw *sql.DB, prefix string, stop <-chan struct{}) bool {
	return AwaitLockWaitIn(raw, "", prefix, stop)
}

// AwaitLockWaitIn is AwaitLockWait for the statements of one database
// (schema), so that a test running beside others with the same statements
// waits for its own (on TiDB: any lock wait).
func AwaitLockWaitIn(raw *sql.DB, schema, prefix string, stop <-chan struct{}) bool {
	var version string
	_ = raw.QueryRow("SELECT VERSION()").Scan(&version)
	query, args := "SELECT COUNT(*) FROM performance_schema.data_lock_waits w JOIN performance_schema.events_statements_current s ON s.THREAD_ID = w.REQUESTING_THREAD_ID "+
		"WHERE s.SQL_TEXT LIKE CONCAT(?, '%') AND (? = '' OR s.CURRENT_SCHEMA = ?)", []any{prefix, schema, schema}
	switch {
	case strings.Contains(version, "MariaDB"):
		query = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND IN ('Query', 'Execute') AND TIME_MS > 50 AND INFO LIKE CONCAT(?, '%') AND (? = '' OR DB = ?)"
	case strings.Contains(version, "TiDB"):
		query, args = "SELECT COUNT(*) FROM information_schema.DATA_LOCK_WAITS", nil
	}
	for {
		var n int
		if err := raw.QueryRow(query, args...).Scan(&n); err == nil && n > 0 {
			return true
		}
		select {
		case <-stop:
			return false
		default:
		}
	}
}

// DropTriggers drops every trigger of d's database, so that a test shows
// what the fenced layer refuses by itself, as on an engine without
// triggers (TiDB). It is a no-op where there are none.
func (d *DB) DropTriggers() {
	d.t.Helper()
	raw := d.RawDB()
	rows, err := raw.Query("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", d.Name)
	if err != nil {
		d.t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			d.t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		d.t.Fatal(err)
	}
	rows.Close()
	for _, n := range names {
		if _, err := raw.Exec("DROP TRIGGER `" + strings.ReplaceAll(n, "`", "``") + "`"); err != nil {
			d.t.Fatalf("drop trigger %s: %v", n, err)
		}
	}
}

// ScratchDSN returns the DSN of a database name on the test server that
// ends in suffix and does not exist yet, dropped when t ends: the name that
// refundd demo (_demo) and refundd chaos (_chaos) require before they drop
// and recreate it (internal/scratchdb).
func ScratchDSN(t testing.TB, suffix string) string {
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
