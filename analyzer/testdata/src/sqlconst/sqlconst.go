package sqlconst

import (
	"context"
	"database/sql"
	"fmt"

	"queries"
)

const table = "refund_jobs"

func updates(ctx context.Context, db *sql.DB, tx *sql.Tx) {
	// The seed's bug.
	db.Exec("UPDATE refund_jobs SET state='ready' WHERE id=?") // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?; add AND state = \? AND attempt = \?`

	// Fenced writes, in several spellings.
	db.Exec("UPDATE refund_jobs SET state = 'succeeded' WHERE id = ? AND state = 'running' AND attempt = ?")
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND ? = state AND ? = attempt")
	db.Exec("update refund_jobs set state = 'failed' where id = 1 and state = 'running' and attempt = 7")
	tx.ExecContext(ctx, "UPDATE refund_jobs SET state = :next WHERE id = :id AND state = :state AND attempt = :attempt")
	db.Exec("UPDATE refund_jobs SET state = ? WHERE (id = ? AND (state = ?)) AND (attempt = ?)")
	db.Exec("UPDATE `refund_jobs` SET `state` = ? WHERE `id` = ? AND `state` = ? AND `attempt` = ?")
	db.Exec("UPDATE fk.refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?")
	db.Exec("UPDATE refund_jobs AS j SET j.state = ? WHERE j.id = ? AND j.state = ? AND j.attempt = ?")

	// Missing one column.
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ?")     // want `WHERE lacks attempt = \?;`
	db.Exec("UPDATE refund_jobs SET attempt = ? WHERE id = ? AND attempt = ?") // want `WHERE lacks state = \?;`
	// Named parameters, one missing.
	db.Exec("UPDATE refund_jobs SET state = :next WHERE id = :id AND attempt = :attempt") // want `WHERE lacks state = \?;`
	// Schema-qualified and back-quoted.
	db.Exec("UPDATE `fk`.`refund_jobs` SET state = ? WHERE id = ?") // want `unfenced UPDATE of refund_jobs`
	// Alias: the predicate is on the alias.
	db.Exec("UPDATE refund_jobs j SET j.state = ? WHERE j.id = ? AND j.state = ?") // want `lacks attempt = \?`
	// Upper/lower case of the table name does not matter.
	db.Exec("UPDATE REFUND_JOBS SET state = ? WHERE id = ?") // want `unfenced UPDATE of refund_jobs`

	// Predicates that do not count.
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt >= ?")         // want `lacks attempt = \?`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = state AND attempt = ?")      // want `lacks state = \?`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = attempt+0")  // want `lacks attempt = \?`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = LOWER(state) AND attempt=?") // want `lacks state = \?`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? /* AND attempt = ? */")    // want `lacks attempt = \?`
	// want +1 `lacks attempt = \?`
	db.Exec(`UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? -- AND attempt = ?
	`)
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id IN (SELECT id FROM refund_jobs WHERE state = ? AND attempt = ?)") // want `lacks state = \? and attempt = \?`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND (state = ? OR attempt = ?)")                              // want `lacks state = \? and attempt = \?`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND NOT (attempt <> ?)")                        // want `lacks attempt = \?`

	// Multi-table UPDATE.
	db.Exec("UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET r.status = 'paid' WHERE j.id = ?") // writes only refunds
	db.Exec("UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = 'succeeded', r.status = 'paid' WHERE j.id = ? AND j.state = ? AND j.attempt = ?")
	db.Exec("UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = 'x' WHERE j.id = ? AND r.state = ? AND r.attempt = ?") // want `lacks state = \? and attempt = \? qualified with j; add AND j.state = \? AND j.attempt = \?`
	db.Exec("UPDATE refunds r, refund_jobs j SET state = 'x' WHERE state = ? AND attempt = ?")                                           // want `qualified with j`

	// Upserts and REPLACE cannot be fenced.
	db.Exec("INSERT INTO refund_jobs (operation_key, state) VALUES (?, 'ready') ON DUPLICATE KEY UPDATE state = 'ready'") // want `INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows and cannot be fenced`
	db.Exec("REPLACE INTO refund_jobs (id, state) VALUES (?, ?)")                                                         // want `REPLACE writes existing refund_jobs rows`
	// Plain INSERT (enqueue) and reads are fine.
	db.Exec("INSERT INTO refund_jobs (operation_key, state, attempt) VALUES (?, 'ready', 0)")
	db.Exec("INSERT INTO refunds (job_id) VALUES (?) ON DUPLICATE KEY UPDATE job_id = job_id")
	db.QueryRow("SELECT state, attempt FROM refund_jobs WHERE id = ? FOR UPDATE")
	db.Query("SELECT id FROM refund_jobs WHERE state = 'ready' AND next_run_at <= UTC_TIMESTAMP(6) LIMIT 10")
	// DELETE is judged only under -delete.
	db.Exec("DELETE FROM refund_jobs WHERE id = ?")

	// Multi-statement strings: each statement is judged.
	db.Exec("SELECT 1; UPDATE refund_jobs SET state = 'x' WHERE id = 1") // want `unfenced UPDATE of refund_jobs`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?; UPDATE refunds SET status = ? WHERE id = ?")

	// The lease regression, in several spellings.
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? AND lease_until > NOW()")              // want `UPDATE of refund_jobs requires lease_until to be in the future: lease expiry must not revoke write rights`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? AND UTC_TIMESTAMP(6) < lease_until")   // want `requires lease_until to be in the future`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? AND lease_until >= CURRENT_TIMESTAMP") // want `requires lease_until to be in the future`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? AND lease_until > NOW(6)")             // want `requires lease_until to be in the future`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? AND SYSDATE() <= lease_until")         // want `requires lease_until to be in the future`
	db.Exec("UPDATE refund_jobs j SET j.state = ? WHERE j.id = ? AND j.state = ? AND j.attempt = ? AND (j.lease_until > ?)")    // want `requires lease_until to be in the future`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ? AND lease_until > NOW()")                                            // want `lacks state = \? and attempt = \?.*; UPDATE of refund_jobs requires lease_until`
	// A takeover checks that the lease has expired: fine.
	db.Exec("UPDATE refund_jobs SET attempt = attempt + 1, lease_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, next_action = 'reconcile' WHERE id = ? AND state = 'running' AND attempt = ? AND lease_until < UTC_TIMESTAMP(6)")

	// Constants from this file, another file and another package, judged at the use.
	db.Exec(unfencedHere)     // want `unfenced UPDATE of refund_jobs`
	db.Exec(queries.Unfenced) // want `unfenced UPDATE of refund_jobs`
	db.Exec(queries.Fenced)
	db.Exec(fencedElsewhere)
	// Constant folding: concatenations and constant fmt.Sprintf.
	db.Exec("UPDATE " + table + " SET state = ? WHERE id = ?")                       // want `unfenced UPDATE of refund_jobs`
	db.Exec(fmt.Sprintf("UPDATE %s SET state = ? WHERE id = %d", queries.Table, 42)) // want `unfenced UPDATE of refund_jobs`
	db.Exec(fmt.Sprintf("UPDATE %s SET state = ? WHERE id = ? AND state = ? AND attempt = %d", table, 7))
	db.Exec("UPDATE " + queries.Table + " SET state = ? WHERE id = ?" + " AND state = ? AND attempt = ?")
}

const unfencedHere = "UPDATE refund_jobs SET state = 'ready' WHERE id = ?"

// A table-driven list: each element is a use.
var all = []string{
	"UPDATE refund_jobs SET next_run_at = UTC_TIMESTAMP(6) WHERE id = ?", // want `unfenced UPDATE of refund_jobs`
	"UPDATE refund_jobs SET next_run_at = UTC_TIMESTAMP(6) WHERE id = ? AND state = 'ready' AND attempt = ?",
}
