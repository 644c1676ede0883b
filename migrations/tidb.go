package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"ariga.io/atlas/sql/migrate"
)

// tidbFiles is migrations/tidb: the directory for TiDB, which has neither
// triggers nor stored procedures (docs/tidb.md). It holds every file of this
// directory that has neither, unchanged, and a fence file of its own with
// only the fence's tables; TestTiDBDirectoryFollowsMigrations keeps the two
// directories in step.
//
//go:embed tidb/*.sql tidb/atlas.sum
var tidbFiles embed.FS

// TiDBDir returns the embedded migration directory for TiDB (migrations/tidb).
func TiDBDir() (migrate.Dir, error) {
	sub, err := fs.Sub(tidbFiles, "tidb")
	if err != nil {
		return nil, err
	}
	d := &migrate.MemDir{}
	names, err := fs.Glob(sub, "*")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			return nil, err
		}
		if err := d.WriteFile(name, b); err != nil {
			return nil, err
		}
	}
	if err := migrate.Validate(d); err != nil {
		return nil, fmt.Errorf("tidb migration directory: %w", err)
	}
	return d, nil
}

// IsTiDB reports whether db is connected to TiDB (its VERSION() says so, as
// in 8.0.11-TiDB-v9.0.0).
func IsTiDB(ctx context.Context, db *sql.DB) (bool, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return false, fmt.Errorf("migrate: read server version: %w", err)
	}
	return strings.Contains(v, "TiDB"), nil
}

// DirFor returns the migration directory for the server db is connected to:
// TiDBDir on TiDB, Dir on MySQL and MariaDB.
func DirFor(ctx context.Context, db *sql.DB) (migrate.Dir, error) {
	tidb, err := IsTiDB(ctx, db)
	if err != nil {
		return nil, err
	}
	if tidb {
		return TiDBDir()
	}
	return Dir()
}
