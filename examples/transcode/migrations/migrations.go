// Package migrations holds the transcoding example's schema as Atlas
// versioned migration directories, one per engine, apart from fencekit's
// own: transcode_jobs and its generated database fence (the *.sql files
// here, for MySQL and MariaDB) and their tables without triggers (tidb/,
// for TiDB). fencekit's migrations never install them.
//
// The files are generated the project's way, from the example's Ent schema
// (go run ./internal/cmd/migdiff -schema transcode -name <change>) and its
// annotation (-schema transcode -fences <name>); the TiDB fence file is
// hand-written. migrations/'s drift tests cover this directory as they
// cover fencekit's.
package migrations

import (
	"context"
	"database/sql"
	"embed"

	"github.com/fencekit/fencekit/migrations"
)

//go:embed *.sql atlas.sum tidb/*.sql tidb/atlas.sum
var files embed.FS

// Source is the example's migration directories.
var Source = migrations.Source{Name: "examples/transcode/migrations", Files: files}

// Apply applies the example's pending migrations to the database db is
// connected to, as migrations.Apply does for fencekit's: tidb/ on TiDB,
// this directory on MySQL and MariaDB.
func Apply(ctx context.Context, db *sql.DB) ([]string, error) {
	return Source.Apply(ctx, db)
}
