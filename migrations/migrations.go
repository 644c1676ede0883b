// Package migrations holds fencekit's schema as Atlas versioned migrations
// and applies them with the Atlas Go library.
//
// The *.sql files and atlas.sum in this directory are the migration
// directory in Atlas's format: users with the Atlas CLI apply it with
// `atlas migrate apply --env local` (see atlas.hcl at the repository root),
// and the files also run, in order, with a plain mysql or mariadb client.
// Apply does the same from Go, recording revisions in the same table as the
// CLI (atlas_schema_revisions, in the target database) under the same kind
// of advisory lock.
//
// Generated files come from the Ent schema (go run ./internal/cmd/migdiff);
// hand-written ones (the database's fences: triggers) sit beside them. A test
// fails when the schema and this directory drift apart or atlas.sum does not
// validate.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"
)

//go:embed *.sql atlas.sum tidb/*.sql tidb/atlas.sum
var files embed.FS

// Dir returns the embedded migration directory (Core.Dir).
func Dir() (migrate.Dir, error) { return Core.Dir() }

// LockName is the advisory lock Apply holds while it migrates.
const LockName = "atlas_migrate_execute"

// LockTimeout bounds the wait for another migration run to finish.
const LockTimeout = 60 * time.Second

// operatorVersion is recorded with each revision, as the CLI records its own.
const operatorVersion = "fencekit (Atlas Go library)"

// Apply applies every pending migration to the database db is connected to
// and returns the versions it applied (none when the database is up to
// date). It holds an advisory lock for the whole run, so concurrent callers
// apply each file once. db must select the target database in its DSN.
//
// A run that fails leaves the database as it found it: MySQL DDL cannot be
// rolled back, so Apply inspects the schema first (tables with Atlas,
// triggers and procedures from the server) and, when a statement fails,
// undoes what the run did (Atlas plans the way back to the inspected
// tables; triggers and procedures are recreated as they were), deletes the
// revisions it wrote and drops the revision table if it created it. The
// error is an *ApplyError naming the file, the statement and how to go on.
// Rows that a failing file wrote into tables that existed before the run
// stay, and what a run dropped comes back empty. When undoing fails too,
// the ApplyError says so: the revision then records how far the file got
// (as the CLI does), and the next run continues with the failed statement.
//
// A database that holds a schema but no revisions (the files applied with
// the plain client, say) is recognised when its schema is exactly the
// state after some file N of the directory (replayed on a scratch database
// on the same server, compared with Atlas's inspection and diff, triggers
// and procedures by their bodies): Apply then records N as the Atlas
// baseline and applies the files after it. Otherwise it refuses with
// ErrUnknownSchema, naming the differences, and changes nothing.
//
// The directory is the server's (DirFor): migrations/tidb on TiDB, which
// has no triggers, this directory on MySQL and MariaDB.
func Apply(ctx context.Context, db *sql.DB) ([]string, error) {
	return Core.Apply(ctx, db)
}

// ApplyN is Apply for at most the next n pending files (n > 0): tests use
// it to write history that predates a migration.
func ApplyN(ctx context.Context, db *sql.DB, n int) ([]string, error) {
	if n <= 0 {
		return nil, fmt.Errorf("migrate: apply %d files: n must be positive", n)
	}
	dir, err := DirFor(ctx, db)
	if err != nil {
		return nil, err
	}
	return applyDir(ctx, db, dir, n, Core.retired)
}

// ApplyDir is Apply for another directory (tests use it).
func ApplyDir(ctx context.Context, db *sql.DB, dir migrate.Dir) ([]string, error) {
	return applyDir(ctx, db, dir, 0, nil)
}

// ErrUnknownSchema means the database holds tables but no revisions, and
// its schema is not exactly the state after any file of the migration
// directory: Apply cannot tell which files it holds and changes nothing.
// `refundd adopt plan` plans the way from such a schema to fencekit's.
var ErrUnknownSchema = errors.New("the database's schema matches no state of the migration directory")

// ApplyError is a run of Apply that failed. Restored says whether the
// database is as the run found it.
type ApplyError struct {
	// File is the migration file that failed, and Stmt the number (from 1)
	// and SQL of its statement that failed; empty when the run failed
	// before any statement ran.
	File string
	Stmt int
	SQL  string
	// Err is what failed.
	Err error
	// Restored is true when everything the run did was undone; RestoreErr
	// is why undoing failed otherwise.
	Restored   bool
	RestoreErr error
}

