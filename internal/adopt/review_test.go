//go:build !tidb

package adopt_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
)

// columnType is a column's full type as the server shows it.
func columnType(t *testing.T, db *sql.DB, table, col string) string {
	t.Helper()
	var typ string
	if err := db.QueryRow("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?", table, col).Scan(&typ); err != nil {
		t.Fatalf("%s.%s: %v", table, col, err)
	}
	return typ
}

// wantMapped checks that every row of before is in db with its state and
// action mapped, and the rest of it as the team wrote it.
func wantMapped(t *testing.T, db *sql.DB, before []teamRow) {
	t.Helper()
	after := teamRows(t, db)
	if len(after) != len(before) {
		t.Fatalf("%d rows before, %d after", len(before), len(after))
	}
	for i, b := range before {
		want := b
		if s, ok := states[b.state]; ok {
			want.state = s
		}
		if a, ok := actions[b.action]; ok {
			want.action = a
		}
		if after[i] != want {
			t.Errorf("row %d: %+v, want %+v", b.id, after[i], want)
		}
	}
}

// refused applies o to db, wants a refusal saying each of wants, and the
// database as it was.
func refused(t *testing.T, db *sql.DB, o adopt.Options, wants ...string) {
	t.Helper()
	before := dbtest.Fingerprint(t, db)
	_, err := adopt.Apply(context.Background(), db, o)
	if !errors.Is(err, adopt.ErrRefused) {
		t.Fatalf("apply: %v, want a refusal", err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not say %q:\n%v", w, err)
		}
	}
	if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 {
		t.Fatalf("a refused apply changed the database: %v", diff)
	}
}

// The team's state and next_action are ENUMs of its own names (fencekit's
// are not members), and it has an ENUM column of its own: apply widens
// state and next_action first, so that every row's value is mapped, and
// leaves the team's ENUM as it is.
func TestApplyAdoptsTeamEnums(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY state ENUM('pending','processing','done','error','review') CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL DEFAULT 'pending', "+
			"MODIFY next_action ENUM('refund','check') NOT NULL DEFAULT 'refund', ADD COLUMN priority ENUM('low','HIGH') NOT NULL DEFAULT 'low'")
		// state's collation is the table's default (what Atlas leaves out
		// of a MODIFY).
		exec(t, db, "ALTER TABLE refund_jobs DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
	})
	before := teamRows(t, db)
	o := options()
	widened := false
	o.Hooks.AfterStep = func(step string) {
		if step != "widen-columns" {
			return
		}
		widened = true
		// Widened with its collation, whatever the table's default is by
		// now (add-columns made it utf8mb4_bin).
		var typ, coll, def string
		if err := db.QueryRow("SELECT COLUMN_TYPE, COLLATION_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'refund_jobs' AND COLUMN_NAME = 'state'").Scan(&typ, &coll, &def); err != nil ||
			typ != "varchar(13)" || coll != "utf8mb4_general_ci" || def != "'pending'" {
			t.Errorf("state after widen-columns: %s %s default %s (%v), want varchar(13) utf8mb4_general_ci default 'pending'", typ, coll, def, err)
		}
	}
	if _, err := adopt.Apply(context.Background(), db, o); err != nil {
		t.Fatal(err)
	}
	if !widened {
		t.Error("no widen-columns step ran")
	}
	wantMapped(t, db, before)
	if typ := columnType(t, db, "refund_jobs", "priority"); typ != "enum('low','HIGH')" {
		t.Errorf("the team's own enum is %s after adopt, want enum('low','HIGH')", typ)
	}
	if extra := schemaDiffBut(t, db, []string{"merchant_note", "legacy_flag", "priority"}, []string{"team_state"}); len(extra) > 0 {
		t.Fatalf("the adopted schema differs from fencekit's:\n%s", strings.Join(extra, "\n"))
	}
}

// The team's state is a VARCHAR too short for fencekit's names, on a
// server whose sql_mode is not strict (the DSN's, here): apply widens it
// before it maps, and nothing is truncated ('review' becomes
// 'manual_review', not 'manual_rev' nor an empty string).
func TestApplyWidensANarrowStateWithoutStrictMode(t *testing.T) {
	t.Parallel()
	legacy := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY state CHAR(10) NOT NULL DEFAULT 'pending', MODIFY next_action VARCHAR(6) NOT NULL DEFAULT 'refund'")
	})
	db := dbtest.OpenDSN(t, dsnOf(t, legacy)+"&sql_mode=%27NO_ENGINE_SUBSTITUTION%27")
	before := teamRows(t, db)
	if _, err := adopt.Apply(context.Background(), db, options()); err != nil {
		t.Fatal(err)
	}
	wantMapped(t, db, before)
}

