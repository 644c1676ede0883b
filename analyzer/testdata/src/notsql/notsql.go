// Package notsql holds text that mentions the table but is not SQL, or is
// SQL that does not write: never reported.
package notsql

import (
	"database/sql"
	"errors"
	"fmt"
	"log"
)

var errStale = errors.New("UPDATE refund_jobs failed: stale attempt")

func messages(db *sql.DB, id int, err error) error {
	log.Printf("UPDATE refund_jobs SET state for job %d failed: %v", id, err)
	log.Println("UPDATE refund_jobs affected 0 rows; re-reading")
	fmt.Println("update refund_jobs: done")
	if err != nil {
		return fmt.Errorf("UPDATE refund_jobs SET state = %q: %w", "ready", err)
	}
	_ = "UPDATE refund_jobs SET state = 'ready' WHERE id = 1"         // discarded
	const doc = "UPDATE refund_jobs SET state = 'ready' WHERE id = ?" // declared, never used
	// Dynamic reads are not reported.
	db.Query("SELECT * FROM refund_jobs WHERE id = " + fmt.Sprint(id))
	db.Query(fmt.Sprintf("SELECT * FROM refund_jobs WHERE state = '%s'", stateOf(id)))
	// Dynamic writes of other tables are not reported.
	db.Exec("UPDATE refunds SET status = 'paid' WHERE id = " + fmt.Sprint(id))
	return errStale
}

func stateOf(int) string { return "ready" }
