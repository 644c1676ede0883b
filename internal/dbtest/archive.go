package dbtest

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Archive moves the terminal jobs last changed before cutoff (an SQL
// expression, at least 30 days in the past) into refund_jobs_archive, as the
// engine allows, with root's rights: CALL refund_jobs_archive where the
// database's fence exists; on TiDB, which has no procedures, the procedure's
// statements in one transaction (docs/tidb.md, "Archival"). Their keys stay
// in refund_jobs_keys either way.
func (d *DB) Archive(cutoff string) {
	d.t.Helper()
	db := d.RawDB()
	if d.Engine().DatabaseFence {
		if _, err := db.Exec("CALL refund_jobs_archive(" + cutoff + ")"); err != nil {
			d.t.Fatalf("archive before %s: %v", cutoff, err)
		}
		return
	}
	if err := archive(context.Background(), db, cutoff); err != nil {
		d.t.Fatalf("archive before %s: %v", cutoff, err)
	}
}

// archive is the body of the archival procedure, for engines without it.
func archive(ctx context.Context, db *sql.DB, cutoff string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	// The cutoff is read once, as microseconds on the server's real clock,
	// and must be at least 30 days old by that clock.
	var at, limit int64
	if err := tx.QueryRowContext(ctx, "SELECT "+fencedwrite.Micros(cutoff)+", "+fencedwrite.ClockMicros+" - 30 * 86400 * 1000000").Scan(&at, &limit); err != nil {
		return err
	}
	if at > limit {
		return fmt.Errorf("the cutoff must be at least 30 days in the past")
	}
	before := fmt.Sprintf("TIMESTAMPADD(MICROSECOND, %d, TIMESTAMP'1970-01-01 00:00:00')", at)
	if _, err := tx.ExecContext(ctx, "INSERT INTO `refund_jobs_archive` SELECT * FROM `refund_jobs` "+
		"WHERE `state` IN ('succeeded', 'failed') AND `updated_at` < "+before+" FOR UPDATE"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM `refund_jobs` WHERE `state` IN ('succeeded', 'failed') AND `updated_at` < "+before); err != nil {
		return err
	}
	return tx.Commit()
}
