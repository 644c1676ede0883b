// Package suppress checks //fencelint:allow directives.
package suppress

import "database/sql"

func directives(db *sql.DB) {
	// A reason on the line above suppresses.
	//fencelint:allow archival path for terminal rows, see DESIGN.md
	db.Exec("UPDATE refund_jobs SET state = 'archived' WHERE id = ?")

	// A reason on the same line suppresses.
	db.Exec("UPDATE refund_jobs SET state = 'archived' WHERE id = ?") //fencelint:allow test fixture resets a row

	// No reason: it does not suppress and is itself reported.
	// want +1 `//fencelint:allow needs a reason`
	//fencelint:allow
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `unfenced UPDATE of refund_jobs`

	// A directive that suppresses nothing is reported.
	//fencelint:allow the query below used to be unfenced // want `//fencelint:allow suppresses nothing`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?")

	// A directive two lines above does not reach.
	//fencelint:allow too far away // want `suppresses nothing`

	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `unfenced UPDATE of refund_jobs`

	// Not a directive: it must start the comment with no space.
	// fencelint:allow spaced out
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `unfenced UPDATE of refund_jobs`
}
