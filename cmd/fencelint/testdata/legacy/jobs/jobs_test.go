package jobs

import "database/sql"

// A test helper's unfenced write is debt too. (This test file imports no
// "testing": fewer packages for go vet to analyse cold.)
func resetJob(db *sql.DB, id int64) error {
	_, err := db.Exec("UPDATE refund_jobs SET attempt = 0 WHERE id = ?", id)
	return err
}
