package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"ariga.io/atlas/sql/migrate"

	transcode "github.com/fencekit/fencekit/examples/transcode/migrations"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/internal/schemadiff"
	"github.com/fencekit/fencekit/migrations"
)

// Each schema's TiDB directory (migrations/tidb, and the example's) is its
// MySQL directory without triggers and procedures: every file of the MySQL
// directory that has none is there unchanged, no file there has any, and the
// fence's tables (the keys table, the archive) are created with the
// statements generated from the annotation (schemadiff.TiDBFollows).
// Nothing else may differ, so a schema change made in migrations/ fails here
// until it is copied.
func TestTiDBDirectoryFollowsMigrations(t *testing.T) {
	schemas(t, func(t *testing.T, s schemadiff.Schema, path string) {
		mysqlDir, err := migrate.NewLocalDir(path)
		if err != nil {
			t.Fatal(err)
		}
		tidbDir, err := migrate.NewLocalDir(filepath.Join(path, "tidb"))
		if err != nil {
			t.Fatal(err)
		}
		if err := migrate.Validate(tidbDir); err != nil {
			t.Fatalf("%s/tidb/atlas.sum: %v (go run ./internal/cmd/migdiff -dir %[1]s/tidb -rehash)", s.Dir, err)
		}
		problems, err := schemadiff.TiDBFollows(mysqlDir, tidbDir, s.Fences)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", s.Dir, p)
		}
	})
	for _, src := range []migrations.Source{migrations.Core, transcode.Source} {
		if _, err := src.TiDBDir(); err != nil {
			t.Fatalf("embedded TiDB directory: %v", err)
		}
	}
}

// The check above can fail.
func TestTiDBDirectoryCheckSeesRoutines(t *testing.T) {
	for _, sql := range []string{
		"CREATE TRIGGER `x` BEFORE UPDATE ON `t` FOR EACH ROW SET NEW.a = 1;",
		"DELIMITER //\nSELECT 1//",
		"drop procedure if exists `p`;",
		"CALL refund_jobs_archive(NOW());",
	} {
		if !schemadiff.HasRoutine([]byte(sql)) {
			t.Errorf("not seen as a routine: %q", sql)
		}
	}
	if schemadiff.HasRoutine([]byte("CREATE TABLE `triggers` (`procedure` int);")) {
		t.Error("a table named triggers seen as a routine")
	}
}

// migrations/tidb applies with the Atlas library on every engine (it has
// nothing TiDB lacks), each file once under concurrent deploys, and a
// second run applies nothing. On TiDB, Apply picks it by itself.
func TestTiDBDirectoryAppliesOnce(t *testing.T) {
	ctx := context.Background()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name, drop, err := devdb.Create(ctx, cfg, "tidbdir")
	if err != nil {
		t.Fatalf("no usable server (%s): %v", devdb.EnvDSN, err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	dir, err := migrations.TiDBDir()
	if err != nil {
		t.Fatal(err)
	}
	want := versions(t, migrations.TiDBDir)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []string
	)
	for range 3 {
		db, err := sql.Open("mysql", devdb.DSN(cfg, name))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := migrations.ApplyDir(ctx, db, dir)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			applied = append(applied, v...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(applied)
	if !slices.Equal(applied, want) {
		t.Fatalf("three concurrent applies applied %v, want each of %v once", applied, want)
	}
	db, err := sql.Open("mysql", devdb.DSN(cfg, name))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if again, err := migrations.ApplyDir(ctx, db, dir); err != nil || len(again) != 0 {
		t.Fatalf("second apply: %v (%v), want nothing", again, err)
	}
	tidb, err := migrations.IsTiDB(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	chosen, err := migrations.DirFor(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := chosen.Checksum(); tidb != (sum.Sum() == mustSum(t, dir)) {
		t.Errorf("on a server where IsTiDB is %v, DirFor chose the other directory", tidb)
	}
}

func mustSum(t *testing.T, dir migrate.Dir) string {
	t.Helper()
	sum, err := dir.Checksum()
	if err != nil {
		t.Fatal(err)
	}
	return sum.Sum()
}

// versions lists the versions of a migration directory, in order.
func versions(t *testing.T, open func() (migrate.Dir, error)) []string {
	t.Helper()
	dir, err := open()
	if err != nil {
		t.Fatal(err)
	}
	files, err := dir.Files()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Version())
	}
	return out
}
