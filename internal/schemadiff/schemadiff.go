// Package schemadiff compares an Ent schema (Schemas: fencekit's own and its
// examples') with its Atlas migration directories.
package schemadiff

import (
	"context"
	"fmt"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"
	entschema "entgo.io/ent/dialect/sql/schema"
)

// Diff plans the changes between the migration directory dir and the Ent
// schema's tables (a Schema's Tables), on devURL (an Atlas URL of an empty scratch database: the files are
// replayed there). When there are changes it writes them to dir as a new
// file named name, in Atlas's format, re-hashes atlas.sum and returns true.
func Diff(ctx context.Context, devURL string, dir migrate.Dir, name string, tables []*entschema.Table) (bool, error) {
	err := entschema.Diff(ctx, devURL, name, tables,
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

// LatestFences returns the name and content of the newest file in dir that
// starts like generated, the database fence that fencedwrite/entext renders
// from the annotation (its first line names the table and the generator);
// found is false when no file does.
func LatestFences(dir migrate.Dir, generated string) (name, content string, found bool, err error) {
	files, err := dir.Files()
	if err != nil {
		return "", "", false, fmt.Errorf("read migrations: %w", err)
	}
	head, _, _ := strings.Cut(generated, "\n")
	for i := len(files) - 1; i >= 0; i-- {
		if b := string(files[i].Bytes()); strings.HasPrefix(b, head+"\n") {
			return files[i].Name(), b, true, nil
		}
	}
	return "", "", false, nil
}

// WriteFences writes generated as a new migration file named name (a
// version is prepended) unless the newest generated fence file already
// holds it, re-hashes atlas.sum, and reports whether it wrote.
func WriteFences(dir migrate.Dir, name, generated string, now time.Time) (bool, error) {
	_, content, found, err := LatestFences(dir, generated)
	if err != nil {
		return false, err
	}
	if found && content == generated {
		return false, nil
	}
	file := now.UTC().Format("20060102150405") + "_" + name + ".sql"
	if err := dir.WriteFile(file, []byte(generated)); err != nil {
		return false, fmt.Errorf("write %s: %w", file, err)
	}
	return true, Rehash(dir)
}