func (e *ApplyError) Error() string {
	var b strings.Builder
	b.WriteString("migrate: ")
	if e.File != "" {
		fmt.Fprintf(&b, "%s failed at statement %d (%s): ", e.File, e.Stmt, abbreviate(e.SQL, 160))
	}
	b.WriteString(e.Err.Error())
	switch {
	case e.Restored:
		b.WriteString("; the database is as this run found it (what the run did was undone, its revisions deleted): fix the cause, then run `refundd migrate` again")
	case e.File != "":
		fmt.Fprintf(&b, "; undoing the run failed too (%v), so the database may hold statements 1 to %d of %s: "+
			"fix the cause, then run `refundd migrate` again (or `atlas migrate apply`), which continues with statement %d", e.RestoreErr, e.Stmt-1, e.File, e.Stmt)
	default:
		fmt.Fprintf(&b, "; undoing the run failed too (%v): inspect the database before running `refundd migrate` again", e.RestoreErr)
	}
	return b.String()
}

func (e *ApplyError) Unwrap() error { return e.Err }

func abbreviate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// applyDir applies the next n pending files of dir, or all of them when n
// is 0. retired (nil for none) tells the objects that files of dir once
// created and no longer do (Source.Retired): recognising a database the
// plain client migrated passes over them.
func applyDir(ctx context.Context, db *sql.DB, dir migrate.Dir, n int, retired func(name string) bool) (applied []string, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	drv, err := atlasmysql.Open(conn)
	if err != nil {
		return nil, fmt.Errorf("migrate: open atlas driver: %w", err)
	}
	unlock, err := lock(ctx, drv.(schema.Locker))
	if err != nil {
		return nil, fmt.Errorf("migrate: take lock %s: %w", LockName, err)
	}
	defer func() { _ = unlock() }()

	rrw := &revisions{conn: conn}
	existed, err := rrw.exists(ctx)
	if err != nil {
		return nil, err
	}
	var before []*migrate.Revision
	if existed {
		if before, err = rrw.ReadRevisions(ctx); err != nil {
			return nil, err
		}
	}
	opts := []migrate.ExecutorOption{migrate.WithOperatorVersion(operatorVersion)}
	if len(before) > 0 {
		// Up to date: nothing to inspect, nothing to undo.
		ex, err := migrate.NewExecutor(drv, dir, rrw, opts...)
		if err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		if _, err := ex.Pending(ctx); errors.Is(err, migrate.ErrNoPendingFiles) {
			return nil, nil
		}
	}
	snap, err := takeSnapshot(ctx, drv, conn)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if len(before) == 0 && len(snap.schema.Tables) > 0 {
		// Not clean and no revisions: the files applied by the plain
		// client, or a schema of someone else's.
		version, err := matchBaseline(ctx, db, conn, drv, dir, snap.without(retired))
		if err != nil {
			return nil, err
		}
		opts = append(opts, migrate.WithBaselineVersion(version))
	}
	if !existed {
		if err := rrw.init(ctx); err != nil {
			return nil, err
		}
	}
	track := &tracker{}
	opts = append(opts, migrate.WithLogger(track))
	ex, err := migrate.NewExecutor(&hookedDriver{Driver: drv, track: track, fail: failAtFrom(ctx)}, dir, rrw, opts...)
	if err == nil {
		err = ex.ExecuteN(ctx, n)
	}
	if err != nil && !errors.Is(err, migrate.ErrNoPendingFiles) {
		return nil, undo(context.WithoutCancel(ctx), drv, conn, rrw, snap, existed, before, track, err)
	}
	after, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range before {
		if r.Applied == r.Total {
			seen[r.Version] = true
		}
	}
	for _, r := range after {
		if !seen[r.Version] && r.Applied == r.Total && r.Error == "" && r.Type != migrate.RevisionTypeBaseline {
			applied = append(applied, r.Version)
		}
	}
	return applied, nil
}

