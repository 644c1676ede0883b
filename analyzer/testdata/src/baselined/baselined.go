// Package baselined is checked with testdata/baselined.baseline: findings
// it accepts are not reported, new ones are, and so are its entries that no
// longer match a finding.
package baselined // want `baseline .*baselined.baseline:11: file deleted.go no longer exists: remove the entry from the baseline: baselined deleted.go Gone 1 unfenced UPDATE`

import "database/sql"

// Old is accepted debt: one finding, one entry.
func Old(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?")
}

// Moved is accepted debt too; lines above it changed since the baseline
// was written, and the entry has no line number.
func (s *store) Moved(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET state = 'failed' WHERE id = ? AND state = 'running'")
}

type store struct{}

// New is a new unfenced write: reported.
func New(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `^unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?; add AND state = \? AND attempt = \?$`
}

// Grown had one accepted finding and now has two with the same message:
// which one is new cannot be told, so both are reported, saying so.
func Grown(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `unfenced UPDATE of refund_jobs: .* \[baseline .*baselined.baseline:8 accepts 1 like it in Grown, 2 found: fix the new one`
	db.Exec("UPDATE refund_jobs SET state = 'done' WHERE id = ?")  // want `\[baseline .*baselined.baseline:8 accepts 1 like it in Grown, 2 found`
}

// Fixed held two accepted findings; one was fixed, so the entry's count
// must come down.
func Fixed(db *sql.DB) { // want `baseline .*baselined.baseline:7: fixed 1 of 2: lower the entry's count to 1: baselined baselined.go Fixed 2 unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?")
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = ? AND attempt = ?")
}

// Clean was fixed entirely: its entry must go.
func Clean(db *sql.DB) { // want `baseline .*baselined.baseline:6: fixed: remove the entry from the baseline: baselined baselined.go Clean 1 unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = ? AND attempt = ?")
}

// Directive problems are never baselined.
func Directive(db *sql.DB) {
	// want +1 `//fencelint:allow needs a reason`
	//fencelint:allow
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `unfenced UPDATE of refund_jobs`
}

// init is package-level code's neighbour; the variable below is outside
// any function ("-").
var requeue = func(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET attempt = 0 WHERE id = ?")
}

var db *sql.DB

// init's finding is accepted; the init of baselined_other.go is not: an
// entry names its file.
func init() {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?")
}
