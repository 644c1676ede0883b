package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/internal/schemadiff"
)

// schemas are the Ent schemas and their migration directories, fencekit's
// and the transcoding example's (schemadiff.Schemas): each drift test below
// checks every one. dir is the directory's path from this package.
func schemas(t *testing.T, each func(t *testing.T, s schemadiff.Schema, dir string)) {
	t.Helper()
	for _, s := range schemadiff.Schemas {
		t.Run(s.Name, func(t *testing.T) { each(t, s, filepath.Join("..", s.Dir)) })
	}
}

// scratch creates an empty database on the test server, dropped when t ends.
func scratch(t *testing.T, prefix string) (*mysql.Config, string) {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name, drop, err := devdb.Create(context.Background(), cfg, prefix)
	if err != nil {
		t.Fatalf("no usable server (%s): %v", devdb.EnvDSN, err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	return cfg, name
}

// emptyDB returns a fresh empty database and a raw pool on it.
func emptyDB(t *testing.T, prefix string) (*mysql.Config, string, *sql.DB) {
	t.Helper()
	cfg, name := scratch(t, prefix)
	c := cfg.Clone()
	c.DBName = name
	c.ParseTime = true
	return cfg, name, dbtest.OpenDSN(t, c.FormatDSN())
}
