// Command migdiff writes a new Atlas migration file when an Ent schema and
// its migration directory differ, using a scratch database on the local
// server (FENCEKIT_TEST_DSN, default root@tcp(127.0.0.1:3306)/) as Atlas's dev
// database. -schema chooses the schema (schemadiff.Schemas): core, fencekit's
// own (ent/ and migrations/), or transcode, the example's
// (examples/transcode/ent and examples/transcode/migrations).
//
//	go run ./internal/cmd/migdiff -name add_column   # plan and write changes
//	go run ./internal/cmd/migdiff -rehash            # after editing a hand-written file
//	go run ./internal/cmd/migdiff -fences job_fences # when the generated database fence of refund_jobs changed
//	go run ./internal/cmd/migdiff -dir migrations/tidb -rehash
//	go run ./internal/cmd/migdiff -schema transcode -fences transcode_job_fences
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"
	_ "ariga.io/atlas/sql/mysql"

	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/internal/schemadiff"
)

func main() {
	var (
		schemaName = flag.String("schema", "core", "the Ent schema and its migrations: "+names())
		name       = flag.String("name", "", "name of the migration file to write when the schema changed")
		path       = flag.String("dir", "", "migration directory (default: the schema's, e.g. migrations)")
		rehash     = flag.Bool("rehash", false, "only rewrite atlas.sum")
		fences     = flag.String("fences", "", "write the generated database fence of -table as a new file with this name when it changed")
		table      = flag.String("table", "", "with -fences: the fenced table whose fence to write (default: the schema's only one)")
	)
	flag.Parse()
	log.SetFlags(0)
	s, err := schemaOf(*schemaName)
	if err != nil {
		log.Fatal(err)
	}
	if *path == "" {
		*path = s.Dir
	}
	dir, err := migrate.NewLocalDir(*path)
	if err != nil {
		log.Fatal(err)
	}
	if *rehash {
		if err := schemadiff.Rehash(dir); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *fences != "" {
		generated, err := fenceOf(s, *table)
		if err != nil {
			log.Fatal(err)
		}
		wrote, err := schemadiff.WriteFences(dir, *fences, generated, time.Now())
		if err != nil {
			log.Fatal(err)
		}
		if wrote {
			fmt.Println("migdiff: wrote the new database fence; review it and commit it with atlas.sum")
		} else {
			fmt.Println("migdiff: the database fence is up to date")
		}
		return
	}
	if *name == "" {
		log.Fatal("migdiff: -name is required (or -rehash)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		log.Fatal(err)
	}
	db, drop, err := devdb.Create(ctx, cfg, "dev")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := drop(context.Background()); err != nil {
			log.Print(err)
		}
	}()
	url, err := devdb.AtlasURL(cfg, db)
	if err != nil {
		log.Fatal(err)
	}
	wrote, err := schemadiff.Diff(ctx, url, dir, *name, s.Tables)
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
	if wrote {
		fmt.Println("migdiff: wrote a new migration file; review it and commit it with atlas.sum")
	} else {
		fmt.Println("migdiff: the schema and the migrations agree")
	}
}

// names lists the schemas -schema takes.
func names() string {
	var out []string
	for _, s := range schemadiff.Schemas {
		out = append(out, s.Name)
	}
	return strings.Join(out, ", ")
}

// schemaOf returns the schema named name, or an error that lists them.
func schemaOf(name string) (schemadiff.Schema, error) {
	for _, s := range schemadiff.Schemas {
		if s.Name == name {
			return s, nil
		}
	}
	return schemadiff.Schema{}, fmt.Errorf("migdiff -schema: %q is not a schema (the schemas: %s)", name, names())
}

// fenceOf returns the generated database fence of the schema's fenced
// table (its only one when table is empty), or an error that lists them.
func fenceOf(s schemadiff.Schema, table string) (string, error) {
	var tables []string
	for _, f := range s.Fences {
		if f.Table == table || (table == "" && len(s.Fences) == 1) {
			return f.SQL, nil
		}
		tables = append(tables, f.Table)
	}
	return "", fmt.Errorf("migdiff -table: %q is not a fenced table of schema %s (its fenced tables: %s)", table, s.Name, strings.Join(tables, ", "))
}
