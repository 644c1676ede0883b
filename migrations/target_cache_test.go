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
	again, err := migrations.ReplayTarget(ctx, raw, dir)
	if err != nil || again != first {
		t.Fatalf("the same directory again: %p, %v; want the kept answer %p", again, err, first)
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
