# Atlas CLI configuration for fencekit's schema.
#
#   atlas migrate apply --env local                       # apply migrations/ to the database
#   atlas migrate apply --env local --var url=mysql://user:pass@host:3306/db
#   atlas migrate validate --env local                    # replay migrations/ on the dev database
#
# migrations/ is Atlas's versioned directory format: files generated from the
# Ent schema (go run ./internal/cmd/migdiff -name <change>) and hand-written
# ones (the triggers of *_fences.sql) side by side, hashed in atlas.sum.
# Without the CLI, `go run ./cmd/refundd migrate` applies the same directory
# with the Atlas Go library and the same revision table.

variable "url" {
  type    = string
  default = "mysql://root@127.0.0.1:3306/fencekit"
}

variable "dev" {
  type    = string
  default = "mysql://root@127.0.0.1:3306/fencekit_dev"
}

env "local" {
  # The database to migrate. Its revisions go to atlas_schema_revisions in it.
  url = var.url
  # An empty scratch database Atlas may wipe, to replay and plan.
  dev = var.dev
  # The desired schema, for `atlas migrate diff --env local`.
  src = "ent://ent/schema"
  migration {
    dir = "file://migrations"
  }
}

# TiDB has neither triggers nor stored procedures: its directory is
# migrations/tidb, migrations/ without them (docs/tidb.md). Plan schema
# changes with env "local" (on MySQL or MariaDB), then copy them there.
#
#   atlas migrate apply --env tidb --var url=mysql://user:pass@host:4000/db
env "tidb" {
  url = var.url
  dev = var.dev
  migration {
    dir = "file://migrations/tidb"
  }
}

# The transcoding example (examples/transcode) has migrations of its own,
# which fencekit's never install: apply them to a database of their own.
#
#   atlas migrate apply --env transcode --var url=mysql://user:pass@host:3306/transcode_example
env "transcode" {
  url = var.url
  dev = var.dev
  src = "ent://examples/transcode/ent/schema"
  migration {
    dir = "file://examples/transcode/migrations"
  }
}
