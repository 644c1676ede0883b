// Package schemadiff compares the Ent schema with the Atlas migration directory.
package schemadiff

import (
	"context"
	"fmt"

	"ariga.io/atlas/sql/migrate"
	entschema "entgo.io/ent/dialect/sql/schema"

	entmigrate "github.com/fencekit/fencekit/ent/migrate"
)

// Diff plans the changes between the migration directory dir and the Ent
// schema, on devURL (an Atlas URL of an empty scratch database: the files are
// replayed there). When there are changes it writes them to dir as a new
// file named name, in Atlas's format, re-hashes atlas.sum and returns true.
func Diff(ctx context.Context, devURL string, dir migrate.Dir, name string) (bool, error) {
	err := entmigrate.NamedDiff(ctx, devURL, name,
		entschema.WithDir(dir),
		entschema.WithMigrationMode(entschema.ModeReplay),
		entschema.WithFormatter(migrate.DefaultFormatter),
		entschema.WithDropColumn(true),
		entschema.WithDropIndex(true),
		// Tables outside the Ent schema (refund_jobs_archive) are hand-written;
		// dropping a table is never planned automatically.
		entschema.WithSkipChanges(entschema.DropTable),
		entschema.WithErrNoPlan(true),
	)
	switch {
	case err == nil:
		return true, nil
	case err == migrate.ErrNoPlan:
		return false, nil
	default:
		return false, fmt.Errorf("diff schema against migrations: %w", err)
	}
}

// Rehash rewrites dir's atlas.sum after a hand-written file changed.
func Rehash(dir migrate.Dir) error {
	sum, err := dir.Checksum()
	if err != nil {
		return fmt.Errorf("checksum migrations: %w", err)
	}
	return migrate.WriteSumFile(dir, sum)
}
