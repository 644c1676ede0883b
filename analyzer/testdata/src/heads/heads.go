// Package heads checks that a string used only as the head of a longer
// string is judged in the longer string, not alone.
package heads

import (
	"database/sql"
	"fmt"
)

const base = "UPDATE refund_jobs SET state = ? WHERE id = ?"

// A constant that only heads longer constants is never judged alone.
const fenced = base + " AND state = ? AND attempt = ?"

const unfencedLonger = base + " AND state = ?"

func constants(db *sql.DB) {
	db.Exec(fenced)
	db.Exec(unfencedLonger) // want `lacks attempt = \?`
	db.Exec(base + " AND state = ? AND attempt = ?")
	db.Exec(base) // want `unfenced UPDATE of refund_jobs`
}

func locals(db *sql.DB, extra bool) {
	// Extended before use: judged as a whole at the +=.
	q := "UPDATE refund_jobs SET state = ? WHERE id = ?"
	q += " AND state = ? AND attempt = ?"
	db.Exec(q)

	// Extended with something that does not fence: reported at the +=.
	r := "UPDATE refund_jobs SET state = ? WHERE id = ?"
	r += " AND state = ?" // want `lacks attempt = \?`
	db.Exec(r)

	// Used alone on one path: the head is reported, and so is the longer
	// string that still lacks state.
	s := "UPDATE refund_jobs SET state = ? WHERE id = ?" // want `lacks state = \? and attempt = \?`
	if extra {
		s += " AND attempt = ?" // want `lacks state = \?`
	}
	db.Exec(s)

	// A fenced local reaching the sink is not reported again.
	ok := "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?"
	db.Exec(ok)

	// A local used alone.
	bad := "UPDATE refund_jobs SET state = 'ready' WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
	db.Exec(bad)

	// A run-time concatenation of constants, in a call.
	t := "UPDATE refund_jobs SET state = ?"
	db.Exec(t + " WHERE id = ?") // want `unfenced UPDATE of refund_jobs`

	// fmt.Sprintf of locals that are constants at run time.
	table := "refund_jobs"
	db.Exec(fmt.Sprintf("UPDATE %s SET state = ? WHERE id = ?", table)) // want `unfenced UPDATE of refund_jobs`
}

// An unexported package variable used only as a head.
var prefix = "UPDATE refund_jobs SET state = ? WHERE id = ?"

func globals(db *sql.DB) {
	db.Exec(prefix + " AND state = ? AND attempt = ?")
	db.Exec(prefix + " AND attempt = ?") // want `lacks state = \?`
}

func declared(db *sql.DB, id int) {
	// var declarations are followed like := ones.
	var q = "UPDATE refund_jobs SET state = ? WHERE id = ?"
	q += " AND state = ? AND attempt = ?"
	db.Exec(q)

	var bad = "UPDATE refund_jobs SET state = ? WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
	db.Exec(bad)

	// A local captured by a closure is used alone.
	captured := "UPDATE refund_jobs SET state = ? WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
	func() { db.Exec(captured) }()

	// Overwritten before any use: the first value is never used.
	dead := "UPDATE refund_jobs SET state = ? WHERE id = ?"
	dead = "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?"
	db.Exec(dead)
}

// A constant returned by a helper is judged at the return.
func resetSQL() string {
	return "UPDATE refund_jobs SET state = 'ready' WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
}

func viaHelper(db *sql.DB) {
	db.Exec(resetSQL()) // not reported again here
}

// A package variable used alone somewhere is judged at its declaration.
var mixed = "UPDATE refund_jobs SET state = ? WHERE id = ?" // want `unfenced UPDATE of refund_jobs`

func mixedUses(db *sql.DB) {
	db.Exec(mixed + " AND state = ? AND attempt = ?")
	db.Exec(mixed)
}

// Exported package variables may be used alone by other packages.
var Exported = "UPDATE refund_jobs SET state = ? WHERE id = ?" // want `unfenced UPDATE of refund_jobs`

func exportedUse(db *sql.DB) {
	db.Exec(Exported + " AND state = ? AND attempt = ?")
}

// A type with a String method: fmt.Sprintf cannot be evaluated statically.
type tableName string

func (t tableName) String() string { return "refund_jobs" } // want String:"returns\\(\"refund_jobs\"\\)"

func stringer(db *sql.DB, t tableName) {
	db.Exec(fmt.Sprintf("UPDATE %v SET state = ? WHERE id = ?", tableName("x")))
}