// A team table referencing refund_jobs.id, whose type adopt widens (INT to
// BIGINT): the foreign key is refused by name before anything changes. A
// foreign key from a team column of refund_jobs to a team table is kept,
// and so is one to refund_jobs.id when the type stays.
func TestApplyRefusesOrKeepsForeignKeys(t *testing.T) {
	t.Parallel()
	t.Run("to a widened id", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "CREATE TABLE refund_notes (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, job_id INT NOT NULL, "+
				"CONSTRAINT fk_notes_job FOREIGN KEY (job_id) REFERENCES refund_jobs (id))")
			exec(t, db, "INSERT INTO refund_notes (job_id) VALUES (1), (2)")
		})
		refused(t, db, options(), "fk_notes_job", "refund_notes", "refund_jobs.id")
	})
	t.Run("from a widened column", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "CREATE TABLE team_keys (op VARCHAR(64) NOT NULL PRIMARY KEY) CHARSET utf8mb4 COLLATE utf8mb4_bin")
			exec(t, db, "INSERT INTO team_keys SELECT operation_key FROM refund_jobs")
			exec(t, db, "ALTER TABLE refund_jobs ADD CONSTRAINT fk_job_key FOREIGN KEY (operation_key) REFERENCES team_keys (op)")
		})
		refused(t, db, options(), "fk_job_key", "refund_jobs.operation_key")
	})
	t.Run("kept", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "ALTER TABLE refund_jobs MODIFY id BIGINT NOT NULL AUTO_INCREMENT")
			exec(t, db, "CREATE TABLE payments (id INT NOT NULL PRIMARY KEY)")
			exec(t, db, "INSERT INTO payments VALUES (1), (2)")
			exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN payment_id INT NULL, ADD CONSTRAINT fk_job_payment FOREIGN KEY (payment_id) REFERENCES payments (id)")
			//fencelint:allow the team's own legacy table before adoption: no fence exists yet
			exec(t, db, "UPDATE refund_jobs SET payment_id = 1 WHERE id = 1")
			exec(t, db, "CREATE TABLE refund_notes (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, "+
				"CONSTRAINT fk_notes_job FOREIGN KEY (job_id) REFERENCES refund_jobs (id))")
			exec(t, db, "INSERT INTO refund_notes (job_id) VALUES (1), (2)")
		})
		// The online copy swaps in a new table by RENAME: the key to
		// refund_jobs would follow the old table, and the key from it is
		// not copied by CREATE TABLE … LIKE. Both are refused by name.
		refused(t, db, options(), "foreign key fk_notes_job (refund_notes.job_id -> refund_jobs.id)", "a key referencing refund_jobs would follow the old table",
			"foreign key fk_job_payment (refund_jobs.payment_id -> payments.id)", "CREATE TABLE … LIKE copies no foreign key", "-blocking-copy")
		// With -blocking-copy (ALGORITHM=COPY, LOCK=SHARED) they are kept.
		o := options()
		o.BlockingCopy = true
		p, err := adopt.NewPlan(context.Background(), db, o)
		if err != nil {
			t.Fatal(err)
		}
		if notes := strings.Join(p.Notes, "\n"); !strings.Contains(notes, "fk_notes_job") || !strings.Contains(notes, "fk_job_payment") {
			t.Errorf("the plan does not name the foreign keys it keeps:\n%s", notes)
		}
		if _, err := adopt.Apply(context.Background(), db, o); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE() AND CONSTRAINT_NAME IN ('fk_notes_job', 'fk_job_payment')").Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d of the 2 foreign keys left after adopt (%v)", n, err)
		}
	})
}

// A team trigger named as one of fencekit's is refused by name (apply
// would have taken it for the fence and left the table unfenced); one of
// its own name is named in the plan and runs beside the fence.
func TestApplyRefusesOrKeepsTeamTriggers(t *testing.T) {
	t.Parallel()
	t.Run("a fencekit name", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "CREATE TRIGGER refund_jobs_fence BEFORE UPDATE ON refund_jobs FOR EACH ROW SET NEW.legacy_flag = 1")
		})
		refused(t, db, options(), "trigger refund_jobs_fence", "not fencekit's")
	})
	t.Run("its own name", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "CREATE TABLE team_audit (job_id BIGINT NOT NULL, state VARCHAR(32) NOT NULL)")
			exec(t, db, "CREATE TRIGGER team_audit_jobs AFTER UPDATE ON refund_jobs FOR EACH ROW INSERT INTO team_audit VALUES (NEW.id, NEW.state)")
		})
		// The online copy's RENAME would leave the team's trigger on the
		// old table: refused by name.
		refused(t, db, options(), "trigger team_audit_jobs (AFTER UPDATE on refund_jobs)", "a trigger follows the old table", "-blocking-copy")
		// With -blocking-copy it is kept and runs beside the fence.
		o := options()
		o.BlockingCopy = true
		p, err := adopt.NewPlan(context.Background(), db, o)
		if err != nil {
			t.Fatal(err)
		}
		if notes := strings.Join(p.Notes, "\n"); !strings.Contains(notes, "trigger team_audit_jobs") {
			t.Errorf("the plan does not name the team's trigger:\n%s", notes)
		}
		if _, err := adopt.Apply(context.Background(), db, o); err != nil {
			t.Fatal(err)
		}
		var fence, audit int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = 'refund_jobs_fence'").Scan(&fence); err != nil || fence != 1 {
			t.Fatalf("the fence's trigger: %d (%v)", fence, err)
		}
		// The team's trigger still fires (map-values' updates fired it too).
		if err := db.QueryRow("SELECT COUNT(*) FROM team_audit WHERE state = 'manual_review'").Scan(&audit); err != nil || audit == 0 {
			t.Fatalf("the team's trigger did not fire: %d (%v)", audit, err)
		}
	})
}

