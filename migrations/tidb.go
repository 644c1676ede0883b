package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
	"github.com/go-sql-driver/mysql"
)

// TiDBDir returns the embedded migration directory for TiDB
// (migrations/tidb, Core.TiDBDir). It holds every file of this directory
// that has neither triggers nor stored procedures (docs/tidb.md), unchanged,
// and a fence file of its own with only the fence's tables;
// TestTiDBDirectoryFollowsMigrations keeps the two directories in step.
func TiDBDir() (migrate.Dir, error) { return Core.TiDBDir() }

// IsTiDB reports whether db is connected to TiDB (its VERSION() says so, as
// in 8.0.11-TiDB-v9.0.0).
func IsTiDB(ctx context.Context, db *sql.DB) (bool, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return false, fmt.Errorf("migrate: read server version: %w", err)
	}
	return strings.Contains(v, "TiDB"), nil
}

// DirFor returns the migration directory for the server db is connected to
// (Core.DirFor): TiDBDir on TiDB, Dir on MySQL and MariaDB.
func DirFor(ctx context.Context, db *sql.DB) (migrate.Dir, error) { return Core.DirFor(ctx, db) }

// TiDBGrants returns grants without their grants on stored procedures,
// which TiDB does not have: TiDBGrants(AppGrants) is the application's
// account on TiDB, which has no archival procedure to EXECUTE
// (docs/tidb.md). MigrationGrants needs no change there.
func TiDBGrants(grants func(db, account string) []string) func(db, account string) []string {
	return func(db, account string) []string {
		var out []string
		for _, g := range grants(db, account) {
			// No procedures, and no fence mode (it needs triggers).
			if !strings.Contains(g, " ON PROCEDURE ") && !strings.Contains(g, "_fence_mode`") {
				out = append(out, g)
			}
		}
		return out
	}
}

// lock takes the advisory lock LockName for Apply, waiting up to
// LockTimeout. TiDB implements GET_LOCK with a pessimistic transaction on
// an internal table, and when several sessions wait for the same lock it
// may give up with "pessimistic lock retry limit reached" (error 1105)
// instead of waiting: lock asks again until LockTimeout has passed, as
// MySQL's and MariaDB's GET_LOCK would have waited.
func lock(ctx context.Context, l schema.Locker) (schema.UnlockFunc, error) {
	deadline := time.Now().Add(LockTimeout)
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		unlock, err := l.Lock(ctx, LockName, time.Until(deadline).Round(time.Second))
		if err == nil || !retryLimitReached(err) || time.Now().Add(pause).After(deadline) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// retryLimitReached reports whether err is TiDB giving up on a contended
// pessimistic lock.
func retryLimitReached(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1105 && strings.Contains(me.Message, "pessimistic lock retry limit reached")
}
