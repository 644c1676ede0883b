//go:build !tidb

// migrations/ against the server: MySQL and MariaDB only. The TiDB run
// (-tags tidb) leaves this file out; tidb_test.go checks migrations/tidb on
// every engine.

package migrations_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ariga.io/atlas/sql/migrate"
	_ "ariga.io/atlas/sql/mysql"
	entschema "entgo.io/ent/dialect/sql/schema"

	"github.com/fencekit/fencekit/ent"
	transcode "github.com/fencekit/fencekit/examples/transcode/migrations"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/internal/schemadiff"
	"github.com/fencekit/fencekit/migrations"
)

func TestAtlasSumValidates(t *testing.T) {
	schemas(t, func(t *testing.T, s schemadiff.Schema, path string) {
		dir, err := migrate.NewLocalDir(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrate.Validate(dir); err != nil {
			t.Fatalf("%s/atlas.sum does not match the files (run go run ./internal/cmd/migdiff -schema %s -rehash after a hand edit): %v", s.Dir, s.Name, err)
		}
	})
	for _, src := range []migrations.Source{migrations.Core, transcode.Source} {
		if _, err := src.Dir(); err != nil {
			t.Fatalf("embedded directory: %v", err)
		}
	}
}

func TestAtlasSumDetectsAnEditedFile(t *testing.T) {
	tmp := copyDir(t, ".")
	files, err := filepath.Glob(filepath.Join(tmp, "*_fences.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fences files: %v %v", files, err)
	}
	f, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n-- an unreviewed edit\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dir, err := migrate.NewLocalDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.Validate(dir); err == nil {
		t.Fatal("Validate accepted a file that no longer matches atlas.sum")
	}
}

// copyDir copies the migration directory at path into a temporary one.
func copyDir(t *testing.T, path string) string {
	t.Helper()
	tmp := t.TempDir()
	files, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".sql") && name != "atlas.sum" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(path, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// Each Ent schema and its migration directory describe the same database: a
// diff against a scratch database where the directory was replayed plans
// nothing. When this fails, run `go run ./internal/cmd/migdiff -schema <name>
// -name <change>`.
func TestSchemaMatchesMigrations(t *testing.T) {
	schemas(t, func(t *testing.T, s schemadiff.Schema, path string) {
		t.Parallel()
		tmp := copyDir(t, path)
		dir, err := migrate.NewLocalDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if diff(t, dir, "drift", s.Tables) {
			var planned []string
			files, _ := filepath.Glob(filepath.Join(tmp, "*_drift.sql"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				planned = append(planned, string(b))
			}
			t.Fatalf("the Ent schema and %s differ; run go run ./internal/cmd/migdiff -schema %s -name <change>. Planned:\n%s", s.Dir, s.Name, strings.Join(planned, "\n"))
		}
	})
}

// The check above must be able to fail: a schema the directory does not
// describe (an empty directory) is planned as a change.
func TestSchemaDiffDetectsDrift(t *testing.T) {
	tmp := t.TempDir()
	dir, err := migrate.NewLocalDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemadiff.Rehash(dir); err != nil {
		t.Fatal(err)
	}
	if !diff(t, dir, "everything", schemadiff.Schemas[0].Tables) {
		t.Fatal("a diff against an empty directory planned nothing")
	}
}

func revisions(t *testing.T, db *sql.DB) map[string][3]int64 {
	t.Helper()
	rows, err := db.Query("SELECT `version`, `type`, `applied`, `total` FROM `atlas_schema_revisions` ORDER BY `version`")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string][3]int64{}
	for rows.Next() {
		var v string
		var typ, applied, total int64
		if err := rows.Scan(&v, &typ, &applied, &total); err != nil {
			t.Fatal(err)
		}
		got[v] = [3]int64{typ, applied, total}
	}
	return got
}

func TestApplyRecordsRevisionsLikeTheCLIAndIsIdempotent(t *testing.T) {
	d := dbtest.New(t) // applies once
	db := d.RawDB()
	versions := versions(t, migrations.Dir)
	got := revisions(t, db)
	if len(got) != len(versions) {
		t.Fatalf("revisions %v, want one per file %v", got, versions)
	}
	for _, v := range versions {
		r, ok := got[v]
		// type 2 is RevisionTypeExecute; applied == total means complete.
		if !ok || r[0] != int64(migrate.RevisionTypeExecute) || r[1] != r[2] || r[2] == 0 {
			t.Errorf("revision %s = %v, want executed and complete", v, r)
		}
	}
	applied, err := migrations.Apply(context.Background(), db)
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if len(applied) != 0 {
		t.Fatalf("second apply applied %v, want nothing", applied)
	}
}

func TestConcurrentAppliesApplyEachFileOnce(t *testing.T) {
	ctx := context.Background()
	cfg, name := scratch(t, "concurrent")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []string
		errs    []error
	)
	for range 4 {
		db, err := sql.Open("mysql", devdb.DSN(cfg, name))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := migrations.Apply(ctx, db)
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, v...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	slices.Sort(applied)
	want := versions(t, migrations.Dir)
	if !slices.Equal(applied, want) {
		t.Fatalf("four concurrent applies applied %v, want each of %v exactly once", applied, want)
	}
}

// The files are plain SQL that the mysql/mariadb client applies in order.
func TestFilesApplyWithPlainClient(t *testing.T) {
	client := ""
	for _, c := range []string{"mariadb", "mysql"} {
		if p, err := exec.LookPath(c); err == nil {
			client = p
			break
		}
	}
	if client == "" {
		t.Fatal("neither the mariadb nor the mysql client is installed (scripts/ensure-db.sh installs mariadb-client)")
	}
	cfg, name := scratch(t, "plain")
	host, port, _ := strings.Cut(cfg.Addr, ":")
	files, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, f := range files {
		args := []string{"--protocol=tcp", "-h" + host, "-P" + port, "-u" + cfg.User}
		if cfg.Passwd != "" {
			args = append(args, "-p"+cfg.Passwd)
		}
		cmd := exec.Command(client, append(args, name)...)
		in, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = in
		out, err := cmd.CombinedOutput()
		in.Close()
		if err != nil {
			t.Fatalf("%s %s < %s: %v\n%s", client, name, f, err, out)
		}
	}
	db, err := sql.Open("mysql", devdb.DSN(cfg, name))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The plain client builds the same fences as the Atlas library does.
	viaAtlas := dbtest.New(t)
	plain, atlas := routines(t, db, name), routines(t, viaAtlas.RawDB(), viaAtlas.Name)
	if !slices.Equal(plain, atlas) || len(plain) == 0 {
		t.Fatalf("plain client created %v, the Atlas library %v", plain, atlas)
	}
}

// routines lists the triggers and procedures of database name.
func routines(t *testing.T, db *sql.DB, name string) []string {
	t.Helper()
	rows, err := db.Query("SELECT CONCAT('trigger ', TRIGGER_NAME, ' on ', EVENT_OBJECT_TABLE) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? "+
		"UNION ALL SELECT CONCAT('procedure ', ROUTINE_NAME) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?", name, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// diff plans the changes between dir and the Ent schema on a scratch
// database, writing them to dir as a file named name; it reports whether
// there were any.
func diff(t *testing.T, dir migrate.Dir, name string, tables []*entschema.Table) bool {
	t.Helper()
	cfg, db := scratch(t, "drift")
	url, err := devdb.AtlasURL(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := schemadiff.Diff(context.Background(), url, dir, name, tables)
	if err != nil {
		t.Fatal(err)
	}
	return wrote
}

// The database fence of every fenced table is generated from its annotation
// (the generated FencedTables of each schema); the newest migration file of
// the schema's directory that carries a table's fence must hold exactly what
// the generator renders now, or the database runs an older fence than the
// code expects (go run ./internal/cmd/migdiff -schema <name> -fences <name>
// writes a new one).
func TestGeneratedFenceIsMigrated(t *testing.T) {
	schemas(t, func(t *testing.T, s schemadiff.Schema, path string) {
		dir, err := migrate.NewLocalDir(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Fences) == 0 {
			t.Fatalf("schema %s has no fenced table", s.Name)
		}
		for _, f := range s.Fences {
			name, content, found, err := schemadiff.LatestFences(dir, f.SQL)
			if err != nil || !found {
				t.Fatalf("no migration of %s carries the generated database fence of %s (%v): run go run ./internal/cmd/migdiff -schema %s -fences <name> -table %[2]s", s.Dir, f.Table, err, s.Name)
			}
			if content != f.SQL {
				t.Fatalf("%s differs from the fence of %s generated from the annotation: run go generate ./... && go run ./internal/cmd/migdiff -schema %s -fences <name> -table %[2]s", name, f.Table, s.Name)
			}
			if !strings.Contains(content, "CREATE TRIGGER `"+f.Table+"_fence` BEFORE UPDATE ON `"+f.Table+"`") {
				t.Fatalf("%s, the fence of %s, has no BEFORE UPDATE trigger on it", name, f.Table)
			}
		}
	})
	// The check is not vacuous: an edited fence is a drift.
	tmp := copyDir(t, ".")
	tmpDir, err := migrate.NewLocalDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := schemadiff.WriteFences(tmpDir, "edited", strings.Replace(ent.RefundJobFencesSQL, "INTERVAL 30 DAY", "INTERVAL 1 DAY", 1), time.Now())
	if err != nil || !wrote {
		t.Fatalf("an edited fence was not written as a new migration: %v", err)
	}
}
