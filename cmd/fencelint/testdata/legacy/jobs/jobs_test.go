package jobs

import (
	"database/sql"
	"testing"
)

// A test helper's unfenced write is debt too.
func resetJob(t *testing.T, db *sql.DB, id int64) {
	if _, err := db.Exec("UPDATE refund_jobs SET attempt = 0 WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
}