// Under a case-insensitive collation, 'Pending' and 'pending ' are equal
// to 'pending' for the server; the mapping is byte-wise: a value not
// declared byte for byte is refused by name, never merged by the
// collation. Declared, 'Pending' is mapped and only it.
func TestMappingIsByteWiseUnderACaseInsensitiveCollation(t *testing.T) {
	t.Parallel()
	ci := func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY state VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL DEFAULT 'pending'")
		exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state) VALUES ('k-7', 'pay-7', 700, 'EUR', 'Pending')")
	}
	t.Run("undeclared", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			ci(db)
			exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state) VALUES ('k-8', 'pay-8', 800, 'EUR', 'pending ')")
		})
		refused(t, db, options(), `state "Pending"`, "id 7", `state "pending "`, "id 8")
	})
	t.Run("declared", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) { ci(db) })
		o := options()
		o.States = map[string]string{"Pending": "running"}
		for k, v := range states {
			o.States[k] = v
		}
		if _, err := adopt.Apply(context.Background(), db, o); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRow("SELECT GROUP_CONCAT(state ORDER BY id) FROM refund_jobs WHERE id IN (1, 6, 7)").Scan(&got); err != nil || got != "ready,ready,running" {
			t.Fatalf("states of ids 1, 6, 7: %q (%v), want ready,ready,running", got, err)
		}
	})
}

// Ids of 0 and below (a signed column), an id one below the top of BIGINT
// (the batch after it would overflow) and a gap of billions: every row is mapped, and registered and opened in the
// ledger by the backfills, which step over the gap.
func TestApplyKeepsIdsAtTheEdges(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY id BIGINT NOT NULL AUTO_INCREMENT")
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range []string{
			"SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')",
			"INSERT INTO refund_jobs (id, operation_key, payment_ref, amount_minor, currency, state) VALUES (0, 'k-zero', 'p', 1, 'EUR', 'pending'), " +
				"(-5, 'k-neg', 'p', 1, 'EUR', 'done'), (9223372036854775806, 'k-top', 'p', 1, 'EUR', 'pending'), (4000000000, 'k-gap', 'p', 1, 'EUR', 'review')",
		} {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})
	before := teamRows(t, db)
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatal(err)
	}
	wantMapped(t, db, before)
	var keys, ledgerRows int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM refund_jobs_keys), (SELECT COUNT(*) FROM refunds)").Scan(&keys, &ledgerRows); err != nil || keys != len(before) || ledgerRows != len(before) {
		t.Fatalf("keys %d, ledger rows %d, want %d each (%v)", keys, ledgerRows, len(before), err)
	}
	var epoch int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs WHERE YEAR(created_at) = 1970 OR YEAR(next_run_at) = 1970").Scan(&epoch); err != nil || epoch != 0 {
		t.Fatalf("%d rows kept the temporary times (%v)", epoch, err)
	}
}

// An unsigned BIGINT id holding a value above fencekit's signed BIGINT is
// refused by name, not failed on.
func TestPlanRefusesAnUnsignedIdAboveBigint(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT")
		exec(t, db, "INSERT INTO refund_jobs (id, operation_key, payment_ref, amount_minor, currency, state) VALUES (?, 'k-huge', 'p', 1, 'EUR', 'pending')", uint64(math.MaxInt64)+10)
	})
	refused(t, db, options(), "refund_jobs.id has reached 9223372036854775817", "bigint")
}

// A mapping whose team name is a fencekit name would be ignored (the rows
// already hold a fencekit name): it is refused by flag. Two team names
// mapped onto one fencekit name are allowed.
func TestMappingOfAFencekitNameIsRefused(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, nil)
	o := options()
	o.States = map[string]string{"ready": "running"}
	if _, err := adopt.NewPlan(context.Background(), db, o); err == nil || !strings.Contains(err.Error(), "states") || !strings.Contains(err.Error(), `"ready" is a fencekit name`) {
		t.Fatalf("plan with -states ready=running: %v", err)
	}
	o = options()
	o.States = map[string]string{"pending": "ready", "processing": "ready", "done": "succeeded", "error": "failed", "review": "manual_review"}
	if _, err := adopt.NewPlan(context.Background(), db, o); err != nil {
		t.Fatalf("two team names onto ready: %v", err)
	}
}

