// Package tables is checked with
// -tables=refund_jobs,payouts:status:version:held_until:declared_version,audit_entries.
package tables

import (
	"database/sql"

	"example.com/app/ent"
)

func writes(db *sql.DB, client *ent.Client) {
	db.Exec("UPDATE payouts SET status = 'paid' WHERE id = ? AND state = ? AND attempt = ?") // want `unfenced UPDATE of payouts: WHERE lacks status = \? and version = \?; add AND status = \? AND version = \?`
	db.Exec("UPDATE payouts SET status = 'paid' WHERE id = ? AND status = ? AND version = ?")
	db.Exec("UPDATE payouts SET status = 'paid' WHERE id = ? AND status = ? AND version = ? AND held_until > NOW()")                    // want `UPDATE of payouts requires held_until to be in the future`
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ?")                                                                            // want `unfenced UPDATE of refund_jobs`
	db.Exec("UPDATE refund_jobs j JOIN payouts p ON p.job_id = j.id SET j.state = ?, p.status = ? WHERE j.state = ? AND j.attempt = ?") // want `unfenced UPDATE of payouts: WHERE lacks status = \? and version = \? qualified with p`
	db.Exec("UPDATE refunds SET state = ? WHERE id = ?")
	db.Exec("UPDATE payouts SET status = 'paid', declared_version = version WHERE id = ? AND status = ? AND version = ?") // want `UPDATE of payouts sets declared_version from the row's own version`
	db.Exec("UPDATE payouts SET status = 'paid', declared_version = ? WHERE id = ? AND status = ? AND version = ?")
	db.Exec("UPDATE refund_jobs SET state = 'x', writer_attempt = attempt WHERE id = ? AND state = ? AND attempt = ?") // want `UPDATE of refund_jobs sets writer_attempt from the row's own attempt`
	client.AuditEntry.Update()                                                                                         // want `AuditEntry.Update bypasses the fence on audit_entries`
}
