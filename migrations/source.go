package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"

	"ariga.io/atlas/sql/migrate"
)

// A Source is a set of embedded migration directories, one per engine: the
// directory for MySQL and MariaDB at the root of Files and the one for TiDB
// under tidb/, each with its atlas.sum. Core is fencekit's own; an example
// with a schema of its own ships another (examples/transcode/migrations).
type Source struct {
	// Name says where the directories live (the repository path of the
	// MySQL one): it names the source in errors, and test databases are
	// copied from one template per source name (internal/dbtest).
	Name  string
	Files fs.FS
}

// Core is fencekit's migrations: this directory and migrations/tidb.
var Core = Source{Name: "migrations", Files: files}

// Dir returns the source's directory for MySQL and MariaDB.
func (s Source) Dir() (migrate.Dir, error) { return s.load(".") }

// TiDBDir returns the source's directory for TiDB, which has neither
// triggers nor stored procedures (docs/tidb.md).
func (s Source) TiDBDir() (migrate.Dir, error) { return s.load("tidb") }

// DirFor returns the source's directory for the server db is connected to:
// TiDBDir on TiDB, Dir on MySQL and MariaDB.
func (s Source) DirFor(ctx context.Context, db *sql.DB) (migrate.Dir, error) {
	tidb, err := IsTiDB(ctx, db)
	if err != nil {
		return nil, err
	}
	if tidb {
		return s.TiDBDir()
	}
	return s.Dir()
}

// Apply is Apply with the source's directory for db's server.
func (s Source) Apply(ctx context.Context, db *sql.DB) ([]string, error) {
	dir, err := s.DirFor(ctx, db)
	if err != nil {
		return nil, err
	}
	return ApplyDir(ctx, db, dir)
}

// load reads the directory sub of the source (its *.sql files and
// atlas.sum) into memory and validates it against its atlas.sum.
func (s Source) load(sub string) (migrate.Dir, error) {
	name := path.Join(s.Name, sub)
	sqls, err := fs.Glob(s.Files, path.Join(sub, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("migration directory %s: %w", name, err)
	}
	d := &migrate.MemDir{}
	for _, p := range append(sqls, path.Join(sub, migrate.HashFileName)) {
		b, err := fs.ReadFile(s.Files, p)
		if err != nil {
			return nil, fmt.Errorf("migration directory %s: %w", name, err)
		}
		if err := d.WriteFile(path.Base(p), b); err != nil {
			return nil, fmt.Errorf("migration directory %s: %w", name, err)
		}
	}
	if err := migrate.Validate(d); err != nil {
		return nil, fmt.Errorf("migration directory %s: %w", name, err)
	}
	return d, nil
}
