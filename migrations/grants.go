package migrations

import (
	"fmt"
	"strings"

	"github.com/fencekit/fencekit/ent"
)

// The application and the migrations connect with different accounts. The
// application's account can read and write rows the way the fenced layer
// does, and nothing more: no DELETE, no DROP, ALTER, TRIGGER or TRUNCATE, so
// that even a compromised service cannot remove the fences or the rows they
// guard. The triggers and the archival procedure run with the rights of the
// account that created them (the migration account), which is how a job
// registers its key in refund_jobs_keys and how CALL refund_jobs_archive
// moves old rows without the application holding those rights itself. The
// application keeps INSERT on refund_jobs_keys for Enqueue's own
// registration, which inserts nothing where the triggers run and registers
// the key on TiDB; the trigger refuses a registration whose job does not
// exist, so the grant cannot register a key alone.

// AppGrants returns the GRANT statements of the application's
// least-privilege account (a quoted account name, e.g. 'app'@'%') on
// database db.
func AppGrants(db, account string) []string {
	q := "`" + strings.ReplaceAll(db, "`", "``") + "`"
	return []string{
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`refund_jobs` TO %s", q, account),
		fmt.Sprintf("GRANT SELECT, INSERT ON %s.`refund_jobs_keys` TO %s", q, account),
		fmt.Sprintf("GRANT SELECT ON %s.`refund_jobs_archive` TO %s", q, account),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`refunds` TO %s", q, account),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`refund_observations` TO %s", q, account),
		fmt.Sprintf("GRANT EXECUTE ON PROCEDURE %s.`refund_jobs_archive` TO %s", q, account),
		// The fleet's outbound budget: rows are created by budget.Open and
		// changed by Take and Return; never deleted.
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`provider_budgets` TO %s", q, account),
		// The fence's mode, read-only: a worker may say that the fence
		// observes; only the migration account changes it. The record of
		// violations and of mode changes is not the application's.
		fmt.Sprintf("GRANT SELECT ON %s.`%s` TO %s", q, ent.RefundJobFenceModeTable, account),
		// The operators' audit is append-only: the application records
		// and reads, and can neither change nor remove an entry (the
		// triggers refuse that even to the migration account). Approval
		// requests are decided once, by UPDATE (package operator).
		fmt.Sprintf("GRANT SELECT, INSERT ON %s.`refund_audit` TO %s", q, account),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`refund_approvals` TO %s", q, account),
		// The attempts log is append-only too: claims, takeovers and
		// resolutions add their rows; nobody changes or removes one (the
		// triggers refuse that even to the migration account).
		fmt.Sprintf("GRANT SELECT, INSERT ON %s.`%s` TO %s", q, ent.RefundJobAttemptsTable, account),
		// The calls log, append-only likewise: each write-back adds its
		// attempt's provider call.
		fmt.Sprintf("GRANT SELECT, INSERT ON %s.`refund_job_calls` TO %s", q, account),
		// The console's sessions and the operators' "I'm on it" marks:
		// created, used and ended (a session) or taken over and released
		// (a mark) by UPDATE; never deleted.
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`console_sessions` TO %s", q, account),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.`review_assignments` TO %s", q, account),
	}
}

// MigrationGrants returns the GRANT statements of the account that applies
// the migrations on database db: it owns the schema, the triggers and the
// procedure. With binary logging on, the server also needs
// log_bin_trust_function_creators=1 (or the account SUPER) to create
// triggers; see docs/migrations.md.
func MigrationGrants(db, account string) []string {
	q := "`" + strings.ReplaceAll(db, "`", "``") + "`"
	return []string{
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP, INDEX, REFERENCES, TRIGGER, "+
			"CREATE ROUTINE, ALTER ROUTINE, EXECUTE ON %s.* TO %s", q, account),
	}
}

// ScratchPrefix starts the name of every scratch database the migrations
// replay on (to recognise a database the plain client migrated, and for
// `refundd adopt`); each is dropped when done.
const ScratchPrefix = "fencekit_scratch_"

// ScratchGrants returns the GRANT statement that lets the migration
// account create, use and drop the scratch databases (ScratchPrefix…) on
// the server: Apply needs it only for a database that has tables but no
// revisions, `refundd adopt` always.
func ScratchGrants(account string) []string {
	return []string{"GRANT ALL PRIVILEGES ON `" + strings.ReplaceAll(ScratchPrefix, "_", `\_`) + "%`.* TO " + account}
}
