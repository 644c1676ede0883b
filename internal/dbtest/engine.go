package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/devdb"
)

// Engine is the kind of MySQL-compatible server the tests run against, and
// every difference from MySQL and MariaDB that the suite had to state. The
// suite is one: the same tests run on every engine, except those of the
// database's fence (triggers, the archival procedure), which live in files
// built without the tidb tag. TestEngineIsWhatTheSuiteStates checks each
// field against the server. docs/tidb.md explains what each one costs.
type Engine struct {
	// Name is "TiDB" or "MySQL" (MySQL and MariaDB: the suite finds no
	// difference between them); Version is the server's VERSION().
	Name, Version string

	// DatabaseFence: the server runs the fences of migrations/*_fences.sql,
	// triggers and the archival procedure. TiDB has neither triggers nor
	// stored procedures: migrations/tidb creates only the fence's tables,
	// and the WHERE clause of every fenced write (state + attempt) is the
	// fence. Without it, writes that bypass the fenced layer are not
	// refused, writer_attempt keeps the last writer's declaration (no
	// trigger clears it), times the triggers stamp come from the writing
	// statements, and archival is two statements in one transaction run by
	// an account that may DELETE (Archive), not CALL refund_jobs_archive.
	DatabaseFence bool

	// SkipLocked: FOR UPDATE SKIP LOCKED skips the rows that other
	// transactions hold. TiDB accepts the clause and ignores it: the scan
	// returns locked rows and locks nothing, so a batch claim finds jobs
	// another claimer is moving, and the fenced UPDATE (0 rows) is what
	// keeps it from taking them.
	SkipLocked bool

	// Procedures: the server has stored procedures, and GRANT … ON PROCEDURE.
	// TiDB has none (error 8108 on CREATE PROCEDURE, 1144 on the grant):
	// Account gives an account its grants without those on procedures.
	Procedures bool

	// ExplainFormat is "mysql" (one row per table: key, possible_keys) or
	// "tidb" (a tree of operators with an access object; no possible_keys:
	// only the chosen path is shown). Explain reads both.
	ExplainFormat string

	// ClockIsText: fencedwrite.ClockUTC, TIMESTAMPADD(MICROSECOND, …,
	// TIMESTAMP'1970-01-01 00:00:00'), comes back as text (VARCHAR), not as a
	// DATETIME: TiDB's TIMESTAMPADD returns a string whatever its operands,
	// and drops the fraction on a whole second. In comparisons with a
	// DATETIME column TiDB casts it to DATETIME(6), and assignments convert
	// it, so the fenced statements behave the same; code that reads the
	// clock reads fencedwrite.ClockMicros.
	ClockIsText bool

	// SessionMovesSysdate: a session can make SYSDATE() follow its own
	// clock (SET tidb_sysdate_is_now = ON, then SET timestamp), which TiDB
	// allows per session; MySQL's and MariaDB's --sysdate-is-now is a server
	// option. fencedwrite.DSN refuses the parameter and the fenced runner
	// refuses SET, but a client that bypasses both can claim on a clock of
	// its choosing: take over a live lease, or send with a stale key.
	SessionMovesSysdate bool

	// SessionQuestions: SHOW SESSION STATUS LIKE 'Questions' counts the
	// statements of a session. TiDB has no such counter, so the suite counts
	// statements on the wire (CountedDB), on every engine.
	SessionQuestions bool
}

// TiDB reports whether the engine is TiDB.
func (e Engine) TiDB() bool { return e.Name == "TiDB" }

// engineOf describes the server that answers on db from its VERSION().
func engineOf(ctx context.Context, db *sql.DB) (Engine, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return Engine{}, fmt.Errorf("read server version: %w", err)
	}
	if strings.Contains(v, "TiDB") {
		return Engine{Name: "TiDB", Version: v, ExplainFormat: "tidb", ClockIsText: true, SessionMovesSysdate: true}, nil
	}
	return Engine{Name: "MySQL", Version: v, DatabaseFence: true, SkipLocked: true, Procedures: true, ExplainFormat: "mysql",
		SessionQuestions: true}, nil
}

var engines sync.Map // server address → Engine

// ServerEngine describes the server of cfg (FENCEKIT_TEST_DSN), asking it
// once per process.
func ServerEngine(ctx context.Context, cfg *mysql.Config) (Engine, error) {
	if e, ok := engines.Load(cfg.Addr); ok {
		return e.(Engine), nil
	}
	db, err := sql.Open("mysql", devdb.DSN(cfg, ""))
	if err != nil {
		return Engine{}, err
	}
	defer db.Close()
	e, err := engineOf(ctx, db)
	if err != nil {
		return Engine{}, err
	}
	if e.TiDB() {
		// provider_budgets relies on CHECK constraints, which TiDB parses and
		// drops unless this is on when the table is created.
		var on bool
		if err := db.QueryRowContext(ctx, "SELECT @@global.tidb_enable_check_constraint").Scan(&on); err != nil {
			return Engine{}, fmt.Errorf("read tidb_enable_check_constraint: %w", err)
		}
		if !on {
			return Engine{}, fmt.Errorf("TiDB at %s runs with tidb_enable_check_constraint=OFF: CHECK constraints would be dropped; "+
				"SET GLOBAL tidb_enable_check_constraint = ON (scripts/tidb.sh start does)", cfg.Addr)
		}
	}
	engines.Store(cfg.Addr, e)
	return e, nil
}

// Engine describes d's server.
func (d *DB) Engine() Engine {
	d.t.Helper()
	e, err := ServerEngine(context.Background(), d.cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	return e
}

// checkRun fails t when the test binary and the server disagree: the TiDB
// run (scripts/test-tidb.sh) is built with the tidb tag, which leaves out
// the tests of the database's fence; without the tag they would fail on
// TiDB for want of triggers, and with it a MySQL or MariaDB run would skip
// them silently.
func checkRun(t interface {
	Helper()
	Fatalf(string, ...any)
}, e Engine, addr string) {
	t.Helper()
	switch {
	case e.TiDB() && !tidbRun:
		t.Fatalf("the server at %s is TiDB (%s), but these tests were built without -tags tidb: "+
			"the tests of the database's fence need triggers; run scripts/test-tidb.sh, or go test -tags tidb", addr, e.Version)
	case !e.TiDB() && tidbRun:
		t.Fatalf("these tests were built with -tags tidb, which leaves out the tests of the database's fence, "+
			"but the server at %s is %s (%s): run them without the tag", addr, e.Name, e.Version)
	}
}
