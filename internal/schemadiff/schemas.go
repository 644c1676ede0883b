package schemadiff

import (
	entschema "entgo.io/ent/dialect/sql/schema"

	"github.com/fencekit/fencekit/ent"
	entmigrate "github.com/fencekit/fencekit/ent/migrate"
	transcode "github.com/fencekit/fencekit/examples/transcode/ent"
	transcodemigrate "github.com/fencekit/fencekit/examples/transcode/ent/migrate"
)

// A Schema is a generated Ent package and the migration directories that
// describe its tables and its database fences.
type Schema struct {
	// Name is what migdiff's -schema takes.
	Name string
	// Dir is the migration directory for MySQL and MariaDB, from the
	// repository's root; the one for TiDB is Dir/tidb.
	Dir string
	// Tables are the Ent schema's tables (the generated migrate.Tables).
	Tables []*entschema.Table
	// Fences are the generated database fences of its fenced tables (the
	// generated FencedTables).
	Fences []Fence
}

// A Fence is one fenced table's database fence, as the generated package
// renders it from the annotation.
type Fence struct {
	Table, SQL string
}

// Schemas are fencekit's own schema (the refund tables, ent/ and
// migrations/) and its examples' (examples/transcode: a second fenced
// entity, with a migration directory of its own, which fencekit's
// migrations never install).
var Schemas = []Schema{
	{Name: "core", Dir: "migrations", Tables: entmigrate.Tables,
		Fences: fences(ent.FencedTables, func(f ent.FencedTableFence) Fence { return Fence{f.Table, f.FencesSQL} })},
	{Name: "transcode", Dir: "examples/transcode/migrations", Tables: transcodemigrate.Tables,
		Fences: fences(transcode.FencedTables, func(f transcode.FencedTableFence) Fence { return Fence{f.Table, f.FencesSQL} })},
}

func fences[F any](generated []F, fence func(F) Fence) []Fence {
	out := make([]Fence, 0, len(generated))
	for _, f := range generated {
		out = append(out, fence(f))
	}
	return out
}
