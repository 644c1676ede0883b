package migrations_test

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"ariga.io/atlas/sql/migrate"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// routine matches what TiDB cannot run: triggers, stored procedures and
// functions, and the client's DELIMITER that their bodies need.
var routine = regexp.MustCompile(`(?im)^\s*(CREATE|DROP)\s+(TRIGGER|PROCEDURE|FUNCTION)\b|^\s*DELIMITER\b|\bCALL\s`)

// migrations/tidb is migrations/ without triggers and procedures: every file
// of migrations/ that has none is there unchanged, no file there has any, and
// the fence's tables (the keys table, the archive) are created with the
// statements generated from the annotation. Nothing else may differ, so a
// schema change made in migrations/ fails here until it is copied.
func TestTiDBDirectoryFollowsMigrations(t *testing.T) {
	mysqlDir, err := migrate.NewLocalDir(".")
	if err != nil {
		t.Fatal(err)
	}
	tidbDir, err := migrate.NewLocalDir("tidb")
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.Validate(tidbDir); err != nil {
		t.Fatalf("migrations/tidb/atlas.sum: %v (go run ./internal/cmd/migdiff -dir migrations/tidb -rehash)", err)
	}
	if _, err := migrations.TiDBDir(); err != nil {
		t.Fatalf("embedded TiDB directory: %v", err)
	}
	mysqlFiles, err := mysqlDir.Files()
	if err != nil {
		t.Fatal(err)
	}
	tidbFiles, err := tidbDir.Files()
	if err != nil {
		t.Fatal(err)
	}
	tidb := map[string]string{}
	for _, f := range tidbFiles {
		tidb[f.Name()] = string(f.Bytes())
		if routine.Match(f.Bytes()) {
			t.Errorf("migrations/tidb/%s has a trigger, a procedure or a DELIMITER: TiDB has none", f.Name())
		}
	}
	mysql := map[string]bool{}
	for _, f := range mysqlFiles {
		mysql[f.Name()] = true
		if routine.Match(f.Bytes()) {
			continue
		}
		got, ok := tidb[f.Name()]
		switch {
		case !ok:
			t.Errorf("migrations/%s is not in migrations/tidb: copy it there (it has no trigger) and rehash", f.Name())
		case got != string(f.Bytes()):
			t.Errorf("migrations/tidb/%s differs from migrations/%s", f.Name(), f.Name())
		}
	}
	// The fence's tables of every fenced table, as the generator writes
	// them: everything of the generated fence before its triggers.
	for _, f := range ent.FencedTables {
		start := strings.Index(f.FencesSQL, "CREATE TABLE")
		end := strings.Index(f.FencesSQL, "\nDROP ")
		if start < 0 || end < start {
			t.Fatalf("the generated fence of %s has no tables before its triggers", f.Table)
		}
		tables := strings.TrimSpace(f.FencesSQL[start:end])
		var own []string
		found := false
		for name, content := range tidb {
			if !mysql[name] {
				own = append(own, name)
				found = found || strings.Contains(content, tables)
			}
		}
		if !found {
			t.Errorf("no file of migrations/tidb of its own (%v) creates the generated fence's tables of %s with:\n%s", own, f.Table, tables)
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
		if !routine.MatchString(sql) {
			t.Errorf("not seen as a routine: %q", sql)
		}
	}
	if routine.MatchString("CREATE TABLE `triggers` (`procedure` int);") {
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
