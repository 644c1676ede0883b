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
	"io/fs"
	"time"

	"ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"
)

//go:embed *.sql atlas.sum
var files embed.FS

// Dir returns the embedded migration directory.
func Dir() (migrate.Dir, error) {
	d := &migrate.MemDir{}
	names, err := fs.Glob(files, "*")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if err := d.WriteFile(name, b); err != nil {
			return nil, err
		}
	}
	if err := migrate.Validate(d); err != nil {
		return nil, fmt.Errorf("migration directory: %w", err)
	}
	return d, nil
}

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
// When a file fails halfway, the revision records how far it got (as the
// CLI does) and later runs refuse to continue until it is fixed; MySQL DDL
// cannot be rolled back.
//
// The directory is the server's (DirFor): migrations/tidb on TiDB, which
// has no triggers, this directory on MySQL and MariaDB.
func Apply(ctx context.Context, db *sql.DB) ([]string, error) {
	dir, err := DirFor(ctx, db)
	if err != nil {
		return nil, err
	}
	return ApplyDir(ctx, db, dir)
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
	return applyDir(ctx, db, dir, n)
}

// ApplyDir is Apply for another directory (tests use it).
func ApplyDir(ctx context.Context, db *sql.DB, dir migrate.Dir) ([]string, error) {
	return applyDir(ctx, db, dir, 0)
}

// applyDir applies the next n pending files of dir, or all of them when n
// is 0.
func applyDir(ctx context.Context, db *sql.DB, dir migrate.Dir, n int) ([]string, error) {
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
	if err := rrw.init(ctx); err != nil {
		return nil, err
	}
	before, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return nil, err
	}
	ex, err := migrate.NewExecutor(drv, dir, rrw, migrate.WithOperatorVersion(operatorVersion))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := ex.ExecuteN(ctx, n); err != nil && !errors.Is(err, migrate.ErrNoPendingFiles) {
		return nil, fmt.Errorf("migrate: %w", err)
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
	var applied []string
	for _, r := range after {
		if !seen[r.Version] && r.Applied == r.Total && r.Error == "" {
			applied = append(applied, r.Version)
		}
	}
	return applied, nil
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
