package migrations

import (
	"context"
	"database/sql"

	"ariga.io/atlas/sql/migrate"
)

// WithFailAt makes Apply, run with the returned context, fail statement
// stmt (from 1) of the file with that version, as a server error halfway
// through the file would: the tests' seam for a file that fails midway.
func WithFailAt(ctx context.Context, version string, stmt int) context.Context {
	return context.WithValue(ctx, failAtKey{}, &failAt{version: version, stmt: stmt})
}

// ErrInjected is the error WithFailAt's statement fails with.
var ErrInjected = errInjected

// Replays is how many times ReplayTarget replayed dir for db's server and
// account.
func Replays(ctx context.Context, db *sql.DB, dir migrate.Dir) int {
	key := targetKey(ctx, db, dir)
	targets.Lock()
	defer targets.Unlock()
	return targets.replays[key]
}

// ReplayUncached replays dir as ReplayTarget does, without its cache.
var ReplayUncached = replayTarget
