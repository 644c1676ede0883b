package migrations_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ariga.io/atlas/sql/migrate"

	"github.com/fencekit/fencekit/migrations"
)

// The transcoding example's files left this directory for
// examples/transcode/migrations (issue 30): testdata/retired keeps them as
// they were shipped (tidb/ the TiDB directory's), for the databases that
// applied them.

// retired returns the retired files of the server's directory (testdata/
// retired, or testdata/retired/tidb on TiDB), by name.
func retired(t *testing.T, db *sql.DB) map[string][]byte {
	t.Helper()
	tidb, err := migrations.IsTiDB(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "retired")
	if tidb {
		path = filepath.Join(path, "tidb")
	}
	names, err := filepath.Glob(filepath.Join(path, "*.sql"))
	if err != nil || len(names) == 0 {
		t.Fatalf("retired files in %s: %v %v", path, names, err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// withFiles returns dir with more files, hashed into its atlas.sum.
func withFiles(t *testing.T, dir migrate.Dir, more map[string][]byte) migrate.Dir {
	t.Helper()
	files, err := dir.Files()
	if err != nil {
		t.Fatal(err)
	}
	out := &migrate.MemDir{}
	for _, f := range files {
		if err := out.WriteFile(f.Name(), f.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range more {
		if err := out.WriteFile(name, b); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := out.Checksum()
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.WriteSumFile(out, sum); err != nil {
		t.Fatal(err)
	}
	return out
}

// tablesLike lists the tables of db's database whose name starts with
// prefix.
func tablesLike(t *testing.T, db *sql.DB, prefix string) []string {
	t.Helper()
	rows, err := db.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE CONCAT(?, '%') ORDER BY 1", prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A database that applied the directory as it was shipped, the transcoding
// example's files included, still migrates: Apply finds nothing pending
// (Atlas passes over revisions whose files are gone), applies the files
// added later, and leaves the example's tables as they were (no file drops a
// table).
func TestDatabaseThatAppliedTheRetiredExampleStillMigrates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, db := emptyDB(t, "retired")
	core, err := migrations.DirFor(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	old := withFiles(t, core, retired(t, db))
	shipped, err := migrations.ApplyDir(ctx, db, old)
	if err != nil {
		t.Fatalf("apply the directory as it was shipped: %v", err)
	}
	if want := versionsOf(t, old); !slices.Equal(shipped, want) {
		t.Fatalf("the shipped directory applied %v, want %v", shipped, want)
	}
	examples := tablesLike(t, db, "transcode_jobs")
	if len(examples) == 0 {
		t.Fatal("the shipped directory created no transcode_jobs table")
	}
	if applied, err := migrations.Apply(ctx, db); err != nil || len(applied) != 0 {
		t.Fatalf("Apply after the example left: applied %v, %v; want nothing pending", applied, err)
	}
	later := withFiles(t, core, map[string][]byte{"20991231000000_later.sql": []byte("CREATE TABLE `later_probe` (`id` bigint NOT NULL, PRIMARY KEY (`id`));\n")})
	applied, err := migrations.ApplyDir(ctx, db, later)
	if err != nil || !slices.Equal(applied, []string{"20991231000000"}) {
		t.Fatalf("a file added later: applied %v, %v; want 20991231000000 alone", applied, err)
	}
	if got := tablesLike(t, db, "transcode_jobs"); !slices.Equal(got, examples) {
		t.Fatalf("the example's tables were %v, now %v: Apply changed them", examples, got)
	}
}

// The core migrations install the refund tables only: the state after the
// last file (what `refundd migrate` and `refundd adopt` bring a database
// to) holds fencekit's tables, all named refund… but the worker's outbound
// budget and the operators' console's two, and triggers and procedures on
// them alone; nothing of the transcoding example.
func TestCoreMigrationsInstallTheRefundTablesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, db := emptyDB(t, "coretarget")
	dir, err := migrations.DirFor(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	target, err := migrations.ReplayTarget(ctx, db, dir)
	if err != nil {
		t.Fatal(err)
	}
	// fencekit's: the refund tables, the worker's outbound budget and the
	// operators' console (its sessions, its "I'm on it" marks).
	ours := func(name string) bool {
		return strings.HasPrefix(name, "refund") || name == "provider_budgets" || name == "console_sessions" || name == "review_assignments"
	}
	var tables []string
	for _, tb := range target.Schema.Tables {
		tables = append(tables, tb.Name)
		if !ours(tb.Name) {
			t.Errorf("the core migrations install table %s", tb.Name)
		}
	}
	if !slices.Contains(tables, "refund_jobs") {
		t.Fatalf("the core target has no refund_jobs: %v", tables)
	}
	for _, r := range target.Routines {
		if !ours(r.Name) || (r.Table != "" && !ours(r.Table)) {
			t.Errorf("the core migrations install %s %s (on %q)", r.Kind, r.Name, r.Table)
		}
	}
}

// versionsOf lists the versions of dir's files, in order.
func versionsOf(t *testing.T, dir migrate.Dir) []string {
	t.Helper()
	return versions(t, func() (migrate.Dir, error) { return dir, nil })
}