// undo brings the database back to snap after a run failed with cause, and
// deletes what the run wrote in the revision table (the table itself when
// the run created it).
func undo(ctx context.Context, drv migrate.Driver, conn *sql.Conn, rrw *revisions, snap *snapshot, existed bool,
	before []*migrate.Revision, track *tracker, cause error) error {
	e := &ApplyError{File: track.file, Stmt: track.stmt, SQL: track.sql, Err: cause}
	var stmtErr *migrate.StmtExecError
	if errors.As(cause, &stmtErr) {
		e.Err = stmtErr.Err
		e.SQL = stmtErr.Stmt.Text
	} else {
		e.File, e.Stmt, e.SQL = "", 0, ""
	}
	if err := restore(ctx, drv, conn, snap); err != nil {
		e.RestoreErr = err
		return e
	}
	if !existed {
		if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS `"+RevisionTable+"`"); err != nil {
			e.RestoreErr = fmt.Errorf("drop %s: %w", RevisionTable, err)
			return e
		}
		e.Restored = true
		return e
	}
	after, err := rrw.ReadRevisions(ctx)
	if err != nil {
		e.RestoreErr = err
		return e
	}
	was := map[string]*migrate.Revision{}
	for _, r := range before {
		was[r.Version] = r
	}
	for _, r := range after {
		old, ok := was[r.Version]
		switch {
		case !ok:
			err = rrw.DeleteRevision(ctx, r.Version)
		case old.Applied != r.Applied || old.Error != r.Error || old.Total != r.Total:
			err = rrw.WriteRevision(ctx, old)
		}
		if err != nil {
			e.RestoreErr = err
			return e
		}
	}
	e.Restored = true
	return e
}

// tracker follows the executor: the file and the statement it runs.
type tracker struct {
	file    string
	version string
	stmt    int // from 1
	sql     string
}

func (t *tracker) Log(e migrate.LogEntry) {
	switch e := e.(type) {
	case migrate.LogFile:
		t.file, t.version, t.stmt, t.sql = e.File.Name(), e.File.Version(), e.Skip, ""
	case migrate.LogStmt:
		t.stmt++
		t.sql = e.SQL
	}
}

// hookedDriver is the Atlas driver Apply runs the files through: the
// driver itself, except that a test may make a chosen statement fail
// (failAt, set only by the package's tests).
type hookedDriver struct {
	migrate.Driver
	track *tracker
	fail  *failAt
}

func (d *hookedDriver) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if f := d.fail; f != nil && d.track.version == f.version && d.track.stmt == f.stmt && d.track.sql == query {
		return nil, errInjected
	}
	return d.Driver.ExecContext(ctx, query, args...)
}

// failAt names a statement of a file that a test makes fail.
type failAt struct {
	version string
	stmt    int // from 1
}

type failAtKey struct{}

var errInjected = errors.New("injected failure (test)")

func failAtFrom(ctx context.Context) *failAt {
	f, _ := ctx.Value(failAtKey{}).(*failAt)
	return f
}

// RevisionTable is the table the Atlas CLI keeps its revisions in when the
// URL names a database.
const RevisionTable = "atlas_schema_revisions"

// revisions reads and writes Atlas revisions in the CLI's table and format.
// Atlas has no public implementation, so this is the CLI's schema written
// out in SQL.
type revisions struct {
	conn *sql.Conn
}

var _ migrate.RevisionReadWriter = (*revisions)(nil)

// exists reports whether the revision table exists.
func (r *revisions) exists(ctx context.Context) (bool, error) {
	var n int
	if err := r.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", RevisionTable).Scan(&n); err != nil {
		return false, fmt.Errorf("migrate: look for %s: %w", RevisionTable, err)
	}
	return n > 0, nil
}

func (r *revisions) init(ctx context.Context) error {
	_, err := r.conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS `"+RevisionTable+"` ("+
		"`version` varchar(255) NOT NULL, "+
		"`description` varchar(255) NOT NULL, "+
		"`type` bigint unsigned NOT NULL DEFAULT 2, "+
		"`applied` bigint NOT NULL DEFAULT 0, "+
		"`total` bigint NOT NULL DEFAULT 0, "+
		"`executed_at` timestamp NOT NULL, "+
		"`execution_time` bigint NOT NULL, "+
		"`error` longtext NULL, "+
		"`error_stmt` longtext NULL, "+
		"`hash` varchar(255) NOT NULL, "+
		"`partial_hashes` json NULL, "+
		"`operator_version` varchar(255) NOT NULL, "+
		"PRIMARY KEY (`version`)"+
		") CHARSET utf8mb4 COLLATE utf8mb4_bin")
	if err != nil {
		return fmt.Errorf("migrate: create %s: %w", RevisionTable, err)
	}
	return nil
}

// Ident names the revisions table, so that the executor's clean-database
// check ignores it.
func (r *revisions) Ident() *migrate.TableIdent {
	return &migrate.TableIdent{Name: RevisionTable}
}

const revisionColumns = "`version`, `description`, `type`, `applied`, `total`, `executed_at`, `execution_time`, " +
	"`error`, `error_stmt`, `hash`, `partial_hashes`, `operator_version`"

