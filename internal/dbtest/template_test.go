package dbtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"

	transcode "github.com/fencekit/fencekit/examples/transcode/migrations"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// TestTemplateCopyIsTheMigratedSchema: a test's database (a copy of the
// migrated template), of fencekit's migrations or of the transcoding
// example's, is the database their Apply makes: the same
// tables, columns, indexes and foreign keys (Atlas plans no change between
// them), the same rows, the same triggers in the same order, and the same
// procedures, each under the sql_mode it was created with.
func TestTemplateCopyIsTheMigratedSchema(t *testing.T) {
	t.Parallel()
	for _, src := range []migrations.Source{migrations.Core, transcode.Source} {
		t.Run(src.Name, func(t *testing.T) {
			t.Parallel()
			templateCopyIsMigrated(t, src)
		})
	}
}

// templateCopyIsMigrated compares a copy of src's template with a database
// that src's migrations were applied to.
func templateCopyIsMigrated(t *testing.T, src migrations.Source) {
	ctx := t.Context()
	start := time.Now()
	copied := dbtest.NewFrom(t, src)
	t.Logf("%s: dbtest.NewFrom (a copy of the template): %v", src.Name, time.Since(start))

	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name, drop, err := devdb.Create(ctx, cfg, "migrated")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	mc := cfg.Clone()
	mc.DBName, mc.ParseTime = name, true
	migrated := dbtest.OpenDSN(t, mc.FormatDSN())
	start = time.Now()
	if _, err := src.Apply(ctx, migrated); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: Apply: %v", src.Name, time.Since(start))
	raw := copied.RawDB()

	inspect := func(db *sql.DB, name string) *schema.Schema {
		drv, err := atlasmysql.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		s, err := drv.InspectSchema(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Name = ""
		return s
	}
	drv, err := atlasmysql.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := drv.SchemaDiff(inspect(migrated, name), inspect(raw, copied.Name))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) > 0 {
		plan, _ := drv.PlanChanges(ctx, "diff", changes)
		var b strings.Builder
		for _, c := range plan.Changes {
			fmt.Fprintln(&b, c.Cmd)
		}
		t.Errorf("the copy differs from the migrated database:\n%s", b.String())
	}

	objects := map[string]string{
		"triggers": "SELECT CONCAT_WS(' | ', TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER, SQL_MODE, ACTION_STATEMENT) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY 1",
		"routines": "SELECT CONCAT_WS(' | ', ROUTINE_TYPE, ROUTINE_NAME, SQL_MODE, ROUTINE_DEFINITION) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? ORDER BY 1",
		"tables":   "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY 1",
	}
	for what, q := range objects {
		want, got := dbtest.Column(t, migrated, q, name), dbtest.Column(t, raw, q, copied.Name)
		if !slices.Equal(want, got) {
			t.Errorf("%s differ:\nmigrated: %q\ncopy:     %q", what, want, got)
		}
		if what == "tables" {
			for _, table := range want {
				// When a row was written differs (the revisions' execution
				// times, a row's timestamps); everything else is the same.
				cols := dbtest.Column(t, raw, "SELECT CONCAT('`', COLUMN_NAME, '`') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND DATA_TYPE NOT IN ('datetime', 'timestamp') AND COLUMN_NAME <> 'execution_time' ORDER BY ORDINAL_POSITION", copied.Name, table)
				q := "SELECT " + strings.Join(cols, ", ") + " FROM `" + table + "`"
				if w, g := rowsOf(t, migrated, q), rowsOf(t, raw, q); !slices.Equal(w, g) {
					t.Errorf("rows of %s differ:\nmigrated: %q\ncopy:     %q", table, w, g)
				}
			}
		}
	}
}

func rowsOf(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, string(v))
		}
		out = append(out, strings.Join(parts, ","))
	}
	slices.Sort(out)
	return out
}
