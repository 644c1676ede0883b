package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"strings"

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
	// Retired names what files of the source once created and that left
	// with their files: a table named so, or prefixed so and "_", and the
	// triggers and procedures named alike. A database migrated before keeps
	// them, untouched; Apply passes over them when it recognises a database
	// the plain client migrated (they are no state of the directory).
	Retired []string
}

// Core is fencekit's migrations: this directory and migrations/tidb. The
// transcoding example's tables, triggers and procedures (transcode_jobs…)
// were shipped here until they moved to examples/transcode/migrations
// (docs/migrations.md, "The transcoding example moved out").
var Core = Source{Name: "migrations", Files: files, Retired: []string{"transcode_jobs"}}

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
	return applyDir(ctx, db, dir, 0, s.retired)
}

// retired reports whether name (a table's, a trigger's or a procedure's)
// is one of the source's retired objects.
func (s Source) retired(name string) bool {
	for _, r := range s.Retired {
		if name == r || strings.HasPrefix(name, r+"_") {
			return true
		}
	}
	return false
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
