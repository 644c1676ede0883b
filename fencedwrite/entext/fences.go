package entext

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"entgo.io/ent/dialect"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/fencekit/fencekit/fencedwrite"
)

// The database fence of a fenced table is generated from the same annotation
// as its statements, so the names of the table, its columns and its states
// live in one place. The generated package holds it as a constant
// (<Entity>FencesSQL); a migration file carries it (migdiff -fences writes
// one when it changes), and a test fails when the two differ.

// fencesData is what the fences template reads.
type fencesData struct {
	Entity, T, Keys, Archive, ID       string
	ModeTable, ModeChanges, Violations string
	Refuse                             string // the procedure every job rule calls when a write breaks it
	State, Token, Writer, Lease        string
	NextRun, Action, KeyFirst, LastSnd string
	ProviderRef, LastError             string
	Reason, Evidence, Created, Updated string
	Key                                string
	Params                             []keyColumn     // the key first
	Columns                            []string        // every column of the entity, the id first
	Text                               map[string]bool // the string columns: compared byte for byte (Same, Match)
	Clock                              string
	// States and actions.
	Ready, Running, Succeeded, Review, Failed string
	Send, Reconcile                           string // Send: the annotation's SendAction
}

type keyColumn struct{ Name, Type string }

// Same is the condition that column col is unchanged by the write (NULL
// included). A string column is compared byte for byte: the tables'
// collation (utf8mb4_bin) pads with spaces, so 'k' = 'k ' in it, and a key
// with a trailing space is another idempotency key at the provider.
func (d fencesData) Same(col string) string {
	n, o := "NEW.`"+col+"`", "OLD.`"+col+"`"
	if d.Text[col] {
		return "CAST(" + n + " AS BINARY) <=> CAST(" + o + " AS BINARY)"
	}
	return n + " <=> " + o
}

// Unchanged is the condition that the write leaves the job's identity as
// it was: its id, its request (the key first) and its creation time.
func (d fencesData) Unchanged() string {
	conds := []string{"NEW.`" + d.ID + "` <=> OLD.`" + d.ID + "`"}
	for _, p := range d.Params {
		conds = append(conds, d.Same(p.Name))
	}
	conds = append(conds, "NEW.`"+d.Created+"` <=> OLD.`"+d.Created+"`")
	return strings.Join(conds, " AND ")
}

// AllSame is the condition that the write changes none of the entity's
// columns (the writer's declaration aside).
func (d fencesData) AllSame() string {
	var conds []string
	for _, c := range d.Columns {
		if c != d.Writer {
			conds = append(conds, d.Same(c))
		}
	}
	return strings.Join(conds, " AND ")
}

// KeyWindowKept is the condition that the write leaves the key window as it
// was: the key's first use and the last send.
func (d fencesData) KeyWindowKept() string {
	return "NEW.`" + d.KeyFirst + "` <=> OLD.`" + d.KeyFirst + "` AND NEW.`" + d.LastSnd + "` <=> OLD.`" + d.LastSnd + "`"
}

// Match is the condition that a.col equals b.col in a lookup: the
// collation's comparison first, which an index answers, then, for a string
// column, the bytes.
func (d fencesData) Match(a, b, col string) string {
	l, r := a+".`"+col+"`", b+".`"+col+"`"
	if d.Text[col] {
		return l + " = " + r + " AND CAST(" + l + " AS BINARY) = CAST(" + r + " AS BINARY)"
	}
	return l + " = " + r
}

func renderFences(s *Spec) (string, error) {
	a := s.Annotation
	d := fencesData{
		Entity: s.Node.Name, T: s.Table, Keys: KeysTable(s.Table), Archive: ArchiveTable(s.Table), ID: s.IDColumn,
		ModeTable: FenceModeTable(s.Table), ModeChanges: FenceModeTable(s.Table) + "_changes", Violations: FenceViolationsTable(s.Table),
		Refuse: s.Table + "_fence_refuse",
		State:  a.State, Token: a.Token, Writer: a.Writer, Lease: a.LeaseUntil,
		NextRun: a.NextRunAt, Action: a.NextAction, KeyFirst: a.KeyFirstUsedAt, LastSnd: a.LastSendAt,
		ProviderRef: a.ProviderRef, LastError: a.LastError, Reason: a.ReviewReason, Evidence: a.ReviewEvidence,
		Created: a.CreatedAt, Updated: a.UpdatedAt, Key: s.Key.StorageKey(), Clock: fencedwrite.ClockUTC,
		Ready: fencedwrite.StateReady, Running: fencedwrite.StateRunning, Succeeded: fencedwrite.StateSucceeded,
		Review: fencedwrite.StateManualReview, Failed: fencedwrite.StateFailed,
		Send: a.SendAction(), Reconcile: fencedwrite.ActionReconcile,
	}
	d.Columns = append(d.Columns, s.IDColumn)
	d.Text = map[string]bool{}
	for _, f := range s.Node.Fields {
		d.Columns = append(d.Columns, f.StorageKey())
		if f.Type.Type == field.TypeString {
			d.Text[f.StorageKey()] = true
		}
	}
	for _, f := range s.Params {
		typ, err := mysqlType(f)
		if err != nil {
			return "", err
		}
		d.Params = append(d.Params, keyColumn{Name: f.StorageKey(), Type: typ})
	}
	var b bytes.Buffer
	if err := fencesTmpl.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}