// Apply stopped after part of the fence was created (simulated: stopped
// before catch-up, two of the fence's triggers dropped): running it again
// takes the fence's own triggers for fencekit's (no refusal), creates the
// missing ones and finishes.
func TestApplyAgainAfterAnInterruptedFence(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	o := options()
	o.Hooks.BeforeStep = func(step string) {
		if step == "catch-up" {
			cancel()
		}
	}
	if _, err := adopt.Apply(ctx, db, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply stopped before catch-up: %v", err)
	}
	exec(t, db, "DROP TRIGGER refund_jobs_register_key")
	exec(t, db, "DROP TRIGGER refunds_follow_job")
	if _, err := adopt.Apply(context.Background(), db, options()); err != nil {
		t.Fatalf("apply again: %v", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME IN ('refund_jobs_register_key', 'refunds_follow_job')").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of the 2 dropped triggers after apply again (%v)", n, err)
	}
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the schema after apply again differs: %v", extra)
	}
}

// Names the team chose (a column, a trigger) are printed in the plan's
// comments: a newline in one cannot end the comment and put a statement
// of its own into the plan the on-call engineer reads and may run.
func TestPlanCommentsCannotCarryStatements(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN `x\nDROP TABLE refunds; --` INT NOT NULL")
		exec(t, db, "CREATE TRIGGER `t\rDROP DATABASE payments; \x1b[2J` AFTER UPDATE ON refund_jobs FOR EACH ROW SET @x = 1")
	})
	// The online copy refuses the team's trigger, naming it inert.
	if _, err := adopt.NewPlan(context.Background(), db, options()); err == nil || !strings.Contains(err.Error(), `t\rDROP DATABASE payments; \x1b[2J`) || strings.ContainsAny(err.Error(), "\r\x1b") {
		t.Errorf("the online copy's refusal of the team's trigger: %v", err)
	}
	o := options()
	o.BlockingCopy = true
	p, err := adopt.NewPlan(context.Background(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := p.Format(&out, 2); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "DROP ") || strings.ContainsAny(line, "\r\x1b") {
			t.Errorf("the plan has a line a team name wrote: %q", line)
		}
	}
	if !strings.Contains(out.String(), `x\nDROP TABLE refunds`) {
		t.Errorf("the plan does not name the team's column escaped")
	}
}

// A team name with a backslash is mapped on a server whose sql_mode has
// NO_BACKSLASH_ESCAPES (the DSN's, here): the rewrite's literals mean
// what they say in either mode.
func TestMappingWithNoBackslashEscapes(t *testing.T) {
	t.Parallel()
	legacy := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state) VALUES ('k-7', 'pay-7', 700, 'EUR', 'on\\\\hold')")
	})
	db := dbtest.OpenDSN(t, dsnOf(t, legacy)+"&sql_mode=%27STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES%27")
	o := options()
	o.States = map[string]string{`on\hold`: "manual_review"}
	for k, v := range states {
		o.States[k] = v
	}
	if _, err := adopt.Apply(context.Background(), db, o); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := db.QueryRow("SELECT state FROM refund_jobs WHERE id = 7").Scan(&got); err != nil || got != "manual_review" {
		t.Fatalf("state of id 7: %q (%v), want manual_review", got, err)
	}
}

// An unsigned INT id at the top of its type becomes fencekit's BIGINT with
// its value: the row is kept, registered and opened in the ledger.
func TestApplyKeepsTheTopOfAnUnsignedInt(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY id INT UNSIGNED NOT NULL AUTO_INCREMENT")
		exec(t, db, "INSERT INTO refund_jobs (id, operation_key, payment_ref, amount_minor, currency, state) VALUES (4294967295, 'k-top', 'p', 1, 'EUR', 'done')")
	})
	before := teamRows(t, db)
	if _, err := adopt.Apply(context.Background(), db, options()); err != nil {
		t.Fatal(err)
	}
	wantMapped(t, db, before)
	var status string
	if err := db.QueryRow("SELECT r.status FROM refunds r JOIN refund_jobs_keys k USING (operation_key) WHERE r.operation_key = 'k-top'").Scan(&status); err != nil || status != "refunded" {
		t.Fatalf("ledger row of id 4294967295: %q (%v)", status, err)
	}
	if typ := columnType(t, db, "refund_jobs", "id"); typ != "bigint(20)" && typ != "bigint" {
		t.Fatalf("id is %s after adopt", typ)
	}
}