// cloudIdentifier is the row the CLI keeps its table identifier in; it is
// not a revision.
const cloudIdentifier = ".atlas_cloud_identifier"

func (r *revisions) ReadRevisions(ctx context.Context) ([]*migrate.Revision, error) {
	rows, err := r.conn.QueryContext(ctx, "SELECT "+revisionColumns+" FROM `"+RevisionTable+"` WHERE `version` <> ? ORDER BY `version`", cloudIdentifier)
	if err != nil {
		return nil, fmt.Errorf("migrate: read revisions: %w", err)
	}
	defer rows.Close()
	var revs []*migrate.Revision
	for rows.Next() {
		rev, err := scanRevision(rows)
		if err != nil {
			return nil, err
		}
		revs = append(revs, rev)
	}
	return revs, rows.Err()
}

func (r *revisions) ReadRevision(ctx context.Context, version string) (*migrate.Revision, error) {
	rows, err := r.conn.QueryContext(ctx, "SELECT "+revisionColumns+" FROM `"+RevisionTable+"` WHERE `version` = ?", version)
	if err != nil {
		return nil, fmt.Errorf("migrate: read revision %s: %w", version, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, migrate.ErrRevisionNotExist
	}
	return scanRevision(rows)
}

func scanRevision(rows *sql.Rows) (*migrate.Revision, error) {
	var (
		rev             migrate.Revision
		typ             uint64
		executedAt      any // time.Time with parseTime=true, text without
		execNanos       int64
		errMsg, errStmt sql.NullString
		partial         sql.NullString
	)
	if err := rows.Scan(&rev.Version, &rev.Description, &typ, &rev.Applied, &rev.Total, &executedAt, &execNanos,
		&errMsg, &errStmt, &rev.Hash, &partial, &rev.OperatorVersion); err != nil {
		return nil, fmt.Errorf("migrate: scan revision: %w", err)
	}
	switch v := executedAt.(type) {
	case time.Time:
		rev.ExecutedAt = v
	case []byte:
		t, err := time.Parse(time.DateTime, string(v))
		if err != nil {
			return nil, fmt.Errorf("migrate: revision %s: executed_at: %w", rev.Version, err)
		}
		rev.ExecutedAt = t
	}
	rev.Type = migrate.RevisionType(typ)
	rev.ExecutionTime = time.Duration(execNanos)
	rev.Error, rev.ErrorStmt = errMsg.String, errStmt.String
	if partial.Valid && partial.String != "" {
		if err := json.Unmarshal([]byte(partial.String), &rev.PartialHashes); err != nil {
			return nil, fmt.Errorf("migrate: revision %s: partial_hashes: %w", rev.Version, err)
		}
	}
	return &rev, nil
}

func (r *revisions) WriteRevision(ctx context.Context, rev *migrate.Revision) error {
	var partial any
	if rev.PartialHashes != nil {
		b, err := json.Marshal(rev.PartialHashes)
		if err != nil {
			return err
		}
		partial = string(b)
	}
	var errMsg, errStmt any
	if rev.Error != "" {
		errMsg = rev.Error
	}
	if rev.ErrorStmt != "" {
		errStmt = rev.ErrorStmt
	}
	_, err := r.conn.ExecContext(ctx, "INSERT INTO `"+RevisionTable+"` ("+revisionColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "+
		"ON DUPLICATE KEY UPDATE `description` = VALUES(`description`), `type` = VALUES(`type`), `applied` = VALUES(`applied`), "+
		"`total` = VALUES(`total`), `executed_at` = VALUES(`executed_at`), `execution_time` = VALUES(`execution_time`), "+
		"`error` = VALUES(`error`), `error_stmt` = VALUES(`error_stmt`), `hash` = VALUES(`hash`), "+
		"`partial_hashes` = VALUES(`partial_hashes`), `operator_version` = VALUES(`operator_version`)",
		rev.Version, rev.Description, uint64(rev.Type), rev.Applied, rev.Total, rev.ExecutedAt.UTC(), int64(rev.ExecutionTime),
		errMsg, errStmt, rev.Hash, partial, rev.OperatorVersion)
	if err != nil {
		return fmt.Errorf("migrate: write revision %s: %w", rev.Version, err)
	}
	return nil
}

func (r *revisions) DeleteRevision(ctx context.Context, version string) error {
	if _, err := r.conn.ExecContext(ctx, "DELETE FROM `"+RevisionTable+"` WHERE `version` = ?", version); err != nil {
		return fmt.Errorf("migrate: delete revision %s: %w", version, err)
	}
	return nil
}