// mysqlType is the column type of a request parameter, for the keys table.
func mysqlType(f *gen.Field) (string, error) {
	c := f.Column()
	if t := c.SchemaType[dialect.MySQL]; t != "" {
		return t, nil
	}
	switch f.Type.Type {
	case field.TypeInt64, field.TypeInt, field.TypeUint64:
		return "bigint", nil
	case field.TypeInt32:
		return "int", nil
	case field.TypeString:
		if c.Size > 0 && c.Size <= 1024 {
			return fmt.Sprintf("varchar(%d)", c.Size), nil
		}
		return "varchar(255)", nil
	}
	return "", fmt.Errorf("annotation field Params: column %q has a type the keys table cannot copy; give it a SchemaType for MySQL", f.Name)
}

var fencesTmpl = template.Must(template.New("fences").Funcs(template.FuncMap{
	"q":    func(s string) string { return "`" + s + "`" },
	"join": strings.Join,
	// words spells a column's name in a refusal's message: provider_refund_id is the provider refund id.
	"words": func(s string) string { return strings.ReplaceAll(s, "_", " ") },
}).Parse(fencesSQL))

// fencesSQL is the template of the database fence. Every refusal raises
// SQLSTATE 45000 (MySQL and MariaDB report error 1644) with a message of at
// most 128 characters (MySQL's MESSAGE_TEXT limit). Every time it reads comes
// from the database clock that no session can move (fencedwrite.ClockUTC).
const fencesSQL = `-- The database fence of {{q .T}}, generated by fencedwrite/entext from the Fenced
-- annotation of {{.Entity}}: do not edit; change the annotation and run
-- ` + "`go generate ./ent/... && go run ./internal/cmd/migdiff -fences <name>`" + `.
-- It replaces every trigger and procedure of earlier versions.
--
-- The rules, enforced whoever writes, in any language:
--   1. A key is registered in {{q .Keys}} only together with its job (by the
--      job's insert, never alone), and takes one job, ever: archiving a job
--      keeps its key, so a re-delivered request is never a second job. A
--      registration left without any job (written alone before this rule)
--      is taken by the job of the same request. A job is born ready at
--      attempt 0, holding no lease.
--   2. Every UPDATE of the fence's columns declares the attempt it holds in
--      {{q .Writer}}; it must equal the row's attempt, and is cleared afterwards.
--      An UPDATE that changes only columns the fence does not know (a team's
--      own columns on an adopted table) is not the job's, and passes.
--   3. Only the moves of the state machine are allowed, each with its attempt
--      rule: claim ready -> running (+1, due), takeover running -> running (+1,
--      lease expired, reconcile), complete / reschedule / manual review / fail
--      from running (same attempt), wake-up ready -> ready (same attempt, only
--      sooner), operator resolution manual_review -> succeeded | ready (+1).
--   4. {{.Succeeded}} and {{.Failed}} rows never change again, in any of the
--      fence's columns.
--   5. The request's identity and parameters never change. Text is compared
--      byte for byte (CAST(… AS BINARY)): utf8mb4_bin pads with spaces, so
--      'k' = 'k ' in the tables' collation, and a key with a trailing space
--      is another idempotency key at the provider. The same holds for the
--      columns a write may not change and for every lookup of a request.
--   6. {{q .KeyFirst}} is set once, by a claim that sends, never moved; {{q .LastSnd}}
--      only moves forward, by a claim that sends. Neither lies in the future.
--   7. Rows are deleted only through CALL {{.Archive}}(cutoff): terminal, last
--      changed over 30 days ago, and copied to {{q .Archive}} first.
--   8. Times the fence relies on ({{q .Updated}}, {{q .Created}}, leases, due times) are
--      checked or stamped on the server's real clock: SET timestamp moves nothing.
--   9. Every read of another row is a locking read (LOCK IN SHARE MODE, which
--      MySQL 8 and MariaDB both accept): it waits for that row's writer and
--      sees what was committed, whatever isolation level the session chose
--      (InnoDB does not lock the reads of an UPDATE, INSERT … SELECT or
--      REPLACE … SELECT under READ UNCOMMITTED and READ COMMITTED by itself).
--  10. The job table's rules (born ready, one key, the moves of an UPDATE, no
--      delete) run in one of two modes, kept in {{q .ModeTable}}: enforce
--      (the default, and the only mode of a new database) refuses the write;
--      observe, for the weeks of adopting a live table, lets the write through
--      and records who wrote what and which rule it broke in
--      {{q .Violations}}, append-only. A write that breaks no rule never reads
--      the mode. Only the migration account (the definer of the mode's
--      triggers) changes it, whatever another account's grants, and every
--      change is recorded in {{q .ModeChanges}}. Fenced writers are fenced by their
--      WHERE clause in both modes.

CREATE TABLE IF NOT EXISTS {{q .Keys}} (
{{- range .Params}}
  {{q .Name}} {{.Type}} NOT NULL,
{{- end}}
  ` + "`registered_at`" + ` datetime(6) NOT NULL,
  ` + "`job_created_at`" + ` datetime(6) NULL,
  PRIMARY KEY ({{q .Key}})
) CHARSET utf8mb4 COLLATE utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {{q .Archive}} LIKE {{q .T}};

-- Every key already enqueued or archived stays known.
INSERT INTO {{q .Keys}} ({{range .Params}}{{q .Name}}, {{end}}` + "`registered_at`, `job_created_at`" + `)
  SELECT {{range .Params}}j.{{q .Name}}, {{end}}j.{{q .Created}}, j.{{q .Created}} FROM {{q .T}} j
  WHERE NOT EXISTS (SELECT 1 FROM {{q .Keys}} k WHERE k.{{q .Key}} = j.{{q .Key}});
INSERT INTO {{q .Keys}} ({{range .Params}}{{q .Name}}, {{end}}` + "`registered_at`, `job_created_at`" + `)
  SELECT {{range .Params}}j.{{q .Name}}, {{end}}j.{{q .Created}}, j.{{q .Created}} FROM {{q .Archive}} j
  WHERE NOT EXISTS (SELECT 1 FROM {{q .Keys}} k WHERE k.{{q .Key}} = j.{{q .Key}});

DROP TRIGGER IF EXISTS {{q (print .T "_born_ready")}};
DROP TRIGGER IF EXISTS {{q (print .T "_register_key")}};
DROP TRIGGER IF EXISTS {{q (print .T "_fence")}};
DROP TRIGGER IF EXISTS {{q (print .T "_no_delete")}};
DROP PROCEDURE IF EXISTS {{q .Archive}};
DROP TRIGGER IF EXISTS {{q (print .Keys "_registered")}};
DROP TRIGGER IF EXISTS {{q (print .Keys "_bind_once")}};
DROP TRIGGER IF EXISTS {{q (print .Keys "_never_change")}};
DROP TRIGGER IF EXISTS {{q (print .Keys "_no_delete")}};
DROP TRIGGER IF EXISTS {{q (print .Archive "_only_old_terminal")}};
DROP TRIGGER IF EXISTS {{q (print .Archive "_no_update")}};
DROP TRIGGER IF EXISTS {{q (print .Archive "_no_delete")}};
DROP PROCEDURE IF EXISTS {{q .Refuse}};
DROP TRIGGER IF EXISTS {{q (print .ModeTable "_owned")}};
DROP TRIGGER IF EXISTS {{q (print .ModeTable "_audited")}};
DROP TRIGGER IF EXISTS {{q (print .ModeTable "_recorded")}};
DROP TRIGGER IF EXISTS {{q (print .ModeTable "_no_delete")}};
DROP TRIGGER IF EXISTS {{q (print .ModeChanges "_append_only")}};
DROP TRIGGER IF EXISTS {{q (print .ModeChanges "_no_delete")}};
DROP TRIGGER IF EXISTS {{q (print .Violations "_append_only")}};
DROP TRIGGER IF EXISTS {{q (print .Violations "_no_delete")}};

-- The fence's mode (rule 10): one row, born enforce.
CREATE TABLE IF NOT EXISTS {{q .ModeTable}} (
  ` + "`id`" + ` tinyint NOT NULL,
  ` + "`mode`" + ` enum('enforce','observe') NOT NULL,
  ` + "`reason`" + ` varchar(255) NOT NULL,
  ` + "`changed_at`" + ` datetime(6) NOT NULL,
  PRIMARY KEY (` + "`id`" + `)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;
INSERT IGNORE INTO {{q .ModeTable}} (` + "`id`, `mode`, `reason`, `changed_at`" + `) VALUES (1, 'enforce', 'the fence is born enforcing', {{.Clock}});

-- Every change of the mode, append-only.
CREATE TABLE IF NOT EXISTS {{q .ModeChanges}} (
  ` + "`id`" + ` bigint NOT NULL AUTO_INCREMENT,
  ` + "`changed_at`" + ` datetime(6) NOT NULL,
  ` + "`from_mode`" + ` varchar(16) NOT NULL,
  ` + "`to_mode`" + ` varchar(16) NOT NULL,
  ` + "`reason`" + ` varchar(255) NOT NULL,
  ` + "`account`" + ` varchar(288) NOT NULL,
  ` + "`connection_id`" + ` bigint NOT NULL,
  PRIMARY KEY (` + "`id`" + `)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;

-- The writes the fence let through in observe mode, append-only: who wrote
-- (the account as it connected, its connection, the program name it sent in
-- its connection attributes, when performance_schema is on), what (the
-- statement, the row, its state and attempt before and after, the attempt it
-- declared) and the rule it broke.
CREATE TABLE IF NOT EXISTS {{q .Violations}} (
  ` + "`id`" + ` bigint NOT NULL AUTO_INCREMENT,
  ` + "`observed_at`" + ` datetime(6) NOT NULL,
  ` + "`operation`" + ` enum('insert','update','delete') NOT NULL,
  ` + "`row_id`" + ` bigint NULL,
  ` + "`rule`" + ` varchar(255) NOT NULL,
  ` + "`old_state`" + ` varchar(32) NULL,
  ` + "`new_state`" + ` varchar(32) NULL,
  ` + "`old_attempt`" + ` bigint NULL,
  ` + "`new_attempt`" + ` bigint NULL,
  ` + "`declared_attempt`" + ` bigint NULL,
  ` + "`changed_columns`" + ` varchar(1024) NULL,
  ` + "`account`" + ` varchar(288) NOT NULL,
  ` + "`connection_id`" + ` bigint NOT NULL,
  ` + "`program_name`" + ` varchar(255) NULL,
  ` + "`statement`" + ` text NULL,
  PRIMARY KEY (` + "`id`" + `),
  KEY ` + "`observed_at`" + ` (` + "`observed_at`" + `)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;

DELIMITER //

-- What every rule of the job table does when a write breaks it: in enforce
-- mode, refuse it (SQLSTATE 45000, error 1644; 23000 with errno 1062 for a
-- key taken before); in observe mode, record it and let it through. It
-- reads the mode only then. A write that breaks no rule still pays for its
-- tables (the mode, the violations, performance_schema's four): the server
-- opens and locks every table a statement's triggers may reach, once per
-- statement (docs/benchmarks.md, "Where the fence's cost goes").
CREATE PROCEDURE {{q .Refuse}}(IN op VARCHAR(6), IN row_id BIGINT, IN rule VARCHAR(255), IN errno INT,
                               IN old_state VARCHAR(32), IN new_state VARCHAR(32),
                               IN old_attempt BIGINT, IN new_attempt BIGINT, IN declared BIGINT, IN changed VARCHAR(1024))
BEGIN
  DECLARE m VARCHAR(16) DEFAULT 'enforce';
  DECLARE prog VARCHAR(255) DEFAULT NULL;
  DECLARE stmt TEXT DEFAULT NULL;
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET m = 'enforce';
    SELECT ` + "`mode`" + ` INTO m FROM {{q .ModeTable}} WHERE ` + "`id`" + ` = 1 LOCK IN SHARE MODE;
  END;
  IF m <> 'observe' THEN
    IF errno = 1062 THEN
      SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, MESSAGE_TEXT = rule;
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = rule;
  END IF;
  -- Who wrote, as far as the server knows: the program name its client sent
  -- and the statement it runs (the outermost), both from performance_schema,
  -- which MySQL 8 keeps on and MariaDB off by default (docs/adopting.md);
  -- without it they stay NULL, and the account, the connection and the
  -- columns the write changed still say who and what.
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET prog = NULL;
    SELECT LEFT(ATTR_VALUE, 255) INTO prog FROM performance_schema.session_connect_attrs
      WHERE PROCESSLIST_ID = CONNECTION_ID() AND ATTR_NAME = 'program_name' LIMIT 1;
  END;
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET stmt = NULL;
    -- A prepared statement's execution shows no text: the statement the
    -- session prepared last stands for it.
    SELECT LEFT(COALESCE(s.SQL_TEXT, (SELECT p.SQL_TEXT FROM performance_schema.prepared_statements_instances p
                                      WHERE p.OWNER_THREAD_ID = s.THREAD_ID ORDER BY p.OWNER_EVENT_ID DESC LIMIT 1)), 4096)
      INTO stmt FROM performance_schema.events_statements_current s
      JOIN performance_schema.threads th ON th.THREAD_ID = s.THREAD_ID
      WHERE th.PROCESSLIST_ID = CONNECTION_ID() AND s.NESTING_EVENT_LEVEL = 0 LIMIT 1;
  END;
  INSERT INTO {{q .Violations}} (` + "`observed_at`, `operation`, `row_id`, `rule`, `old_state`, `new_state`, `old_attempt`, `new_attempt`, `declared_attempt`, `changed_columns`, `account`, `connection_id`, `program_name`, `statement`" + `)
    VALUES ({{.Clock}}, op, row_id, rule, old_state, new_state, old_attempt, new_attempt, declared, changed, USER(), CONNECTION_ID(), prog, stmt);
END//

-- The mode changes with a reason, and only between the two modes; the
-- change is recorded whoever makes it.
-- Only the migration account changes it, whatever the other accounts'
-- grants: the account that created this trigger (inside a trigger
-- CURRENT_USER() is its definer; USER() is the session's own account, as it
-- connected). A legacy account granted UPDATE on the whole database is
-- refused like any other.
CREATE TRIGGER {{q (print .ModeTable "_owned")}} BEFORE INSERT ON {{q .ModeTable}} FOR EACH ROW
BEGIN
  IF NEW.` + "`id`" + ` <> 1 OR BINARY SUBSTRING_INDEX(USER(), '@', 1) <> BINARY SUBSTRING_INDEX(CURRENT_USER(), '@', 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.ModeTable}}: only the migration account sets the mode';
  END IF;
END//

CREATE TRIGGER {{q (print .ModeTable "_audited")}} BEFORE UPDATE ON {{q .ModeTable}} FOR EACH ROW
BEGIN
  IF BINARY SUBSTRING_INDEX(USER(), '@', 1) <> BINARY SUBSTRING_INDEX(CURRENT_USER(), '@', 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.ModeTable}}: only the migration account changes the mode';
  END IF;
  IF NEW.` + "`id`" + ` <> 1 OR NEW.` + "`reason`" + ` = '' OR NEW.` + "`reason`" + ` <=> OLD.` + "`reason`" + ` THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.ModeTable}}: a change of mode gives a new reason';
  END IF;
  SET NEW.` + "`changed_at`" + ` = {{.Clock}};
END//

CREATE TRIGGER {{q (print .ModeTable "_recorded")}} AFTER UPDATE ON {{q .ModeTable}} FOR EACH ROW
BEGIN
  INSERT INTO {{q .ModeChanges}} (` + "`changed_at`, `from_mode`, `to_mode`, `reason`, `account`, `connection_id`" + `)
    VALUES (NEW.` + "`changed_at`" + `, OLD.` + "`mode`" + `, NEW.` + "`mode`" + `, NEW.` + "`reason`" + `, USER(), CONNECTION_ID());
END//

CREATE TRIGGER {{q (print .ModeTable "_no_delete")}} BEFORE DELETE ON {{q .ModeTable}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.ModeTable}}: the mode is changed, never deleted';
END//

CREATE TRIGGER {{q (print .ModeChanges "_append_only")}} BEFORE UPDATE ON {{q .ModeChanges}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.ModeChanges}}: the record of mode changes is append-only';
END//

CREATE TRIGGER {{q (print .ModeChanges "_no_delete")}} BEFORE DELETE ON {{q .ModeChanges}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.ModeChanges}}: the record of mode changes is append-only';
END//

CREATE TRIGGER {{q (print .Violations "_append_only")}} BEFORE UPDATE ON {{q .Violations}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Violations}}: the record of violations is append-only';
END//

CREATE TRIGGER {{q (print .Violations "_no_delete")}} BEFORE DELETE ON {{q .Violations}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Violations}}: the record of violations is append-only';
END//

-- A key is registered only while its job exists with the same request (in
-- the job table, or archived): the job's insert registers it.
CREATE TRIGGER {{q (print .Keys "_registered")}} BEFORE INSERT ON {{q .Keys}} FOR EACH ROW
BEGIN
  DECLARE now DATETIME(6) DEFAULT {{.Clock}};
  IF NOT EXISTS (SELECT 1 FROM {{q .T}} j WHERE {{range $i, $p := .Params}}{{if $i}} AND {{end}}{{$.Match "j" "NEW" $p.Name}}{{end}} LOCK IN SHARE MODE)
     AND NOT EXISTS (SELECT 1 FROM {{q .Archive}} a WHERE {{range $i, $p := .Params}}{{if $i}} AND {{end}}{{$.Match "a" "NEW" $p.Name}}{{end}} LOCK IN SHARE MODE) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Keys}}: a key is registered only together with its job';
  END IF;
  SET NEW.` + "`registered_at`" + ` = now, NEW.` + "`job_created_at`" + ` = now;
END//

CREATE TRIGGER {{q (print .Keys "_never_change")}} BEFORE UPDATE ON {{q .Keys}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Keys}}: a registered key never changes and takes one job, ever';
END//

CREATE TRIGGER {{q (print .Keys "_no_delete")}} BEFORE DELETE ON {{q .Keys}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Keys}}: a key once enqueued stays known for ever';
END//

-- A job is stamped with its creation time as it is inserted; whether it is
-- born ready is checked after, where its id is known (an AUTO_INCREMENT id
-- is 0 before), so that observe mode records the row it concerns.
CREATE TRIGGER {{q (print .T "_born_ready")}} BEFORE INSERT ON {{q .T}} FOR EACH ROW
BEGIN
  DECLARE now DATETIME(6) DEFAULT {{.Clock}};
  SET NEW.{{q .Created}} = now, NEW.{{q .Updated}} = now;
END//

-- A job is born ready at attempt 0, and registers its key as it is
-- inserted: AFTER INSERT, which the update half of an INSERT … ON DUPLICATE
-- KEY UPDATE never fires. A key registered before is refused (error 1062, a
-- duplicate key), unless its registration holds this very request and no
-- job took it: a registration left alone from before this rule, which the
-- job takes.
CREATE TRIGGER {{q (print .T "_register_key")}} AFTER INSERT ON {{q .T}} FOR EACH ROW
BEGIN
  DECLARE known BOOLEAN DEFAULT FALSE;
  IF NEW.{{q .State}} <> '{{.Ready}}' OR NEW.{{q .Token}} <> 0 THEN
    CALL {{q .Refuse}}('insert', NEW.{{q .ID}}, '{{.T}}: a job is born ready at attempt 0', 0, NULL, NEW.{{q .State}}, NULL, NEW.{{q .Token}}, NEW.{{q .Writer}}, NULL);
  END IF;
  IF NEW.{{q .Writer}} IS NOT NULL OR NEW.{{q .Lease}} IS NOT NULL OR NEW.{{q .KeyFirst}} IS NOT NULL OR NEW.{{q .LastSnd}} IS NOT NULL THEN
    CALL {{q .Refuse}}('insert', NEW.{{q .ID}}, '{{.T}}: a new job holds no lease, declares no writer and has sent nothing', 0, NULL, NEW.{{q .State}}, NULL, NEW.{{q .Token}}, NEW.{{q .Writer}}, NULL);
  END IF;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1062 SET known = TRUE;
    INSERT INTO {{q .Keys}} ({{range .Params}}{{q .Name}}, {{end}}` + "`registered_at`" + `) VALUES ({{range .Params}}NEW.{{q .Name}}, {{end}}NEW.{{q .Created}});
  END;
  IF known AND (NOT EXISTS (SELECT 1 FROM {{q .Keys}} k WHERE {{range $i, $p := .Params}}{{if $i}} AND {{end}}{{$.Match "k" "NEW" $p.Name}}{{end}} LOCK IN SHARE MODE)
                OR EXISTS (SELECT 1 FROM {{q .Archive}} a WHERE a.{{q .Key}} = NEW.{{q .Key}} LOCK IN SHARE MODE)) THEN
    CALL {{q .Refuse}}('insert', NEW.{{q .ID}}, '{{.T}}: a key takes one job, ever (archived or not)', 1062, NULL, NEW.{{q .State}}, NULL, NEW.{{q .Token}}, NEW.{{q .Writer}}, NULL);
  END IF;
END//

-- Every UPDATE: the first rule it breaks, if any, is refused (enforce) or
-- recorded with the columns the write changed (observe). The messages are
-- built only for a write that breaks a rule.
--
-- The moves a fenced writer makes by the thousand (a claim that sends, a
-- claim of a reconcile, leaving running) are checked first, each by one
-- expression, in a session on UTC (time_zone '+00:00', as the fenced layer
-- sets it; SYSDATE(6) is then the real clock in UTC, read once; the zone's
-- name compared byte for byte, as its collation pads with spaces and a
-- named zone loaded as '+00:00' and set as '+00:00 ' is no offset): every rule
-- the checks below apply to that move, written as one condition. A NULL
-- anywhere, another time zone or any other move makes the conditions false,
-- never true, and the checks below decide, rule by rule, with their
-- messages: the fast paths only ever accept what they accept.
--
-- The server prepares an IF's expression again for every row it checks
-- (MariaDB fixes each item of it anew, whether its value is needed or not),
-- so most of a fast path's cost is the size of the expressions a row goes
-- through: the row's old state, then, for a claim, its old action choose
-- the one expression of its move.
CREATE TRIGGER {{q (print .T "_fence")}} BEFORE UPDATE ON {{q .T}} FOR EACH ROW
main: BEGIN
  DECLARE utc DATETIME(6) DEFAULT IF(BINARY @@session.time_zone = '+00:00', SYSDATE(6), NULL);
  IF OLD.{{q .State}} = '{{.Ready}}' THEN
    IF OLD.{{q .Action}} = '{{.Send}}' THEN
      IF NEW.{{q .State}} = '{{.Running}}' AND NEW.{{q .Action}} = '{{.Send}}' AND utc IS NOT NULL AND NEW.{{q .Writer}} = OLD.{{q .Token}}
         AND NEW.{{q .Token}} = OLD.{{q .Token}} + 1 AND OLD.{{q .NextRun}} <= utc AND NEW.{{q .Lease}} IS NOT NULL
         AND NEW.{{q .LastSnd}} <= utc + INTERVAL 1 SECOND AND (OLD.{{q .LastSnd}} IS NULL OR NEW.{{q .LastSnd}} > OLD.{{q .LastSnd}})
         AND ((OLD.{{q .KeyFirst}} IS NULL AND NEW.{{q .KeyFirst}} <= utc + INTERVAL 1 SECOND) OR NEW.{{q .KeyFirst}} = OLD.{{q .KeyFirst}})
         AND {{.Unchanged}} THEN
        SET NEW.{{q .Writer}} = NULL, NEW.{{q .Updated}} = utc;
        LEAVE main;
      END IF;
    ELSEIF OLD.{{q .Action}} = '{{.Reconcile}}' THEN
      IF NEW.{{q .State}} = '{{.Running}}' AND NEW.{{q .Action}} = '{{.Reconcile}}' AND utc IS NOT NULL AND NEW.{{q .Writer}} = OLD.{{q .Token}}
         AND NEW.{{q .Token}} = OLD.{{q .Token}} + 1 AND OLD.{{q .NextRun}} <= utc AND NEW.{{q .Lease}} IS NOT NULL
         AND {{.KeyWindowKept}}
         AND {{.Unchanged}} THEN
        SET NEW.{{q .Writer}} = NULL, NEW.{{q .Updated}} = utc;
        LEAVE main;
      END IF;
    END IF;
  ELSEIF OLD.{{q .State}} = '{{.Running}}' THEN
    IF NEW.{{q .State}} IN ('{{.Succeeded}}', '{{.Ready}}', '{{.Review}}', '{{.Failed}}') AND utc IS NOT NULL AND NEW.{{q .Writer}} = OLD.{{q .Token}}
       AND NEW.{{q .Token}} = OLD.{{q .Token}} AND NEW.{{q .Lease}} IS NULL
       AND (NEW.{{q .State}} <> '{{.Succeeded}}' OR NEW.{{q .ProviderRef}} IS NOT NULL)
       AND {{.KeyWindowKept}}
       AND {{.Unchanged}} THEN
      SET NEW.{{q .Writer}} = NULL, NEW.{{q .Updated}} = utc;
      LEAVE main;
    END IF;
  END IF;
  -- A write that changes none of the fence's columns and declares no
  -- attempt (the team's notes, flags and admin fields on an adopted table)
  -- is not the job's: it passes in any state, and changes nothing of the
  -- job's (not even its update time).
  IF NEW.{{q .Writer}} IS NULL AND {{.AllSame}} THEN
    LEAVE main;
  END IF;
  BEGIN
  DECLARE now DATETIME(6) DEFAULT {{.Clock}};
  DECLARE msg VARCHAR(255) DEFAULT NULL;
  DECLARE rule VARCHAR(128) DEFAULT NULL;
  DECLARE sends BOOLEAN DEFAULT OLD.{{q .State}} = '{{.Ready}}' AND NEW.{{q .State}} = '{{.Running}}' AND NEW.{{q .Action}} = '{{.Send}}';
  IF @@session.time_zone <> 'SYSTEM' AND @@session.time_zone NOT REGEXP '^[+-][0-9]{1,2}:[0-9]{2}$' THEN
    SET msg = '{{.T}}: the fence needs time_zone SYSTEM or a numeric offset: named zones repeat an hour';
  ELSEIF OLD.{{q .State}} IN ('{{.Succeeded}}', '{{.Failed}}') THEN
    SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': ', OLD.{{q .State}}, ' is terminal and never changes');
  ELSEIF NEW.{{q .Writer}} IS NULL THEN
    SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': an UPDATE must declare the attempt it holds: SET {{.Writer}} = ', OLD.{{q .Token}});
  ELSEIF NEW.{{q .Writer}} <> OLD.{{q .Token}} THEN
    SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': stale writer declares attempt ', NEW.{{q .Writer}}, ', row is at ', OLD.{{q .Token}});
  ELSEIF NOT ({{.Unchanged}}) THEN
    SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': the id, the request and its creation time never change');
  ELSEIF NEW.{{q .Token}} <> OLD.{{q .Token}} AND NEW.{{q .Token}} <> OLD.{{q .Token}} + 1 THEN
    SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': attempt may only stay or grow by one, not go ', OLD.{{q .Token}}, ' -> ', NEW.{{q .Token}});
  ELSE
    IF OLD.{{q .State}} = '{{.Ready}}' AND NEW.{{q .State}} = '{{.Running}}' THEN
      IF NEW.{{q .Token}} <> OLD.{{q .Token}} + 1 THEN
        SET rule = 'a claim takes attempt+1';
      ELSEIF NOT (OLD.{{q .NextRun}} <= now) THEN
        SET rule = 'a claim needs a due job (database clock)';
      ELSEIF NEW.{{q .Lease}} IS NULL THEN
        SET rule = 'a claim holds a lease';
      ELSEIF OLD.{{q .Action}} = '{{.Reconcile}}' AND NEW.{{q .Action}} <> '{{.Reconcile}}' THEN
        SET rule = 'a claim never turns a reconcile into a send';
      ELSEIF sends AND (NEW.{{q .KeyFirst}} IS NULL OR NEW.{{q .LastSnd}} IS NULL OR NEW.{{q .LastSnd}} <=> OLD.{{q .LastSnd}}) THEN
        SET rule = 'a claim that sends records the key''s first use and the send';
      END IF;
    ELSEIF OLD.{{q .State}} = '{{.Running}}' AND NEW.{{q .State}} = '{{.Running}}' THEN
      IF NEW.{{q .Token}} <> OLD.{{q .Token}} + 1 THEN
        SET rule = 'only a takeover stays running, with attempt+1';
      ELSEIF NOT (OLD.{{q .Lease}} < now) THEN
        SET rule = 'a takeover needs a lease expired by the database clock';
      ELSEIF NEW.{{q .Action}} <> '{{.Reconcile}}' OR NEW.{{q .Lease}} IS NULL THEN
        SET rule = 'a takeover holds a new lease and reconciles';
      END IF;
    ELSEIF OLD.{{q .State}} = '{{.Running}}' AND NEW.{{q .State}} IN ('{{.Succeeded}}', '{{.Ready}}', '{{.Review}}', '{{.Failed}}') THEN
      IF NEW.{{q .Token}} <> OLD.{{q .Token}} THEN
        SET rule = 'complete, reschedule, manual review and fail keep the attempt';
      ELSEIF NEW.{{q .Lease}} IS NOT NULL THEN
        SET rule = 'leaving running gives the lease up';
      ELSEIF NEW.{{q .State}} = '{{.Succeeded}}' AND NEW.{{q .ProviderRef}} IS NULL THEN
        SET rule = 'success needs the {{words .ProviderRef}}';
      END IF;
    ELSEIF OLD.{{q .State}} = '{{.Ready}}' AND NEW.{{q .State}} = '{{.Ready}}' THEN
      IF NEW.{{q .Token}} <> OLD.{{q .Token}} OR NEW.{{q .NextRun}} > OLD.{{q .NextRun}}
         OR NOT (NEW.{{q .Action}} <=> OLD.{{q .Action}} AND NEW.{{q .Lease}} <=> OLD.{{q .Lease}} AND {{.Same .ProviderRef}}
                 AND {{.Same .LastError}} AND {{.Same .Reason}} AND {{.Same .Evidence}}) THEN
        SET rule = 'a wake-up only makes a job due sooner';
      END IF;
    ELSEIF OLD.{{q .State}} = '{{.Review}}' AND NEW.{{q .State}} IN ('{{.Succeeded}}', '{{.Ready}}') THEN
      IF NEW.{{q .Token}} <> OLD.{{q .Token}} + 1 THEN
        SET rule = 'an operator resolution takes attempt+1';
      ELSEIF NEW.{{q .Evidence}} IS NULL OR NEW.{{q .Lease}} IS NOT NULL THEN
        SET rule = 'an operator resolution records its evidence and holds no lease';
      ELSEIF NEW.{{q .State}} = '{{.Succeeded}}' AND NEW.{{q .ProviderRef}} IS NULL THEN
        SET rule = 'success needs the {{words .ProviderRef}}';
      END IF;
    ELSE
      SET rule = 'not a move of the state machine';
    END IF;
    IF rule IS NOT NULL THEN
      SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': ', OLD.{{q .State}}, ' -> ', NEW.{{q .State}}, ': ', rule);
    ELSEIF NOT (NEW.{{q .KeyFirst}} <=> OLD.{{q .KeyFirst}})
       AND (OLD.{{q .KeyFirst}} IS NOT NULL OR NOT sends OR NEW.{{q .KeyFirst}} > now + INTERVAL 1 SECOND) THEN
      SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': {{.KeyFirst}} is set once, by a claim that sends, never in the future');
    ELSEIF NOT (NEW.{{q .LastSnd}} <=> OLD.{{q .LastSnd}})
       AND (NOT sends OR NEW.{{q .LastSnd}} > now + INTERVAL 1 SECOND OR NEW.{{q .LastSnd}} < OLD.{{q .LastSnd}}) THEN
      SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': {{.LastSnd}} moves forward only, by a claim that sends, never into the future');
    END IF;
  END IF;
  IF msg IS NOT NULL THEN
    CALL {{q .Refuse}}('update', OLD.{{q .ID}}, msg, 0, OLD.{{q .State}}, NEW.{{q .State}}, OLD.{{q .Token}}, NEW.{{q .Token}}, NEW.{{q .Writer}},
      CONCAT_WS(',', {{range $i, $c := .Columns}}{{if $i}}, {{end}}IF({{$.Same $c}}, NULL, '{{$c}}'){{end}}));
  END IF;
  SET NEW.{{q .Writer}} = NULL;
  -- A wake-up of a job already due changes nothing, and says so (0 changed
  -- rows): clientFoundRows=true tells it from a stale write.
  IF OLD.{{q .State}} = '{{.Ready}}' AND NEW.{{q .State}} = '{{.Ready}}' AND NEW.{{q .NextRun}} <=> OLD.{{q .NextRun}} THEN
    SET NEW.{{q .Updated}} = OLD.{{q .Updated}};
  ELSE
    SET NEW.{{q .Updated}} = now;
  END IF;
  END;
END//

CREATE TRIGGER {{q (print .T "_no_delete")}} BEFORE DELETE ON {{q .T}} FOR EACH ROW
BEGIN
  DECLARE msg VARCHAR(255);
  IF OLD.{{q .State}} NOT IN ('{{.Succeeded}}', '{{.Failed}}') OR NOT (OLD.{{q .Updated}} < {{.Clock}} - INTERVAL 30 DAY)
     OR NOT EXISTS (SELECT 1 FROM {{q .Archive}} a WHERE a.{{q .ID}} = OLD.{{q .ID}} AND {{.Match "a" "OLD" .Key}}
                    AND a.{{q .State}} = OLD.{{q .State}} AND a.{{q .Token}} = OLD.{{q .Token}} LOCK IN SHARE MODE) THEN
    SET msg = CONCAT('{{.T}}#', OLD.{{q .ID}}, ': only archived terminal jobs 30 days old are deleted (CALL {{.Archive}})');
    CALL {{q .Refuse}}('delete', OLD.{{q .ID}}, msg, 0, OLD.{{q .State}}, NULL, OLD.{{q .Token}}, NULL, NULL, NULL);
  END IF;
END//

CREATE TRIGGER {{q (print .Archive "_only_old_terminal")}} BEFORE INSERT ON {{q .Archive}} FOR EACH ROW
BEGIN
  IF NOT EXISTS (SELECT 1 FROM {{q .T}} j WHERE j.{{q .ID}} = NEW.{{q .ID}} AND {{.Match "j" "NEW" .Key}}
                 AND j.{{q .State}} IN ('{{.Succeeded}}', '{{.Failed}}') AND j.{{q .State}} = NEW.{{q .State}}
                 AND j.{{q .Token}} = NEW.{{q .Token}} AND j.{{q .Updated}} < {{.Clock}} - INTERVAL 30 DAY LOCK IN SHARE MODE) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Archive}}: only terminal jobs 30 days old are archived (CALL {{.Archive}})';
  END IF;
END//

CREATE TRIGGER {{q (print .Archive "_no_update")}} BEFORE UPDATE ON {{q .Archive}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Archive}}: archived jobs never change';
END//

CREATE TRIGGER {{q (print .Archive "_no_delete")}} BEFORE DELETE ON {{q .Archive}} FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Archive}}: archived jobs are never deleted';
END//

-- The archival path: moves {{.Succeeded}} and {{.Failed}} jobs last changed before cutoff
-- (itself at least 30 days ago by the server's real clock) into {{q .Archive}}, in one
-- transaction. Their keys stay registered in {{q .Keys}}.
CREATE PROCEDURE {{q .Archive}}(IN cutoff DATETIME(6))
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF cutoff IS NULL OR cutoff > {{.Clock}} - INTERVAL 30 DAY THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{.Archive}}: the cutoff must be at least 30 days in the past';
  END IF;
  START TRANSACTION;
  INSERT INTO {{q .Archive}}
    SELECT * FROM {{q .T}} WHERE {{q .State}} IN ('{{.Succeeded}}', '{{.Failed}}') AND {{q .Updated}} < cutoff FOR UPDATE;
  DELETE FROM {{q .T}} WHERE {{q .State}} IN ('{{.Succeeded}}', '{{.Failed}}') AND {{q .Updated}} < cutoff;
  COMMIT;
END//

DELIMITER ;
`
