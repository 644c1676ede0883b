//go:build !tidb

package migrations_test

import (
	"context"
	"testing"

	"ariga.io/atlas/sql/migrate"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
)

// ReplayTarget keeps its answer per server, account and directory: asked
// again for the same files it answers from memory, and a directory with
// other files is replayed (here: all but the last file, an earlier
// version).
func TestReplayTargetIsKeptPerDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := dbtest.New(t).RawDB()
	dir, err := migrations.DirFor(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	first, err := migrations.ReplayTarget(ctx, raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	replays := migrations.Replays(ctx, raw, dir)
	again, err := migrations.ReplayTarget(ctx, raw, dir)
	if err != nil || replays == 0 || migrations.Replays(ctx, raw, dir) != replays {
		t.Fatalf("the same directory again: %v, %d replays before, %d after; want the kept answer, no replay", err, replays, migrations.Replays(ctx, raw, dir))
	}
	// Each caller gets its own copy: Atlas's diff writes to the schemas it
	// compares, and two plans of one process (the tests' parallel ones)
	// raced on a shared one.
	if again == first || again.Schema == first.Schema || again.Version != first.Version || len(again.Routines) != len(first.Routines) {
		t.Fatalf("the kept answer again: %p (schema %p), want a copy of %p (schema %p) with the same version and routines", again, again.Schema, first, first.Schema)
	}
	if len(again.Schema.Tables) != len(first.Schema.Tables) {
		t.Fatalf("the copy has %d tables, the kept answer %d", len(again.Schema.Tables), len(first.Schema.Tables))
	}
	for i, tab := range again.Schema.Tables {
		orig := first.Schema.Tables[i]
		if tab.Name != orig.Name || len(tab.Columns) != len(orig.Columns) || len(tab.Indexes) != len(orig.Indexes) || len(tab.ForeignKeys) != len(orig.ForeignKeys) {
			t.Fatalf("the copy's table %s differs from the kept answer's %s", tab.Name, orig.Name)
		}
		for j, col := range tab.Columns {
			if col.Name != orig.Columns[j].Name || col.Type.Raw != orig.Columns[j].Type.Raw {
				t.Fatalf("the copy's column %s.%s (%s) differs from the kept answer's (%s)", tab.Name, col.Name, col.Type.Raw, orig.Columns[j].Type.Raw)
			}
		}
	}
	jobs, ok := again.Schema.Table("refund_jobs")
	if !ok || jobs.Schema != again.Schema {
		t.Fatal("the copy's refund_jobs does not point back to the copy's schema")
	}
	col, ok := jobs.Column("attempt")
	if !ok {
		t.Fatal("the copy's refund_jobs has no attempt column")
	}
	col.Type.Raw = "mutated by the test"
	if orig, _ := first.Schema.Table("refund_jobs"); orig == jobs {
		t.Fatal("the copy shares its tables")
	} else if c, _ := orig.Column("attempt"); c.Type.Raw == "mutated by the test" {
		t.Fatal("a change to one caller's copy reached another's")
	}
	files, err := dir.Files()
	if err != nil || len(files) < 2 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	earlier := &migrate.MemDir{}
	for _, f := range files[:len(files)-1] {
		if err := earlier.WriteFile(f.Name(), f.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	other, err := migrations.ReplayTarget(ctx, raw, earlier)
	if err != nil {
		t.Fatal(err)
	}
	if other == first || other.Version != files[len(files)-2].Version() || first.Version != files[len(files)-1].Version() {
		t.Fatalf("a directory without its last file: version %s (the whole one: %s), want %s", other.Version, first.Version, files[len(files)-2].Version())
	}
}

// A plan killed while it replays leaves its scratch database behind. The
// next replay on the server drops it, and only it: a database whose replay
// is alive (its lock held by the connection that made it) stays.
func TestReplayDropsTheScratchDatabasesOfDeadReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := dbtest.New(t).RawDB()
	dir, err := migrations.DirFor(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	dead, alive := migrations.ScratchPrefix+"dead0000test", migrations.ScratchPrefix+"alive000test"
	holder, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var got int
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", alive).Scan(&got); err != nil || got != 1 {
		t.Fatalf("lock %s: %d, %v", alive, got, err)
	}
	for _, name := range []string{dead, alive} {
		if _, err := raw.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = raw.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+alive+"`") })
	if _, err := migrations.ReplayUncached(ctx, raw, dir); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		var n int
		if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if exists(dead) || !exists(alive) {
		t.Fatalf("after a replay: the dead replay's database exists %v (want false), the live one's %v (want true)", exists(dead), exists(alive))
	}
}
