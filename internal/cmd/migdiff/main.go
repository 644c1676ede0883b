// Command migdiff writes a new Atlas migration file when the Ent schema and
// the migrations directory differ, using a scratch database on the local
// server (FENCEKIT_TEST_DSN, default root@tcp(127.0.0.1:3306)/) as Atlas's dev
// database.
//
//	go run ./internal/cmd/migdiff -name add_column   # plan and write changes
//	go run ./internal/cmd/migdiff -rehash            # after editing a hand-written file
//	go run ./internal/cmd/migdiff -fences job_fences # when the generated database fence of refund_jobs changed
//	go run ./internal/cmd/migdiff -fences transcode_job_fences -table transcode_jobs
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

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/internal/schemadiff"
)

func main() {
	var (
		name   = flag.String("name", "", "name of the migration file to write when the schema changed")
		path   = flag.String("dir", "migrations", "migration directory")
		rehash = flag.Bool("rehash", false, "only rewrite atlas.sum")
		fences = flag.String("fences", "", "write the generated database fence of -table (ent.FencedTables) as a new file with this name when it changed")
		table  = flag.String("table", "refund_jobs", "with -fences: the fenced table whose fence to write")
	)
	flag.Parse()
	log.SetFlags(0)
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
		generated, err := fencesOf(*table)
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
	wrote, err := schemadiff.Diff(ctx, url, dir, *name)
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

// fencesOf returns the generated database fence of the fenced table, or an
// error that lists the fenced tables.
func fencesOf(table string) (string, error) {
	var names []string
	for _, f := range ent.FencedTables {
		if f.Table == table {
			return f.FencesSQL, nil
		}
		names = append(names, f.Table)
	}
	return "", fmt.Errorf("migdiff -table: %q is not a fenced table (the fenced tables: %s)", table, strings.Join(names, ", "))
}
